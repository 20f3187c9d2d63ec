// The reductions, elementwise functions and linear algebra of the PyTorch-style API against
// PyTorch: tests/golden/gen_reduce_elementwise.py stores, per case, the inputs, the output and
// the gradients of sum(output * w), computed in float64 (the layout of gen_ops.py). Each lambda
// below mirrors its Python line, and the last test checks that no fixture case goes without one.
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;

namespace {

using Inputs = std::vector<Tensor>;
using Case = std::pair<std::string, std::function<Tensor(const Inputs&)>>;

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(LOOM_TEST_DATA "/reduce_elementwise.safetensors");
  return tensors;
}

bool has(const std::string& key) { return fixture().count(key) > 0; }

// One case: fresh leaf inputs (float ones require grad when the case stores gradients), the
// output against "<case>.out", then the gradients of sum(out * w) against "<case>.grad<i>". An
// op with a zero derivative (floor) leaves the graph: its gradients are then zeros.
void run_case(const Case& c, float rtol, float atol) {
  const std::string& name = c.first;
  INFO("golden case " << name);
  REQUIRE_MESSAGE(has(name + ".out"), name << " is missing from reduce_elementwise.safetensors");
  const bool differentiable = has(name + ".w");
  Inputs inputs;
  for (int i = 0; has(name + ".in" + std::to_string(i)); ++i) {
    Tensor x = fixture().at(name + ".in" + std::to_string(i)).clone();
    if (x.dtype() == DType::Float32 && differentiable) x.requires_grad_(true);
    inputs.push_back(x);
  }
  const Tensor out = c.second(inputs);
  testing::check_close(out, fixture().at(name + ".out"), rtol, atol, name + " output");
  if (!differentiable) return;
  const Tensor loss = sum(out * fixture().at(name + ".w"));
  if (loss.requires_grad()) loss.backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string key = name + ".grad" + std::to_string(i);
    const Tensor grad = inputs[i].grad().defined() ? inputs[i].grad() : zeros_like(inputs[i]);
    testing::check_close(grad, fixture().at(key), rtol, atol, key);
  }
}

// ------------------------------------------------------------------------------ families
// Each mirrors the Python function of the same name.

std::vector<Case> elementwise() {
  return {
      {"neg", [](const Inputs& x) { return neg(x[0]); }},
      {"reciprocal", [](const Inputs& x) { return reciprocal(x[0]); }},
      {"square", [](const Inputs& x) { return x[0].square(); }},
      {"log1p", [](const Inputs& x) { return log1p(x[0]); }},
      {"expm1", [](const Inputs& x) { return x[0].expm1(); }},
      {"log2", [](const Inputs& x) { return log2(x[0]); }},
      {"exp2", [](const Inputs& x) { return exp2(x[0]); }},
      {"erf", [](const Inputs& x) { return x[0].erf(); }},
      {"floor", [](const Inputs& x) { return floor(x[0]); }},
      {"ceil", [](const Inputs& x) { return x[0].ceil(); }},
      {"round", [](const Inputs& x) { return round(x[0]); }},
      {"trunc", [](const Inputs& x) { return x[0].trunc(); }},
      {"silu", [](const Inputs& x) { return silu(x[0]); }},
      {"silu_transposed", [](const Inputs& x) { return x[0].t().silu(); }},
      {"softplus", [](const Inputs& x) { return softplus(x[0]); }},
      {"softplus_beta_threshold", [](const Inputs& x) { return x[0].softplus(2.0f, 5.0f); }},
      {"leaky_relu", [](const Inputs& x) { return leaky_relu(x[0]); }},
      {"leaky_relu_slope", [](const Inputs& x) { return x[0].leaky_relu(0.2f); }},
      {"elu", [](const Inputs& x) { return elu(x[0]); }},
      {"elu_alpha", [](const Inputs& x) { return x[0].elu(0.5f); }},
      {"mish", [](const Inputs& x) { return mish(x[0]); }},
      {"hardswish", [](const Inputs& x) { return x[0].hardswish(); }},
      {"logit", [](const Inputs& x) { return logit(x[0]); }},
      {"logit_eps", [](const Inputs& x) { return x[0].logit(0.2f); }},
      {"relu6", [](const Inputs& x) { return relu6(x[0]); }},
      {"clamp_max_only", [](const Inputs& x) { return clamp(x[0], std::nullopt, 0.5f); }},
      {"clamp_min_only", [](const Inputs& x) { return x[0].clamp(-0.5f, std::nullopt); }},
      {"clamp_min", [](const Inputs& x) { return clamp_min(x[0], 0.25f); }},
      {"clamp_max", [](const Inputs& x) { return x[0].clamp_max(-0.25f); }},
      {"abs_method", [](const Inputs& x) { return x[0].abs(); }},
      {"sigmoid_method", [](const Inputs& x) { return x[0].sigmoid(); }},
  };
}

std::vector<Case> reductions() {
  return {
      {"sum_dims",
       [](const Inputs& x) {
         return sum(x[0], {0, 2});
       }},
      {"sum_dims_keepdim",
       [](const Inputs& x) {
         return x[0].sum({0, 2}, true);
       }},
      {"sum_dims_negative",
       [](const Inputs& x) {
         return sum(x[0], {-1, -2});
       }},
      {"sum_dims_transposed",
       [](const Inputs& x) {
         return sum(x[0].transpose(0, 2), {0, 1});
       }},
      {"mean_dims",
       [](const Inputs& x) {
         return mean(x[0], {0, 2});
       }},
      {"mean_dims_keepdim",
       [](const Inputs& x) {
         return x[0].mean({1, 2}, true);
       }},
      {"prod_all", [](const Inputs& x) { return prod(x[0]); }},
      {"prod_dim", [](const Inputs& x) { return prod(x[0], 1); }},
      {"prod_dim_keepdim", [](const Inputs& x) { return x[0].prod(0, true); }},
      {"prod_one_zero", [](const Inputs& x) { return prod(x[0], 1); }},
      {"prod_two_zeros", [](const Inputs& x) { return prod(x[0], 1); }},
      {"prod_all_one_zero", [](const Inputs& x) { return x[0].prod(); }},
      {"var_dims",
       [](const Inputs& x) {
         return var(x[0], {0, 2});
       }},
      {"var_dims_correction0_keepdim",
       [](const Inputs& x) {
         return var(x[0], {1, 2}, 0, true);
       }},
      {"var_dim_correction2", [](const Inputs& x) { return x[0].var(Shape{1}, 2); }},
      {"std_dims",
       [](const Inputs& x) {
         return loom::std(x[0], {0, 2});
       }},
      {"std_dim", [](const Inputs& x) { return x[0].std(1, false, true); }},
      {"std_constant_row", [](const Inputs& x) { return loom::std(x[0], 1); }},
      {"logsumexp_dim", [](const Inputs& x) { return logsumexp(x[0], 1); }},
      {"logsumexp_dims_keepdim",
       [](const Inputs& x) {
         return x[0].logsumexp({0, 2}, true);
       }},
      {"logsumexp_transposed", [](const Inputs& x) { return logsumexp(x[0].t(), 0); }},
      {"logsumexp_neg_inf_row", [](const Inputs& x) { return logsumexp(x[0], 1); }},
      {"norm_2", [](const Inputs& x) { return norm(x[0]); }},
      {"norm_2_dim", [](const Inputs& x) { return norm(x[0], 2, 1); }},
      {"norm_2_zero_row", [](const Inputs& x) { return x[0].norm(2, 1); }},
      {"norm_1_dims",
       [](const Inputs& x) {
         return norm(x[0], 1, {0, 2});
       }},
      {"norm_inf", [](const Inputs& x) { return norm(x[0], INFINITY, 1); }},
      {"norm_inf_ties", [](const Inputs& x) { return norm(x[0], INFINITY, 1); }},
      {"norm_neg_inf", [](const Inputs& x) { return x[0].norm(-INFINITY, 1, true); }},
      {"norm_0", [](const Inputs& x) { return norm(x[0], 0, 1); }},
      {"norm_3_dims",
       [](const Inputs& x) {
         return norm(x[0], 3, {0, 1});
       }},
      {"norm_half", [](const Inputs& x) { return norm(x[0], 0.5f, 1); }},
      {"norm_1_5_zero_row", [](const Inputs& x) { return norm(x[0], 1.5f, 1); }},
      {"cumsum_0", [](const Inputs& x) { return cumsum(x[0], 0); }},
      {"cumsum_1", [](const Inputs& x) { return x[0].cumsum(1); }},
      {"cumsum_transposed", [](const Inputs& x) { return cumsum(x[0].t(), -1); }},
      {"cumsum_3d_middle", [](const Inputs& x) { return cumsum(x[0], 1); }},
      {"cumprod_1", [](const Inputs& x) { return cumprod(x[0], 1); }},
      {"cumprod_0", [](const Inputs& x) { return x[0].cumprod(0); }},
      {"cumprod_zeros", [](const Inputs& x) { return cumprod(x[0], 1); }},
      {"cumprod_zeros_dim0", [](const Inputs& x) { return cumprod(x[0], 0); }},
  };
}

std::vector<Case> linear_algebra() {
  return {
      {"einsum_matmul",
       [](const Inputs& x) {
         return einsum("ij,jk->ik", {x[0], x[1]});
       }},
      {"einsum_abt",
       [](const Inputs& x) {
         return einsum("ij,kj->ik", {x[0], x[1]});
       }},
      {"einsum_colsum", [](const Inputs& x) { return einsum("ij->j", {x[0]}); }},
      {"einsum_sum_all", [](const Inputs& x) { return einsum("ij->", {x[0]}); }},
      {"einsum_diagonal", [](const Inputs& x) { return einsum("ii->i", {x[0]}); }},
      {"einsum_trace", [](const Inputs& x) { return einsum("ii", {x[0]}); }},
      {"einsum_attention",
       [](const Inputs& x) {
         return einsum("bhqd,bhkd->bhqk", {x[0], x[1]});
       }},
      {"einsum_ellipsis_broadcast",
       [](const Inputs& x) {
         return einsum("...ij,...jk->...ik", {x[0], x[1]});
       }},
      {"einsum_outer",
       [](const Inputs& x) {
         return einsum("i,j->ij", {x[0], x[1]});
       }},
      {"einsum_dot",
       [](const Inputs& x) {
         return einsum("ij,ij->", {x[0], x[1]});
       }},
      {"einsum_implicit",
       [](const Inputs& x) {
         return einsum("kj,ji", {x[0], x[1]});
       }},
      {"einsum_implicit_upper",
       [](const Inputs& x) {
         return einsum("bA,Ab", {x[0], x[1]});
       }},
      {"einsum_three",
       [](const Inputs& x) {
         return einsum("ij,jk,kl->il", {x[0], x[1], x[2]});
       }},
      {"einsum_hadamard",
       [](const Inputs& x) {
         return einsum("i,i->i", {x[0], x[1]});
       }},
      {"einsum_permute", [](const Inputs& x) { return einsum("abc->cba", {x[0]}); }},
      {"einsum_diag_batch",
       [](const Inputs& x) {
         return einsum("iij,jk->ki", {x[0], x[1]});
       }},
      {"einsum_bilinear",
       [](const Inputs& x) {
         return einsum("bi,oij,bj->bo", {x[0], x[1], x[2]});
       }},
      {"einsum_transposed_operand",
       [](const Inputs& x) {
         return einsum("ij,jk->ik", {x[0].t(), x[1]});
       }},
      {"outer", [](const Inputs& x) { return outer(x[0], x[1]); }},
      {"bmm", [](const Inputs& x) { return x[0].bmm(x[1]); }},
      {"baddbmm", [](const Inputs& x) { return baddbmm(x[0], x[1], x[2], 0.5f, 2.0f); }},
      {"baddbmm_broadcast", [](const Inputs& x) { return x[0].baddbmm(x[1], x[2]); }},
      {"addmm", [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }},
      {"addmm_beta0", [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.0f, 0.5f); }},
      {"addmm_broadcast", [](const Inputs& x) { return x[0].addmm(x[1], x[2], 2.0f); }},
      {"einsum_ellipsis_summed",
       [](const Inputs& x) { return einsum("...ij,jk->ik", {x[0], x[1]}); }},
  };
}

}  // namespace

TEST_CASE("golden: elementwise functions of the unary table and clamp's forms match PyTorch") {
  for (const Case& c : elementwise()) run_case(c, 1e-5f, 1e-6f);
}

TEST_CASE("golden: reductions over dims, prod, var/std, logsumexp, norm, cumsum/cumprod") {
  for (const Case& c : reductions()) run_case(c, 1e-4f, 1e-5f);
}

TEST_CASE("golden: einsum, outer, bmm, baddbmm and addmm match PyTorch") {
  for (const Case& c : linear_algebra()) run_case(c, 1e-4f, 1e-5f);
}

TEST_CASE("golden: every case of reduce_elementwise.safetensors has a lambda") {
  std::set<std::string> covered;
  for (const auto& family : {elementwise(), reductions(), linear_algebra()})
    for (const Case& c : family) covered.insert(c.first);
  for (const auto& [key, value] : fixture()) {
    const std::string name = key.substr(0, key.find('.'));
    CHECK_MESSAGE(covered.count(name) == 1, "fixture case " << name << " has no lambda");
  }
}
