// compile/lent_outputs.cpp — lending a replay's results (Note [What a replay returns]).
#include "compile/lent_outputs.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "compile/graph.h"
#include "compile/storage_uses.h"
#include "core/allocator.h"

namespace kiln::compiler {

LentOutputs::LentOutputs(const Graph& g, const std::vector<Tensor>& handed)
    : loan_of_(handed.size(), -1), returned_(handed) {
  const std::map<const Storage*, StorageUses> uses = storage_uses(g);
  const std::set<const Storage*> refilled = refilled_buffers(g);
  const auto made_anew = [&](const Storage* s) {
    const auto use = uses.find(s);
    return refilled.contains(s) ||
           (use != uses.end() && !use->second.writes.empty() && use->second.first_use_writes_whole);
  };
  std::map<const Storage*, int> loan_of_buffer;
  for (std::size_t i = 0; i < handed.size(); ++i) {
    const Tensor& out = handed[i];
    if (!out.defined() || !out.device().is_cpu() || !made_anew(storage_of(out))) continue;
    auto [it, fresh] = loan_of_buffer.emplace(storage_of(out), static_cast<int>(loans_.size()));
    if (fresh) loans_.push_back({out.impl()->storage(), nullptr, {}});
    loans_[it->second].outputs.push_back(i);
    loan_of_[i] = it->second;
  }
}

void LentOutputs::settle() {
  for (Loan& loan : loans_) {
    if (!loan.lent) continue;
    // The loan itself and each returned handle over it account for the references the graph
    // knows of; any further one is the caller's: the tensor kept, or a view of it.
    bool held = loan.lent.use_count() > static_cast<long>(1 + loan.outputs.size());
    for (std::size_t i : loan.outputs) held = held || returned_[i].impl_ptr().use_count() > 1;
    if (!held) continue;
    const std::size_t nbytes = loan.lent->nbytes();
    DataPtr own = allocator_for(loan.lent->device())->allocate(nbytes);
    if (nbytes > 0) std::memcpy(own.get(), loan.buffer->data(), nbytes);
    loan.lent->set_data_ptr(std::move(own));
    loan.lent.reset();
    for (std::size_t i : loan.outputs) returned_[i] = Tensor();
  }
}

std::vector<Tensor> LentOutputs::lend(const std::vector<Tensor>& handed) {
  for (Loan& loan : loans_) {
    if (loan.lent) continue;
    // The borrowed bytes' deleter drops the reference to the buffer that keeps them alive.
    auto* keep_alive = new std::shared_ptr<Storage>(loan.buffer);
    DataPtr borrowed(
        loan.buffer->data(), keep_alive,
        [](void* context, void*) { delete static_cast<std::shared_ptr<Storage>*>(context); },
        loan.buffer->device());
    loan.lent = std::make_shared<Storage>(std::move(borrowed), loan.buffer->nbytes(), false,
                                          MemoryProvenance{MemoryOrigin::ZeroCopy, "a compiled step's result", {}});
    for (std::size_t i : loan.outputs) {
      returned_[i] = with_geometry(loan.lent, handed[i], {TensorOrigin::OpOutput, "a compiled step's result", {}});
    }
  }
  for (std::size_t i = 0; i < handed.size(); ++i) {
    if (loan_of_[i] < 0) returned_[i] = handed[i];
  }
  return returned_;
}

}  // namespace kiln::compiler
