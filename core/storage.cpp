// core/storage.cpp — allocating storages. Meta storages have no bytes, but tell an installed
// observer what they stand for (core/meta_allocations.h).
#include "core/storage.h"

#include "core/capture_hooks.h"
#include "core/meta_allocations.h"
#include "core/shape.h"

namespace kiln {

namespace {

std::shared_ptr<Storage> allocate_described(std::size_t nbytes, Device device, bool pinned,
                                            const MemoryProvenance& provenance, const MetaAllocation* meta) {
  if (device.is_meta()) {
    MetaAllocation what = meta != nullptr ? *meta : MetaAllocation{};
    what.nbytes = nbytes;
    what.provenance = &provenance;
    return std::make_shared<Storage>(meta_data_ptr(what), nbytes, false, provenance);
  }
  Allocator* allocator = allocator_for(device, pinned);
  auto storage = std::make_shared<Storage>(allocator->allocate(nbytes), nbytes, allocator->is_pinned(), provenance);
  if (capture::Observer* o = capture::observer()) [[unlikely]] o->storage_made(storage);
  return storage;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device, bool pinned,
                                           MemoryProvenance provenance) {
  return allocate_described(nbytes, device, pinned, provenance, nullptr);
}

std::shared_ptr<Storage> Storage::allocate_for(IntArrayRef sizes, DType dtype, Device device, bool pinned,
                                               MemoryProvenance provenance) {
  const MetaAllocation meta{.sizes = sizes, .dtype = dtype, .described = true};
  return allocate_described(storage_nbytes(sizes, itemsize(dtype)), device, pinned, provenance, &meta);
}

}  // namespace kiln
