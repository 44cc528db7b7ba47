// examples/creation_paths.cpp — a tour of the creation contract: what copies, what shares
// memory, what keeps what alive, and what each costs. Run: build/examples/creation_paths
// Read next: core/creation.h (the table of creation paths), docs/internals.md.
#include <kiln.h>

#include "support/flags.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// Resident memory of this process, from /proc/self/statm.
double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

void section(const char* title) { std::printf("\n== %s\n", title); }
const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

int show_creation_paths() {
  using namespace kiln;

  section("tensor(values): always a new copy");
  std::vector<double> source{1.5, 2.5, 3.5};
  Tensor copied = tensor(source);
  source[0] = 100;
  std::printf("source[0] set to 100; tensor still holds %s\n", to_string(copied).c_str());
  std::printf("dtype %s (C++ doubles become the default dtype, Float32: no silent Float64)\n",
              dtype_name(copied.dtype()));
  std::printf("provenance: %s\n", copied.describe().c_str());

  section("from_blob(ptr, sizes, owner): zero-copy, keeps the owner alive");
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor shared = from_blob(buffer->data(), {2, 3}, buffer);
  (*buffer)[0] = -1;
  std::printf("buffer[0] set to -1; tensor sees it: %s\n", to_string(shared).c_str());
  std::printf("same address as the buffer: %s; owner use_count now %ld\n",
              yes_no(shared.data_ptr<float>() == buffer->data()), buffer.use_count());
  std::printf("provenance: %s\n", shared.describe().c_str());
  std::vector<double> doubles{1, 2};
  try {
    (void)from_blob_borrowed(doubles.data(), {2}, kFloat32);
  } catch (const Error& e) {
    std::printf("from_blob(double*, Float32) is refused: %s\n", e.message().c_str());
  }

  section("as_tensor(x): shares when the terms allow, copies otherwise");
  Tensor x = ones({3});
  std::printf("as_tensor(x) is x itself: %s\n", yes_no(as_tensor(x).is_same(x)));
  std::printf("as_tensor(x, Float64) shares memory with x: %s (a dtype change must copy)\n",
              yes_no(as_tensor(x, kFloat64).shares_memory(x)));
  std::vector<float> moved(1000, 1.0f);
  const float* before = moved.data();
  Tensor owned = as_tensor(std::move(moved));
  std::printf("as_tensor(std::move(vector)) took the vector's buffer: %s\n",
              yes_no(owned.data_ptr<float>() == before));

  section("views and contiguity");
  Tensor chw = arange(24.0).reshape({2, 3, 4});
  Tensor hwc = chw.permute({1, 2, 0});
  std::printf("permute shares memory: %s; contiguous: %s; strides %s\n", yes_no(hwc.shares_memory(chw)),
              yes_no(hwc.is_contiguous()), detail::str_cat(hwc.strides()).c_str());
  Tensor packed = hwc.contiguous();
  std::printf("contiguous() copied: %s; x.contiguous() on a contiguous x returns x: %s\n",
              yes_no(!packed.shares_memory(chw)), yes_no(packed.contiguous().is_same(packed)));
  std::printf("to(Float32) on a Float32 tensor returns it unchanged: %s\n", yes_no(x.to(kFloat32).is_same(x)));

  section("memory: a deep copy costs its size, a zero-copy tensor costs nothing");
  const std::int64_t n = 10'000'000;
  auto big = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n), 0.5f);
  double base = resident_mib();
  Tensor deep = tensor(*big);
  deep.sum();  // touch it
  const double after_copy = resident_mib();
  Tensor zero_copy = from_blob(big->data(), {n}, big);
  const double after_blob = resident_mib();
  std::printf("tensor() of 1e7 Float32: +%.1f MiB resident; from_blob: +%.2f MiB\n", after_copy - base,
              after_blob - after_copy);

  section("creation is a contract: requires_grad is fixed at creation");
  Tensor w = randn({2, 2}, requires_grad());
  Tensor y = (w * 2).sum();
  std::printf("w: %s\ny: %s\n", autograd::explain(w).c_str(), autograd::explain(y).c_str());
  try {
    w.add_(1);
  } catch (const Error& e) {
    std::printf("w.add_(1) is refused: %s\n", e.message().substr(0, e.message().find('\n')).c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  return kiln::examples::run_program("creation_paths", [&] {
    kiln::examples::Flags("creation_paths", "what copies and what shares memory, for each way to create a tensor")
        .parse(argc, argv);
    return show_creation_paths();
  });
}
