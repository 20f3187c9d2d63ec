#include "data/dataloader.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "data/splitmix.h"

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

// --- the background worker ---------------------------------------------------------------------

// Producer/consumer over a bounded queue: the worker thread builds batches in order and waits
// while kCapacity of them are ready; the consumer (the Iterator) takes them one by one.
class BatchWorker {
 public:
  static constexpr size_t kCapacity = 2;

  // Produces batches first_batch .. num_batches - 1 of `order`.
  BatchWorker(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> order,
              int64_t batch_size, int64_t first_batch, int64_t num_batches)
      : dataset_(std::move(dataset)),
        order_(std::move(order)),
        batch_size_(batch_size),
        first_batch_(first_batch),
        num_batches_(num_batches),
        taken_(first_batch) {
    thread_ = std::thread([this] { run(); });
  }

  ~BatchWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    thread_.join();
  }

  // The next batch; false after the last one. Rethrows an error of the worker.
  bool next(Batch& batch) {
    if (taken_ == num_batches_) return false;
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return !queue_.empty(); });
      slot = std::move(queue_.front());
      queue_.pop_front();
    }
    space_.notify_one();
    ++taken_;
    if (slot.error) {
      taken_ = num_batches_;  // nothing follows an error
      std::rethrow_exception(slot.error);
    }
    batch = std::move(slot.batch);
    return true;
  }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  void run() {
    for (int64_t b = first_batch_; b < num_batches_; ++b) {
      Slot slot;
      try {
        slot.batch = make_batch(b);
      } catch (...) {
        slot.error = std::current_exception();
      }
      const bool failed = slot.error != nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [this] { return stop_ || queue_.size() < kCapacity; });
        if (stop_) return;
        queue_.push_back(std::move(slot));
      }
      ready_.notify_one();
      if (failed) return;
    }
  }

  Batch make_batch(int64_t b) const {
    const int64_t begin = b * batch_size_;
    const int64_t end = std::min<int64_t>(begin + batch_size_, static_cast<int64_t>(order_.size()));
    std::vector<Example> examples;
    examples.reserve(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) examples.push_back(dataset_->get(order_[i]));
    return collate(examples);
  }

  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> order_;
  int64_t batch_size_, first_batch_, num_batches_;
  int64_t taken_;  // index of the next batch to hand out; consumer side only

  std::mutex mutex_;
  std::condition_variable ready_, space_;  // "a batch is queued", "the queue has room"
  std::deque<Slot> queue_;
  bool stop_ = false;
  std::thread thread_;  // started in the constructor, joined in the destructor
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

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle,
                       uint64_t seed, bool drop_last)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  LOOM_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  LOOM_CHECK(batch_size_ >= 1, "DataLoader: batch_size must be positive, got {}", batch_size_);
}

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  if (shuffle_) return random_permutation(n, mix_seeds(seed_, static_cast<uint64_t>(epoch)));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

DataLoader::Iterator DataLoader::begin_at(int64_t first_batch) {
  LOOM_CHECK(first_batch >= 0 && first_batch <= size(),
             "DataLoader::begin_at: batch {} is outside the {} batches of an epoch", first_batch,
             size());
  auto worker = std::make_unique<BatchWorker>(dataset_, epoch_order(epoch_), batch_size_,
                                              first_batch, size());
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
