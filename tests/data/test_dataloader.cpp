// Datasets and the DataLoader: batch shapes and contents, drop_last, seeded shuffling and
// epochs, stopping early, and errors raised on the worker thread.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <set>

#include "autograd/ops.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data_test_util.h"

using namespace loom;
using namespace loom::data;
using loom::testing::check_error;

namespace {

// n examples; example i is {features [3] = (i, i + 0.5, -i), label = i}.
std::shared_ptr<TensorDataset> numbered_dataset(int64_t n) {
  std::vector<float> features;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(i);
    features.insert(features.end(), {f, f + 0.5f, -f});
    labels.push_back(i);
  }
  return std::make_shared<TensorDataset>(
      std::vector<Tensor>{tensor(features, {n, 3}), tensor_i64(labels, {n})});
}

// The labels of every batch of one pass, in order.
std::vector<std::vector<int64_t>> labels_of_pass(DataLoader& loader) {
  std::vector<std::vector<int64_t>> labels;
  for (auto& batch : loader) labels.push_back(batch[1].to_vector_i64());
  return labels;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

// Example i is {i}; counts calls to get() and throws at `fail_at`.
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Example get(int64_t index) const override {
    ++calls;
    LOOM_CHECK(index != fail_at_, "CountingDataset: example {} is broken", index);
    Tensor t = Tensor::empty({1}, DType::Int64);
    *t.data_ptr<int64_t>() = index;
    return {t};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, fail_at_;
};

}  // namespace

TEST_CASE("DataLoader: batches stack examples in order, the last one is short") {
  const int64_t n = 10, batch_size = 4;
  DataLoader loader(numbered_dataset(n), batch_size);
  CHECK(loader.size() == (n + batch_size - 1) / batch_size);
  int64_t next_label = 0, batches = 0;
  for (auto& batch : loader) {
    REQUIRE(batch.size() == 2);
    const int64_t b = std::min(batch_size, n - next_label);
    CHECK(batch[0].shape() == Shape{b, 3});
    CHECK(batch[0].dtype() == DType::Float32);
    CHECK(batch[1].shape() == Shape{b});
    CHECK(batch[1].dtype() == DType::Int64);
    const std::vector<float> features = batch[0].to_vector();
    const std::vector<int64_t> labels = batch[1].to_vector_i64();
    for (int64_t r = 0; r < b; ++r) {
      const auto i = static_cast<float>(next_label);
      CHECK(labels[r] == next_label);
      CHECK(features[r * 3 + 0] == i);
      CHECK(features[r * 3 + 1] == i + 0.5f);
      CHECK(features[r * 3 + 2] == -i);
      ++next_label;
    }
    ++batches;
  }
  CHECK(batches == loader.size());
  CHECK(next_label == n);
}

TEST_CASE("DataLoader: drop_last drops the short batch") {
  DataLoader loader(numbered_dataset(10), 4, /*shuffle=*/false, /*seed=*/0, /*drop_last=*/true);
  CHECK(loader.size() == 10 / 4);
  const auto batches = labels_of_pass(loader);
  REQUIRE(batches.size() == 2);
  for (const auto& b : batches) CHECK(b.size() == 4);
  DataLoader exact(numbered_dataset(8), 4, false, 0, true);
  CHECK(labels_of_pass(exact).size() == 2);
  DataLoader too_small(numbered_dataset(3), 4, false, 0, true);
  CHECK(too_small.size() == 0);
  CHECK(labels_of_pass(too_small).empty());
}

TEST_CASE("DataLoader: shuffling is a seeded permutation, new each epoch, repeatable") {
  const int64_t n = 50;
  DataLoader a(numbered_dataset(n), 8, /*shuffle=*/true, /*seed=*/123);
  DataLoader b(numbered_dataset(n), 8, /*shuffle=*/true, /*seed=*/123);
  const auto a0 = flatten(labels_of_pass(a)), a1 = flatten(labels_of_pass(a));
  CHECK(a0 == flatten(labels_of_pass(b)));  // same seed, same first epoch
  CHECK(a1 == flatten(labels_of_pass(b)));  // and same second epoch
  CHECK(a0 != a1);                          // epochs differ
  std::vector<int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  CHECK(sorted == identity);  // every example exactly once
  CHECK(a0 != identity);
  CHECK(a0 == a.epoch_order(0));

  DataLoader c(numbered_dataset(n), 8, true, 123);
  c.set_epoch(1);
  CHECK(flatten(labels_of_pass(c)) == a1);  // set_epoch picks the order
  CHECK(c.epoch() == 2);
  DataLoader other_seed(numbered_dataset(n), 8, true, 124);
  CHECK(flatten(labels_of_pass(other_seed)) != a0);
  DataLoader ordered(numbered_dataset(n), 8);
  CHECK(flatten(labels_of_pass(ordered)) == identity);
  CHECK(flatten(labels_of_pass(ordered)) == identity);
}

TEST_CASE("DataLoader: begin_at resumes an epoch at a given batch") {
  DataLoader loader(numbered_dataset(30), 4, /*shuffle=*/true, /*seed=*/5);
  loader.set_epoch(3);
  const auto full = labels_of_pass(loader);
  auto data = std::make_shared<CountingDataset>(30);
  DataLoader counted(data, 4, true, 5);
  for (int64_t first : {int64_t{0}, int64_t{2}, loader.size()}) {
    loader.set_epoch(3);
    std::vector<std::vector<int64_t>> tail;
    for (auto it = loader.begin_at(first); !(it == loader.end()); ++it)
      tail.push_back((*it)[1].to_vector_i64());
    CHECK(tail == std::vector<std::vector<int64_t>>(full.begin() + first, full.end()));
    CHECK(loader.epoch() == 4);
  }
  // Skipped batches are not prepared.
  for (auto it = counted.begin_at(counted.size() - 1); !(it == counted.end()); ++it) {
  }
  CHECK(data->calls.load() == 30 - 4 * (counted.size() - 1));
  check_error([&] { loader.begin_at(loader.size() + 1); }, {"begin_at", "batch 9"});
}

TEST_CASE("DataLoader: leaving the loop early stops the worker") {
  auto data = std::make_shared<CountingDataset>(100000);
  const int64_t batch_size = 10;
  {
    DataLoader loader(data, batch_size);
    int64_t seen = 0;
    for (auto& batch : loader) {
      CHECK(batch[0].to_vector_i64()[0] == seen * batch_size);
      if (++seen == 3) break;
    }
  }
  // 3 batches consumed, at most 2 queued and 1 in preparation when the loop was left.
  CHECK(data->calls.load() <= (3 + 2 + 1) * batch_size);
  // A loader destroyed with a pass never started, and a pass abandoned at its first batch.
  { DataLoader unused(data, batch_size); }
  DataLoader loader(data, batch_size, true, 1);
  {
    auto it = loader.begin();
    CHECK(!(it == loader.end()));
  }
  const int64_t before = data->calls.load();
  for (auto& batch : loader) {
    CHECK(batch[0].shape() == Shape{batch_size, 1});
    break;
  }
  CHECK(data->calls.load() - before <= 4 * batch_size);
}

TEST_CASE("DataLoader: an error in Dataset::get is rethrown at its batch") {
  auto data = std::make_shared<CountingDataset>(20, /*fail_at=*/7);
  DataLoader loader(data, 2);
  int64_t batches = 0;
  check_error(
      [&] {
        for (auto& batch : loader) {
          CHECK(batch[0].numel() == 2);
          ++batches;
        }
      },
      {"CountingDataset", "example 7"});
  CHECK(batches == 7 / 2);  // the batches before the broken one arrived
  // The loader still works for a new pass (which fails again at the same place).
  check_error(
      [&] {
        for (auto& batch : loader) (void)batch;
      },
      {"example 7"});
  auto first_broken = std::make_shared<CountingDataset>(4, 0);
  DataLoader loader2(first_broken, 2);
  check_error([&] { loader2.begin(); }, {"example 0"});
}

TEST_CASE("collate: examples that disagree are reported by index and field") {
  const Example a = {tensor({1, 2}, {2}), tensor_i64({1}, {1})};
  const Example b = {tensor({1, 2, 3}, {3}), tensor_i64({1}, {1})};
  const Example c = {tensor({1, 2}, {2})};
  const Example d = {tensor({1, 2}, {2}), tensor({1}, {1})};
  check_error([&] { collate({a, b}); }, {"field 0", "example 1", "[3]", "[2]"});
  check_error([&] { collate({a, c}); }, {"example 1", "1 fields"});
  check_error([&] { collate({a, d}); }, {"field 1", "float32", "int64"});
  const Batch batch = collate({a, a, a});
  CHECK(batch[0].shape() == Shape{3, 2});
  CHECK(batch[1].shape() == Shape{3, 1});
  check_error([] { DataLoader(nullptr, 2); }, {"null"});
  check_error([&] { DataLoader(numbered_dataset(3), 0); }, {"batch_size", "0"});
}

TEST_CASE("TensorDataset: rows of each tensor, whose sizes must agree") {
  auto data = numbered_dataset(5);
  CHECK(data->size() == 5);
  const Example e = data->get(3);
  CHECK(e[0].to_vector() == std::vector<float>{3.0f, 3.5f, -3.0f});
  CHECK(e[1].shape() == Shape{});
  CHECK(e[1].to_vector_i64() == std::vector<int64_t>{3});
  check_error([&] { data->get(5); }, {"index 5", "[0, 5)"});
  check_error([] { TensorDataset({zeros({4, 2}), zeros({3})}); }, {"[3]", "[4,2]"});
  check_error([] { TensorDataset(std::vector<Tensor>{}); }, {"at least one tensor"});
  // A transposed (non-contiguous) tensor gives the rows of its logical layout.
  const Tensor m = tensor({0, 1, 2, 3, 4, 5}, {2, 3}).transpose(0, 1);  // [3, 2]
  TensorDataset transposed({m});
  CHECK(transposed.get(1)[0].to_vector() == std::vector<float>{1.0f, 4.0f});
}

TEST_CASE("LanguageModelDataset: y is x shifted by one, strides tile the stream") {
  const int64_t n = 23, context = 5;
  std::vector<int64_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), int64_t{100});
  for (int64_t stride : {int64_t{0}, int64_t{1}, int64_t{3}}) {
    const LanguageModelDataset data(tokens, context, stride);
    const int64_t s = stride == 0 ? context : stride;
    CHECK(data.stride() == s);
    // Window i uses tokens [i*s, i*s + context]: the last start is at most n - context - 1.
    CHECK(data.size() == (n - context - 1) / s + 1);
    for (int64_t i = 0; i < data.size(); ++i) {
      const Example e = data.get(i);
      REQUIRE(e.size() == 2);
      CHECK(e[0].shape() == Shape{context});
      CHECK(e[0].dtype() == DType::Int64);
      const std::vector<int64_t> x = e[0].to_vector_i64(), y = e[1].to_vector_i64();
      for (int64_t t = 0; t < context; ++t) {
        CHECK(x[t] == tokens[i * s + t]);
        CHECK(y[t] == tokens[i * s + t + 1]);
      }
    }
  }
  check_error([&] { LanguageModelDataset(std::vector<int64_t>(5), 5); }, {"5 tokens", "context 5"});
  check_error([&] { LanguageModelDataset(tokens, 0); }, {"context"});

  DataLoader loader(std::make_shared<LanguageModelDataset>(tokens, context, 1), 4, true, 9);
  for (auto& batch : loader) {
    CHECK(batch[0].dim() == 2);
    CHECK(batch[0].size(1) == context);
    const std::vector<int64_t> x = batch[0].to_vector_i64(), y = batch[1].to_vector_i64();
    for (size_t k = 0; k < x.size(); ++k) CHECK(y[k] == x[k] + 1);  // tokens are consecutive
  }
}

TEST_CASE("BatchStream: epoch after epoch in the loader's order; seek continues at any position") {
  auto loader = [] { return DataLoader(numbered_dataset(10), 3, /*shuffle=*/true, /*seed=*/9); };
  DataLoader reference = loader();  // 3 batches of 3 per epoch (the short one kept: 4 batches)
  std::vector<std::vector<int64_t>> expected;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    reference.set_epoch(epoch);
    for (auto& b : labels_of_pass(reference)) expected.push_back(b);
  }
  BatchStream stream(loader());
  std::vector<std::vector<int64_t>> got;
  for (size_t i = 0; i < expected.size(); ++i) got.push_back(stream.next()[1].to_vector_i64());
  CHECK(got == expected);
  CHECK(stream.epoch() == 2);
  CHECK(stream.index() == reference.size());
  // A stream that seeks to where the first one was after batch k gives the same batches.
  for (size_t k : {size_t{0}, size_t{2}, size_t{4}, size_t{7}}) {
    const int64_t per_epoch = reference.size();
    BatchStream resumed(loader());
    resumed.seek(static_cast<int64_t>(k) / per_epoch, static_cast<int64_t>(k) % per_epoch);
    for (size_t i = k; i < expected.size(); ++i)
      CHECK(resumed.next()[1].to_vector_i64() == expected[i]);
  }
  BatchStream bad(loader());
  check_error([&] { bad.seek(0, reference.size() + 1); }, {"begin_at", "batch 5"});
  check_error([&] { bad.seek(-1, 0); }, {"BatchStream::seek", "-1"});
}
