// tests/consumer/main.cpp — builds against an installed Kiln and checks one backward pass.
#include <kiln.h>

#include <iostream>

int main() {
  auto w = kiln::tensor({1.0, 2.0, 3.0}, kiln::requires_grad());
  auto loss = (w * w).sum();
  loss.backward();
  std::cout << "grad: " << w.grad() << "\n";
  // d(sum w^2)/dw = 2w
  return kiln::allclose(w.grad(), w.detach() * 2) ? 0 : 1;
}
