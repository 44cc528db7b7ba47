// core/storage.cpp — allocating storages.
#include "core/storage.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device, bool pinned,
                                           MemoryProvenance provenance) {
  Allocator* allocator = allocator_for(device, pinned);
  return std::make_shared<Storage>(allocator->allocate(nbytes), nbytes, allocator->is_pinned(),
                                   provenance);
}

}  // namespace kiln
