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
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

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

struct DdpFlags {
  TrainConfig train;
  std::string model = "mlp", backend = "mpi";
  double bucket_cap_mb = 25, first_bucket_cap_mb = 1;
  double timeout_seconds = 60;  // KILN_DIST_TIMEOUT when set
};

int train_ddp(DdpFlags& flags) {
  TrainConfig& c = flags.train;
  distributed::init_process_group(
      {.backend = flags.backend,
       .timeout = std::chrono::milliseconds(static_cast<std::int64_t>(flags.timeout_seconds * 1000.0 + 0.5))});
  const int rank = distributed::get_rank(), world = distributed::get_world_size();
  // NCCL wants one GPU per rank: the rank's own on its machine, as its process group chose.
  if (flags.backend == "nccl" && c.device.is_cuda() && !c.device.has_index()) {
    c.device = Device(DeviceType::CUDA, distributed::get_local_rank() % cuda::device_count());
  }
  set_num_threads(c.threads > 0 ? c.threads : threads_per_rank());
  manual_seed(c.seed);
  std::shared_ptr<nn::Module> model;
  std::function<Tensor(const Tensor&)> input;
  if (flags.model == "mlp") {
    model = std::make_shared<Mlp>();
    input = [](const Tensor& images) { return normalize_fashion(images).flatten(1); };
  } else {
    model = std::make_shared<Cnn>();
    input = [](const Tensor& images) { return normalize_fashion(images); };
  }
  model->to(c.device);
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
  // Every rank must run the same steps with the same model: ranks started with different
  // flags are refused here, before the first collective, instead of meeting collectives of
  // other sizes later.
  distributed::check_same_across_ranks({{"--model (0 mlp, 1 cnn)", flags.model == "cnn"},
                                        {"--epochs", c.epochs},
                                        {"--batch-size", batch},
                                        {"--seed", static_cast<std::int64_t>(c.seed)},
                                        {"training samples (--limit)", static_cast<std::int64_t>(train_set->size())},
                                        {"steps per epoch", static_cast<std::int64_t>(loader.size())},
                                        {"parameters", model->num_parameters()}});
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = flags.bucket_cap_mb,
                                         .first_bucket_cap_mb = flags.first_bucket_cap_mb});
  auto opt = make_optimizer(c, ddp.parameters());
  optim::CosineAnnealingLR schedule(*opt, c.epochs);
  std::ofstream log;
  if (rank == 0 && !c.log.empty()) log = open_log(c.log, /*resumed=*/false, 0);
  if (rank == 0) {
    std::printf("%s\n%d ranks x %lld samples per step (global batch %lld), %d threads per rank, %lld parameters, "
                "%s lr %g, %lld epochs on %s\n",
                model->repr().c_str(), world, static_cast<long long>(batch), static_cast<long long>(batch * world),
                get_num_threads(), static_cast<long long>(model->num_parameters()), c.optimizer.c_str(), c.lr,
                static_cast<long long>(c.epochs), c.device.str().c_str());
  }
  // One step; with --compile it is captured once and replayed, the buckets' all-reduces
  // included (each one a region that sums and waits, Note [Capturing a step]).
  double backward = 0.0;
  auto step = [&](const Tensor& images, const Tensor& y) {
    opt->zero_grad();
    const Tensor loss = cross_entropy(ddp.forward(input(images)), y);
    const auto started = std::chrono::steady_clock::now();
    loss.backward();  // returns with the gradients averaged over the ranks
    backward += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    opt->step();
    return loss;
  };
  auto compiled_step = kiln::compile(step);
  std::int64_t parameter_bytes = 0;
  for (const Tensor& p : ddp.synchronised_parameters()) {
    parameter_bytes += p.numel() * static_cast<std::int64_t>(itemsize(p.dtype()));
  }
  // --profile: every rank profiles the same steps into DIR/trace.rank<r>.json and
  // DIR/step.rank<r>.html; rank 0 prints its table.
  StepProfiler profile(c.profile_dir, c.profile_with_stack, ".rank" + std::to_string(rank), rank == 0);
  double accuracy = 0.0;
  for (std::int64_t epoch = 1; epoch <= c.epochs; ++epoch) {
    Progress progress("epoch " + std::to_string(epoch), loader.size());
    double loss_sum = 0.0, communication = 0.0, exposed = 0.0;
    backward = 0.0;
    std::int64_t steps = 0, bytes = 0, measured_steps = 0;
    for (const data::Example& b : loader) {
      const Tensor images = b.data.to(c.device, true), y = b.target.to(c.device, true);
      const Tensor loss = c.compile ? compiled_step(images, y) : step(images, y);
      if (!compiled_step.last_call_replayed()) {  // a replay runs no hooks: DDP's figures are the eager steps'
        const nn::DdpStepStats s = ddp.last_step_stats();
        communication += s.communication_seconds;
        exposed += s.exposed_seconds;
        bytes += s.bytes_reduced;
        ++measured_steps;
      }
      loss_sum += loss.item<double>();
      profile.step();
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
      double test_loss = 0.0;
      std::tie(accuracy, test_loss) = evaluate(*model, test_loader, c.device, input);
      const double per_step = 1000.0 / static_cast<double>(std::max<std::int64_t>(measured_steps, 1));
      std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.2fs (%.0f samples/s over %d ranks)\n",
                  static_cast<long long>(epoch), mean_loss.item<double>(), 100 * accuracy, seconds,
                  static_cast<double>(steps * batch * world) / seconds, world);
      if (measured_steps > 0) {
        std::printf("  per %sstep: backward %.2f ms (all-reduce waits included), all-reduce %.2f ms of which %.0f%% "
                    "hidden behind backward; %lld bytes reduced (parameters: %lld bytes)\n",
                    c.compile ? "eager " : "", backward * per_step, communication * per_step,
                    communication > 0 ? 100.0 * std::clamp(1.0 - exposed / communication, 0.0, 1.0) : 0.0,
                    static_cast<long long>(bytes / measured_steps), static_cast<long long>(parameter_bytes));
      }
      std::fflush(stdout);
      if (log.is_open()) {
        log << epoch << "," << mean_loss.item<double>() << "," << test_loss << "," << accuracy << "," << seconds << ","
            << static_cast<double>(steps * batch * world) / seconds << "\n" << std::flush;
      }
    }
    distributed::barrier();  // the others wait while rank 0 evaluates
  }
  profile.finish();  // a run shorter than --profile's schedule: the steps it recorded
  if (rank == 0 && c.compile) report_compiled(compiled_step);
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
  return run_program("train_ddp", [&] {
    using namespace kiln::examples::flag_checks;
    DdpFlags flags;
    flags.train.epochs = 10;
    flags.train.lr = 1e-3;
    if (std::getenv("KILN_DIST_TIMEOUT") != nullptr) {
      flags.timeout_seconds = static_cast<double>(distributed::default_timeout().count()) / 1000.0;
    }
    Flags f("train_ddp", "train_mlp's or train_cnn's model across MPI ranks (DistributedDataParallel)");
    f.add("--model", flags.model, "mlp or cnn")->check(one_of({"mlp", "cnn"}));
    f.add("--backend", flags.backend, "mpi (CPU tensors; CUDA ones staged through host memory) or nccl (--device cuda)")
        ->check(one_of({"mpi", "nccl"}));
    f.add("--bucket-cap-mb", flags.bucket_cap_mb, "DDP's gradient bucket size in MiB")
        ->check(number(0, 1e6, /*exclusive_lo=*/true));
    f.add("--first-bucket-cap-mb", flags.first_bucket_cap_mb, "the first (earliest launched) bucket's size in MiB")
        ->check(number(0, 1e6, /*exclusive_lo=*/true));
    f.add("--timeout", flags.timeout_seconds,
          "seconds a collective waits for the other ranks before failing with an error naming them (default: "
          "KILN_DIST_TIMEOUT, else 60)")
        ->check(number(0, 1e7, /*exclusive_lo=*/true));
    add_training_flags(f, flags.train, {.memory_plan = false, .checkpoints = false});
    f.parse(argc, argv);
    // The other ranks fail with this rank's message instead of waiting for it.
    auto tell_the_others = [](const std::string& message) {
      if (distributed::is_initialized()) distributed::default_group().report_failure(message);
    };
    try {
      return train_ddp(flags);
    } catch (const Error& e) {
      tell_the_others(e.message());
      throw;
    } catch (const std::exception& e) {
      tell_the_others(e.what());
      throw;
    }
  });
}
