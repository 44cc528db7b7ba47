// profiler/cuda_stream_clock.cpp — the StreamClock of a GPU: a timing cudaEvent recorded on the
// current stream per marker, read with cudaEventElapsedTime once the profile stops. Written
// against core/cuda/cuda.h, whose stubs make it compile (and answer "no device") everywhere.
#include <cstdint>

#include "core/cuda/cuda.h"
#include "profiler/stream_clock.h"

namespace kiln::profiler {

namespace {

class CudaMarker final : public StreamMarker {
 public:
  explicit CudaMarker(const cuda::Stream& stream)
      : event_(/*enable_timing=*/true),
        // Every device's default stream is the null handle: the device tells them apart.
        stream_(reinterpret_cast<std::uintptr_t>(stream.handle()) ^ (static_cast<std::uint64_t>(stream.device()) << 56)) {
    event_.record(stream);
  }
  std::uint64_t stream() const override { return stream_; }
  double elapsed_ms_since(const StreamMarker& start) const override {
    event_.synchronize();
    return static_cast<const CudaMarker&>(start).event_.elapsed_time(event_);
  }

 private:
  cuda::Event event_;
  std::uint64_t stream_;
};

class CudaStreamClock final : public StreamClock {
 public:
  std::unique_ptr<StreamMarker> record() override { return std::make_unique<CudaMarker>(cuda::current_stream()); }
};

}  // namespace

StreamClock* cuda_stream_clock() {
  if (!cuda::is_available()) return nullptr;
  static CudaStreamClock clock;
  return &clock;
}

}  // namespace kiln::profiler
