// core/print.cpp — printing tensors the way PyTorch does, so output can be compared by eye:
//
//   tensor([[1., 2.],
//           [3., 4.]], dtype=kiln.float64, requires_grad=True)
//
// Floats print as integers with a trailing "." when every value is whole, with 4 decimals
// otherwise, and in scientific notation when the magnitudes span more than 1000x (or exceed
// 1e8, or fall below 1e-4). Tensors over 1000 elements show 3 items at each edge and "...".
// The grad_fn's name is autograd's to add (core/print.h).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/index.h"
#include "core/ops/view.h"
#include "core/print.h"
#include "core/tensor.h"

namespace kiln {

namespace {

constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;
constexpr std::int64_t kLineWidth = 80;

/// Formats every element of a (CPU, contiguous) tensor the same way and to the same width.
class Formatter {
 public:
  explicit Formatter(const std::vector<double>& values, DType dtype) : dtype_(dtype) {
    if (dtype == DType::Bool || !is_floating_point(dtype)) {
      for (double v : values) width_ = std::max(width_, text(v).size());
      return;
    }
    double lo = INFINITY, hi = 0;
    bool any = false;
    int_mode_ = true;
    for (double v : values) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (any) {
      if (int_mode_) sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8;
      else sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (double v : values) width_ = std::max(width_, text(v).size());
  }

  std::string text(double v) const {
    if (dtype_ == DType::Bool) return v != 0 ? "True" : "False";
    char buf[64];
    if (!is_floating_point(dtype_)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode_) std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (int_mode_) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }

  std::string padded(double v) const {
    std::string s = text(v);
    return std::string(width_ - std::min(width_, s.size()), ' ') + s;
  }
  std::size_t width() const { return width_; }

 private:
  DType dtype_;
  bool int_mode_ = false;
  bool sci_mode_ = false;
  std::size_t width_ = 1;
};

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = ops::contiguous(t);
  std::vector<double> out(static_cast<std::size_t>(c.numel()));
  dispatch_dtype<AllTypes>(c.dtype(), "print", [&]<typename T>() {
    const T* p = static_cast<const T*>(c.raw_data_ptr());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

/// The elements that will be shown (all, or the edges of each dim when summarising).
Tensor summarized(const Tensor& t, bool summarize) {
  if (!summarize || t.dim() == 0) return t;
  Tensor x = t;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] > 2 * kEdgeItems) {
      x = ops::cat({ops::narrow(x, d, 0, kEdgeItems),
                    ops::narrow(x, d, x.sizes()[d] - kEdgeItems, kEdgeItems)}, d);
    }
  }
  return x;
}

/// One element of a (CPU) tensor as a double.
double value_at(const Tensor& t) { return values_of(t).front(); }

void write_body(std::ostream& os, const Tensor& t, const Formatter& f, std::int64_t indent,
                bool summarize) {
  if (t.dim() == 0) {
    os << f.text(value_at(t));
    return;
  }
  const std::int64_t n = t.sizes()[0];
  const bool cut = summarize && n > 2 * kEdgeItems;
  std::vector<std::int64_t> shown;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!cut || i < kEdgeItems || i >= n - kEdgeItems) shown.push_back(i);
  }
  os << '[';
  if (t.dim() == 1) {
    const auto item = static_cast<std::int64_t>(f.width()) + 2;
    const std::int64_t per_line = std::max<std::int64_t>(1, (kLineWidth - indent) / item);
    std::int64_t on_line = 0;
    bool first = true;
    auto next = [&](const std::string& s) {
      if (!first) {
        os << ',';
        if (on_line == per_line) {
          os << '\n' << std::string(static_cast<std::size_t>(indent + 1), ' ');
          on_line = 0;
        } else {
          os << ' ';
        }
      }
      os << s;
      ++on_line;
      first = false;
    };
    const std::vector<double> vals = values_of(t);
    for (std::size_t k = 0; k < shown.size(); ++k) {
      if (cut && k == static_cast<std::size_t>(kEdgeItems)) next(" ...");
      next(f.padded(vals[static_cast<std::size_t>(shown[k])]));
    }
  } else {
    const std::string sep = detail::str_cat(',', std::string(static_cast<std::size_t>(t.dim() - 1), '\n'),
                                            std::string(static_cast<std::size_t>(indent + 1), ' '));
    for (std::size_t k = 0; k < shown.size(); ++k) {
      if (k > 0) os << sep;
      if (cut && k == static_cast<std::size_t>(kEdgeItems)) os << "..." << sep;
      write_body(os, ops::select(t, 0, shown[k]), f, indent + 1, summarize);
    }
  }
  os << ']';
}

bool prints_dtype(DType t) {
  return t != default_dtype() && t != DType::Int64 && t != DType::Bool;
}

std::string size_text(IntArrayRef s) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ',';
  os << ')';
  return os.str();
}

}  // namespace

void print_tensor(std::ostream& os, const Tensor& t, const char* grad_fn_name) {
  if (!t.defined()) {
    os << "[ Tensor (undefined) ]";
    return;
  }
  const std::string prefix = "tensor(";
  std::vector<std::string> suffixes;
  std::ostringstream body;
  if (t.is_meta()) {
    body << "...";
    suffixes.push_back(detail::str_cat("size=", size_text(t.sizes())));
  } else if (t.numel() == 0) {
    body << "[]";
    if (t.dim() != 1) suffixes.push_back(detail::str_cat("size=", size_text(t.sizes())));
  } else {
    const Tensor host = t.is_cpu() ? t : ops::to_device(t, kCPU, false);
    const bool summarize = host.numel() > kThreshold;
    const Formatter f(values_of(summarized(host, summarize)), host.dtype());
    write_body(body, host, f, static_cast<std::int64_t>(prefix.size()), summarize);
  }
  if (!t.is_cpu()) suffixes.insert(suffixes.begin(), detail::str_cat("device='", t.device(), "'"));
  if (prints_dtype(t.dtype())) suffixes.push_back(detail::str_cat("dtype=kiln.", dtype_name(t.dtype())));
  if (grad_fn_name != nullptr) suffixes.push_back(detail::str_cat("grad_fn=<", grad_fn_name, ">"));
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  os << prefix << body.str();
  for (const auto& s : suffixes) os << ", " << s;
  os << ')';
}

}  // namespace kiln
