// core/cpu/eigen_exp.h — Eigen's vectorised exp, with the one value it gets wrong put right:
// what underflows is 0.
// Read next: core/cpu/unary.cpp, core/cpu/softmax_row.h.
#pragma once

#include <Eigen/Core>

#include <limits>

namespace kiln::cpu {

/// What Eigen's vectorised exp gives for -inf. Eigen 3.4 clamps a double's argument at
/// -709.78, so every smaller one, -inf included (a masked score), comes out as exp(-709.78) =
/// 5.6e-309, not the 0 (or, down to -745.13, the denormal) that std::exp and PyTorch give; a
/// float's exp gives 0 there. Asked of Eigen itself, so that an Eigen that gets it right needs
/// nothing put right.
template <class T>
T eigen_exp_floor() {
  static const T floor = [] {
    Eigen::Array<T, 64 / sizeof(T), 1> x;  // a whole vector, so that the vectorised exp runs
    x.setConstant(-std::numeric_limits<T>::infinity());
    const Eigen::Array<T, 64 / sizeof(T), 1> e = x.exp();
    return e[0];
  }();
  return floor;
}

/// dest = exp(x) by Eigen's vectorised exp, then 0 where it gave its floor: those arguments
/// underflow, and the denormals between -745.13 and -709.78 are flushed to 0 (as Float32's exp
/// flushes its own). `dest` is contiguous (an Eigen array or a Map of one); nothing more is done
/// where the floor is already 0.
template <class Dest, class Derived>
void assign_exp(Dest&& dest, const Eigen::ArrayBase<Derived>& x) {
  using T = typename Eigen::ArrayBase<Derived>::Scalar;
  dest = x.exp();
  const T floor = eigen_exp_floor<T>();
  if (floor == T(0)) return;
  T* const p = dest.data();
  for (Eigen::Index i = 0; i < dest.size(); ++i) p[i] = p[i] == floor ? T(0) : p[i];
}

}  // namespace kiln::cpu
