// tests/support/fake_host_memory.h — stand-ins for page-locked memory and CUDA events, so the
// pinned-memory logic (FencedBlockCache, the pinned DataLoader pipeline) is tested on the CPU:
// a block source over malloc that counts its calls, and a fence the test completes by hand.
#pragma once

#include <cstdlib>

#include "core/fenced_block_cache.h"

namespace kiln::testing {

class CountingSource final : public HostBlockSource {
 public:
  void* allocate(std::size_t nbytes) override {
    ++allocations;
    return std::malloc(nbytes);
  }
  void free(void* ptr, std::size_t) override {
    ++frees;
    std::free(ptr);
  }
  int allocations = 0, frees = 0;
};

/// An asynchronous copy that "finishes" when the test says so; waiting on it finishes it (and
/// is counted).
class FakeCopy final : public Fence {
 public:
  bool done() const override { return finished; }
  void wait() override {
    ++waits;
    finished = true;
  }
  bool finished = false;
  int waits = 0;
};

}  // namespace kiln::testing
