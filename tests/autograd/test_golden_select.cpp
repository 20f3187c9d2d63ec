// Selection and sorting against PyTorch: tests/golden/gen_select.py stores each case's inputs,
// output and the gradients of sum(output * w) (float64 reference, gen_ops.py's layout), and each
// case below mirrors its Python function. Indices (topk's, sort's, argsort, one_hot) are int64
// and must match exactly; values and gradients to float32 rounding. The last test checks that
// every fixture case has a lambda here and every lambda a fixture case.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;

namespace {

using Inputs = std::vector<Tensor>;
using CaseFn = std::function<Tensor(const Inputs&)>;

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(LOOM_TEST_DATA "/select.safetensors");
  return tensors;
}

bool stored(const std::string& key) { return fixture().count(key) > 0; }

// The case's output against "<name>.out" (int64 exactly), then, for a differentiable case, the
// gradients of sum(out * w) against "<name>.grad<i>".
void check_case(const std::string& name, const CaseFn& fn) {
  INFO("golden case " << name);
  REQUIRE_MESSAGE(stored(name + ".out"), name << " is missing from select.safetensors");
  Inputs in;
  for (int i = 0; stored(name + ".in" + std::to_string(i)); ++i) {
    Tensor x = fixture().at(name + ".in" + std::to_string(i)).clone();
    if (x.dtype() == DType::Float32) x.requires_grad_(true);
    in.push_back(x);
  }
  const Tensor out = fn(in);
  const Tensor& expected = fixture().at(name + ".out");
  REQUIRE(out.dtype() == expected.dtype());
  REQUIRE(out.shape() == expected.shape());
  if (out.dtype() == DType::Int64)
    CHECK(out.to_vector_i64() == expected.to_vector_i64());
  else
    testing::check_close(out, expected, 1e-6f, 1e-7f, name + " output");
  if (!stored(name + ".w")) return;
  sum(out * fixture().at(name + ".w")).backward();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype() != DType::Float32) continue;
    const Tensor grad = in[i].grad().defined() ? in[i].grad() : zeros_like(in[i]);
    testing::check_close(grad, fixture().at(name + ".grad" + std::to_string(i)), 1e-5f, 1e-6f,
                         name + " gradient of input " + std::to_string(i));
  }
}

// topk's or sort's two results as the two cases "<name>" (values) and "<name>_indices".
void add_pair(std::map<std::string, CaseFn>& cases, const std::string& name,
              const std::function<ValuesIndices(const Tensor&)>& fn) {
  cases[name] = [fn](const Inputs& x) { return fn(x[0]).values; };
  cases[name + "_indices"] = [fn](const Inputs& x) { return fn(x[0]).indices; };
}

std::map<std::string, CaseFn> sorting() {
  std::map<std::string, CaseFn> c;
  add_pair(c, "topk_last", [](const Tensor& x) { return topk(x, 3); });
  add_pair(c, "topk_smallest_dim0", [](const Tensor& x) { return topk(x, 2, 0, false); });
  add_pair(c, "topk_transposed", [](const Tensor& x) { return x.t().topk(2, 1); });
  add_pair(c, "topk_middle_dim", [](const Tensor& x) { return topk(x, 2, 1); });
  add_pair(c, "topk_k_is_n", [](const Tensor& x) { return topk(x, 5, -1, false); });
  c["topk_ties_values"] = [](const Inputs& x) { return topk(x[0].detach(), 4).values; };
  add_pair(c, "sort_ties", [](const Tensor& x) { return sort(x); });
  add_pair(c, "sort_descending_dim0", [](const Tensor& x) { return sort(x, 0, true); });
  add_pair(c, "sort_transposed", [](const Tensor& x) { return sort(x.t(), 1); });
  add_pair(c, "sort_method_3d", [](const Tensor& x) { return x.sort(1, true); });
  c["argsort_descending"] = [](const Inputs& x) { return argsort(x[0], 1, true); };
  c["argsort_dim0"] = [](const Inputs& x) { return x[0].argsort(0); };
  c["sort_specials_indices"] = [](const Inputs& x) { return sort(x[0].detach()).indices; };
  c["sort_specials_descending_indices"] = [](const Inputs& x) {
    return sort(x[0].detach(), -1, true).indices;
  };
  c["topk_specials_indices"] = [](const Inputs& x) { return topk(x[0].detach(), 3).indices; };
  return c;
}

std::map<std::string, CaseFn> extrema() {
  return {
      {"amax_dims_0_2", [](const Inputs& x) { return amax(x[0], {0, 2}); }},
      {"amax_ties_keepdim", [](const Inputs& x) { return amax(x[0], {1}, true); }},
      {"amax_all", [](const Inputs& x) { return x[0].amax(); }},
      {"amin_neg_dim", [](const Inputs& x) { return amin(x[0], {-1}); }},
      {"amin_transposed", [](const Inputs& x) { return x[0].t().amin({0, 1}, true); }},
      {"min_all_ties", [](const Inputs& x) { return min(x[0]); }},
  };
}

std::map<std::string, CaseFn> scatters() {
  return {
      {"scatter_src_dim0", [](const Inputs& x) { return scatter(x[0], 0, x[1], x[2]); }},
      {"scatter_index_smaller_than_x",
       [](const Inputs& x) { return scatter(x[0], 1, x[1], x[2]); }},
      {"scatter_value", [](const Inputs& x) { return scatter(x[0], 1, x[1], 2.5f); }},
      {"scatter_method_transposed",
       [](const Inputs& x) { return x[0].t().scatter(0, x[1], x[2]); }},
      {"scatter_int64", [](const Inputs& x) { return scatter(x[0], 1, x[1], x[2]); }},
      {"one_hot", [](const Inputs& x) { return one_hot(x[0]); }},
      {"one_hot_num_classes", [](const Inputs& x) { return one_hot(x[0], 6); }},
      {"gather_method", [](const Inputs& x) { return x[0].gather(1, x[1]); }},
      {"index_select_method", [](const Inputs& x) { return x[0].index_select(1, x[1]); }},
      {"scatter_add_method", [](const Inputs& x) { return x[0].scatter_add(0, x[1], x[2]); }},
  };
}

void check_family(const std::map<std::string, CaseFn>& cases) {
  for (const auto& [name, fn] : cases) check_case(name, fn);
}

}  // namespace

TEST_CASE("golden select: topk, sort and argsort (ties, NaN, dims, strided inputs)") {
  check_family(sorting());
}

TEST_CASE("golden select: amax, amin and min (ties share the gradient)") {
  check_family(extrema());
}

TEST_CASE("golden select: scatter, one_hot and the index ops' methods") {
  check_family(scatters());
}

TEST_CASE("golden select: every fixture case has a lambda and every lambda a case") {
  std::set<std::string> ours;
  for (const auto& family : {sorting(), extrema(), scatters()})
    for (const auto& [name, fn] : family) ours.insert(name);
  std::set<std::string> theirs;
  for (const auto& [key, t] : fixture()) theirs.insert(key.substr(0, key.find('.')));
  CHECK(ours == theirs);
}
