// tests/profiler/test_html_report.cpp — Profile::export_html: the page is self-contained and
// names the step's ops; and, rendered by a real browser (headless Chromium, installed by
// scripts/setup.sh), its screenshot shows the lanes in time order (forward, then backward,
// then the optimizer's step), stacked above the memory curve, each box as wide as its time.
#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/backends.h"
#include "profiler/profiled_models.h"
#include "profiler/profiler.h"
#include "support/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using kiln::testing::read_text;
using profiler::Event;
using profiler::EventKind;
using profiler::Lane;

/// One CNN step profiled on a schedule (one warm-up step, one recorded), as the programs do.
profiler::Profile& profiled_cnn_step(profiler::Profile& prof) {
  manual_seed(0);
  profiled::TinyCnn model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({32, 1, 28, 28}), y = randint(0, 10, {32});
  for (int k = 0; k < 2; ++k) {
    profiled::train_step(model, sgd, x, y);
    prof.step();
  }
  prof.stop();
  return prof;
}

fs::path fresh_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ProfilerHtml, ThePageIsSelfContainedAndNamesTheStepsOps) {
  profiler::Profile prof({.profile_memory = true, .schedule = profiler::Schedule{.warmup = 1, .active = 1}});
  profiled_cnn_step(prof);
  const fs::path dir = fresh_dir("kiln_html_report");
  prof.export_html((dir / "step.html").string());
  const std::string page = read_text(dir / "step.html");
  ASSERT_FALSE(page.empty());
  // Nothing is fetched: no script, stylesheet link, image source or imported style.
  for (const char* fetch : {"<script", "<link", "src=", "@import", "url("}) {
    EXPECT_EQ(page.find(fetch), std::string::npos) << fetch;
  }
  EXPECT_NE(page.find("Kiln profile: ProfilerStep#1"), std::string::npos);
  EXPECT_NE(page.find("CPU memory peak in this step"), std::string::npos);
  // A CPU without oneDNN takes the convolution's composite route by default (core/backends.h):
  // unfold, then a matrix product, so the step's convolutions are im2col's ops and nodes.
  const bool library = backends::onednn_is_available();
  for (const char* name : {library ? "aten::convolution" : "aten::im2col", "aten::max_pool2d_with_indices",
                           library ? "ConvolutionBackward0" : "Im2ColBackward1", "optimizer.step",
                           "optimizer.zero_grad", "Self CPU %"}) {
    EXPECT_NE(page.find(name), std::string::npos) << name;
  }

  // Without profile_memory the page says so instead of drawing a flat line.
  profiler::Profile no_memory({.schedule = profiler::Schedule{.warmup = 1, .active = 1}});
  profiled_cnn_step(no_memory);
  EXPECT_NE(profiler::step_html(no_memory.events(), no_memory.memory_samples(), 0).find("not recorded"),
            std::string::npos);
}

/// A decoded RGBA image.
struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
};

Image read_png(const fs::path& path) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  Image image;
  if (png_image_begin_read_from_file(&png, path.c_str()) == 0) return image;
  png.format = PNG_FORMAT_RGBA;
  image.rgba.resize(PNG_IMAGE_SIZE(png));
  if (png_image_finish_read(&png, nullptr, image.rgba.data(), 0, nullptr) == 0) return {};
  image.width = static_cast<int>(png.width);
  image.height = static_cast<int>(png.height);
  return image;
}

/// Where the pixels of exactly one colour lie.
struct Box {
  int count = 0;
  int min_x = std::numeric_limits<int>::max(), max_x = -1;
  int min_y = std::numeric_limits<int>::max(), max_y = -1;
  int width() const { return max_x - min_x + 1; }
};

Box pixels_of(const Image& image, const char* hex) {
  const unsigned colour = static_cast<unsigned>(std::stoul(hex + 1, nullptr, 16));
  Box box;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const unsigned char* p = &image.rgba[(static_cast<std::size_t>(y) * image.width + x) * 4];
      if (((unsigned{p[0]} << 16) | (unsigned{p[1]} << 8) | p[2]) != colour) continue;
      ++box.count;
      box.min_x = std::min(box.min_x, x);
      box.max_x = std::max(box.max_x, x);
      box.min_y = std::min(box.min_y, y);
      box.max_y = std::max(box.max_y, y);
    }
  }
  return box;
}

/// Debian's chromium, or another Chromium-based browser, found as a shell would ("" if none).
std::string chromium_on_path() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
      const fs::path candidate = fs::path(dir) / name;
      if (!dir.empty() && fs::exists(candidate)) return candidate.string();
    }
  }
  return "";
}

TEST(ProfilerHtml, ChromiumDrawsTheLanesInTimeOrderAboveTheMemoryCurve) {
  const std::string chromium = chromium_on_path();
  if (chromium.empty()) GTEST_SKIP() << "no chromium on PATH (scripts/test.sh installs Debian's)";
  profiler::Profile prof({.profile_memory = true, .schedule = profiler::Schedule{.warmup = 1, .active = 1}});
  profiled_cnn_step(prof);
  const fs::path dir = fresh_dir("kiln_html_screenshot");
  const fs::path html = dir / "step.html", png = dir / "step.png";
  prof.export_html(html.string());
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  const std::string command = "timeout 120 '" + chromium +
                              "' --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1"
                              " --user-data-dir='" + (dir / "profile").string() + "' --window-size=1240,900"
                              " --screenshot='" + png.string() + "' 'file://" + html.string() + "' > '" +
                              (dir / "chromium.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_text(dir / "chromium.log");
  const Image image = read_png(png);
  ASSERT_GT(image.width, 1000) << read_text(dir / "chromium.log");

  const Box forward = pixels_of(image, profiler::lane_colour(Lane::Forward));
  const Box backward = pixels_of(image, profiler::lane_colour(Lane::Backward));
  const Box optimizer = pixels_of(image, profiler::lane_colour(Lane::Optimizer));
  const Box memory = pixels_of(image, profiler::memory_colour());
  ASSERT_GT(forward.count, 20);
  ASSERT_GT(backward.count, 20);
  ASSERT_GT(optimizer.count, 20);
  ASSERT_GT(memory.count, 20);
  // Lanes top to bottom, then the memory curve.
  EXPECT_LT(forward.max_y, backward.min_y);
  EXPECT_LT(backward.max_y, optimizer.min_y);
  EXPECT_LT(optimizer.max_y, memory.min_y);
  // In time: the forward ops end where the backward nodes begin, optimizer.step comes last.
  EXPECT_LE(forward.max_x, backward.min_x + 2);
  EXPECT_GE(optimizer.max_x, backward.max_x);
  // The memory curve spans the step; the forward lane's share of it is the forward's share of
  // the step's time (top-level ops and regions that are not the optimizer's).
  const std::vector<Event>& events = prof.events();
  const auto step = std::find_if(events.begin(), events.end(), [](const Event& e) { return e.name == "ProfilerStep#1"; });
  ASSERT_NE(step, events.end());
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = 0;
  for (const Event& e : events) {
    if (e.depth != step->depth + 1 || e.start_ns < step->start_ns || e.end_ns > step->end_ns) continue;
    if (profiler::lane_of(e) != Lane::Forward) continue;
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
  }
  const double drawn = static_cast<double>(forward.width()) / memory.width();
  const double timed = static_cast<double>(last - first) / static_cast<double>(step->duration_ns());
  EXPECT_NEAR(drawn, timed, 0.01 + 3.0 / memory.width()) << "forward lane drawn " << forward.width() << " of "
                                                         << memory.width() << " px";
}

}  // namespace
}  // namespace kiln
