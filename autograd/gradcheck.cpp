// autograd/gradcheck.cpp — finite differences vs backward (see autograd/gradcheck.h).
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace kiln::autograd {

namespace {

/// Storage offset of element `flat` (row-major order) of a tensor of any strides.
std::int64_t element_offset(const Tensor& t, std::int64_t flat) {
  std::int64_t offset = t.storage_offset();
  for (std::int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (flat % t.sizes()[d]) * t.strides()[d];
    flat /= t.sizes()[d];
  }
  return offset;
}

/// One element of a Float64 input, read and written in place without recording anything
/// or bumping its version: through the raw pointer on the CPU, through a 0-dim view and a
/// fill kernel on other devices.
class Element {
 public:
  Element(const Tensor& t, std::int64_t flat) {
    if (t.is_cpu()) {
      ptr_ = static_cast<double*>(t.raw_data_ptr()) + (element_offset(t, flat) - t.storage_offset());
    } else {
      view_ = ops::as_strided(t, {}, {}, element_offset(t, flat), "gradcheck");
    }
  }
  double get() const {
    if (ptr_ != nullptr) return *ptr_;
    const Tensor host = ops::to_device(view_, kCPU, false);
    return *static_cast<const double*>(host.raw_data_ptr());
  }
  void set(double v) const {
    if (ptr_ != nullptr) {
      *ptr_ = v;
    } else {
      ops::fill_data(view_, v);
    }
  }

 private:
  double* ptr_ = nullptr;
  Tensor view_;
};

/// Outputs flattened to Float64 vectors on the CPU.
std::vector<std::vector<double>> flat_outputs(const TensorList& outs) {
  std::vector<std::vector<double>> flat;
  for (const Tensor& o : outs) {
    const Tensor c = ops::contiguous(ops::to_dtype(ops::to_device(o.detach(), kCPU, false), kFloat64));
    const double* p = static_cast<const double*>(c.raw_data_ptr());
    flat.emplace_back(p, p + c.numel());
  }
  return flat;
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const TensorList& inputs, GradcheckOptions o) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    KILN_CHECK_TYPE(x.dtype() == kFloat64 && !x.is_meta(), "gradcheck: input ", i,
                    " requires grad but is ", x.dtype(), " on ", x.device(),
                    "; gradcheck needs Float64 inputs with data (finite differences in Float32 are "
                    "too noisy to judge by)");
  }
  const TensorList outputs = fn(inputs);
  std::ostringstream report;
  bool ok = true;
  for (std::size_t k = 0; k < outputs.size() && ok; ++k) {
    const Tensor& out = outputs[k];
    if (!out.defined() || !out.is_floating_point()) continue;
    const std::int64_t m = out.numel();
    // Analytical Jacobian rows: one backward per output element.
    std::vector<std::vector<std::vector<double>>> analytical(inputs.size());
    TensorList diff_inputs;
    std::vector<std::size_t> diff_index;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && inputs[i].requires_grad()) {
        diff_inputs.push_back(inputs[i]);
        diff_index.push_back(i);
      }
    }
    for (std::int64_t r = 0; r < m && out.requires_grad(); ++r) {
      Tensor seed = zeros_like(out);
      {
        NoGradGuard no_grad;
        seed.reshape({-1}).narrow(0, r, 1).fill_(1);
      }
      const TensorList grads = grad({out}, diff_inputs, {seed}, true, false, true);
      for (std::size_t j = 0; j < diff_inputs.size(); ++j) {
        std::vector<double> row(static_cast<std::size_t>(diff_inputs[j].numel()), 0.0);
        if (grads[j].defined()) {
          const Tensor c = ops::contiguous(ops::to_dtype(ops::to_device(grads[j], kCPU, false), kFloat64));
          const double* p = static_cast<const double*>(c.raw_data_ptr());
          std::copy(p, p + c.numel(), row.begin());
        }
        analytical[diff_index[j]].push_back(std::move(row));
      }
    }
    // Numerical Jacobian columns, compared as they are computed.
    for (std::size_t i : diff_index) {
      const Tensor& x = inputs[i];
      for (std::int64_t e = 0; e < x.numel() && ok; ++e) {
        // Perturbed through the raw pointer (no version bump, nothing recorded); fn runs in
        // the caller's grad mode, since gradgradcheck's fn itself calls backward.
        const Element element(x, e);
        const double saved = element.get();
        element.set(saved + o.eps);
        const std::vector<double> plus = flat_outputs(fn(inputs))[k];
        element.set(saved - o.eps);
        const std::vector<double> minus = flat_outputs(fn(inputs))[k];
        element.set(saved);
        for (std::int64_t r = 0; r < m; ++r) {
          const double numerical = (plus[r] - minus[r]) / (2 * o.eps);
          const double analytic = out.requires_grad()
                                      ? analytical[i][static_cast<std::size_t>(r)][static_cast<std::size_t>(e)]
                                      : 0.0;
          if (!(std::fabs(analytic - numerical) <= o.atol + o.rtol * std::fabs(numerical))) {
            ok = false;
            report << "Jacobian mismatch for output " << k << " with respect to input " << i
                   << ",\nat output element " << r << ", input element " << e
                   << ":\nnumerical: " << numerical << "\nanalytical: " << analytic
                   << "\n(eps " << o.eps << ", atol " << o.atol << ", rtol " << o.rtol << ")";
            break;
          }
        }
      }
    }
  }
  if (!ok && o.raise_exception) KILN_FAIL(report.str());
  return ok;
}

bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               GradcheckOptions options) {
  return gradcheck(GradcheckFn([&](const TensorList& in) { return TensorList{fn(in)}; }), inputs,
                   options);
}

bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   GradcheckOptions options) {
  // A fixed random grad_output, itself differentiable, as PyTorch does.
  Tensor out = fn(inputs);
  Tensor grad_out = randn(out.sizes(), TensorOptions().dtype(kFloat64).requires_grad(true));
  TensorList all = inputs;
  all.push_back(grad_out);
  const std::size_t n = inputs.size();
  return gradcheck(
      GradcheckFn([&](const TensorList& in) {
        TensorList xs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
        TensorList diff;
        for (const Tensor& x : xs) {
          if (x.defined() && x.requires_grad()) diff.push_back(x);
        }
        return grad({fn(xs)}, diff, {in.back()}, true, true, true);
      }),
      all, options);
}

}  // namespace kiln::autograd
