// examples/pinned_pipeline.cpp — the DataLoader with pinned memory, measured: host→device
// bandwidth from pageable and from page-locked memory, and the time of a training epoch
// for three pipelines:
//   pageable + synchronous      pin_memory=false, to(cuda)
//   pinned + synchronous        pin_memory=true,  to(cuda)
//   pinned + non_blocking       pin_memory=true,  copies on a copy stream one batch ahead
// with the DataLoader's own statistics (queue depth, time the loop waited for a batch).
//   build/examples/pinned_pipeline --epochs 1 --workers 2
// Without a GPU there is nothing to pin for: it runs the pipeline unpinned on the CPU, says
// why, and still reports the DataLoader's statistics.
// Read next: data/device_prefetcher.h, core/cuda/host_allocator.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "support/models.h"
#include "support/training.h"

namespace {

using namespace kiln;

struct EpochReport {
  double seconds = 0.0;
  data::DataLoaderStats loader;
  data::PrefetcherStats prefetcher;
};

EpochReport run_epoch(nn::Module& model, optim::Optimizer& opt, data::DataLoader& loader,
                      std::shared_ptr<data::BatchCopier> copier, Device device) {
  data::DevicePrefetcher batches(loader, std::move(copier));
  const auto begin = std::chrono::steady_clock::now();
  batches.start_epoch();
  while (auto batch = batches.next()) {
    const Tensor x = examples::normalize_fashion(batch->data).flatten(1);
    opt.zero_grad();
    cross_entropy(model.forward(x), batch->target).backward();
    opt.step();
  }
  if (device.is_cuda()) cuda::synchronize();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(), loader.stats(),
          batches.stats()};
}

/// GB/s of a host→device copy of `bytes` from pageable or pinned memory (median of 5).
double h2d_bandwidth(std::int64_t bytes, bool pinned) {
  Tensor host = empty({bytes / 4}, kFloat32);
  host.fill_(1.0f);
  if (pinned) host = host.pin_memory();
  const Tensor device = empty({bytes / 4}, TensorOptions().dtype(kFloat32).device(Device("cuda")));
  std::vector<double> gbs;
  for (int i = 0; i < 6; ++i) {
    cuda::Event start(true), stop(true);
    start.record();
    device.copy_(host, /*non_blocking=*/pinned);
    stop.record();
    stop.synchronize();
    if (i > 0) gbs.push_back(static_cast<double>(bytes) / (start.elapsed_time(stop) * 1e-3) / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

void print_report(const char* name, const EpochReport& r) {
  std::printf("%-26s %8.2f s %10lld %12.3f s %10.2f %10zu %12.3f s\n", name, r.seconds,
              static_cast<long long>(r.loader.batches), r.loader.consumer_wait_seconds, r.loader.mean_queue_depth,
              r.loader.max_queue_depth, r.prefetcher.start_seconds);
}

void print_header() {
  std::printf("%-26s %10s %10s %14s %10s %10s %14s\n", "pipeline", "epoch", "batches", "loader wait",
              "mean queue", "max queue", "copy starts");
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_program("pinned_pipeline", [&] {
    examples::TrainConfig c;
    c.epochs = 1;
    c.batch_size = 512;
    c.workers = 2;
    examples::Flags flags("pinned_pipeline", "pageable vs pinned vs non_blocking batches to the GPU");
    examples::add_training_flags(flags, c, {.memory_plan = false, .checkpoints = false, .profile = false});
    flags.parse(argc, argv);
    const auto train = data::FashionMNIST::load(true, c.data_root);
    auto loader_with = [&](bool pin) {
      return data::DataLoader(train, {.batch_size = static_cast<std::size_t>(c.batch_size), .shuffle = true,
                                      .seed = c.seed, .num_workers = c.workers, .pin_memory = pin});
    };
    auto fresh_model = [&](Device device) {
      manual_seed(c.seed);
      auto model = std::make_unique<examples::Mlp>();
      model->to(device);
      return model;
    };

    if (!cuda::is_available()) {
      std::printf("No CUDA device (%s): pinned memory only helps copies to a GPU, so this run keeps the\n"
                  "batches in ordinary (pageable) memory and trains on the CPU. The pipeline is the same —\n"
                  "DataLoader workers, the prefetcher, the training step — with a copier that does not copy.\n\n",
                  cuda::is_built() ? "Kiln was built with CUDA but found no device" : "Kiln was built without CUDA");
      print_header();
      for (std::int64_t epoch = 0; epoch < c.epochs; ++epoch) {
        auto model = fresh_model(kCPU);
        optim::Adam opt(model->parameters(), optim::AdamOptions(c.lr));
        data::DataLoader loader = loader_with(false);
        print_report("pageable, CPU training", run_epoch(*model, opt, loader, data::make_sync_copier(kCPU), kCPU));
      }
      return 0;
    }

    const Device gpu("cuda");
    const std::int64_t bytes = 64 << 20;
    const double pageable_gbs = h2d_bandwidth(bytes, false), pinned_gbs = h2d_bandwidth(bytes, true);
    std::printf("host->device bandwidth, 64 MiB copies: pageable %.1f GB/s, pinned %.1f GB/s (%.2fx)\n\n",
                pageable_gbs, pinned_gbs, pinned_gbs / pageable_gbs);
    print_header();
    struct Pipeline { const char* name; bool pin; bool overlap; };
    EpochReport sync_pinned, overlapped;
    for (const Pipeline& p : {Pipeline{"pageable + synchronous", false, false},
                              Pipeline{"pinned + synchronous", true, false},
                              Pipeline{"pinned + non_blocking", true, true}}) {
      auto model = fresh_model(gpu);
      optim::Adam opt(model->parameters(), optim::AdamOptions(c.lr));
      data::DataLoader loader = loader_with(p.pin);
      EpochReport r;
      for (std::int64_t epoch = 0; epoch < c.epochs; ++epoch) {
        r = run_epoch(*model, opt, loader, p.overlap ? data::make_cuda_copier(gpu) : data::make_sync_copier(gpu), gpu);
      }
      print_report(p.name, r);
      if (p.pin) (p.overlap ? overlapped : sync_pinned) = r;
    }
    std::printf("\noverlap: the epoch takes %.2fx the time of pinned + synchronous\n",
                overlapped.seconds / sync_pinned.seconds);
    return 0;
  });
}
