// compile/scratch.cpp — one bump-allocated block for kernels' own memory during a replay (see
// compile/scratch.h and Note [Kernels' own memory in a replay]).
#include "compile/scratch.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::compiler {

namespace {
std::size_t aligned(std::size_t n) { return (n + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment; }
}  // namespace

Scratch::~Scratch() {
  if (block_ != nullptr) drop(block_);
}

void Scratch::drop(Block* block) {
  if (block->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::free(block->data);
    delete block;
  }
}

void Scratch::free_one(void* block, void*) { drop(static_cast<Block*>(block)); }

DataPtr Scratch::allocate(std::size_t nbytes) {
  const std::size_t size = aligned(nbytes);
  if (block_ == nullptr || used_ + size > block_->bytes) {
    overflow_ += size;
    return {};
  }
  char* p = block_->data + used_;
  used_ += size;
  block_->references.fetch_add(1, std::memory_order_relaxed);
  return DataPtr(p, block_, &free_one, kCPU);
}

void Scratch::install() {
  used_ = 0;
  overflow_ = 0;
  previous_ = capture::set_scratch_source(this);
}

bool Scratch::release() {
  capture::set_scratch_source(previous_);
  needed_ = std::max(needed_, used_ + overflow_);
  if (block_ == nullptr || block_->references.load(std::memory_order_acquire) == 1) return true;
  drop(block_);  // its holders keep it; the next kernels get a new one
  block_ = nullptr;
  return false;
}

void Scratch::fit() {
  if (block_ != nullptr && block_->bytes >= needed_) return;
  if (needed_ == 0) return;
  if (block_ != nullptr) drop(block_);
  block_ = new Block;
  block_->bytes = aligned(needed_);
  block_->data = static_cast<char*>(std::aligned_alloc(kCpuAlignment, block_->bytes));
  if (block_->data == nullptr) {
    delete block_;
    block_ = nullptr;
  }
}

std::size_t Scratch::capacity() const { return block_ == nullptr ? 0 : block_->bytes; }

}  // namespace kiln::compiler
