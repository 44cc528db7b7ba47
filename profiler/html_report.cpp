// profiler/html_report.cpp — drawing one step as SVG (see profiler/html_report.h). Coordinates
// are computed here once, in pixels, so the page needs no script to lay itself out.
#include "profiler/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "profiler/key_averages.h"

namespace kiln::profiler {

namespace {

constexpr int kWidth = 1200;      // the SVG's width in pixels
constexpr int kLabelWidth = 100;  // the lane names' column
constexpr int kPlotWidth = kWidth - kLabelWidth - 20;
constexpr int kAxisHeight = 28;
constexpr int kRowHeight = 18;
constexpr int kLaneGap = 10;
constexpr int kMemoryHeight = 140;
constexpr int kTopOps = 20;

constexpr std::array<const char*, static_cast<std::size_t>(Lane::kCount)> kLaneNames = {"forward", "backward",
                                                                                         "optimizer"};
// Depth 0 of a lane in its full colour; nested calls in a lighter tint of it.
constexpr std::array<const char*, static_cast<std::size_t>(Lane::kCount)> kLaneColours = {"#3366cc", "#cc3333",
                                                                                          "#2e9e44"};
constexpr std::array<const char*, static_cast<std::size_t>(Lane::kCount)> kNestedColours = {"#9fb8e6", "#e6a3a3",
                                                                                            "#9ed4a8"};

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string mib(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 2) + " MiB"; }

/// A tick spacing of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10.0 * power;
}

/// The step drawn: [begin, end) in ns, and the depth of its own top-level events.
struct Window {
  std::int64_t begin = 0;
  std::int64_t end = 1;
  int base_depth = 0;
  int span = -1;  // index of the ProfilerStep span, -1 for the whole recording
  std::string title = "the whole recording";
};

Window pick_window(const std::vector<Event>& events) {
  Window w;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::Region && e.name.starts_with("ProfilerStep#")) {
      return {.begin = e.start_ns, .end = std::max(e.end_ns, e.start_ns + 1), .base_depth = e.depth + 1,
              .span = static_cast<int>(i), .title = e.name};
    }
  }
  if (!events.empty()) {
    w.begin = events.front().start_ns;
    for (const Event& e : events) {
      if (e.on_profiled_thread) w.end = std::max(w.end, e.end_ns);
    }
    w.end = std::max(w.end, w.begin + 1);
  }
  return w;
}

// The page draws the recording thread's step; workers' and streams' spans are the trace's.
bool inside(const Event& e, const Window& w, int index) {
  return e.on_profiled_thread && index != w.span && e.depth >= w.base_depth && e.start_ns >= w.begin && e.end_ns <= w.end;
}

}  // namespace

Lane lane_of(const Event& top_level) {
  switch (top_level.kind) {
    case EventKind::Op:
    case EventKind::Collective:
    case EventKind::Kernel:
    case EventKind::Memcpy: return Lane::Forward;
    case EventKind::BackwardNode: return Lane::Backward;
    case EventKind::Region:
      return top_level.name.starts_with("optimizer.") || top_level.name.starts_with("GradScaler.")
                 ? Lane::Optimizer
                 : Lane::Forward;
  }
  return Lane::Forward;
}

const char* lane_colour(Lane lane) { return kLaneColours[static_cast<std::size_t>(lane)]; }
const char* memory_colour() { return "#f28e2b"; }

std::string step_html(const std::vector<Event>& events, const std::vector<MemorySample>& memory,
                      std::int64_t initial_allocated) {
  const Window w = pick_window(events);
  const double ns_per_px = static_cast<double>(w.end - w.begin) / kPlotWidth;
  auto x_of = [&](std::int64_t ns) { return kLabelWidth + static_cast<double>(ns - w.begin) / ns_per_px; };

  // Each event of the step: its lane (its outermost caller's) and its row within the lane.
  struct Box {
    int index;
    Lane lane;
    int row;
  };
  std::vector<Box> boxes;
  std::array<int, static_cast<std::size_t>(Lane::kCount)> rows{};  // rows used per lane
  std::vector<Event> step_events;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!inside(e, w, static_cast<int>(i))) continue;
    int top = static_cast<int>(i);
    while (events[static_cast<std::size_t>(top)].depth > w.base_depth) top = events[static_cast<std::size_t>(top)].parent;
    const Lane lane = lane_of(events[static_cast<std::size_t>(top)]);
    const int row = e.depth - w.base_depth;
    boxes.push_back({static_cast<int>(i), lane, row});
    auto& used = rows[static_cast<std::size_t>(lane)];
    used = std::max(used, row + 1);
    step_events.push_back(e);
  }

  std::ostringstream svg;
  int y = kAxisHeight;
  std::array<int, static_cast<std::size_t>(Lane::kCount)> lane_top{};
  for (std::size_t l = 0; l < rows.size(); ++l) {
    lane_top[l] = y;
    const int height = std::max(rows[l], 1) * kRowHeight;
    svg << "<text class=\"lane\" x=\"8\" y=\"" << y + 13 << "\">" << kLaneNames[l] << "</text>\n";
    svg << "<rect class=\"band\" x=\"" << kLabelWidth << "\" y=\"" << y << "\" width=\"" << kPlotWidth
        << "\" height=\"" << height << "\"/>\n";
    y += height + kLaneGap;
  }
  const int memory_top = y + 8;

  // Time axis: ticks over the whole height.
  const double span_us = static_cast<double>(w.end - w.begin) / 1e3;
  const double step_us = tick_step(span_us, 10);
  for (double t = 0; t <= span_us + 1e-9; t += step_us) {
    const double x = x_of(w.begin + static_cast<std::int64_t>(t * 1e3));
    svg << "<line class=\"tick\" x1=\"" << fixed(x) << "\" x2=\"" << fixed(x) << "\" y1=\"" << kAxisHeight - 6
        << "\" y2=\"" << memory_top + kMemoryHeight << "\"/>";
    if (x + 45 > kWidth) continue;  // a label past the right edge would be cut off
    svg << "<text class=\"axis\" x=\"" << fixed(x + 2) << "\" y=\"" << kAxisHeight - 10 << "\">"
        << (span_us >= 1e3 ? fixed(t / 1e3, step_us >= 1e3 ? 0 : 1) + " ms" : fixed(t, step_us >= 1 ? 0 : 1) + " us")
        << "</text>\n";
  }

  for (const Box& b : boxes) {
    const Event& e = events[static_cast<std::size_t>(b.index)];
    const double x = x_of(e.start_ns);
    // Three pixels at least, so the shortest call (an optimizer step of a tiny model) shows.
    const double width = std::max(static_cast<double>(e.duration_ns()) / ns_per_px, 3.0);
    const int box_y = lane_top[static_cast<std::size_t>(b.lane)] + b.row * kRowHeight;
    const char* fill = (b.row == 0 ? kLaneColours : kNestedColours)[static_cast<std::size_t>(b.lane)];
    std::string tip = e.name + "  " + format_time_us(static_cast<double>(e.duration_ns()) / 1e3) +
                      " (self " + format_time_us(static_cast<double>(e.self_ns) / 1e3) + ")";
    if (!e.route.empty()) tip += "  on " + e.route;
    if (!e.input_shapes.empty()) tip += "  " + format_shapes(e.input_shapes);
    svg << "<g><title>" << escape(tip) << "</title><rect x=\"" << fixed(x) << "\" y=\"" << box_y + 1
        << "\" width=\"" << fixed(width) << "\" height=\"" << kRowHeight - 2 << "\" fill=\"" << fill << (width > 6 ? "\" class=\"wide" : "")
        << "\"/>";
    // A label only where it fits (about 6.5 px a character at this size).
    if (width > 6.5 * static_cast<double>(e.name.size()) + 6) {
      svg << "<text class=\"box\" x=\"" << fixed(x + 3) << "\" y=\"" << box_y + 13 << "\">" << escape(e.name)
          << "</text>";
    }
    svg << "</g>\n";
  }

  // The allocator's curve over the step: a step function from the value before the window.
  std::int64_t level = initial_allocated;
  std::vector<std::pair<std::int64_t, std::int64_t>> curve;  // (ns, bytes)
  for (const MemorySample& m : memory) {
    if (m.ts_ns < w.begin) level = m.allocated_bytes;
    else if (m.ts_ns <= w.end) curve.emplace_back(m.ts_ns, m.allocated_bytes);
  }
  std::int64_t peak = level;
  std::int64_t peak_at = w.begin;
  for (const auto& [ts, bytes] : curve) {
    if (bytes > peak) {
      peak = bytes;
      peak_at = ts;
    }
  }
  svg << "<text class=\"lane\" x=\"8\" y=\"" << memory_top + 13 << "\">memory</text>\n";
  if (memory.empty()) {
    svg << "<text class=\"axis\" x=\"" << kLabelWidth << "\" y=\"" << memory_top + 13
        << "\">not recorded (ProfileOptions::profile_memory = false)</text>\n";
  } else {
    const double bottom = memory_top + kMemoryHeight;
    const double scale = peak > 0 ? (kMemoryHeight - 16) / static_cast<double>(peak) : 0.0;
    auto y_of = [&](std::int64_t bytes) { return bottom - static_cast<double>(bytes) * scale; };
    std::ostringstream path;
    path << "M" << kLabelWidth << "," << fixed(bottom) << " L" << kLabelWidth << "," << fixed(y_of(level));
    for (const auto& [ts, bytes] : curve) {
      path << " H" << fixed(x_of(ts)) << " V" << fixed(y_of(bytes));
    }
    path << " H" << kLabelWidth + kPlotWidth << " V" << fixed(bottom) << " Z";
    svg << "<path d=\"" << path.str() << "\" fill=\"" << memory_colour() << "\"/>\n";
    svg << "<line class=\"peak\" x1=\"" << kLabelWidth << "\" x2=\"" << kLabelWidth + kPlotWidth << "\" y1=\""
        << fixed(y_of(peak)) << "\" y2=\"" << fixed(y_of(peak)) << "\"/>";
    svg << "<text class=\"axis\" x=\"" << fixed(x_of(peak_at) + 4) << "\" y=\"" << fixed(y_of(peak) - 3)
        << "\">peak " << mib(peak) << "</text>\n";
  }
  const int height = memory_top + kMemoryHeight + 8;

  // The step's top ops by self time, PyTorch's columns.
  std::vector<FunctionEventAvg> top = key_averages(step_events, false, !memory.empty()).rows();
  std::sort(top.begin(), top.end(), [](const FunctionEventAvg& a, const FunctionEventAvg& b) {
    return a.self_cpu_time_total_ns > b.self_cpu_time_total_ns;
  });
  std::int64_t self_total = 0;
  for (const FunctionEventAvg& r : top) self_total += r.self_cpu_time_total_ns;
  if (top.size() > static_cast<std::size_t>(kTopOps)) top.resize(kTopOps);
  std::ostringstream table;
  table << "<table><tr><th>Name</th><th>Self CPU %</th><th>Self CPU</th><th>CPU total</th><th>CPU time avg</th>"
           "<th>CPU Mem</th><th>Self CPU Mem</th><th># of Calls</th></tr>\n";
  for (const FunctionEventAvg& r : top) {
    const double share = self_total > 0 ? 100.0 * static_cast<double>(r.self_cpu_time_total_ns) / self_total : 0.0;
    table << "<tr><td>" << escape(r.key) << "</td><td>" << fixed(share, 2) << "%</td><td>"
          << format_time_us(static_cast<double>(r.self_cpu_time_total_ns) / 1e3) << "</td><td>"
          << format_time_us(static_cast<double>(r.cpu_time_total_ns) / 1e3) << "</td><td>"
          << format_time_us(r.cpu_time_ns() / 1e3) << "</td><td>" << format_memory(r.cpu_memory_usage) << "</td><td>"
          << format_memory(r.self_cpu_memory_usage) << "</td><td>" << r.count << "</td></tr>\n";
  }
  table << "</table>\n";

  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Kiln profile: "
       << escape(w.title) << "</title>\n<style>\n"
       << "body{font:14px sans-serif;margin:16px;color:#222;background:#fff}\n"
       << "svg text{font:11px sans-serif}\n.lane{font-weight:bold}\n.box{fill:#fff;pointer-events:none}\n"
       << ".axis{fill:#555}\n.tick{stroke:#e4e4e4}\n.band{fill:#f6f6f6}\n"
       << "rect.wide{stroke:#fff;stroke-width:0.6}\n"
       << ".peak{stroke:#555;stroke-dasharray:4 3}\n"
       << "table{border-collapse:collapse;margin-top:12px}\ntd,th{padding:2px 10px;text-align:right}\n"
       << "td:first-child,th:first-child{text-align:left;font-family:monospace}\n"
       << "tr:nth-child(even){background:#f3f3f3}\n</style></head><body>\n"
       << "<h1 style=\"font-size:18px\">Kiln profile: " << escape(w.title) << ", "
       << escape(format_time_us(span_us)) << "</h1>\n"
       << "<p>Forward ops, backward nodes in the engine's order, and the optimizer's regions; each nested call "
          "is a row below its caller. Hover over a box for its time and input shapes.";
  if (!memory.empty()) page << " CPU memory peak in this step: " << mib(peak) << ".";
  page << "</p>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
       << "\" viewBox=\"0 0 " << kWidth << " " << height << "\">\n"
       << svg.str() << "</svg>\n<h2 style=\"font-size:16px\">Top ops by self CPU time</h2>\n"
       << table.str() << "</body></html>\n";
  return page.str();
}

}  // namespace kiln::profiler
