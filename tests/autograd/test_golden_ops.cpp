// Every op of autograd/ops.h against PyTorch: tests/golden/gen_ops.py stores, per case, the
// inputs, the output and the gradients of sum(output * w) for a random w, computed by PyTorch in
// float64. Each case below rebuilds the same computation with loom ops (the lambda mirrors the
// Python function line by line, including the transposes that make inputs non-contiguous) and
// compares output and gradients. A final test checks that every case in the fixture has a
// lambda here and vice versa, so no case is silently skipped.
#include <cmath>
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

struct GoldenCase {
  std::string name;
  std::function<Tensor(const Inputs&)> fn;
};

// Tolerances against the float64 reference. Elementwise ops and views are off by a rounding or
// two; reductions, matmul, softmax and the fused nn functions accumulate many terms in float32.
struct Tolerance {
  float rtol, atol;
};
constexpr Tolerance kElementwise{1e-5f, 1e-6f};
constexpr Tolerance kAccumulating{1e-4f, 1e-5f};

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(LOOM_TEST_DATA "/ops.safetensors");
  return tensors;
}

bool has(const std::string& key) { return fixture().count(key) > 0; }

// Runs one case: fresh leaf inputs (float ones require grad), output vs "<case>.out", then
// backward of sum(out * w) and each input's gradient vs "<case>.grad<i>".
void run_case(const GoldenCase& c, Tolerance tol) {
  INFO("golden case " << c.name);
  if (!has(c.name + ".out")) {
    FAIL_CHECK("case " << c.name << " is missing from ops.safetensors");
    return;
  }
  Inputs inputs;
  for (int i = 0; has(c.name + ".in" + std::to_string(i)); ++i) {
    Tensor x = fixture().at(c.name + ".in" + std::to_string(i)).clone();
    if (x.dtype() == DType::Float32) x.requires_grad_(true);
    inputs.push_back(x);
  }
  REQUIRE(!inputs.empty());

  const Tensor out = c.fn(inputs);
  const Tensor& expected = fixture().at(c.name + ".out");
  // Comparisons give Bool; the fixture stores their masks as float32 1/0 (gen_ops.py).
  const bool mask = out.dtype() == DType::Bool && !has(c.name + ".w");
  CHECK(out.dtype() == (mask ? DType::Bool : expected.dtype()));
  testing::check_close(out, expected, tol.rtol, tol.atol, c.name + " output");

  if (!has(c.name + ".w")) {
    // Comparisons and arg-reductions are never differentiable.
    CHECK_MESSAGE(!out.requires_grad(), c.name << ": output should not require grad");
    return;
  }
  const Tensor loss = sum(out * fixture().at(c.name + ".w"));
  // An op with an identically zero derivative (sign) may leave the graph: then every gradient
  // must be zero, which is what an absent .grad() stands for below.
  if (loss.requires_grad()) loss.backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string key = c.name + ".grad" + std::to_string(i);
    if (inputs[i].dtype() != DType::Float32) {
      CHECK_MESSAGE(!has(key), key << " stored for an integer input");
      continue;
    }
    REQUIRE_MESSAGE(has(key), key << " missing from ops.safetensors");
    const Tensor grad = inputs[i].grad().defined() ? inputs[i].grad() : zeros_like(inputs[i]);
    testing::check_close(grad, fixture().at(key), tol.rtol, tol.atol, key);
  }
}

void run_family(const std::vector<GoldenCase>& cases, Tolerance tol) {
  for (const auto& c : cases) run_case(c, tol);
}

// ------------------------------------------------------------------------------ families
// Each mirrors the Python function of the same name in tests/golden/gen_ops.py.

std::vector<GoldenCase> elementwise_binary() {
  return {
      {"add_same", [](const Inputs& x) { return x[0] + x[1]; }},
      {"add_broadcast", [](const Inputs& x) { return add(x[0], x[1]); }},   // [2,3,4] + [3,1]
      {"add_0d", [](const Inputs& x) { return x[0] + x[1]; }},              // [2,3] + []
      {"add_transposed", [](const Inputs& x) { return x[0].t() + x[1]; }},  // [4,3]^T + [3,4]
      {"sub_broadcast", [](const Inputs& x) { return sub(x[0], x[1]); }},   // [4,1] - [1,5]
      {"sub_same", [](const Inputs& x) { return x[0] - x[1]; }},
      {"mul_broadcast", [](const Inputs& x) { return mul(x[0], x[1]); }},  // [2,1,4] * [3,1]
      {"mul_self", [](const Inputs& x) { return x[0] * x[0]; }},
      {"div_broadcast", [](const Inputs& x) { return x[0] / x[1]; }},  // [3,4] / [4]
      {"div_same", [](const Inputs& x) { return div(x[0], x[1]); }},
      {"pow_tensor", [](const Inputs& x) { return pow(x[0], x[1]); }},
      {"pow_tensor_broadcast", [](const Inputs& x) { return pow(x[0], x[1]); }},  // [2,3], [3]
      {"maximum", [](const Inputs& x) { return maximum(x[0], x[1]); }},
      {"minimum_broadcast", [](const Inputs& x) { return minimum(x[0], x[1]); }},  // [3,4], [4]
  };
}

std::vector<GoldenCase> elementwise_scalar() {
  return {
      {"scalar_add", [](const Inputs& x) { return x[0] + 1.5f; }},
      {"scalar_radd", [](const Inputs& x) { return 1.5f + x[0]; }},
      {"scalar_sub", [](const Inputs& x) { return x[0] - 0.75f; }},
      {"scalar_rsub", [](const Inputs& x) { return 0.75f - x[0]; }},
      {"scalar_mul", [](const Inputs& x) { return x[0] * -2.0f; }},
      {"scalar_rmul", [](const Inputs& x) { return 3.0f * x[0]; }},
      {"scalar_div", [](const Inputs& x) { return x[0] / 4.0f; }},
      {"scalar_rdiv", [](const Inputs& x) { return 2.0f / x[0]; }},
      {"neg", [](const Inputs& x) { return -x[0]; }},
      {"pow_3", [](const Inputs& x) { return pow(x[0], 3.0f); }},
      {"pow_2_negative_base", [](const Inputs& x) { return pow(x[0], 2.0f); }},
      {"pow_half", [](const Inputs& x) { return pow(x[0], 0.5f); }},
      {"pow_minus_1_5", [](const Inputs& x) { return pow(x[0], -1.5f); }},
  };
}

std::vector<GoldenCase> elementwise_unary() {
  return {
      {"exp", [](const Inputs& x) { return exp(x[0]); }},
      {"exp_transposed", [](const Inputs& x) { return exp(x[0].t()); }},  // [4,3]^T
      {"log", [](const Inputs& x) { return log(x[0]); }},
      {"sqrt", [](const Inputs& x) { return sqrt(x[0]); }},
      {"rsqrt", [](const Inputs& x) { return rsqrt(x[0]); }},
      {"tanh", [](const Inputs& x) { return tanh(x[0]); }},
      {"sigmoid", [](const Inputs& x) { return sigmoid(x[0]); }},
      {"relu", [](const Inputs& x) { return relu(x[0]); }},
      {"gelu", [](const Inputs& x) { return gelu(x[0]); }},
      {"gelu_tanh", [](const Inputs& x) { return gelu_tanh(x[0]); }},
      {"abs", [](const Inputs& x) { return abs(x[0]); }},
      {"sin", [](const Inputs& x) { return sin(x[0]); }},
      {"cos", [](const Inputs& x) { return cos(x[0]); }},
      {"sign", [](const Inputs& x) { return sign(x[0]); }},
      {"clamp", [](const Inputs& x) { return clamp(x[0], -0.5f, 0.8f); }},
  };
}

std::vector<GoldenCase> comparison() {
  return {
      {"eq", [](const Inputs& x) { return eq(x[0], x[1]); }},
      {"ne_broadcast", [](const Inputs& x) { return ne(x[0], x[1]); }},  // [3,4], [4]
      {"lt", [](const Inputs& x) { return lt(x[0], x[1]); }},
      {"le_broadcast", [](const Inputs& x) { return le(x[0], x[1]); }},  // [2,3,1], [3,4]
      {"gt", [](const Inputs& x) { return gt(x[0], x[1]); }},
      {"ge", [](const Inputs& x) { return ge(x[0], x[1]); }},
      {"eq_scalar", [](const Inputs& x) { return eq(x[0], 0.5f); }},
      {"lt_scalar", [](const Inputs& x) { return lt(x[0], 0.0f); }},
      {"gt_scalar", [](const Inputs& x) { return gt(x[0], -0.5f); }},
  };
}

std::vector<GoldenCase> selection() {
  return {
      {"where", [](const Inputs& x) { return where(x[0], x[1], x[2]); }},
      {"where_broadcast",
       [](const Inputs& x) { return where(x[0], x[1], x[2]); }},  // [3,1],[3,4],[4]
      {"masked_fill", [](const Inputs& x) { return masked_fill(x[0], x[1], -2.5f); }},
      {"masked_fill_broadcast",
       [](const Inputs& x) { return masked_fill(x[0], x[1], 7.0f); }},  // [2,3,4], mask [3,1]
      {"masked_fill_neg_inf", [](const Inputs& x) { return masked_fill(x[0], x[1], -INFINITY); }},
  };
}

std::vector<GoldenCase> reduction() {
  return {
      {"sum_all", [](const Inputs& x) { return sum(x[0]); }},
      {"sum_dim0", [](const Inputs& x) { return sum(x[0], 0); }},
      {"sum_dim1_3d", [](const Inputs& x) { return sum(x[0], 1); }},
      {"sum_neg_dim_keepdim", [](const Inputs& x) { return sum(x[0], -1, true); }},
      {"mean_all", [](const Inputs& x) { return mean(x[0]); }},
      {"mean_dim1", [](const Inputs& x) { return mean(x[0], 1); }},
      {"mean_dim0_keepdim", [](const Inputs& x) { return mean(x[0], 0, true); }},
      {"max_all", [](const Inputs& x) { return max(x[0]); }},
      {"max_dim1", [](const Inputs& x) { return max(x[0], 1); }},
      {"max_dim0_keepdim", [](const Inputs& x) { return max(x[0], 0, true); }},
      {"min_neg_dim", [](const Inputs& x) { return min(x[0], -1); }},
      {"min_dim1_keepdim", [](const Inputs& x) { return min(x[0], 1, true); }},
      {"argmax_dim1", [](const Inputs& x) { return argmax(x[0], 1); }},
      {"argmax_dim0_keepdim", [](const Inputs& x) { return argmax(x[0], 0, true); }},
      {"argmin_neg_dim", [](const Inputs& x) { return argmin(x[0], -1); }},
      {"var_unbiased", [](const Inputs& x) { return var(x[0], 1); }},
      {"var_biased_keepdim", [](const Inputs& x) { return var(x[0], 0, false, true); }},
      {"var_neg_dim_3d", [](const Inputs& x) { return var(x[0], -1); }},
      {"sum_to_3x1",
       [](const Inputs& x) {
         return sum_to(x[0], {3, 1});
       }},                                                              // [2,3,4] -> [3,1]
      {"sum_to_4", [](const Inputs& x) { return sum_to(x[0], {4}); }},  // [2,3,4] -> [4]
      {"sum_to_same",
       [](const Inputs& x) {
         return sum_to(x[0], {2, 3});
       }},
  };
}

std::vector<GoldenCase> softmax_family() {
  return {
      {"softmax_last", [](const Inputs& x) { return softmax(x[0], -1); }},
      {"softmax_dim0", [](const Inputs& x) { return softmax(x[0], 0); }},
      {"softmax_middle", [](const Inputs& x) { return softmax(x[0], 1); }},
      {"softmax_large_values", [](const Inputs& x) { return softmax(x[0], -1); }},
      {"softmax_transposed", [](const Inputs& x) { return softmax(x[0].t(), -1); }},  // [5,3]^T
      {"log_softmax_last", [](const Inputs& x) { return log_softmax(x[0], -1); }},
      {"log_softmax_dim0", [](const Inputs& x) { return log_softmax(x[0], 0); }},
      {"log_softmax_middle", [](const Inputs& x) { return log_softmax(x[0], 1); }},
      {"log_softmax_large_values", [](const Inputs& x) { return log_softmax(x[0], -1); }},
  };
}

std::vector<GoldenCase> matmul_family() {
  auto plain = [](const Inputs& x) { return matmul(x[0], x[1]); };
  return {
      {"matmul_1d_1d", plain},                  // [4] . [4] -> []
      {"matmul_1d_2d", plain},                  // [4] @ [4,3] -> [3]
      {"matmul_2d_1d", plain},                  // [3,4] @ [4] -> [3]
      {"matmul_2d_2d", plain},                  // [3,4] @ [4,5] -> [3,5]
      {"matmul_3d_3d", plain},                  // [2,3,4] @ [2,4,5] -> [2,3,5]
      {"matmul_3d_2d", plain},                  // [2,3,4] @ [4,5] -> [2,3,5]
      {"matmul_2d_3d", plain},                  // [3,4] @ [2,4,5] -> [2,3,5]
      {"matmul_1d_3d", plain},                  // [4] @ [2,4,5] -> [2,5]
      {"matmul_3d_1d", plain},                  // [2,3,4] @ [4] -> [2,3]
      {"matmul_broadcast_batch", plain},        // [2,1,3,4] @ [1,3,4,5] -> [2,3,3,5]
      {"matmul_broadcast_batch_4d_3d", plain},  // [2,2,3,4] @ [2,4,5] -> [2,2,3,5]
      {"matmul_transposed_a", [](const Inputs& x) { return matmul(x[0].t(), x[1]); }},
      {"matmul_transposed_b", [](const Inputs& x) { return matmul(x[0], x[1].t()); }},
      {"matmul_transposed_both", [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); }},
      {"matmul_batched_transposed",  // [2,4,3]^T(1,2) @ [2,5,4]^T(-2,-1) -> [2,3,5]
       [](const Inputs& x) { return matmul(x[0].transpose(1, 2), x[1].transpose(-2, -1)); }},
      {"matmul_permuted",  // [3,2,4] -> [2,3,4], @ [4,5]
       [](const Inputs& x) {
         return matmul(x[0].permute({1, 0, 2}), x[1]);
       }},
      {"matmul_expanded_batch",  // [3,2,4] @ ([4,5] -> [3,4,5] with batch stride 0)
       [](const Inputs& x) {
         return matmul(x[0], x[1].unsqueeze(0).expand({3, 4, 5}));
       }},
      {"matmul_narrowed",  // columns 1..4 of [3,6] -> [3,4], @ [4,2]
       [](const Inputs& x) { return matmul(x[0].narrow(1, 1, 4), x[1]); }},
  };
}

std::vector<GoldenCase> views() {
  return {
      {"reshape",
       [](const Inputs& x) {
         return x[0].reshape({6, 4});
       }},
      {"reshape_infer_then_sum",
       [](const Inputs& x) {
         return x[0].reshape({-1, 2}).sum(0);
       }},
      {"reshape_of_transposed", [](const Inputs& x) { return x[0].t().reshape({12}); }},
      {"view_then_mean",
       [](const Inputs& x) {
         return x[0].view({4, 6}).mean(1);
       }},
      {"transpose_then_sum", [](const Inputs& x) { return x[0].transpose(0, 2).sum(1); }},
      {"permute",
       [](const Inputs& x) {
         return x[0].permute({2, 0, 1});
       }},  // [2,3,4] -> [4,2,3]
      {"permute_then_sum",
       [](const Inputs& x) {
         return x[0].permute({2, 0, 1}).sum(1);
       }},
      {"permute_then_softmax",
       [](const Inputs& x) {
         return softmax(x[0].permute({1, 2, 0}), -1);
       }},  // -> [3,4,2]
      {"narrow", [](const Inputs& x) { return x[0].narrow(1, 1, 3); }},
      {"narrow_then_mean", [](const Inputs& x) { return x[0].narrow(1, 1, 3).mean(0); }},
      {"select_then_sum", [](const Inputs& x) { return x[0].select(1, 2).sum(-1); }},
      {"select_negative_index", [](const Inputs& x) { return x[0].select(0, -1); }},
      {"expand",
       [](const Inputs& x) {
         return x[0].expand({3, 4});
       }},  // [3,1] -> [3,4]
      {"expand_new_dims_then_sum",
       [](const Inputs& x) {
         return x[0].expand({2, 3, 4}).sum(0);
       }},
      {"squeeze_dim", [](const Inputs& x) { return x[0].squeeze(1); }},
      {"squeeze_all", [](const Inputs& x) { return x[0].squeeze(); }},
      {"unsqueeze_then_mul",
       [](const Inputs& x) { return x[0].unsqueeze(1) * x[1]; }},           // [3,1,4]*[3,2,4]
      {"flatten_from_1", [](const Inputs& x) { return x[0].flatten(1); }},  // [2,3,4] -> [2,12]
      {"flatten_all_then_max", [](const Inputs& x) { return max(x[0].flatten(), 0); }},
      {"flatten_range_of_permuted",  // [2,3,4] -> [3,2,4] -> [6,4]
       [](const Inputs& x) {
         return x[0].permute({1, 0, 2}).flatten(0, 1);
       }},
      {"contiguous_of_transposed", [](const Inputs& x) { return x[0].t().contiguous().mean(0); }},
      {"t_then_matmul", [](const Inputs& x) { return matmul(x[0].t(), x[1]); }},
      {"clone", [](const Inputs& x) { return x[0].clone() * 2.0f; }},
      {"chain_permute_narrow_reshape",  // [2,3,4,5] -> [2,4,3,5] -> [2,4,3,2] -> [2,4,6] -> [2,6]
       [](const Inputs& x) {
         return x[0].permute({0, 2, 1, 3}).narrow(3, 1, 2).reshape({2, 4, 6}).sum(1);
       }},
  };
}

// gen_ops.py's indexing() (the name would clash with the namespace loom::indexing).
std::vector<GoldenCase> index_ops() {
  return {
      {"cat_dim0",
       [](const Inputs& x) {
         return cat({x[0], x[1]}, 0);
       }},
      {"cat_dim1_three",
       [](const Inputs& x) {
         return cat({x[0], x[1], x[2]}, 1);
       }},
      {"cat_neg_dim_3d",
       [](const Inputs& x) {
         return cat({x[0], x[1]}, -1);
       }},
      {"cat_transposed",
       [](const Inputs& x) {
         return cat({x[0].t(), x[1]}, 0);
       }},  // [3,2]^T, [1,3]
      {"stack_dim0",
       [](const Inputs& x) {
         return stack({x[0], x[1], x[2]}, 0);
       }},
      {"stack_dim1",
       [](const Inputs& x) {
         return stack({x[0], x[1]}, 1);
       }},
      {"stack_neg_dim",
       [](const Inputs& x) {
         return stack({x[0], x[1]}, -1);
       }},
      {"index_select_dim0_repeats", [](const Inputs& x) { return index_select(x[0], 0, x[1]); }},
      {"index_select_dim1", [](const Inputs& x) { return index_select(x[0], 1, x[1]); }},
      {"gather_dim1", [](const Inputs& x) { return gather(x[0], 1, x[1]); }},
      {"gather_dim0_repeats", [](const Inputs& x) { return gather(x[0], 0, x[1]); }},
      {"gather_neg_dim_3d", [](const Inputs& x) { return gather(x[0], -1, x[1]); }},
      {"embedding_2d_ids", [](const Inputs& x) { return embedding(x[0], x[1]); }},  // [6,3], [2,4]
      {"embedding_1d_ids", [](const Inputs& x) { return embedding(x[0], x[1]); }},
      {"tril", [](const Inputs& x) { return tril(x[0]); }},
      {"tril_below", [](const Inputs& x) { return tril(x[0], -1); }},
      {"tril_above", [](const Inputs& x) { return tril(x[0], 2); }},
      {"triu_above", [](const Inputs& x) { return triu(x[0], 1); }},
      {"triu_batched", [](const Inputs& x) { return triu(x[0]); }},
  };
}

// index_add and scatter_add (inputs: x, int64 index, src); gradients flow to x and src.
std::vector<GoldenCase> scatter_adds() {
  return {
      {"index_add_dim0_repeats",  // [3,2] += [4,2] at rows [2,0,2,1]
       [](const Inputs& x) { return index_add(x[0], 0, x[1], x[2]); }},
      {"index_add_dim1_3d",  // [2,4,3] += [2,3,3] at dim-1 positions [3,1,3]
       [](const Inputs& x) { return index_add(x[0], 1, x[1], x[2]); }},
      {"index_add_neg_dim_transposed",  // [4,3]^T = [3,4] += [3,3]^T at columns [0,3,0]
       [](const Inputs& x) { return index_add(x[0].t(), -1, x[1], x[2].t()); }},
      {"scatter_add_dim1",  // [3,4] += [3,2] at index [3,2] along dim 1
       [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }},
      {"scatter_add_dim0_repeats",  // [3,4] += [2,4] at index [2,4] along dim 0
       [](const Inputs& x) { return scatter_add(x[0], 0, x[1], x[2]); }},
      {"scatter_add_neg_dim_3d",  // [2,3,4] += [2,3,2] along the last dim
       [](const Inputs& x) { return scatter_add(x[0], -1, x[1], x[2]); }},
      {"scatter_add_transposed",  // [4,3]^T = [3,4] += [4,2]^T = [2,4] along dim 0
       [](const Inputs& x) { return scatter_add(x[0].t(), 0, x[1], x[2].t()); }},
  };
}

// torch.roll, composed of narrow + cat (its gradient is a roll by -shift).
std::vector<GoldenCase> rolls() {
  return {
      {"roll_1d", [](const Inputs& x) { return roll(x[0], 2, 0); }},
      {"roll_neg_shift", [](const Inputs& x) { return roll(x[0], -1, 1); }},
      {"roll_shift_beyond_size", [](const Inputs& x) { return roll(x[0], 9, 1); }},  // [3,4]
      {"roll_neg_shift_beyond_size", [](const Inputs& x) { return roll(x[0], -10, 0); }},
      {"roll_multiple_of_size", [](const Inputs& x) { return roll(x[0], 8, 1); }},  // a copy
      {"roll_neg_dim_3d", [](const Inputs& x) { return roll(x[0], 1, -2); }},
      {"roll_two_dims",
       [](const Inputs& x) {
         return roll(x[0], {1, -2}, {0, 2});
       }},
      {"roll_same_dim_twice",
       [](const Inputs& x) {
         return roll(x[0], {1, 2}, {1, 1});
       }},
      {"roll_swin_cyclic_shift",  // [B,H,W,C] = [2,4,4,3] shifted by -1 along H and W
       [](const Inputs& x) {
         return roll(x[0], {-1, -1}, {1, 2});
       }},
      {"roll_transposed", [](const Inputs& x) { return roll(x[0].t(), 1, 0); }},  // [4,3]^T
      {"roll_method", [](const Inputs& x) { return x[0].roll(-1, 0); }},
  };
}

std::vector<GoldenCase> nn_functions() {
  return {
      {"layer_norm", [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5f); }},
      {"layer_norm_offset_eps",
       [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-3f); }},
      {"cross_entropy", [](const Inputs& x) { return cross_entropy(x[0], x[1]); }},
      {"cross_entropy_ignore_default",
       [](const Inputs& x) { return cross_entropy(x[0], x[1], -100); }},
      {"cross_entropy_ignore_2", [](const Inputs& x) { return cross_entropy(x[0], x[1], 2); }},
      {"cross_entropy_label_smoothing",
       [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, 0.1f); }},
      {"cross_entropy_smoothing_and_ignore",
       [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, 0.2f); }},
      {"cross_entropy_large_logits", [](const Inputs& x) { return cross_entropy(x[0], x[1]); }},
      {"dropout_eval", [](const Inputs& x) { return dropout(x[0], 0.5f, false); }},
      {"dropout_p0_training", [](const Inputs& x) { return dropout(x[0], 0.0f, true); }},
  };
}

std::vector<GoldenCase> tensor_methods() {
  return {
      {"method_sum", [](const Inputs& x) { return x[0].sum(); }},
      {"method_sum_dim", [](const Inputs& x) { return x[0].sum(1, true); }},
      {"method_mean", [](const Inputs& x) { return x[0].mean(); }},
      {"method_mean_dim", [](const Inputs& x) { return x[0].mean(0); }},
      {"method_max_dim", [](const Inputs& x) { return x[0].max(1); }},
      {"method_argmax", [](const Inputs& x) { return x[0].argmax(1, true); }},
      {"method_exp_log_sqrt_abs", [](const Inputs& x) { return x[0].exp().log().abs().sqrt(); }},
      {"method_pow", [](const Inputs& x) { return x[0].pow(2.0f); }},
      {"method_softmax", [](const Inputs& x) { return x[0].softmax(1); }},
      {"method_log_softmax", [](const Inputs& x) { return x[0].log_softmax(0); }},
      {"method_matmul", [](const Inputs& x) { return x[0].matmul(x[1]); }},
      {"method_masked_fill", [](const Inputs& x) { return x[0].masked_fill(x[1], 1.0f); }},
  };
}

// Two-layer MLP classifier, y = W2 relu(W1 x + b1) + b2, with softmax cross-entropy; weights in
// nn.Linear's [out, in] layout. Inputs: x [4,5], W1 [6,5], b1 [6], W2 [3,6], b2 [3], target [4].
Tensor mlp_cross_entropy(const Inputs& x) {
  const Tensor h = relu(matmul(x[0], x[1].t()) + x[2]);    // [4,6]
  return cross_entropy(matmul(h, x[3].t()) + x[4], x[5]);  // logits [4,3] -> []
}

// Scaled dot-product attention with a causal mask (Vaswani et al. 2017, eq. 1):
// softmax(Q K^T / sqrt(d), blocked above the diagonal) V. q, k, v: [B,H,T,D].
Tensor causal_attention(const Inputs& x) {
  const Tensor &q = x[0], &k = x[1], &v = x[2];
  const int64_t t = q.size(-2), d = q.size(-1);
  const Tensor scores =
      matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<float>(d));   // [B,H,T,T]
  const Tensor blocked = triu(ones({t, t}), 1);                            // [T,T]
  return matmul(softmax(masked_fill(scores, blocked, -INFINITY), -1), v);  // [B,H,T,D]
}

// Multi-head self-attention with packed projections and an additive float mask (0 or -inf,
// like PyTorch's attn_mask): x [B,T,C], in_proj [3C,C], out_proj [C,C], 2 heads.
Tensor self_attention(const Inputs& x) {
  const int64_t b = x[0].size(0), t = x[0].size(1), c = x[0].size(2), h = 2;
  Tensor qkv = matmul(x[0], x[1].t());                              // [B,T,3C]
  qkv = qkv.reshape({b, t, 3, h, c / h}).permute({2, 0, 3, 1, 4});  // [3,B,H,T,hd]
  const Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  const Tensor mask = triu(full({t, t}, -INFINITY), 1);  // [T,T]
  const float scale = std::sqrt(static_cast<float>(c / h));
  const Tensor att = softmax(matmul(q, k.transpose(-2, -1)) / scale + mask, -1);  // [B,H,T,T]
  const Tensor y = matmul(att, v).transpose(1, 2).reshape({b, t, c});             // [B,T,C]
  return matmul(y, x[2].t());
}

// Pre-norm transformer MLP sub-block: x + W2 gelu_tanh(W1 LN(x) + b1) + b2.
// Inputs: x [2,3,4], gamma [4], beta [4], W1 [8,4], b1 [8], W2 [4,8], b2 [4].
Tensor prenorm_mlp_block(const Inputs& x) {
  Tensor h = layer_norm(x[0], x[1], x[2], 1e-5f);  // [2,3,4]
  h = gelu_tanh(matmul(h, x[3].t()) + x[4]);       // [2,3,8]
  return x[0] + matmul(h, x[5].t()) + x[6];        // [2,3,4]
}

std::vector<GoldenCase> compositions() {
  return {
      {"mlp_cross_entropy", mlp_cross_entropy},
      {"attention_causal", causal_attention},
      {"self_attention_additive_mask", self_attention},
      {"prenorm_mlp_block", prenorm_mlp_block},
  };
}

// add_layer_norm against PyTorch's x + r followed by layer_norm; bias_gelu and friends against
// the activation of x + b; linear_activation against the activation of F.linear.
std::vector<GoldenCase> fused_functions() {
  return {
      {"add_layer_norm",
       [](const Inputs& x) { return add_layer_norm(x[0], x[1], x[2], x[3], 1e-5f).second; }},
      {"add_layer_norm_both_used",
       [](const Inputs& x) {
         const auto [h, y] = add_layer_norm(x[0], x[1], x[2], x[3], 1e-3f);
         return y * 2.0f + sin(h);
       }},
      {"bias_gelu", [](const Inputs& x) { return bias_gelu(x[0], x[1]); }},
      {"bias_gelu_tanh", [](const Inputs& x) { return bias_gelu_tanh(x[0], x[1]); }},
      {"bias_relu", [](const Inputs& x) { return bias_relu(x[0], x[1]); }},
      {"linear_activation_gelu_tanh",
       [](const Inputs& x) { return linear_activation(x[0], x[1], x[2], UnaryOp::GeluTanh); }},
      {"linear_activation_relu",
       [](const Inputs& x) { return linear_activation(x[0], x[1], x[2], UnaryOp::Relu); }},
      {"linear_activation_gelu_no_bias",
       [](const Inputs& x) { return linear_activation(x[0], x[1], Tensor(), UnaryOp::Gelu); }},
  };
}

// split and chunk: views whose gradients are joined by one cat (an unused piece gives zeros).
std::vector<GoldenCase> splits() {
  return {
      {"split_last_piece_smaller",  // [5,3] in pieces of 2, 2, 1; the middle one unused
       [](const Inputs& x) {
         const std::vector<Tensor> p = split(x[0], 2, 0);
         return cat({sin(p[0]), p[2] * 3.0f}, 0);
       }},
      {"split_sizes_neg_dim",
       [](const Inputs& x) {
         const std::vector<Tensor> p = split(x[0], std::vector<int64_t>{3, 0, 4}, -1);
         return sum(p[0], -1, true) * p[2];
       }},
      {"split_transposed",
       [](const Inputs& x) {
         const std::vector<Tensor> p = split(x[0].t(), 2, 0);  // [3,4]^T in two [2,3]
         return p[0] * p[1];
       }},
      {"chunk_fewer_pieces",  // size 5 in 4 chunks: pieces of 2, 2, 1
       [](const Inputs& x) {
         const std::vector<Tensor> p = chunk(x[0], 4, 1);
         return cat({p[0] * p[1], exp(p[2])}, 1);
       }},
      {"split_method", [](const Inputs& x) { return tanh(x[0].split({1, 2}, 0)[1]); }},
      {"chunk_method", [](const Inputs& x) { return x[0].chunk(2, -1)[0] * 2.0f; }},
      {"split_qkv_attention",  // nanoGPT's: q, k, v from one projection and one split
       [](const Inputs& x) {
         const std::vector<Tensor> qkv = linear(x[0], x[1], x[2]).split(4, -1);
         return matmul(softmax(matmul(qkv[0], qkv[1].transpose(-2, -1)) / 2.0f, -1), qkv[2]);
       }},
  };
}

// add_softmax against PyTorch's softmax(x + bias, -1), the bias broadcast as attention's masks.
std::vector<GoldenCase> fused_softmax() {
  const auto add_softmax_of = [](const Inputs& x) { return add_softmax(x[0], x[1]); };
  return {{"add_softmax_row_bias", add_softmax_of}, {"add_softmax_causal", add_softmax_of},
          {"add_softmax_windows", add_softmax_of},  {"add_softmax_padding", add_softmax_of},
          {"add_softmax_bias_per_row", add_softmax_of}};
}

std::vector<std::vector<GoldenCase>> all_families() {
  return {elementwise_binary(), elementwise_scalar(), elementwise_unary(), comparison(),
          selection(),          reduction(),          softmax_family(),    matmul_family(),
          views(),              index_ops(),          nn_functions(),      tensor_methods(),
          compositions(),       scatter_adds(),       rolls(),             fused_functions(),
          splits(),             fused_softmax()};
}

}  // namespace

TEST_CASE("golden: binary elementwise ops with broadcasting match PyTorch") {
  run_family(elementwise_binary(), kElementwise);
}
TEST_CASE("golden: ops with a float operand match PyTorch") {
  run_family(elementwise_scalar(), kElementwise);
}
TEST_CASE("golden: unary elementwise functions match PyTorch") {
  run_family(elementwise_unary(), kElementwise);
}
TEST_CASE("golden: comparisons give PyTorch's masks and no gradient") {
  run_family(comparison(), kElementwise);
}
TEST_CASE("golden: where and masked_fill match PyTorch") { run_family(selection(), kElementwise); }
TEST_CASE("golden: reductions match PyTorch") { run_family(reduction(), kAccumulating); }
TEST_CASE("golden: softmax and log_softmax match PyTorch") {
  run_family(softmax_family(), kAccumulating);
}
TEST_CASE("golden: matmul in every form matches PyTorch") {
  run_family(matmul_family(), kAccumulating);
}
TEST_CASE("golden: views, then reductions, match PyTorch") { run_family(views(), kAccumulating); }
TEST_CASE("golden: cat, stack, index_select, gather, embedding, tril, triu match PyTorch") {
  run_family(index_ops(), kElementwise);
}
TEST_CASE("golden: index_add and scatter_add, with repeated indices, match PyTorch") {
  run_family(scatter_adds(), kElementwise);
}
TEST_CASE("golden: roll by any shift, along one dim or several, matches PyTorch") {
  run_family(rolls(), kElementwise);
}
TEST_CASE("golden: split and chunk, an unused piece included, match PyTorch") {
  run_family(splits(), kAccumulating);
}
TEST_CASE("golden: layer_norm, cross_entropy and dropout match PyTorch") {
  run_family(nn_functions(), kAccumulating);
}
TEST_CASE("golden: add_layer_norm and bias_gelu match PyTorch's unfused ops") {
  run_family(fused_functions(), kAccumulating);
}
TEST_CASE("golden: add_softmax matches PyTorch's softmax of x + bias") {
  run_family(fused_softmax(), kAccumulating);
}
TEST_CASE("golden: Tensor method forms match PyTorch") {
  run_family(tensor_methods(), kAccumulating);
}
TEST_CASE("golden: MLP and attention compositions match PyTorch") {
  run_family(compositions(), kAccumulating);
}

TEST_CASE("golden: every case in ops.safetensors is checked, and every check has a case") {
  std::set<std::string> in_fixture;
  for (const auto& [key, tensor] : fixture()) {
    const std::string suffix = key.substr(key.rfind('.') + 1);
    const bool known = suffix == "out" || suffix == "w" ||
                       (suffix.rfind("in", 0) == 0 && suffix.size() > 2) ||
                       (suffix.rfind("grad", 0) == 0 && suffix.size() > 4);
    CHECK_MESSAGE(known, "unexpected tensor " << key);
    if (suffix == "out") in_fixture.insert(key.substr(0, key.rfind('.')));
  }
  std::set<std::string> in_tests;
  for (const auto& family : all_families())
    for (const auto& c : family) {
      CHECK_MESSAGE(in_tests.insert(c.name).second, "case " << c.name << " listed twice");
      CHECK_MESSAGE(in_fixture.count(c.name), "case " << c.name << " is not in the fixture");
    }
  for (const auto& name : in_fixture)
    CHECK_MESSAGE(in_tests.count(name), "fixture case " << name << " is not checked by any test");
  // The fixture's own count, so that a truncated fixture cannot pass unnoticed.
  std::map<std::string, std::string> metadata;
  nn::read_safetensors(LOOM_TEST_DATA "/ops.safetensors", &metadata);
  CHECK(std::to_string(in_fixture.size()) == metadata.at("cases"));
  CHECK(in_tests.size() == in_fixture.size());
}
