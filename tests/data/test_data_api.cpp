// The PyTorch-style data API: TensorDataset with names, Subset and random_split, the
// DataLoader's options (workers that deliver in order, the same batches for any number of
// them, errors at their batch, a custom collate) and a batch's named fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <set>
#include <thread>

#include "data_test_util.h"
#include "loom.h"

using namespace loom;
using namespace loom::data;
namespace T = loom::data::transforms;
using loom::testing::check_error;

namespace {

// n examples: image [1, 4, 4] filled with i, label i.
std::shared_ptr<TensorDataset> image_dataset(int64_t n) {
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    pixels.insert(pixels.end(), 16, static_cast<float>(i));
    labels.push_back(i);
  }
  return std::make_shared<TensorDataset>(
      std::vector<Tensor>{tensor(pixels, {n, 1, 4, 4}), tensor_i64(labels, {n})},
      std::vector<std::string>{"image", "label"});
}

// Example i is {i}; throws at `fail_at`, sleeps a little at odd indices so that workers finish
// out of order.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Example get(int64_t index) const override {
    ++calls;
    LOOM_CHECK(index != fail_at_, "SlowDataset: example {} is broken", index);
    if (index % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
    return {tensor_i64({index}, {})};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, fail_at_;
};

// Every batch of one pass, each field flattened to floats (labels converted).
std::vector<std::vector<float>> pass(DataLoader& loader) {
  std::vector<std::vector<float>> out;
  for (const Batch& batch : loader) {
    std::vector<float> values = batch[0].to_vector();
    for (int64_t v : batch[1].to_vector_i64()) values.push_back(static_cast<float>(v));
    out.push_back(std::move(values));
  }
  return out;
}

}  // namespace

TEST_CASE("TensorDataset: names its fields; Subset picks examples; random_split deals them") {
  auto data = image_dataset(10);
  CHECK(data->field_names() == std::vector<std::string>{"image", "label"});
  CHECK(data->get(3)[1].to_vector_i64()[0] == 3);
  CHECK(data->tensors().size() == 2);
  CHECK(TensorDataset({zeros({2, 3})}).field_names().empty());

  Subset subset(data, {7, 2, 7});
  CHECK(subset.size() == 3);
  CHECK(subset.get(0)[1].to_vector_i64()[0] == 7);
  CHECK(subset.get(1)[1].to_vector_i64()[0] == 2);
  CHECK(subset.field_names() == data->field_names());

  const auto parts = random_split(data, {6, 3, 1}, /*seed=*/5);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0]->size() == 6);
  CHECK(parts[1]->size() == 3);
  CHECK(parts[2]->size() == 1);
  std::vector<int64_t> all;
  for (const auto& p : parts) all.insert(all.end(), p->indices().begin(), p->indices().end());
  std::vector<int64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(10);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  CHECK(sorted == identity);   // disjoint, and together every example
  CHECK(all != identity);      // in a random order
  CHECK(random_split(data, {6, 3, 1}, 5)[0]->indices() == parts[0]->indices());
  CHECK(random_split(data, {6, 3, 1}, 6)[0]->indices() != parts[0]->indices());
  CHECK(&parts[0]->dataset() == data.get());  // shared, not copied

  // Fractions: floor of each, then the remainder dealt round robin (PyTorch's rule).
  const auto thirds = random_split(data, {0.34, 0.33, 0.33}, 5);
  CHECK(thirds[0]->size() == 4);
  CHECK(thirds[1]->size() == 3);
  CHECK(thirds[2]->size() == 3);
  const int64_t n_train = 8, n_val = 2;
  CHECK(random_split(data, {n_train, n_val})[1]->size() == 2);
  const std::vector<double> fractions{0.5, 0.5};
  CHECK(random_split(data, fractions)[1]->size() == 5);
}

TEST_CASE("DataLoader options: designated initializers, workers in order for any count") {
  auto data = image_dataset(37);
  const auto augment = T::Compose({T::RandomCrop(4, 1, -1.0f), T::RandomHorizontalFlip()});
  auto augmented = std::make_shared<TransformDataset>(data, augment);
  std::vector<std::vector<float>> reference;
  for (int64_t workers : {0, 1, 2, 4}) {
    INFO("num_workers " << workers);
    DataLoader loader(augmented, {.batch_size = 5, .shuffle = true, .num_workers = workers,
                                  .seed = 11});
    CHECK(loader.size() == 8);
    const auto epoch0 = pass(loader), epoch1 = pass(loader);
    CHECK(epoch0 != epoch1);
    if (reference.empty()) reference = epoch0;
    CHECK(epoch0 == reference);  // same order, same crops and flips
    loader.set_epoch(0);
    auto it = loader.begin_at(3);  // a resumed pass repeats batch 3's draws
    CHECK((*it)[0].to_vector() == std::vector<float>(reference[3].begin(),
                                                     reference[3].begin() + 5 * 16));
  }
  // Another seed draws other augmentations (with the same order when not shuffling).
  DataLoader a(augmented, {.batch_size = 5, .seed = 1}), b(augmented, {.batch_size = 5, .seed = 2});
  CHECK(pass(a) != pass(b));
  DataLoader dropping(data, {.batch_size = 5, .drop_last = true, .num_workers = 2});
  CHECK(dropping.size() == 7);
  CHECK(pass(dropping).size() == 7);

  // Workers that finish out of order still hand batches over in order.
  auto slow = std::make_shared<SlowDataset>(60);
  DataLoader loader(slow, {.batch_size = 3, .num_workers = 4});
  int64_t next = 0;
  for (const Batch& batch : loader)
    for (int64_t v : batch[0].to_vector_i64()) CHECK(v == next++);
  CHECK(next == 60);
}

TEST_CASE("DataLoader: an error is rethrown at its batch, after the batches before it") {
  for (int64_t workers : {0, 1, 3}) {
    INFO("num_workers " << workers);
    auto data = std::make_shared<SlowDataset>(40, /*fail_at=*/17);
    DataLoader loader(data, {.batch_size = 4, .num_workers = workers});
    int64_t seen = 0;
    try {
      for (const Batch& batch : loader) {
        CHECK(batch[0].to_vector_i64().front() == seen * 4);
        ++seen;
      }
      FAIL("expected the error of example 17");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("example 17 is broken") != std::string::npos);
    }
    CHECK(seen == 4);  // batches 0..3; batch 4 holds example 17
    CHECK(data->calls.load() <= 40);
  }
  // Leaving a loop early with workers running stops them.
  auto data = std::make_shared<SlowDataset>(400);
  {
    DataLoader loader(data, {.batch_size = 2, .num_workers = 3});
    for (const Batch& batch : loader) {
      (void)batch;
      break;
    }
  }
  CHECK(data->calls.load() < 400);
}

TEST_CASE("DataLoader: a custom collate gets each batch's examples; batches answer to names") {
  auto data = image_dataset(10);
  DataLoader named(data, {.batch_size = 4});
  for (Batch& batch : named) {
    CHECK(batch.names() == std::vector<std::string>{"image", "label"});
    CHECK(batch["image"].shape() == Shape{batch["label"].size(0), 1, 4, 4});
    CHECK(batch["label"].to_vector_i64() == batch[1].to_vector_i64());
    const Batch& view = batch;
    CHECK(view["label"].dtype() == DType::Int64);
    check_error([&] { (void)batch["target"]; }, {"Batch", "'target'", "image, label"});
    int fields = 0;
    for (const Tensor& t : batch) fields += t.defined();
    CHECK(fields == 2);
    break;
  }

  // The collate sees the examples of its batch; it may return any fields, named or not.
  std::atomic<int> calls{0};
  const Collate sum_labels = [&calls](const std::vector<Example>& examples) {
    ++calls;
    int64_t total = 0;
    for (const Example& e : examples) total += e[1].to_vector_i64()[0];
    return Batch({tensor_i64({total}, {1})}, {"label_sum"});
  };
  for (int64_t workers : {0, 2}) {
    DataLoader loader(data, {.batch_size = 4, .num_workers = workers, .collate = sum_labels});
    std::vector<int64_t> sums;
    for (Batch& batch : loader) sums.push_back(batch["label_sum"].to_vector_i64()[0]);
    CHECK(sums == std::vector<int64_t>{0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9});
  }
  CHECK(calls.load() == 6);
  // A collate that keeps the fields gets the dataset's names.
  DataLoader same(data, {.batch_size = 3, .collate = [](const std::vector<Example>& examples) {
                           return collate(examples);
                         }});
  CHECK((*same.begin())["label"].to_vector_i64() == std::vector<int64_t>{0, 1, 2});
  // An unnamed dataset's batch says so.
  DataLoader unnamed(std::make_shared<TensorDataset>(std::vector<Tensor>{zeros({3, 2})}), 3);
  check_error([&] { (void)(*unnamed.begin())["x"]; }, {"'x'", "names no fields", "batch[0]"});
}

TEST_CASE("data API: misuse is a loom::Error naming the function and the numbers") {
  auto data = image_dataset(10);
  check_error([&] { DataLoader(data, {.batch_size = 0}); }, {"DataLoader", "batch_size", "0"});
  check_error([&] { DataLoader(data, {.batch_size = 2, .num_workers = -1}); },
              {"DataLoader", "num_workers", "-1"});
  check_error([&] { DataLoader(nullptr, {.batch_size = 2}); }, {"DataLoader", "null"});
  check_error([&] { random_split(data, {6, 3}); }, {"random_split", "sum to 9", "10 examples"});
  check_error([&] { random_split(data, {11, -1}); }, {"random_split", "-1", "negative"});
  check_error([&] { random_split(data, {0.5, 0.4}); }, {"random_split", "0.9", "not 1"});
  check_error([&] { random_split(data, {1.5, -0.5}); }, {"random_split", "1.5", "[0, 1]"});
  check_error([&] { Subset(data, {3, 10}); }, {"Subset", "10", "10 examples"});
  check_error([&] { Subset(data, {3}).get(1); }, {"Subset::get", "1", "[0, 1)"});
  check_error([] { TensorDataset({zeros({2, 3})}, {"a", "b"}); },
              {"TensorDataset", "2 names", "1 tensors"});
}
