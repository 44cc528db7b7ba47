// autograd/tensor_print.cpp — `std::cout << t` and to_string(t): core's text of the tensor
// (core/print.cpp) with its history, `grad_fn=<MulBackward0>`, which only autograd can name.
#include <sstream>
#include <string>

#include "core/print.h"
#include "core/tensor.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  print_tensor(os, t, t.defined() && t.grad_fn() ? node_name(*t.grad_fn()) : nullptr);
  return os;
}

std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace kiln
