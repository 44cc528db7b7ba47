// core/cpu/pool_record.cpp — the conversions between window records and max_pool2d's Int64
// indices (Note [A pool window in one byte] in core/cpu/pool_record.h), for the kernels that
// compose a fused call out of the unfused ones.
#include "core/cpu/pool_record.h"

#include "core/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/half.h"

namespace kiln::cpu {

bool pools_whole_2x2_windows(const Im2ColGeometry& pool) {
  return pool.kernel_h == 2 && pool.kernel_w == 2 && pool.stride_h == 2 && pool.stride_w == 2 && pool.pad_h == 0 &&
         pool.pad_w == 0 && pool.dilation_h == 1 && pool.dilation_w == 1 && pool.out_h == pool.height / 2 &&
         pool.out_w == pool.width / 2;
}

namespace {

/// Runs `body(first, py, px)` over every window of `windows`' planes, the planes split across
/// threads; `first` is the window's element offset.
template <class Body>
void for_each_window(const Tensor& windows, const Body& body) {
  const std::int64_t planes = windows.sizes()[0] * windows.sizes()[1];
  const std::int64_t out_h = windows.sizes()[2], out_w = windows.sizes()[3];
  parallel_for(0, planes, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      std::int64_t o = p * out_h * out_w;
      for (std::int64_t py = 0; py < out_h; ++py) {
        for (std::int64_t px = 0; px < out_w; ++px) body(o++, py, px);
      }
    }
  });
}

}  // namespace

void pool_records_from_indices(const Tensor& records, const Tensor& indices, const Tensor& values,
                               std::int64_t width) {
  std::uint8_t* r = records.data_ptr<std::uint8_t>();
  const std::int64_t* at = indices.data_ptr<std::int64_t>();
  dispatch_dtype<FloatingTypes>(values.dtype(), "pool_records_from_indices", [&]<typename T>() {
    const T* v = values.data_ptr<T>();
    for_each_window(records, [&](std::int64_t o, std::int64_t py, std::int64_t px) {
      const std::int64_t row = at[o] / width - 2 * py, column = at[o] % width - 2 * px;
      KILN_CHECK_INDEX(at[o] >= 0 && (row == 0 || row == 1) && (column == 0 || column == 1),
                       "max_pool2d: index ", at[o], " is outside its 2x2 window at (", 2 * py, ", ", 2 * px, ")");
      r[o] = pool_record(row == 1, column == 1, !(to_op_math(v[o]) <= 0));
    });
  });
}

void pool_indices_from_records(const Tensor& indices, const Tensor& records, std::int64_t width) {
  std::int64_t* at = indices.data_ptr<std::int64_t>();
  const std::uint8_t* r = records.data_ptr<std::uint8_t>();
  for_each_window(records, [&](std::int64_t o, std::int64_t py, std::int64_t px) {
    at[o] = pool_record_winner(r[o], py, px, width);
  });
}

}  // namespace kiln::cpu
