// tests/core/test_pool.cpp — the CPU max-pool kernel against a direct reading of the
// definition: every window scanned in row-major order, the first strict maximum kept, the
// first NaN winning for good, padding never chosen. The kernel has a separable fast path
// (windows that tile the rows) and a window-at-a-time path; geometries below exercise both,
// on data with many ties so the tie order is checked, not just the values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/conv.h"
#include "kiln.h"

namespace kiln {
namespace {

struct PoolCase {
  const char* name;
  std::int64_t h, w, kh, kw, sh, sw, ph, pw, dh, dw;
};

/// max_pool2d by the definition, one window at a time, in Float64.
std::pair<std::vector<double>, std::vector<std::int64_t>> reference(const std::vector<double>& x, std::int64_t planes,
                                                                    const Im2ColGeometry& g) {
  std::vector<double> values;
  std::vector<std::int64_t> indices;
  for (std::int64_t p = 0; p < planes; ++p) {
    const double* plane = x.data() + p * g.height * g.width;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        double best = 0;
        std::int64_t at = -1;
        for (std::int64_t i = 0; i < g.kernel_h; ++i) {
          for (std::int64_t j = 0; j < g.kernel_w; ++j) {
            const std::int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
            const std::int64_t xx = ox * g.stride_w - g.pad_w + j * g.dilation_w;
            if (y < 0 || y >= g.height || xx < 0 || xx >= g.width) continue;
            const double v = plane[y * g.width + xx];
            const bool first = at < 0;
            if (first || (!std::isnan(best) && (v > best || std::isnan(v)))) {
              best = v;
              at = y * g.width + xx;
            }
          }
        }
        values.push_back(best);
        indices.push_back(at);
      }
    }
  }
  return {values, indices};
}

class MaxPoolKernel : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolKernel, MatchesTheDefinitionIncludingTiesAndNaN) {
  const PoolCase c = GetParam();
  const std::int64_t n = 2, channels = 3;
  manual_seed(7);
  // Small integers: most windows hold ties. A few NaNs and -infs on top.
  Tensor x = randint(0, 4, {n, channels, c.h, c.w}).to(kFloat64);
  std::vector<double> data(x.data_ptr<double>(), x.data_ptr<double>() + x.numel());
  for (std::size_t i = 0; i < data.size(); i += 23) data[i] = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t i = 5; i < data.size(); i += 17) data[i] = -std::numeric_limits<double>::infinity();
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, c.h, c.w}, {c.kh, c.kw}, {c.dh, c.dw}, {c.ph, c.pw}, {c.sh, c.sw});
  const auto [want_values, want_indices] = reference(data, n * channels, g);
  for (DType dtype : {kFloat64, kFloat32}) {
    Tensor input = tensor(data).reshape({n, channels, c.h, c.w}).to(dtype);
    const auto [values, indices] = ops::max_pool2d_with_indices(input, g);
    ASSERT_EQ(values.numel(), static_cast<std::int64_t>(want_values.size()));
    Tensor v = values.to(kFloat64).contiguous();
    for (std::int64_t i = 0; i < values.numel(); ++i) {
      const double got = v.data_ptr<double>()[i];
      if (std::isnan(want_values[static_cast<std::size_t>(i)])) {
        EXPECT_TRUE(std::isnan(got)) << c.name << " output " << i;
      } else {
        EXPECT_EQ(got, want_values[static_cast<std::size_t>(i)]) << c.name << " output " << i;
      }
      EXPECT_EQ(indices.data_ptr<std::int64_t>()[i], want_indices[static_cast<std::size_t>(i)])
          << c.name << " output " << i << " (" << dtype_name(dtype) << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, MaxPoolKernel,
    ::testing::Values(PoolCase{"tiling_2x2_stride_2", 8, 10, 2, 2, 2, 2, 0, 0, 1, 1},
                      PoolCase{"tiling_1x2_stride_1x2_tall", 5, 6, 3, 2, 1, 2, 0, 0, 1, 1},
                      PoolCase{"tiling_kernel_1_stride_1", 4, 5, 1, 1, 1, 1, 0, 0, 1, 1},
                      PoolCase{"odd_width_2x2_stride_2", 7, 7, 2, 2, 2, 2, 0, 0, 1, 1},
                      PoolCase{"overlapping_3x3_stride_1", 6, 7, 3, 3, 1, 1, 0, 0, 1, 1},
                      PoolCase{"padded_3x3_stride_2", 7, 8, 3, 3, 2, 2, 1, 1, 1, 1},
                      PoolCase{"dilated_2x2", 9, 9, 2, 2, 1, 1, 0, 0, 2, 3},
                      PoolCase{"dilated_tiling", 6, 8, 2, 2, 2, 2, 0, 0, 2, 1},
                      PoolCase{"padded_dilated", 6, 6, 3, 2, 2, 1, 1, 1, 2, 2}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kiln
