// torch::indexing and its shape ops (autograd/indexing.h): every form against PyTorch
// (tests/golden/gen_indexing.py: values and gradients), finite-difference gradients, views that
// share storage, and index_put_ on tensors inside a graph.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::indexing;
using loom::testing::check_close;
using loom::testing::gradcheck;
using loom::testing::weighted;

namespace {

using Inputs = std::vector<Tensor>;

struct GoldenCase {
  std::string name;
  std::function<Tensor(const Inputs&)> fn;
};

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(LOOM_TEST_DATA "/indexing.safetensors");
  return tensors;
}

bool has(const std::string& key) { return fixture().count(key) > 0; }

Tensor as_mask(const Tensor& t) { return t.to(DType::Bool); }

// Each mirrors the Python line of the same name in tests/golden/gen_indexing.py.
std::vector<GoldenCase> golden_cases() {
  return {
      // basic
      {"slice_step",
       [](const Inputs& x) { return x[0].index({Slice(1, None, 2), Slice(None, -1)}); }},
      {"slice_clamped", [](const Inputs& x) { return x[0].index({Slice(-10, 100), Slice(4, 2)}); }},
      {"slice_negative_start",
       [](const Inputs& x) { return x[0].index({Slice(), Slice(-3, None, 2)}); }},
      {"int_select", [](const Inputs& x) { return x[0].index({1, Slice(), -1}); }},
      {"ellipsis_int_none", [](const Inputs& x) { return x[0].index({Ellipsis, 0, None}); }},
      {"none_slice_none", [](const Inputs& x) { return x[0].index({None, Slice(1), None}); }},
      {"ellipsis_middle",
       [](const Inputs& x) { return x[0].index({1, Ellipsis, Slice(None, None, 2)}); }},
      {"slice_method", [](const Inputs& x) { return x[0].slice(1, 1, 5, 2) * 2.0f; }},
      {"bool_true", [](const Inputs& x) { return x[0].index({true}); }},
      // advanced
      {"index_rows_repeated", [](const Inputs& x) { return x[0].index({x[1]}); }},
      {"index_negative_cols", [](const Inputs& x) { return x[0].index({Slice(), x[1]}); }},
      {"index_2d", [](const Inputs& x) { return x[0].index({x[1]}); }},
      {"index_pair_adjacent", [](const Inputs& x) { return x[0].index({Slice(), x[1], x[2]}); }},
      {"index_pair_separated", [](const Inputs& x) { return x[0].index({x[1], Slice(), x[2]}); }},
      {"index_broadcast", [](const Inputs& x) { return x[0].index({x[1], x[2]}); }},
      {"int_then_index", [](const Inputs& x) { return x[0].index({0, Slice(), x[1]}); }},
      {"index_and_slice", [](const Inputs& x) { return x[0].index({x[1], Slice(2, 4)}); }},
      {"mask_full", [](const Inputs& x) { return x[0].index({as_mask(x[1])}); }},
      {"mask_rows", [](const Inputs& x) { return x[0].index({as_mask(x[1])}); }},
      {"mask_middle", [](const Inputs& x) { return x[0].index({Slice(), as_mask(x[1])}); }},
      {"mask_then_index", [](const Inputs& x) { return x[0].index({as_mask(x[1]), x[2]}); }},
      {"index_on_strided",
       [](const Inputs& x) { return x[0].index({Slice(None, None, 2)}).index({x[1]}); }},
      // index_put
      {"index_put_rows", [](const Inputs& x) { return index_put(x[0], {x[1]}, x[2]); }},
      {"index_put_accumulate",
       [](const Inputs& x) { return index_put(x[0], std::vector<Tensor>{x[1]}, x[2], true); }},
      {"index_put_broadcast", [](const Inputs& x) { return x[0].index_put({x[1]}, x[2]); }},
      {"index_put_mask", [](const Inputs& x) { return index_put(x[0], {as_mask(x[1])}, x[2]); }},
      {"index_put_pair_accumulate",
       [](const Inputs& x) {
         return index_put(x[0], std::vector<Tensor>{x[1], x[2]}, x[3], true);
       }},
      {"index_put_slice_index",
       [](const Inputs& x) {
         return index_put(x[0], std::vector<TensorIndex>{Slice(1), x[1]}, x[2]);
       }},
      {"index_put_basic",
       [](const Inputs& x) {
         Tensor y = x[0].clone();  // a non-leaf: index_put_ takes over its history
         y.index_put_({Slice(), Slice(1, None, 2)}, x[1]);
         return y;
       }},
      // shape ops
      {"masked_select_broadcast",
       [](const Inputs& x) { return masked_select(x[0], as_mask(x[1])); }},
      {"nonzero", [](const Inputs& x) { return nonzero(x[0]); }},
      {"unbind", [](const Inputs& x) { return unbind(x[0], 1)[2] * 3.0f; }},
      {"unflatten", [](const Inputs& x) { return unflatten(x[0], 1, {2, -1}); }},
      {"repeat", [](const Inputs& x) { return x[0].repeat({2, 1, 3}); }},
      {"flip", [](const Inputs& x) { return flip(x[0], {0, -1}); }},
      {"free_views",
       [](const Inputs& x) { return flatten(unsqueeze(squeeze(x[0]), 0).expand({2, 3, 4}), 1); }},
  };
}

// Fresh leaf inputs (float ones require grad), output vs "<case>.out", then the gradients of
// sum(out * w) vs "<case>.grad<i>".
void run_case(const GoldenCase& c) {
  INFO("golden case " << c.name);
  REQUIRE_MESSAGE(has(c.name + ".out"), c.name << " is missing from indexing.safetensors");
  Inputs inputs;
  for (int i = 0; has(c.name + ".in" + std::to_string(i)); ++i) {
    Tensor x = fixture().at(c.name + ".in" + std::to_string(i)).clone();
    if (x.dtype() == DType::Float32) x.requires_grad_(true);
    inputs.push_back(x);
  }
  const Tensor out = c.fn(inputs);
  const Tensor& expected = fixture().at(c.name + ".out");
  CHECK(out.dtype() == expected.dtype());
  check_close(out, expected, 1e-5f, 1e-6f, c.name + " output");
  if (!has(c.name + ".w")) return;
  sum(out * fixture().at(c.name + ".w")).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::Float32) continue;
    const std::string key = c.name + ".grad" + std::to_string(i);
    REQUIRE_MESSAGE(has(key), key << " missing");
    const Tensor grad = inputs[i].grad().defined() ? inputs[i].grad() : zeros_like(inputs[i]);
    check_close(grad, fixture().at(key), 1e-5f, 1e-6f, key);
  }
}

}  // namespace

TEST_CASE("indexing: every form matches PyTorch, values and gradients") {
  for (const GoldenCase& c : golden_cases()) run_case(c);
}

TEST_CASE("indexing: every fixture case has a lambda") {
  std::set<std::string> covered;
  for (const GoldenCase& c : golden_cases()) covered.insert(c.name);
  for (const auto& [key, tensor] : fixture()) {
    const std::string name = key.substr(0, key.find('.'));
    CHECK_MESSAGE(covered.count(name) == 1, "fixture case " << name << " has no lambda");
  }
}

TEST_CASE("indexing: gradients match finite differences") {
  manual_seed(5);
  const Tensor rows = tensor_i64({2, 0, 2, -1}, {4});
  const Tensor keep = randn({4, 3, 3}) > 0.0f;  // fixed: a mask of x would move with x
  const std::vector<std::pair<const char*, std::function<Tensor(const Inputs&)>>> cases = {
      {"slice", [](const Inputs& in) { return in[0].index({Slice(1, None, 2), Slice(None, -1)}); }},
      {"int_and_none", [](const Inputs& in) { return in[0].index({-1, None, Ellipsis}); }},
      {"index_repeated", [&](const Inputs& in) { return in[0].index({rows}); }},
      {"index_separated",
       [&](const Inputs& in) { return in[0].index({rows, Slice(), rows.index({Slice(0, 4)})}); }},
      {"mask", [&](const Inputs& in) { return in[0].index({keep}); }},
      {"mask_middle", [&](const Inputs& in) { return in[0].index({0, keep.index({0})}); }},
      {"index_put", [&](const Inputs& in) { return index_put(in[0], {rows}, in[1], true); }},
      {"masked_select",
       [&](const Inputs& in) { return masked_select(in[0], keep.index({1, 0})); }},
      {"repeat", [](const Inputs& in) { return in[0].repeat({2, 1, 2}); }},
      {"flip", [](const Inputs& in) { return in[0].flip({0, 2}); }},
      {"unbind", [](const Inputs& in) { return unbind(in[0], 2)[1] * unbind(in[0], 2)[0]; }},
  };
  for (const auto& [name, f] : cases) {
    // x [4, 3, 3] (contiguous, or a permuted view); index_put's values [3, 3] broadcast to
    // x.index({rows}) [4, 3, 3].
    for (Tensor x : {randn({4, 3, 3}), randn({3, 3, 4}).permute({2, 1, 0})}) {
      Inputs inputs{x};
      if (std::string(name) == "index_put") inputs.push_back(randn({3, 3}));
      gradcheck(weighted(f), inputs, 1e-2f, 2e-2f, 2e-3f, name);
    }
  }
}

TEST_CASE("indexing: basic indices give views that share storage") {
  Tensor x = arange_f(0, 24).reshape({4, 6});
  Tensor v = x.index({Slice(1, None, 2), Slice(None, None, 3)});  // rows 1, 3; cols 0, 3
  CHECK(v.shape() == Shape{2, 2});
  CHECK(v.to_vector() == std::vector<float>{6, 9, 18, 21});
  v.fill_(-1.0f);  // seen by x
  CHECK(x.index({3, 3}).item() == -1.0f);
  CHECK(x.index({1, 0}).item() == -1.0f);
  x.index({0}).fill_(5.0f);
  CHECK(x.sum(1).to_vector()[0] == 30.0f);
  // Advanced indices copy.
  Tensor c = x.index({tensor_i64({0}, {1})});
  c.fill_(0.0f);
  CHECK(x.index({0, 0}).item() == 5.0f);
  // The views keep storage and history.
  CHECK(x.slice(1, 2, 100).shape() == Shape{4, 4});
  CHECK(x.slice(0, -100, 2).shape() == Shape{2, 6});
  CHECK(x.unbind(1).size() == 6);
  CHECK(x.unbind(0)[2].data_ptr<float>() == x.data_ptr<float>() + 12);
}

TEST_CASE("indexing: index_put_ writes in place, basic through the view, advanced as a scatter") {
  Tensor x = zeros({3, 4});
  x.index_put_({Slice(), 0}, 7.0f);
  x.index_put_({tensor_i64({2, 2}, {2}), Slice(1, 3)}, ones({2}));
  x.index_put_(std::vector<Tensor>{tensor_i64({0, 0}, {2}), tensor_i64({3, 3}, {2})},
               full({2}, 2.0f), /*accumulate=*/true);
  CHECK(x.to_vector() == std::vector<float>{7, 0, 0, 4, 7, 0, 0, 0, 7, 1, 1, 0});
  Tensor m = x > 5.0f;
  x.index_put_({m}, -1.0f);
  CHECK(x.index({Slice(), 0}).to_vector() == std::vector<float>{-1, -1, -1});
  // A non-contiguous target: written through a copy, still in place.
  Tensor t = zeros({4, 3}).t();
  t.index_put_({tensor_i64({1}, {1})}, 3.0f);
  CHECK(t.sum().item() == 12.0f);
  const uint64_t before = x.version();
  x.index_put_({0}, 1.0f);
  CHECK(x.version() > before);
}

TEST_CASE("indexing: index_put_ inside a graph follows PyTorch") {
  Tensor w = randn({3, 2}).requires_grad_();
  testing::expect_error([&] { w.index_put_({0}, 1.0f); }, {"index_put_", "leaf", "in-place"});
  {
    NoGradGuard no_grad;
    CHECK_NOTHROW(w.index_put_({0}, 1.0f));
  }
  // A non-leaf takes the history of index_put: the written rows get no gradient from y, the
  // values get theirs.
  Tensor v = randn({2}).requires_grad_();
  Tensor y = (w * 2.0f).clone();
  y.index_put_({1}, v);
  sum(y * y).backward();
  Tensor expected = w.detach() * 8.0f;
  expected.index({1}).fill_(0.0f);
  check_close(w.grad(), expected, 1e-6f, 1e-6f, "w.grad");
  check_close(v.grad(), v.detach() * 2.0f, 1e-6f, 1e-6f, "v.grad");
  // A view of a tensor in the graph is refused.
  Tensor z = w * 1.0f;
  Tensor row = z.index({0});
  testing::expect_error([&] { row.index_put_({0}, 1.0f); }, {"index_put_", "view", "index_put"});
}

TEST_CASE("indexing: nonzero and masked_select of every dtype") {
  Tensor f = tensor({0, 1.5f, 0, -2}, {2, 2});
  CHECK(nonzero(f).to_vector_i64() == std::vector<int64_t>{0, 1, 1, 1});
  CHECK(nonzero(f.to(DType::Int64)).shape() == Shape{2, 2});
  CHECK(f.to(DType::BFloat16).nonzero().shape() == Shape{2, 2});
  CHECK(nonzero(zeros({0, 3})).shape() == Shape{0, 2});
  CHECK(nonzero(f.t()).to_vector_i64() == std::vector<int64_t>{1, 0, 1, 1});
  CHECK(masked_select(f, f != 0.0f).to_vector() == std::vector<float>{1.5f, -2});
  // Many elements: the threads' chunks join in row-major order.
  Tensor big = zeros({100000});
  big.index_put_({Slice(None, None, 3)}, 1.0f);
  const std::vector<int64_t> flat = nonzero(big > 0.5f).to_vector_i64();
  REQUIRE(flat.size() == 33334);
  bool every_third = true;
  for (size_t i = 0; i < flat.size(); ++i) every_third = every_third && flat[i] == 3 * int64_t(i);
  CHECK(every_third);
}

TEST_CASE("indexing: shape ops and their free forms") {
  Tensor x = arange_f(0, 6).reshape({2, 3});
  CHECK(repeat(x, {2, 1}).shape() == Shape{4, 3});
  CHECK(repeat(x, {2, 1, 1}).shape() == Shape{2, 2, 3});
  CHECK(x.repeat({1, 0}).numel() == 0);
  CHECK(flip(x, {1}).to_vector() == std::vector<float>{2, 1, 0, 5, 4, 3});
  CHECK(flip(x, {}).to_vector() == x.to_vector());
  CHECK(x.unflatten(1, {3, 1}).shape() == Shape{2, 3, 1});
  CHECK(unflatten(x, -1, {-1, 3}).shape() == Shape{2, 1, 3});
  CHECK(unbind(zeros({2, 0}), 1).empty());
  CHECK(squeeze(zeros({1, 2, 1})).shape() == Shape{2});
  CHECK(squeeze(zeros({1, 2, 1}), -1).shape() == Shape{1, 2});
  CHECK(unsqueeze(x, -1).shape() == Shape{2, 3, 1});
  CHECK(expand(zeros({3}), {2, 3}).shape() == Shape{2, 3});
  CHECK(flatten(zeros({2, 3, 4}), 1).shape() == Shape{2, 12});
  CHECK(x.index({}).data_ptr<float>() == x.data_ptr<float>());
  CHECK(x.index({false}).shape() == Shape{0, 2, 3});
  CHECK(x.index({Ellipsis}).shape() == Shape{2, 3});
  CHECK(scalar_tensor(3.0f).index({None}).shape() == Shape{1});
  CHECK(x.index({tensor_i64({}, {0})}).shape() == Shape{0, 3});
  CHECK(x.index(std::vector<Tensor>{Tensor(), tensor_i64({2}, {1})}).shape() == Shape{2, 1});
}
