// Tensor::register_post_accumulate_grad_hook: the per-leaf "gradient ready" hook that
// nn::DistributedDataParallel launches its bucket all-reduces from.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "loom.h"

using namespace loom;

TEST_CASE("grad-ready hook sees the whole gradient of a leaf used on several paths") {
  Tensor w = tensor({1.0f, 2.0f}, {2}).requires_grad_();
  std::vector<float> seen;
  int calls = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    seen = leaf.grad().to_vector();
  });
  // d/dw sum(w*3 + w*w) = 3 + 2w: two paths, the hook must wait for both.
  Tensor loss = sum(w * 3.0f + w * w);
  loss.backward();
  CHECK(calls == 1);
  CHECK(seen == std::vector<float>{5.0f, 7.0f});
  // A second backward accumulates into .grad; the hook sees the running total.
  sum(w * 3.0f + w * w).backward();
  CHECK(calls == 2);
  CHECK(seen == std::vector<float>{10.0f, 14.0f});
}

TEST_CASE("grad-ready hooks fire in reverse order of use, while backward is still running") {
  // y = (x @ a) @ b: b's gradient is complete before the backward reaches a.
  Tensor x = ones({1, 2});
  Tensor a = ones({2, 2}).requires_grad_(), b = ones({2, 1}).requires_grad_();
  std::vector<std::string> order;
  a.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("a"); });
  b.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    order.push_back("b");
    CHECK(!a.grad().defined());  // a's gradient has not been computed yet
    CHECK(leaf.grad().defined());
  });
  sum(matmul(matmul(x, a), b)).backward();
  CHECK(order == std::vector<std::string>{"b", "a"});
}

TEST_CASE("grad-ready hook does not fire for a leaf the backward does not reach") {
  Tensor used = ones({3}).requires_grad_(), unused = ones({3}).requires_grad_();
  int used_calls = 0, unused_calls = 0;
  used.register_post_accumulate_grad_hook([&](const Tensor&) { ++used_calls; });
  unused.register_post_accumulate_grad_hook([&](const Tensor&) { ++unused_calls; });
  // `unused` is a leaf of the model but not of this loss (a layer skipped by this batch).
  Tensor loss = sum(used * 2.0f);
  loss.backward();
  CHECK(used_calls == 1);
  CHECK(unused_calls == 0);
  CHECK(!unused.grad().defined());
}

TEST_CASE("grad-ready hook fires on backward from the leaf itself") {
  Tensor w = ones({2}).requires_grad_();
  int calls = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    CHECK(leaf.grad().to_vector() == std::vector<float>{2.0f, 3.0f});
  });
  w.backward(tensor({2.0f, 3.0f}, {2}));
  CHECK(calls == 1);
}

TEST_CASE("grad-ready hook is refused on tensors that get no accumulated gradient") {
  Tensor plain = ones({2});
  CHECK_THROWS_WITH_AS(plain.register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("does not require grad"), Error);
  Tensor w = ones({2}).requires_grad_();
  Tensor y = w * 2.0f;
  CHECK_THROWS_WITH_AS(y.register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("produced by 'mul"), Error);
  CHECK_THROWS_WITH_AS(w.register_post_accumulate_grad_hook(nullptr),
                       doctest::Contains("empty"), Error);
}
