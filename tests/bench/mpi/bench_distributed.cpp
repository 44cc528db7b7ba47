// tests/bench/mpi/bench_distributed.cpp — Kiln's collectives and a DDP training step beside
// their baselines in the same binary: raw MPI_Allreduce on the same bytes, and the same step
// without DistributedDataParallel. Run under mpirun; rank 0 reports.
//   mpirun -np 2 build/tests/bench/bench_distributed
// Every rank must run the same collectives the same number of times, so each benchmark has a
// fixed iteration count instead of Google Benchmark's adaptive one.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <memory>

#include "../../../examples/support/models.h"

namespace {

using namespace kiln;

Tensor floats(std::int64_t bytes) { return ones({bytes / 4}); }

void raw_mpi_allreduce(benchmark::State& state) {
  Tensor t = floats(state.range(0));
  for (auto _ : state) {
    MPI_Allreduce(MPI_IN_PLACE, t.data_ptr<float>(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void kiln_all_reduce(benchmark::State& state) {
  Tensor t = floats(state.range(0));
  for (auto _ : state) distributed::all_reduce(t, distributed::ReduceOp::SUM);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

/// One SGD step of train_mlp's model on a batch of 128 per rank; range(0): 1 through DDP
/// (one bucket, as train_ddp's defaults give), 0 the model alone (no communication).
void mlp_step(benchmark::State& state) {
  manual_seed(0);
  auto model = std::make_shared<examples::Mlp>();
  std::unique_ptr<nn::DistributedDataParallel> ddp;
  if (state.range(0) == 1) ddp = std::make_unique<nn::DistributedDataParallel>(model);
  nn::Module& run = ddp ? static_cast<nn::Module&>(*ddp) : *model;
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({128, 784}), y = randint(0, 10, {128});
  for (auto _ : state) {
    opt.zero_grad();
    cross_entropy(run.forward(x), y).backward();
    opt.step();
  }
  state.SetLabel(ddp ? "DDP" : "alone");
}

void register_all() {
  for (std::int64_t bytes : {4LL << 10, 256LL << 10, 2LL << 20, 16LL << 20}) {
    const int iterations = bytes >= (16LL << 20) ? 30 : 200;
    benchmark::RegisterBenchmark("RawMpiAllreduce", raw_mpi_allreduce)->Arg(bytes)->Iterations(iterations)
        ->UseRealTime();
    benchmark::RegisterBenchmark("KilnAllReduce", kiln_all_reduce)->Arg(bytes)->Iterations(iterations)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("MlpStep", mlp_step)->Arg(0)->Iterations(100)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("MlpStep", mlp_step)->Arg(1)->Iterations(100)->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

/// Reports nothing: the ranks other than 0 run the benchmarks for their collectives only.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  kiln::distributed::init_process_group();
  if (std::getenv("KILN_NUM_THREADS") == nullptr) kiln::set_num_threads(1);  // one core per rank
  benchmark::Initialize(&argc, argv);
  register_all();
  if (kiln::distributed::get_rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  kiln::distributed::barrier();
  return 0;
}
