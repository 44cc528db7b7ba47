// examples/amp_train.cpp — the Fashion-MNIST CNN trained with mixed precision (autocast +
// GradScaler: Float16 on a GPU, BFloat16 on the CPU), then the same run in Float32 for
// comparison of accuracy and speed.
//   build/examples/amp_train --epochs 2                 # on a GPU: --device cuda
//   build/examples/amp_train --epochs 1 --limit 10000   # a quick look on the CPU
// On the CPU, BFloat16 pays only where oneDNN has native BFloat16 kernels (AVX512_BF16 or AMX:
// backends::onednn_has_bf16(), printed at the start): convolutions and matrix products then
// run in BFloat16 with Float32 accumulation. Elsewhere they widen to Float32 and the casts are
// extra work (0.50x the speed on a 2-core Zen 1 with AVX2), and Kiln says so once. With AMX
// (a 2-core Xeon) the mixed-precision epoch ran 1.81x faster, at the same accuracy. On a GPU
// the speed-up is tensor cores', measured by scripts/gpu_check.sh.
// Read next: autograd/autocast.h, amp/grad_scaler.h.
#include "support/models.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  return examples::run_program("amp_train", [&] {
    examples::TrainConfig config;
    config.epochs = 2;
    config.lr = 1e-3;
    config.batch_size = 512;
    config.device = cuda::is_available() ? Device("cuda") : kCPU;
    bool compare = true;
    examples::Flags flags("amp_train", "the CNN with autocast + GradScaler, then in Float32 for comparison");
    examples::add_training_flags(flags, config);
    flags.add("--compare", compare, "also train in Float32 and compare (0 to skip)");
    flags.parse(argc, argv);
    const auto input = [](const Tensor& images) { return examples::normalize_fashion(images); };
    const bool gpu = config.device.is_cuda();
    const char* low = gpu ? "Float16" : "BFloat16";
    std::printf("== mixed precision: autocast(%s, %s) + GradScaler ==\n", gpu ? "CUDA" : "CPU", low);
    if (!gpu) {
      std::printf("CPU: oneDNN %s, instruction set %s, native BFloat16 kernels: %s\n",
                  backends::onednn_is_available() ? "on" : "off", backends::onednn_cpu_isa().c_str(),
                  backends::onednn_has_bf16() ? "yes" : "no");
    }
    config.mixed_precision = true;
    manual_seed(config.seed);
    examples::Cnn amp_model;
    const examples::TrainResult mixed = examples::train_fashion_mnist(amp_model, config, input);
    if (!compare) return 0;

    std::printf("\n== Float32, same seed and schedule ==\n");
    config.mixed_precision = false;
    // The weights, the log, checkpoints and --resume belong to the mixed-precision run; the
    // comparison starts fresh and writes nothing over them.
    config.checkpoint.clear();
    config.log.clear();
    config.checkpoint_dir.clear();
    config.resume = false;
    config.overwrite = false;
    manual_seed(config.seed);
    examples::Cnn fp32_model;
    const examples::TrainResult full = examples::train_fashion_mnist(fp32_model, config, input);
    if (config.plan) return 0;  // both steps planned (the memory autocast saves), neither run

    std::printf("\n%-22s %12s %14s %12s\n", "run", "accuracy", "samples/s", "s/epoch");
    std::printf("%-22s %11.2f%% %14.0f %12.2f\n", (std::string("autocast ") + low).c_str(),
                100 * mixed.test_accuracy, mixed.samples_per_second, mixed.seconds_per_epoch);
    std::printf("%-22s %11.2f%% %14.0f %12.2f\n", "Float32", 100 * full.test_accuracy, full.samples_per_second,
                full.seconds_per_epoch);
    std::printf("mixed precision: %.2fx the speed, accuracy %+.2f points\n",
                mixed.samples_per_second / full.samples_per_second,
                100 * (mixed.test_accuracy - full.test_accuracy));
    return 0;
  });
}
