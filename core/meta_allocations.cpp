// core/meta_allocations.cpp — the observer slot, and meta DataPtrs that report their release.
#include "core/meta_allocations.h"

#include <atomic>
#include <utility>

namespace kiln {

namespace {

std::atomic<MetaAllocationObserver*> installed{nullptr};
// Per thread: a plan runs its step on its own thread, and other threads (data loading) keep
// computing on real tensors meanwhile.
thread_local DeviceType stands_for = DeviceType::Meta;
// Bumped at every installation, so a storage that outlives its observer (or meets a new one
// at the same address) reports to nobody.
std::atomic<std::uint64_t> generation{0};

struct ObservedBlock {
  MetaAllocationObserver* observer;
  std::uint64_t generation;
  std::uint64_t id;
};

void release_observed(void* context, void*) {
  auto* block = static_cast<ObservedBlock*>(context);
  if (installed.load(std::memory_order_acquire) == block->observer &&
      generation.load(std::memory_order_acquire) == block->generation) {
    block->observer->released(block->id);
  }
  delete block;
}

}  // namespace

DeviceType meta_stands_for() { return stands_for; }

MetaStandsForGuard::MetaStandsForGuard(DeviceType type) : stands_for_(stands_for, type) {}

MetaAllocationObserver* set_meta_allocation_observer(MetaAllocationObserver* observer) {
  generation.fetch_add(1, std::memory_order_acq_rel);
  return installed.exchange(observer, std::memory_order_acq_rel);
}

DataPtr meta_data_ptr(const MetaAllocation& allocation) {
  MetaAllocationObserver* observer = installed.load(std::memory_order_acquire);
  if (observer == nullptr || allocation.nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, kMeta);
  auto* block = new ObservedBlock{observer, generation.load(std::memory_order_acquire), 0};
  block->id = observer->allocated(allocation);
  return DataPtr(nullptr, block, &release_observed, kMeta);
}

}  // namespace kiln
