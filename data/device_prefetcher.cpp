// data/device_prefetcher.cpp — the one-batch-ahead copy loop and the two copiers. See Note
// [Overlapping copies with compute] in data/device_prefetcher.h.
#include "data/device_prefetcher.h"

#include <chrono>

#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/error.h"

namespace kiln::data {

namespace {

class SyncCopier final : public BatchCopier {
 public:
  explicit SyncCopier(Device device) : device_(device) {}
  Transfer start(const Example& host) override {
    Example out{host.data.to(device_), host.target.defined() ? host.target.to(device_) : Tensor()};
    return {std::move(out), [] {}};
  }

 private:
  Device device_;
};

class CudaCopier final : public BatchCopier {
 public:
  explicit CudaCopier(Device device) : device_(device), copy_stream_(cuda::Stream::create(device.index())) {}

  Transfer start(const Example& host) override {
    cuda::DeviceGuard on_device(device_.index());
    const cuda::Stream compute = cuda::current_stream(device_.index());
    // Device memory comes from the consumer's stream (rule 3): allocate before switching.
    Example out{empty(host.data.sizes(), TensorOptions().dtype(host.data.dtype()).device(device_)),
                host.target.defined()
                    ? empty(host.target.sizes(), TensorOptions().dtype(host.target.dtype()).device(device_))
                    : Tensor()};
    cuda::Event consumer_so_far;
    consumer_so_far.record(compute);
    auto copied = std::make_shared<cuda::Event>();
    {
      cuda::StreamGuard on_copy_stream(copy_stream_);
      consumer_so_far.block(copy_stream_);
      out.data.copy_(host.data, /*non_blocking=*/true);
      if (out.target.defined()) out.target.copy_(host.target, /*non_blocking=*/true);
      copied->record(copy_stream_);
    }
    const int index = device_.index();
    return {std::move(out), [copied, index] { copied->block(cuda::current_stream(index)); }};
  }

 private:
  Device device_;
  cuda::Stream copy_stream_;
};

}  // namespace

std::shared_ptr<BatchCopier> make_sync_copier(Device device) { return std::make_shared<SyncCopier>(device); }

std::shared_ptr<BatchCopier> make_cuda_copier(Device device) {
  KILN_CHECK(device.is_cuda(), "make_cuda_copier: expected a CUDA device, got ", device);
  KILN_CHECK(cuda::is_available(), "make_cuda_copier: CUDA is not available (",
             cuda::is_built() ? "no device found" : "Kiln was built without CUDA", ")");
  return std::make_shared<CudaCopier>(device.has_index() ? device : Device(DeviceType::CUDA, cuda::current_device()));
}

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, std::shared_ptr<BatchCopier> copier)
    : loader_(loader), copier_(std::move(copier)) {}

DevicePrefetcher::~DevicePrefetcher() { drop_pending(); }

void DevicePrefetcher::drop_pending() {
  // A batch abandoned mid-copy: order the consumer's stream after the copy anyway, so its
  // device memory is not handed to the consumer's next allocation while the copy still writes.
  if (pending_) pending_->make_ready();
  pending_.reset();
}

void DevicePrefetcher::start_epoch() {
  drop_pending();
  stats_ = {};
  it_ = loader_.begin();
  end_ = loader_.end();
  start_next();
}

void DevicePrefetcher::start_next() {
  if (it_ == end_) return;
  const auto begin = std::chrono::steady_clock::now();
  pending_ = copier_->start(*it_);
  stats_.start_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ++it_;
}

std::optional<Example> DevicePrefetcher::next() {
  if (!pending_) return std::nullopt;
  Transfer current = std::move(*pending_);
  pending_.reset();
  current.make_ready();
  start_next();  // queued before the consumer's compute on `current` (rule 2)
  ++stats_.batches;
  return std::move(current.batch);
}

}  // namespace kiln::data
