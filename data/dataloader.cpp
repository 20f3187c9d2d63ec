#include "data/dataloader.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "data/splitmix.h"
#include "data/transforms.h"

namespace loom::data {

// --- collation ---------------------------------------------------------------------------------

namespace {

void check_same_layout(const std::vector<Example>& examples, size_t e, size_t f) {
  const Tensor& t = examples[e][f];
  const Tensor& ref = examples[0][f];
  LOOM_CHECK(t.defined(), "collate: field {} of example {} is an undefined tensor", f, e);
  LOOM_CHECK(t.device() == Device::CPU,
             "collate: field {} of example {} is on {}; datasets return CPU tensors (move the "
             "batch to the GPU in the training loop)",
             f, e, device_name(t.device()));
  LOOM_CHECK(t.shape() == ref.shape() && t.dtype() == ref.dtype(),
             "collate: field {} of example {} is {} {} but in example 0 it is {} {}; examples "
             "of one batch must agree",
             f, e, dtype_name(t.dtype()), shape_str(t.shape()), dtype_name(ref.dtype()),
             shape_str(ref.shape()));
}

}  // namespace

Batch collate(const std::vector<Example>& examples) {
  LOOM_CHECK(!examples.empty(), "collate: no examples to batch");
  const size_t num_fields = examples[0].size();
  for (size_t e = 0; e < examples.size(); ++e)
    LOOM_CHECK(examples[e].size() == num_fields,
               "collate: example {} has {} fields but example 0 has {}", e, examples[e].size(),
               num_fields);
  Batch batch;
  for (size_t f = 0; f < num_fields; ++f) {
    for (size_t e = 0; e < examples.size(); ++e) check_same_layout(examples, e, f);
    const Tensor& ref = examples[0][f];
    Shape shape{static_cast<int64_t>(examples.size())};  // [B, S...]
    shape.insert(shape.end(), ref.shape().begin(), ref.shape().end());
    Tensor out = Tensor::empty(shape, ref.dtype(), Device::CPU);
    const size_t bytes = static_cast<size_t>(ref.numel()) * element_size(ref.dtype());
    auto* dst = static_cast<char*>(out.raw_data());
    for (size_t e = 0; e < examples.size(); ++e) {
      // Datasets return contiguous tensors; anything else is made contiguous first.
      const Tensor src =
          examples[e][f].is_contiguous() ? examples[e][f] : examples[e][f].contiguous();
      std::memcpy(dst + e * bytes, src.raw_data(), bytes);
    }
    batch.push_back(std::move(out));
  }
  return batch;
}

// --- the batch ---------------------------------------------------------------------------------

Batch::Batch(std::vector<Tensor> fields, std::vector<std::string> names)
    : std::vector<Tensor>(std::move(fields)), names_(std::move(names)) {}

size_t Batch::field_index(std::string_view name) const {
  for (size_t i = 0; i < names_.size() && i < size(); ++i)
    if (names_[i] == name) return i;
  std::string known;
  for (const std::string& n : names_) known += (known.empty() ? "" : ", ") + n;
  LOOM_FAIL("Batch: no field named '{}'; {}", name,
             names_.empty() ? "the dataset names no fields (index them: batch[0])"
                            : "its fields are " + known);
}

Tensor& Batch::operator[](std::string_view name) { return (*this)[field_index(name)]; }
const Tensor& Batch::operator[](std::string_view name) const {
  return (*this)[field_index(name)];
}

// --- the workers -------------------------------------------------------------------------------

uint64_t example_seed(uint64_t seed, int64_t epoch, int64_t position) {
  // Tagged so that these streams differ from the epoch's shuffle, seeded by (seed, epoch).
  constexpr uint64_t kAugmentTag = 0x617567'6D656E74ull;  // "augment"
  return mix_seeds(mix_seeds(seed ^ kAugmentTag, static_cast<uint64_t>(epoch)),
                   static_cast<uint64_t>(position));
}

// The producer of one pass. With no threads, next() builds each batch itself. With n threads,
// each worker claims the next unclaimed batch, builds it and files it under its index; next()
// waits for the batch it is due to hand out, so batches leave in order whichever worker
// finished first. Workers claim at most kPrefetch * n batches beyond the one handed out last.
class BatchWorker {
 public:
  static constexpr int64_t kPrefetch = 2;

  // What one pass over the data needs to build its batches.
  struct Pass {
    std::shared_ptr<const Dataset> dataset;
    std::vector<int64_t> order;  // the epoch's order of example indices
    DataLoaderOptions options;
    int64_t epoch = 0, first_batch = 0, num_batches = 0;
  };

  explicit BatchWorker(Pass pass)
      : pass_(std::move(pass)), claimed_(pass_.first_batch), taken_(pass_.first_batch) {
    for (int64_t w = 0; w < pass_.options.num_workers; ++w)
      threads_.emplace_back([this] { run(); });
  }

  ~BatchWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // The next batch; false after the last one. Rethrows the error of the batch it is due.
  bool next(Batch& batch) {
    if (taken_ == pass_.num_batches) return false;
    Slot slot;
    if (threads_.empty()) {
      slot = build(taken_);
      ++taken_;
    } else {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return done_.count(taken_) > 0; });
        auto it = done_.find(taken_);
        slot = std::move(it->second);
        done_.erase(it);
        ++taken_;
      }
      space_.notify_all();
    }
    if (slot.error) {
      taken_ = pass_.num_batches;  // nothing follows an error
      std::rethrow_exception(slot.error);
    }
    batch = std::move(slot.batch);
    return true;
  }

 private:
  // Batch b of the pass. Each example is read with the augmentation generator seeded from its
  // position in the epoch, and a custom collate runs with one seeded from the batch's index, so
  // nothing here depends on the thread that runs it.
  Batch make_batch(int64_t b) const {
    const int64_t batch_size = pass_.options.batch_size;
    const int64_t begin = b * batch_size;
    const int64_t end =
        std::min<int64_t>(begin + batch_size, static_cast<int64_t>(pass_.order.size()));
    std::vector<Example> examples;
    examples.reserve(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) {
      transforms::RngScope rng(example_seed(pass_.options.seed, pass_.epoch, i));
      examples.push_back(pass_.dataset->get(pass_.order[static_cast<size_t>(i)]));
    }
    if (!pass_.options.collate) {
      Batch batch = collate(examples);
      batch.set_names(pass_.dataset->field_names());
      return batch;
    }
    transforms::RngScope rng(example_seed(pass_.options.seed, pass_.epoch, -1 - b));
    Batch batch = pass_.options.collate(examples);
    const std::vector<std::string> names = pass_.dataset->field_names();
    if (batch.names().empty() && names.size() == batch.size()) batch.set_names(names);
    return batch;
  }

  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  Slot build(int64_t b) const {
    Slot slot;
    try {
      slot.batch = make_batch(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    return slot;
  }

  void run() {
    const int64_t window = kPrefetch * pass_.options.num_workers;
    for (;;) {
      int64_t b = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] {
          return stop_ || failed_ || claimed_ == pass_.num_batches || claimed_ < taken_ + window;
        });
        if (stop_ || failed_ || claimed_ == pass_.num_batches) return;
        b = claimed_++;
      }
      Slot slot = build(b);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_ = failed_ || slot.error != nullptr;  // no batch past a failed one is started
        done_.emplace(b, std::move(slot));
      }
      ready_.notify_one();
    }
  }

  const Pass pass_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;  // "a batch was filed", "the window moved or stop"
  std::map<int64_t, Slot> done_;           // built batches not yet handed out, by index
  int64_t claimed_;                        // the next batch a worker will build
  int64_t taken_;                          // the next batch next() hands out
  bool stop_ = false, failed_ = false;
  std::vector<std::thread> threads_;  // started in the constructor, joined in the destructor
};

// --- the iterator ------------------------------------------------------------------------------

DataLoader::Iterator::Iterator(std::unique_ptr<BatchWorker> worker) : worker_(std::move(worker)) {
  ++*this;  // fetch the first batch
}
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  batch_.clear();
  try {
    done_ = !worker_->next(batch_);
  } catch (...) {
    done_ = true;
    throw;
  }
  return *this;
}

// --- the loader --------------------------------------------------------------------------------

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  LOOM_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  LOOM_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be positive, got {}",
             options_.batch_size);
  LOOM_CHECK(options_.num_workers >= 0, "DataLoader: num_workers must be 0 or more, got {}",
             options_.num_workers);
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle,
                       uint64_t seed, bool drop_last)
    : DataLoader(std::move(dataset), {.batch_size = batch_size,
                                      .shuffle = shuffle,
                                      .drop_last = drop_last,
                                      .num_workers = 1,
                                      .seed = seed}) {}

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  if (options_.shuffle)
    return random_permutation(n, mix_seeds(options_.seed, static_cast<uint64_t>(epoch)));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

DataLoader::Iterator DataLoader::begin_at(int64_t first_batch) {
  LOOM_CHECK(first_batch >= 0 && first_batch <= size(),
             "DataLoader::begin_at: batch {} is outside the {} batches of an epoch", first_batch,
             size());
  auto worker = std::make_unique<BatchWorker>(
      BatchWorker::Pass{dataset_, epoch_order(epoch_), options_, epoch_, first_batch, size()});
  ++epoch_;
  return Iterator(std::move(worker));
}

// ---------------------------------------------------------------------------- BatchStream

BatchStream::BatchStream(DataLoader loader) : loader_(std::move(loader)) {
  LOOM_CHECK(loader_.size() > 0,
             "BatchStream: an epoch holds no batch: {} examples, batch size {}{}; use a smaller "
             "batch or more data",
             loader_.dataset().size(), loader_.batch_size(),
             loader_.drop_last() ? " with drop_last" : "");
}

void BatchStream::seek(int64_t epoch, int64_t index) {
  LOOM_CHECK(epoch >= 0, "BatchStream::seek: negative epoch {}", epoch);
  it_.reset();  // stops the current pass's worker first
  loader_.set_epoch(epoch);
  it_.emplace(loader_.begin_at(index));  // checks index against the epoch's batches
  epoch_ = epoch;
  index_ = index;
}

Batch BatchStream::next() {
  if (!it_) seek(epoch_, index_);
  if (*it_ == loader_.end()) seek(epoch_ + 1, 0);  // a fresh epoch, in its own order
  Batch batch = std::move(**it_);
  ++*it_;
  ++index_;
  return batch;
}

}  // namespace loom::data
