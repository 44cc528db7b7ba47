// examples/train_ddp.cpp — train_mlp's or train_cnn's model on Fashion-MNIST across processes:
// every rank holds the model, visits its share of each epoch (DistributedSampler) and
// averages gradients with the others during backward (DistributedDataParallel). Rank 0 alone
// prints, evaluates and writes the checkpoint (which train_mlp's model loads as it is).
//   mpirun -np 2 build/examples/train_ddp --epochs 1                  # one machine, 2 ranks
//   mpirun -np 4 --hostfile hosts build/examples/train_ddp --model cnn  # several machines
//   mpirun -np 2 build/examples/train_ddp --device cuda --backend nccl  # a GPU per rank
// As root, Open MPI wants --allow-run-as-root (or OMPI_ALLOW_RUN_AS_ROOT=1 and
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); with more ranks than cores, --oversubscribe.
// --batch-size is per rank, as in PyTorch: the step's global batch is that times the ranks.
// Read next: distributed/data_parallel.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "support/models.h"
#include "support/training.h"

namespace {

using namespace kiln;
using namespace kiln::examples;

/// Cores per rank: this machine's cores shared among the ranks Open MPI put on it.
int threads_per_rank() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local ? std::max(1, std::atoi(local)) : distributed::get_world_size();
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
}

int train_ddp(const Flags& flags) {
  distributed::init_process_group({.backend = flags.str("backend")});
  const int rank = distributed::get_rank(), world = distributed::get_world_size();
  TrainConfig c = config_from(flags);
  // NCCL wants one GPU per rank: the rank's own on its machine, as its process group chose.
  if (flags.str("backend") == "nccl" && c.device.is_cuda() && !c.device.has_index()) {
    c.device = Device(DeviceType::CUDA, distributed::get_local_rank() % cuda::device_count());
  }
  if (c.plan || c.batch_size == 0 || !c.checkpoint_dir.empty() || c.resume) {
    throw std::invalid_argument("train_ddp does not take --plan, --batch-size auto, --checkpoint-dir or --resume "
                                "(train_mlp and train_cnn do)");
  }
  set_num_threads(c.threads > 0 ? c.threads : threads_per_rank());
  manual_seed(c.seed);
  const std::string kind = flags.str("model");
  std::shared_ptr<nn::Module> model;
  std::function<Tensor(const Tensor&)> input;
  if (kind == "mlp") {
    model = std::make_shared<Mlp>();
    input = [](const Tensor& images) { return normalize_fashion(images).flatten(1); };
  } else if (kind == "cnn") {
    model = std::make_shared<Cnn>();
    input = [](const Tensor& images) { return normalize_fashion(images); };
  } else {
    throw std::invalid_argument("unknown --model '" + kind + "' (mlp or cnn)");
  }
  model->to(c.device);
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = flags.num("bucket-cap-mb"),
                                         .first_bucket_cap_mb = flags.num("first-bucket-cap-mb")});
  std::shared_ptr<data::Dataset> train_set = data::FashionMNIST::load(true, c.data_root);
  auto test_set = data::FashionMNIST::load(false, c.data_root);
  if (c.limit > 0 && static_cast<std::size_t>(c.limit) < train_set->size()) {
    std::vector<std::size_t> first(static_cast<std::size_t>(c.limit));
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    train_set = std::make_shared<data::Subset>(train_set, first);
  }
  const auto sampler = std::make_shared<data::DistributedSampler>(
      train_set->size(), static_cast<std::size_t>(world), static_cast<std::size_t>(rank), true, c.seed);
  const std::int64_t batch = c.batch_size;
  data::DataLoader loader(train_set, {.batch_size = static_cast<std::size_t>(batch), .sampler = sampler,
                                      .num_workers = c.workers, .pin_memory = c.device.is_cuda()});
  data::DataLoader test_loader(test_set, {.batch_size = 1000, .num_workers = c.workers});
  auto opt = make_optimizer(c, ddp.parameters());
  optim::CosineAnnealingLR schedule(*opt, c.epochs);
  if (rank == 0) {
    std::printf("%s\n%d ranks x %lld samples per step (global batch %lld), %d threads per rank, %lld parameters, "
                "%s lr %g, %lld epochs on %s\n",
                model->repr().c_str(), world, static_cast<long long>(batch), static_cast<long long>(batch * world),
                get_num_threads(), static_cast<long long>(model->num_parameters()), c.optimizer.c_str(), c.lr,
                static_cast<long long>(c.epochs), c.device.str().c_str());
  }
  std::int64_t parameter_bytes = 0;
  for (const Tensor& p : ddp.synchronised_parameters()) {
    parameter_bytes += p.numel() * static_cast<std::int64_t>(itemsize(p.dtype()));
  }
  double accuracy = 0.0;
  for (std::int64_t epoch = 1; epoch <= c.epochs; ++epoch) {
    Progress progress("epoch " + std::to_string(epoch), loader.size());
    double loss_sum = 0.0, backward = 0.0, communication = 0.0, exposed = 0.0;
    std::int64_t steps = 0, bytes = 0;
    for (const data::Example& b : loader) {
      const Tensor x = input(b.data.to(c.device, true)), y = b.target.to(c.device, true);
      opt->zero_grad();
      const Tensor loss = cross_entropy(ddp.forward(x), y);
      const auto started = std::chrono::steady_clock::now();
      loss.backward();  // returns with the gradients averaged over the ranks
      backward += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      opt->step();
      const nn::DdpStepStats s = ddp.last_step_stats();
      communication += s.communication_seconds;
      exposed += s.exposed_seconds;
      bytes += s.bytes_reduced;
      loss_sum += loss.item<double>();
      ++steps;
      if (rank == 0) {
        progress.update(static_cast<std::size_t>(steps), loss_sum / static_cast<double>(steps),
                        static_cast<std::size_t>(steps * batch * world));
      }
    }
    schedule.step();
    const double seconds = progress.seconds();
    // The mean training loss over every rank's batches.
    Tensor mean_loss = full({1}, loss_sum / static_cast<double>(std::max<std::int64_t>(steps, 1)),
                            TensorOptions().dtype(kFloat64));
    distributed::all_reduce(mean_loss, distributed::ReduceOp::AVG);
    if (rank == 0) {
      progress.finish();
      accuracy = evaluate(*model, test_loader, c.device, input).first;
      const double per_step = 1000.0 / static_cast<double>(std::max<std::int64_t>(steps, 1));
      std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.2fs (%.0f samples/s over %d ranks)\n",
                  static_cast<long long>(epoch), mean_loss.item<double>(), 100 * accuracy, seconds,
                  static_cast<double>(steps * batch * world) / seconds, world);
      std::printf("  per step: backward %.2f ms (all-reduce waits included), all-reduce %.2f ms of which %.0f%% "
                  "hidden behind backward; %lld bytes reduced (parameters: %lld bytes)\n",
                  backward * per_step, communication * per_step,
                  communication > 0 ? 100.0 * std::clamp(1.0 - exposed / communication, 0.0, 1.0) : 0.0,
                  static_cast<long long>(bytes / std::max<std::int64_t>(steps, 1)),
                  static_cast<long long>(parameter_bytes));
      std::fflush(stdout);
    }
    distributed::barrier();  // the others wait while rank 0 evaluates
  }
  if (rank == 0) {
    if (!c.checkpoint.empty()) {
      save(c.checkpoint, model->state_dict(), {{"format", "pt"}, {"model", model->type_name()}});
      std::printf("checkpoint written to %s\n", c.checkpoint.c_str());
    }
    std::printf("final test accuracy %.2f%%\n", 100 * accuracy);
  }
  distributed::barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  TrainConfig defaults;
  defaults.epochs = 10;
  defaults.lr = 1e-3;
  Flags flags("train_ddp", "train_mlp's or train_cnn's model across MPI ranks (DistributedDataParallel)");
  flags.add("model", "mlp", "mlp or cnn");
  flags.add("backend", "mpi", "mpi (CPU tensors; CUDA ones staged through host memory) or nccl (--device cuda)");
  flags.add("bucket-cap-mb", "25", "DDP's gradient bucket size in MiB");
  flags.add("first-bucket-cap-mb", "1", "the first (earliest launched) bucket's size in MiB");
  add_common_flags(flags, defaults);
  flags.parse(argc, argv);
  return run_reporting_errors("train_ddp", [&] {
    try {
      return train_ddp(flags);
    } catch (const std::exception& e) {
      // The other ranks fail with this message instead of waiting for this one.
      if (distributed::is_initialized()) distributed::default_group().report_failure(e.what());
      throw;
    }
  });
}
