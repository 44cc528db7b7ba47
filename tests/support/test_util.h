// tests/support/test_util.h — assertions for tensors: values, shapes, and error messages.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::testing {

/// The elements of `t` in row-major order, as doubles (any dtype, any device, any strides).
std::vector<double> values(const Tensor& t);

/// Passes when `actual` holds `expected` (row-major) within `tol` (absolute + relative).
::testing::AssertionResult values_near(const Tensor& actual, const std::vector<double>& expected,
                                       double tol = 1e-6);
/// Passes when two tensors have equal shapes and values within `tol`.
::testing::AssertionResult tensors_near(const Tensor& actual, const Tensor& expected, double tol = 1e-6);

/// Whether two tensors hold the same bytes in row-major order: the sign of a zero and a NaN's
/// payload included, which value comparisons do not see.
bool same_bytes(const Tensor& a, const Tensor& b);

/// Sets element i (row-major) of a contiguous Float32 or BFloat16 tensor to the value with these
/// float bits (BFloat16 keeps their upper half): a NaN with a payload, a -0.
void set_bits(const Tensor& t, std::int64_t i, std::uint32_t float_bits);

/// A dataset of n examples whose data ([1] Float32) and target (Int64) are both i: batches
/// show at a glance which examples they hold and in what order.
std::shared_ptr<data::TensorDataset> numbers(std::int64_t n);

/// How many times `what` occurs in `text` (overlapping occurrences counted): a node's name in a
/// printed graph.
std::size_t occurrences(const std::string& text, const std::string& what);

/// The whole text of a file ("" when it cannot be read): a log, a page a test wrote.
std::string read_text(const std::filesystem::path& path);

/// The message of the kiln::Error `fn` throws (fails the test if it throws nothing).
template <class E = Error, class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.message();
  }
  ADD_FAILURE() << "expected an exception, none was thrown";
  return "";
}

}  // namespace kiln::testing

/// EXPECT_ERROR(expr, "substring"): expr throws a kiln::Error whose message contains substring.
#define EXPECT_ERROR(statement, substring)                                              \
  EXPECT_NE(::kiln::testing::error_of([&] { (void)(statement); }).find(substring),     \
            std::string::npos)                                                          \
      << "message: " << ::kiln::testing::error_of([&] { (void)(statement); })
