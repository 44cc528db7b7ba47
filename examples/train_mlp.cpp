// examples/train_mlp.cpp — trains an MLP (784-512-256-10, ReLU) on Fashion-MNIST and prints
// the test accuracy after each epoch. The README's main command runs it. The training loop is
// written out here as PyTorch's tutorials write it: epochs, batches from the DataLoader,
// forward, loss, zero_grad, backward, step, then an evaluation. What goes around the loop
// (flags, checkpoint folder, log, profiler) is the programs' shared TrainingRun.
//   build/examples/train_mlp --epochs 10 --log mlp.csv --checkpoint mlp.safetensors
// Read next: examples/support/training.h (TrainingRun), examples/train_cnn.cpp.
#include "support/models.h"
#include "support/training.h"

using namespace kiln;
using namespace kiln::examples;

namespace {

/// A batch of [N, 1, 28, 28] images as the MLP takes them: normalised, one row of 784 each.
Tensor mlp_input(const Tensor& images) { return normalize_fashion(images).flatten(1); }

int train_mlp(int argc, char** argv) {
  TrainConfig c;
  c.epochs = 10;
  c.lr = 1e-3;
  Flags flags("train_mlp", "an MLP on Fashion-MNIST (Adam, cosine schedule)");
  add_training_flags(flags, c, TrainingFlags{.export_onnx = true});
  flags.parse(argc, argv);
  manual_seed(c.seed);
  Mlp model;

  // The data, loaders, optimizer (Adam by default) and cosine schedule, checkpoint folder and
  // log, set up from the flags; with --resume, `at` is where the saved run stopped.
  TrainingRun run(model, data::FashionMNIST::load(true, c.data_root), data::FashionMNIST::load(false, c.data_root),
                  c, mlp_input);
  if (run.planned_only()) return 0;  // --plan: the memory plan is printed, nothing trains
  optim::Optimizer& optimizer = *run.optimizer;
  data::DataLoader& train_loader = *run.train_loader;
  LoopPosition& at = run.at;

  // One training step, in Float32 (examples/amp_train.cpp adds autocast and a GradScaler).
  // With --compile it is captured once as a graph and replayed (compile/compile.h).
  auto step = [&](const Tensor& images, const Tensor& labels) {
    const Tensor x = mlp_input(images);                           // [N, 784]
    optimizer.zero_grad();                                        // forget the last step's gradients
    const Tensor loss = cross_entropy(model.forward(x), labels);  // mean over the batch
    loss.backward();                                              // d loss / d each parameter, into .grad
    optimizer.step();                                             // move each parameter against it
    return loss;
  };
  auto compiled_step = kiln::compile(step);
  StepProfiler profile(c.profile_dir, c.profile_with_stack);  // --profile DIR: steps 3-5

  for (; at.epoch <= c.epochs; at = at.next_epoch()) {
    Progress progress("epoch " + std::to_string(at.epoch) + (c.compile ? " (compiled)" : ""), train_loader.size());
    const std::int64_t samples_before = at.samples;
    // Each epoch the loader shuffles the training set anew (seeded by --seed).
    for (auto it = run.batches_left() ? train_loader.begin() : train_loader.end(); it != train_loader.end(); ++it) {
      const Tensor images = it->data.to(c.device, /*non_blocking=*/true);
      const Tensor labels = it->target.to(c.device, /*non_blocking=*/true);
      const Tensor loss = c.compile ? compiled_step(images, labels) : step(images, labels);
      at.loss_sum += loss.item<double>();  // waits for the step: the loss is on the host now
      profile.step();
      ++at.steps;
      ++at.step;
      at.samples += labels.numel();
      progress.update(static_cast<std::size_t>(at.steps), at.loss_sum / static_cast<double>(at.steps),
                      static_cast<std::size_t>(at.samples - samples_before));
      run.after_step();  // a checkpoint every --checkpoint-every steps
    }
    progress.finish();
    const double seconds = progress.seconds();  // the epoch's training, not its evaluation
    run.schedule->step();                       // the cosine schedule moves once an epoch

    // Evaluation: eval mode, no graph recorded, the whole test set.
    const double train_loss = at.loss_sum / static_cast<double>(std::max<std::int64_t>(at.steps, 1));
    const auto [accuracy, test_loss] = evaluate(model, *run.test_loader, c.device, mlp_input);
    // Prints "epoch N: train loss ..., test accuracy ...%", logs it, checkpoints the epoch.
    run.end_epoch(train_loss, test_loss, accuracy, seconds, static_cast<double>(at.samples - samples_before));
  }
  if (c.compile) report_compiled(compiled_step);
  profile.finish();
  run.finish();  // --checkpoint, --export-onnx, and the final accuracy
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_program("train_mlp", [&] { return train_mlp(argc, argv); });
}
