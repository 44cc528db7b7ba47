// data/dataloader.cpp — the epoch run: sampling, workers, ordered hand-off, pinning.
#include "data/dataloader.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/profiler_hooks.h"
#include "core/threads.h"
#include "core/warning.h"
#include "data/sampler.h"

namespace kiln::data {

// Note [DataLoader workers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The batches of an epoch (lists of sample indices) are drawn up front on the consumer's
// thread, so their composition depends only on (seed, epoch), never on the thread count.
// Workers take batch numbers in order from a shared counter, but never more than
// num_workers * prefetch_factor ahead of the consumer (bounded memory); finished batches wait
// in a map until the consumer asks for that number, so output order is sample order. A
// worker's exception is stored with its batch and rethrown on the consumer's thread when the
// consumer reaches that batch. Destroying the iterator (leaving the loop early, or an
// exception unwinding it) sets a stop flag and joins every worker: nothing keeps running.
// Workers run their ops with one OpenMP thread each, so they do not compete with the training
// step's GEMMs for the same cores.
// Under a profiler, each batch a worker builds is a span "DataLoader worker: batch" on the
// worker's own lane (its number, worker and size in the args), and each next() on the consumer
// is PyTorch's "enumerate(DataLoader)#..." span: the time the loop waited for its batch (or,
// without workers, built it).

class DataLoader::Run {
 public:
  Run(std::shared_ptr<Dataset> dataset, const DataLoaderOptions& options, std::int64_t epoch, std::size_t first_batch,
      std::shared_ptr<DataLoaderStats> stats, std::shared_ptr<Position> position)
      : dataset_(std::move(dataset)),
        options_(options),
        stats_(std::move(stats)),
        position_(std::move(position)),
        next_(first_batch),
        next_task_(first_batch),
        consumed_(first_batch) {
    dataset_->set_epoch(epoch);
    const std::size_t n = dataset_->size();
    std::shared_ptr<const Sampler> sampler = options.sampler;
    if (!sampler && options.shuffle) sampler = std::make_shared<RandomSampler>(n, options.seed);
    if (!sampler) sampler = std::make_shared<SequentialSampler>(n);
    batches_ = BatchSampler(*sampler, options.batch_size, options.drop_last).batches(epoch);
    pin_ = options.pin_memory && cuda::is_available();
    if (options.pin_memory && !pin_) {
      warn_once("DataLoader.pin_memory",
                "DataLoader: pin_memory=true, but CUDA is not available (" +
                    std::string(cuda::is_built() ? "no CUDA device was found" : "Kiln was built without CUDA") +
                    "): batches stay in ordinary pageable memory");
    }
    *stats_ = DataLoaderStats{};
    *position_ = Position{epoch, first_batch};
    stats_->pinned = pin_;
    window_ = std::max<std::size_t>(1, options.num_workers * std::max<std::size_t>(1, options.prefetch_factor));
    for (std::size_t w = 0; w < options.num_workers; ++w) workers_.emplace_back([this, w] { work(w); });
  }

  ~Run() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  bool has_next() const { return next_ < batches_.size(); }

  Example next() {
    const profiler::Span span(workers_.empty() ? "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
                                               : "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                              profiler::SpanKind::Region);
    const std::size_t index = next_++;
    position_->batches_yielded = next_;
    if (workers_.empty()) {
      Slot slot = load(index, 0);
      record(0, 0.0);
      return finish(index, std::move(slot));
    }
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const std::size_t depth = ready_.size();
      const auto start = std::chrono::steady_clock::now();
      ready_cv_.wait(lock, [&] { return ready_.count(index) > 0; });
      record(depth, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      slot = std::move(ready_.at(index));
      ready_.erase(index);
      consumed_ = index + 1;
    }
    work_cv_.notify_all();
    return finish(index, std::move(slot));
  }

 private:
  struct Slot {
    Example batch;
    std::exception_ptr error;
    std::size_t worker = 0;
  };

  Slot load(std::size_t index, std::size_t worker) {
    Slot slot;
    slot.worker = worker;
    try {
      const std::vector<std::size_t>& ids = batches_[index];
      if (options_.collate) {
        std::vector<Example> examples;
        for (std::size_t i : ids) examples.push_back(dataset_->get(i));
        slot.batch = options_.collate(examples);
      } else {
        slot.batch = dataset_->get_batch(ids);
      }
      if (pin_) {
        slot.batch.data = slot.batch.data.pin_memory();
        if (slot.batch.target.defined()) slot.batch.target = slot.batch.target.pin_memory();
      }
    } catch (...) {
      slot.error = std::current_exception();
    }
    return slot;
  }

  Example finish(std::size_t index, Slot slot) {
    if (!slot.error) return std::move(slot.batch);
    try {
      std::rethrow_exception(slot.error);
    } catch (const Error& e) {
      KILN_FAIL("DataLoader worker ", slot.worker, " caught an exception while loading batch ", index, ": ", e.message());
    } catch (const std::exception& e) {
      KILN_FAIL("DataLoader worker ", slot.worker, " caught an exception while loading batch ", index, ": ", e.what());
    }
  }

  void record(std::size_t depth, double waited) {
    DataLoaderStats& s = *stats_;
    s.mean_queue_depth = (s.mean_queue_depth * static_cast<double>(s.batches) + static_cast<double>(depth)) /
                         static_cast<double>(s.batches + 1);
    s.max_queue_depth = std::max(s.max_queue_depth, depth);
    s.consumer_wait_seconds += waited;
    ++s.batches;
  }

  void work(std::size_t worker) {
    use_one_thread_on_this_thread();  // see Note [DataLoader workers]
    while (true) {
      std::size_t index;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [&] { return stop_ || next_task_ >= batches_.size() || next_task_ < consumed_ + window_; });
        if (stop_ || next_task_ >= batches_.size()) return;
        index = next_task_++;
      }
      Slot slot;
      {
        const profiler::Span span("DataLoader worker: batch", profiler::SpanKind::Region, [&] {
          return profiler::SpanArgs{{"Batch", static_cast<std::int64_t>(index)},
                                    {"Worker", static_cast<std::int64_t>(worker)},
                                    {"Samples", static_cast<std::int64_t>(batches_[index].size())}};
        });
        slot = load(index, worker);
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(index, std::move(slot));
      }
      ready_cv_.notify_all();
    }
  }

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<DataLoaderStats> stats_;
  std::shared_ptr<Position> position_;
  std::vector<std::vector<std::size_t>> batches_;
  bool pin_ = false;
  std::size_t window_ = 1;
  std::size_t next_;  // consumer side: the next batch to hand out

  std::mutex mutex_;
  std::condition_variable work_cv_, ready_cv_;
  std::size_t next_task_;  // the next batch a worker will load
  std::size_t consumed_;   // batches the consumer has taken
  std::map<std::size_t, Slot> ready_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      stats_(std::make_shared<DataLoaderStats>()),
      position_(std::make_shared<Position>()) {
  KILN_CHECK(dataset_ != nullptr, "DataLoader needs a dataset");
  KILN_CHECK_VALUE(options_.batch_size > 0, "batch_size should be a positive integer value, but got batch_size=",
                   options_.batch_size);
  KILN_CHECK_VALUE(!(options_.sampler && options_.shuffle), "sampler option is mutually exclusive with shuffle");
}

DataLoader::Iterator::Iterator(std::shared_ptr<Run> run) : run_(std::move(run)) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (run_ == nullptr) return *this;
  if (!run_->has_next()) {
    run_.reset();  // stops and joins the workers
    current_ = Example{};
    return *this;
  }
  current_ = run_->next();
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  ++epoch_;
  const std::size_t first = std::exchange(resume_at_batch_, 0);
  return Iterator(std::make_shared<Run>(dataset_, options_, epoch_, first, stats_, position_));
}

StateDict DataLoader::state_dict() const {
  return {{"epoch", tensor(position_->epoch)},
          {"batches_yielded", tensor(static_cast<std::int64_t>(position_->batches_yielded))},
          {"seed", tensor(static_cast<std::int64_t>(options_.seed))},
          {"shuffle", tensor(options_.shuffle)},
          {"num_batches", tensor(static_cast<std::int64_t>(size()))}};
}

void DataLoader::load_state_dict(const StateDict& dict) {
  auto integer = [&](const char* name) {
    const Tensor* t = dict.find(name);
    KILN_CHECK_VALUE(t != nullptr, "DataLoader.load_state_dict: the state dict is missing '", name, "'");
    return t->item<std::int64_t>();
  };
  const std::int64_t epoch = integer("epoch"), yielded = integer("batches_yielded");
  const std::int64_t seed = integer("seed"), shuffle = integer("shuffle"), batches = integer("num_batches");
  KILN_CHECK_VALUE(dict.size() == 5, "DataLoader.load_state_dict: the state dict has ", dict.size(),
                   " entries; expected epoch, batches_yielded, seed, shuffle and num_batches");
  KILN_CHECK_VALUE(batches == static_cast<std::int64_t>(size()), "DataLoader.load_state_dict: the state was saved "
                   "by a loader with ", batches, " batches per epoch, this one has ", size(),
                   " (another dataset size, batch_size or drop_last?)");
  KILN_CHECK_VALUE(static_cast<std::uint64_t>(seed) == options_.seed && (shuffle != 0) == options_.shuffle,
                   "DataLoader.load_state_dict: the state was saved by a loader with seed ", seed, " and shuffle=",
                   shuffle != 0, ", this one has seed ", options_.seed, " and shuffle=", options_.shuffle,
                   ": it would visit other samples");
  KILN_CHECK_VALUE(yielded >= 0 && yielded <= batches, "DataLoader.load_state_dict: batches_yielded ", yielded,
                   " is outside [0, ", batches, "]");
  if (epoch < 0) {
    epoch_ = -1;
    resume_at_batch_ = 0;
  } else if (yielded == batches) {
    epoch_ = epoch;  // that epoch is done: the next begin() starts the one after it
    resume_at_batch_ = 0;
  } else {
    epoch_ = epoch - 1;
    resume_at_batch_ = static_cast<std::size_t>(yielded);
  }
  *position_ = Position{epoch, static_cast<std::size_t>(yielded)};
}

std::size_t DataLoader::size() const {
  const std::size_t n = options_.sampler ? options_.sampler->num_samples() : dataset_->size();
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

DataLoaderStats DataLoader::stats() const { return *stats_; }

}  // namespace kiln::data
