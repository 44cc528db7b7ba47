// profiler/stream_clock.h — how a profile times GPU work: markers recorded on a stream as the
// host queues work there (CUDA events with timing on a GPU), whose times are read once the
// recording stops, so the hot path never waits for the device. The seam lets the recorder's
// GPU path run on a machine with no GPU, against a fake clock (tests/profiler/test_gpu_spans.cpp).
// See Note [GPU spans].
// Read next: profiler/profile.cpp.
#pragma once

#include <cstdint>
#include <memory>

namespace kiln::profiler {

/// A point reached by one stream's queue.
class StreamMarker {
 public:
  virtual ~StreamMarker() = default;
  /// The stream it was recorded on (any value that tells streams apart).
  virtual std::uint64_t stream() const = 0;
  /// Milliseconds the stream took from `start` to this marker (both on the same stream);
  /// waits until the stream has passed this marker.
  virtual double elapsed_ms_since(const StreamMarker& start) const = 0;
};

/// Records markers on the calling thread's current stream.
class StreamClock {
 public:
  virtual ~StreamClock() = default;
  virtual std::unique_ptr<StreamMarker> record() = 0;
};

/// CUDA events on the current stream of the current device; nullptr when no device is
/// available (or Kiln was built without CUDA).
StreamClock* cuda_stream_clock();

}  // namespace kiln::profiler
