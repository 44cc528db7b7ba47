// profiler/key_averages.cpp — grouping events and printing PyTorch's table (the layout of
// torch.autograd.profiler_util._build_table: right-aligned columns 12 wide, two spaces apart,
// a dashed line above and below the header and at the end).
#include "profiler/key_averages.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"

namespace kiln::profiler {

std::string format_time_us(double us) {
  char buf[32];
  if (us >= 1e6) std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

std::string format_memory(std::int64_t bytes) {
  constexpr double kb = 1024.0, mb = 1024.0 * kb, gb = 1024.0 * mb;
  const double b = static_cast<double>(bytes);
  char buf[32];
  if (std::abs(b) >= gb) std::snprintf(buf, sizeof buf, "%.2f Gb", b / gb);
  else if (std::abs(b) >= mb) std::snprintf(buf, sizeof buf, "%.2f Mb", b / mb);
  else if (std::abs(b) >= kb) std::snprintf(buf, sizeof buf, "%.2f Kb", b / kb);
  else std::snprintf(buf, sizeof buf, "%lld b", static_cast<long long>(bytes));
  return buf;
}

std::string format_shapes(const std::vector<std::vector<std::int64_t>>& shapes) {
  std::string out = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) out += ", ";
    out += '[';
    for (std::size_t d = 0; d < shapes[i].size(); ++d) {
      if (d > 0) out += ", ";
      out += std::to_string(shapes[i][d]);
    }
    out += ']';
  }
  return out + "]";
}

EventList key_averages(const std::vector<Event>& events, bool group_by_input_shape, bool with_memory,
                       int group_by_stack_n) {
  std::vector<FunctionEventAvg> rows;
  std::map<std::tuple<std::string, std::string, std::vector<std::string>>, std::size_t> row_of;
  bool any_stack = false;
  for (const Event& e : events) {
    std::string shapes = group_by_input_shape ? format_shapes(e.input_shapes) : std::string();
    const std::size_t frames = std::min(e.stack.size(), static_cast<std::size_t>(std::max(group_by_stack_n, 0)));
    std::vector<std::string> stack(e.stack.begin(), e.stack.begin() + static_cast<std::ptrdiff_t>(frames));
    any_stack = any_stack || !stack.empty();
    auto key = std::make_tuple(e.name, shapes, stack);
    auto it = row_of.find(key);
    if (it == row_of.end()) {
      it = row_of.emplace(std::move(key), rows.size()).first;
      rows.push_back({.key = e.name, .input_shapes = std::move(shapes), .stack = std::move(stack)});
    }
    FunctionEventAvg& row = rows[it->second];
    ++row.count;
    row.self_cpu_time_total_ns += e.self_ns;
    row.cpu_time_total_ns += e.duration_ns();
    row.cpu_memory_usage += e.cpu_memory_usage;
    row.self_cpu_memory_usage += e.self_cpu_memory_usage;
  }
  return EventList(std::move(rows), group_by_input_shape, with_memory, any_stack);
}

std::int64_t EventList::self_cpu_time_total_ns() const {
  std::int64_t total = 0;
  for (const FunctionEventAvg& r : rows_) total += r.self_cpu_time_total_ns;
  return total;
}

std::string EventList::table(const TableOptions& options) const {
  std::vector<const FunctionEventAvg*> rows;
  for (const FunctionEventAvg& r : rows_) rows.push_back(&r);
  if (!options.sort_by.empty()) {
    using Key = double (*)(const FunctionEventAvg&);
    static const std::map<std::string, Key> keys = {
        {"self_cpu_time_total", [](const FunctionEventAvg& r) { return double(r.self_cpu_time_total_ns); }},
        {"cpu_time_total", [](const FunctionEventAvg& r) { return double(r.cpu_time_total_ns); }},
        {"cpu_time", [](const FunctionEventAvg& r) { return r.cpu_time_ns(); }},
        {"count", [](const FunctionEventAvg& r) { return double(r.count); }},
        {"cpu_memory_usage", [](const FunctionEventAvg& r) { return double(r.cpu_memory_usage); }},
        {"self_cpu_memory_usage", [](const FunctionEventAvg& r) { return double(r.self_cpu_memory_usage); }},
    };
    auto it = keys.find(options.sort_by);
    KILN_CHECK_VALUE(it != keys.end(), "sort_by: unknown key '", options.sort_by,
                     "' (self_cpu_time_total, cpu_time_total, cpu_time, count, cpu_memory_usage, "
                     "self_cpu_memory_usage)");
    const Key key = it->second;
    std::stable_sort(rows.begin(), rows.end(), [key](auto* a, auto* b) { return key(*a) > key(*b); });
  }
  if (options.row_limit >= 0 && rows.size() > static_cast<std::size_t>(options.row_limit)) {
    rows.resize(static_cast<std::size_t>(options.row_limit));
  }

  const double total_ns = static_cast<double>(self_cpu_time_total_ns());
  const auto percent = [&](std::int64_t ns) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f%%", total_ns > 0 ? 100.0 * static_cast<double>(ns) / total_ns : 0.0);
    return std::string(buf);
  };
  // PyTorch's widths: the longest name plus 4 (at most 55, longer names end in "..."), 12 for
  // numbers, the longest shape list plus 4 (at most 80) for Input Shapes, the longest frame
  // plus 4 (at most 75, longer frames keep their end) for Source Location, which shows at most
  // 5 frames of a row, one per line.
  constexpr std::size_t kColumn = 12, kMaxName = 55, kMaxShapes = 80, kMaxSource = 75, kMaxStackEntry = 5;
  std::size_t name_width = 4;
  std::size_t shapes_width = 12;
  std::size_t source_width = 0;
  for (const auto* r : rows) {
    name_width = std::max(name_width, r->key.size() + 4);
    shapes_width = std::max(shapes_width, r->input_shapes.size() + 4);
    for (const std::string& f : r->stack) source_width = std::max(source_width, f.size() + 4);
  }
  name_width = std::min(name_width, kMaxName);
  shapes_width = std::min(shapes_width, kMaxShapes);
  source_width = std::min(source_width, kMaxSource);
  const auto clip = [](const std::string& s, std::size_t width) {
    return s.size() <= width - 1 ? s : s.substr(0, width - 4) + "...";
  };
  // PyTorch's trim_path: a frame too wide keeps its end, "..." in front.
  const auto clip_front = [](const std::string& s, std::size_t width) {
    return s.size() <= width ? s : "..." + s.substr(s.size() - width + 3);
  };

  std::vector<std::string> headers = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (with_memory_) {
    headers.push_back("CPU Mem");
    headers.push_back("Self CPU Mem");
  }
  headers.push_back("# of Calls");
  if (with_shapes_) headers.push_back("Input Shapes");
  if (with_stack_) headers.push_back("Source Location");
  const std::size_t shapes_column = with_stack_ ? headers.size() - 2 : headers.size() - 1;

  const auto width_of = [&](std::size_t column) {
    if (column == 0) return name_width;
    if (with_stack_ && column == headers.size() - 1) return source_width;
    if (with_shapes_ && column == shapes_column) return shapes_width;
    return kColumn;
  };
  std::ostringstream out;
  const auto line = [&] {
    for (std::size_t c = 0; c < headers.size(); ++c) out << (c ? "  " : "") << std::string(width_of(c), '-');
    out << '\n';
  };
  const auto row = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t w = width_of(c);
      const bool left = (with_shapes_ && c == shapes_column) || (with_stack_ && c == headers.size() - 1);
      const std::string& s = cells[c];
      const std::string pad(s.size() < w ? w - s.size() : 0, ' ');
      out << (c ? "  " : "") << (left ? s + pad : pad + s);
    }
    out << '\n';
  };
  line();
  row(headers);
  line();
  for (const auto* r : rows) {
    std::vector<std::string> cells = {clip(r->key, name_width),
                                      percent(r->self_cpu_time_total_ns),
                                      format_time_us(static_cast<double>(r->self_cpu_time_total_ns) / 1e3),
                                      percent(r->cpu_time_total_ns),
                                      format_time_us(static_cast<double>(r->cpu_time_total_ns) / 1e3),
                                      format_time_us(r->cpu_time_ns() / 1e3)};
    if (with_memory_) {
      cells.push_back(format_memory(r->cpu_memory_usage));
      cells.push_back(format_memory(r->self_cpu_memory_usage));
    }
    cells.push_back(std::to_string(r->count));
    if (with_shapes_) cells.push_back(clip(r->input_shapes, shapes_width));
    if (with_stack_) cells.push_back(r->stack.empty() ? "" : clip_front(r->stack.front(), source_width));
    row(cells);
    // The row's further frames, one per line, under Source Location.
    for (std::size_t f = 1; with_stack_ && f < std::min(r->stack.size(), kMaxStackEntry); ++f) {
      std::vector<std::string> more(headers.size() - 1, "");
      more.push_back(clip_front(r->stack[f], source_width));
      row(more);
    }
  }
  line();
  out << "Self CPU time total: " << format_time_us(total_ns / 1e3) << '\n';
  return out.str();
}

}  // namespace kiln::profiler
