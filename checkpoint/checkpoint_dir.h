// checkpoint/checkpoint_dir.h — a folder of training checkpoints that survives being killed
// at any moment and never loses a run: each checkpoint is one safetensors file (the
// TrainingState's tensors, its values as metadata, and a CRC-32 of the whole file), written to
// a temporary name, flushed, renamed into place and the folder flushed; the newest `keep_last`
// are kept. resume() restores the newest one that reads back whole, moving aside (with a
// warning naming it) any newer one that was truncated, corrupted or edited since. A folder
// holding another run's checkpoints is never written into unless that run is resumed or
// `overwrite` says to replace it.
//
//   checkpoint::CheckpointDir dir("runs/cnn", {.keep_last = 3});
//   if (auto path = dir.resume(state)) std::printf("resumed from %s\n", path->c_str());
//   ... dir.save(step, state);
//
// See Note [Exact resumption] and Note [A checkpoint folder holds one run].
// Read next: examples/support/training.h (--resume, --overwrite).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/training_state.h"

namespace kiln::checkpoint {

// Note [Exact resumption]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A run killed at any point and resumed from its newest checkpoint ends with the same bytes as
// a run never stopped, because everything the rest of the run reads is either in the
// checkpoint or a function of it:
//   - parameters and buffers, the optimizer's moments and step counts, and each group's
//     hyperparameters (the lr a scheduler set, OneCycle's momentum);
//   - the schedule's epoch counter (every schedule is a closed form of it);
//   - the DataLoader's (epoch, batches yielded): an epoch's batches depend only on (seed,
//     epoch), so the rest of the epoch is the same batches in the same order, whatever
//     num_workers;
//   - the generator states, so dropout masks continue the same stream;
//   - the loop's running sums, as exact decimal text.
// Kernels give the same bits for the same inputs on every run with the same thread count.
// Kiln's sums do not depend on it (Note [How Kiln sums]) but oneDNN's last bits do, and the
// default count backs off while the machine is busy (Note [Sharing the machine]): a run that
// must resume bit for bit fixes it (set_num_threads; the training programs do so whenever
// they checkpoint). A checkpoint is taken only between steps, never inside one. Timings are
// not state: they stay out of the checkpoint, whose bytes are then the same.

// Note [A checkpoint folder holds one run]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Pruning keeps the checkpoints with the highest steps and resume() takes the highest step
// that reads back whole. Both are right only while every checkpoint in the folder belongs to
// one run, so a CheckpointDir writes into a folder that holds checkpoints only after resume()
// (or latest()) has made it that run's continuation, or when `overwrite` is set, in which case
// its first save removes the other run's files. Checkpoints newer than the one resumed that
// did not read back are renamed aside (".unusable"): they would otherwise outrank every
// checkpoint the resumed run writes and be pruned last. Every byte of a checkpoint is covered
// by its checksum, header and metadata included, so an edited tensor name or loop counter
// makes it unusable, and resume falls back to the one before it.

struct CheckpointDirOptions {
  /// How many of the newest checkpoints to keep (0 keeps all).
  std::size_t keep_last = 3;
  /// Replace the checkpoints another run left in the folder (removed by the first save()).
  bool overwrite = false;
  /// Called with the temporary file's path once its bytes are written, before it is renamed
  /// into place: where a test kills the process "during a checkpoint write".
  std::function<void(const std::string& unpublished_path)> before_publish{};
};

class CheckpointDir {
 public:
  /// Creates the folder (and its parents) if needed.
  explicit CheckpointDir(std::string path, CheckpointDirOptions options = {});

  /// Writes `state` as the checkpoint of `step` ("checkpoint-<step>.safetensors"), then
  /// removes all but the newest keep_last. Returns the file's path. Refuses (ValueError) a
  /// folder holding another run's checkpoints unless resume() or latest() ran first or
  /// `overwrite` is set (Note [A checkpoint folder holds one run]).
  std::string save(std::int64_t step, const TrainingState& state);
  /// Restores the newest valid checkpoint into `state` (its values too) and returns its path;
  /// nullopt when there is none. A checkpoint that does not fit `state` is an error, not a
  /// reason to fall back: it means the program changed, not the file.
  std::optional<std::string> resume(TrainingState& state);

  /// Reads and checks one checkpoint file: the dict, its values, and its step.
  struct Contents {
    StateDict tensors;
    std::map<std::string, std::string> values;
    std::int64_t step = 0;
  };
  struct Found {
    std::string path;
    Contents contents;
  };
  /// resume() without the restore: the newest checkpoint that reads back whole (newer unusable
  /// ones moved aside, with a warning), for a caller that checks its values first. After it,
  /// save() continues this folder's run.
  std::optional<Found> latest();

  /// The checkpoints in the folder, oldest first (not checked for validity).
  std::vector<std::string> list() const;
  static Contents read(const std::string& file);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  CheckpointDirOptions options_;
  bool continues_run_ = false;  // resume()/latest() ran, or save() has written: the folder is this run's
};

}  // namespace kiln::checkpoint
