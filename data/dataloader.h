// DataLoader: batches of a Dataset, in seeded random order, prepared ahead by worker threads
// while the caller trains on the previous one (torch.utils.data.DataLoader).
//
// clang-format off
//   auto data = std::make_shared<data::LanguageModelDataset>(tokens, /*context=*/128,
//                                                            /*stride=*/1);
//   data::DataLoader loader(data, {.batch_size = 32, .shuffle = true, .num_workers = 2,
//                                  .seed = 1234});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);
//     for (auto& batch : loader) {  // batch["x"] (or batch[0]): int64 [32, 128], batch["y"] too
//       ...
//       if (done) break;            // stops the workers cleanly
//     }
//   }
// clang-format on
//
// Order: without shuffle, examples come in index order. With shuffle, the order of an epoch is
// a SplitMix64 permutation determined by (seed, epoch) alone: the same on every run and every
// platform, different between epochs. Each begin() uses the current epoch and then advances
// it by one, so consecutive loops over the loader see new orders even without set_epoch
// (PyTorch's RandomSampler); set_epoch(e) makes the next loop use epoch e
// (PyTorch's DistributedSampler.set_epoch).
//
// Workers: num_workers = 0 prepares each batch in the loop's own thread when it is asked for
// (PyTorch's default); n > 0 starts n threads that prepare up to 2n batches ahead (PyTorch's
// prefetch_factor 2) and hand them over in order. Which worker prepares a batch never shows in
// it: before example k of an epoch is read, the thread's augmentation generator
// (transforms::current_rng()) is seeded from (seed, epoch, k) alone, so random transforms draw
// the same numbers for any number of workers, and a resumed pass (begin_at) repeats them.
//
// Batches: example fields are stacked along a new leading dim, so a field of shape S becomes
// [batch, S...] (or what a custom collate makes of them). The last batch is smaller when the
// dataset size is not a multiple of the batch size, or dropped with drop_last. An exception
// thrown while preparing a batch (e.g. by Dataset::get) is rethrown in the loop, at the batch
// where it happened, after every batch before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace loom::data {

// A batch: one tensor per example field, with the batch as the leading dim. It is the vector
// of those tensors (batch[0], batch.size(), range-for), and it also answers to the fields'
// names, the dataset's field_names(): batch["image"], batch["label"].
class Batch : public std::vector<Tensor> {
 public:
  using std::vector<Tensor>::vector;
  Batch(std::vector<Tensor> fields, std::vector<std::string> names = {});

  using std::vector<Tensor>::operator[];
  // The field called `name`; throws loom::Error listing the names there are.
  Tensor& operator[](std::string_view name);
  const Tensor& operator[](std::string_view name) const;
  const std::vector<std::string>& names() const { return names_; }
  void set_names(std::vector<std::string> names) { names_ = std::move(names); }

 private:
  size_t field_index(std::string_view name) const;
  std::vector<std::string> names_;
};

// Turns the examples of one batch into the batch (PyTorch's collate_fn).
using Collate = std::function<Batch(const std::vector<Example>& examples)>;

// The options of a DataLoader, in the order of the designated initializers that name them:
//   DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .num_workers = 2});
struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  int64_t num_workers = 0;  // threads preparing batches ahead; 0: in the loop's own thread
  Collate collate = nullptr;  // nullptr: data::collate (stack every field)
  uint64_t seed = 0;          // the epoch orders and the transforms' random draws
};

// The producer of one pass over the data (defined in dataloader.cpp).
class BatchWorker;

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  // The positional form: one worker thread, the default collate.
  DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle = false,
             uint64_t seed = 0, bool drop_last = false);

  // Number of batches per epoch (len(loader) in PyTorch).
  int64_t size() const;
  int64_t batch_size() const { return options_.batch_size; }
  bool drop_last() const { return options_.drop_last; }
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }  // the epoch the next begin() will use
  // The order in which epoch `epoch` visits the examples.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  struct Sentinel {};
  // Input iterator over the batches of one epoch. Owns the worker thread: destroying it (the
  // loop ends or is left early) stops the thread and waits for it.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    explicit Iterator(std::unique_ptr<BatchWorker> worker);
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();

    Batch& operator*() { return batch_; }
    Batch* operator->() { return &batch_; }
    Iterator& operator++();
    bool operator==(Sentinel) const { return done_; }

   private:
    std::unique_ptr<BatchWorker> worker_;
    Batch batch_;
    bool done_ = false;
  };

  // Starts a pass over epoch epoch() (and advances epoch() by one).
  Iterator begin() { return begin_at(0); }
  // Same, but the pass starts at batch `first_batch` of the epoch, without preparing the
  // batches before it (to resume training from a checkpoint mid-epoch).
  Iterator begin_at(int64_t first_batch);
  Sentinel end() const { return {}; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
};

// The batches of a DataLoader as one endless stream, epoch after epoch, whose position (epoch,
// batch within the epoch) can be saved and restored: what a trainer that counts steps rather
// than epochs iterates, and what lets a resumed run see exactly the batches it would have seen.
//
//   data::BatchStream batches(loader);
//   batches.seek(saved_epoch, saved_batch);   // after loading a checkpoint
//   data::Batch b = batches.next();           // forever; a new epoch starts by itself
class BatchStream {
 public:
  // Throws loom::Error naming the sizes if an epoch holds no batch (an empty data set, or
  // drop_last with fewer examples than the batch size): the stream would never yield.
  explicit BatchStream(DataLoader loader);

  // The next batch; after an epoch's last batch, the first batch of the next epoch.
  Batch next();
  // Continue at batch `index` of epoch `epoch` (the batches before it are not prepared).
  void seek(int64_t epoch, int64_t index);
  int64_t epoch() const { return epoch_; }  // the position of the next batch
  int64_t index() const { return index_; }

 private:
  DataLoader loader_;
  std::optional<DataLoader::Iterator> it_;
  int64_t epoch_ = 0, index_ = 0;
};

// Stacks examples into a batch: field f of every example must have the same shape S and
// dtype, giving a tensor [examples.size(), S...]. Throws loom::Error naming the example and
// field that disagree. (The loader then gives the batch the dataset's field names.)
Batch collate(const std::vector<Example>& examples);

// The seed of the augmentation generator while example `position` of epoch `epoch` is read
// (position counts from the epoch's first example, in the epoch's order).
uint64_t example_seed(uint64_t seed, int64_t epoch, int64_t position);

}  // namespace loom::data
