// loom's dtypes against PyTorch: tests/golden/gen_dtypes.py stores torch.result_type for every
// pair of dtypes and for a tensor with each kind of number, the result dtype of the binary ops
// (or that PyTorch raises), and value cases of int64 arithmetic, rounding division,
// comparisons, logical and bitwise ops, any/all/equal/allclose, casts and where/masked_fill with
// their gradients. Each lambda below mirrors its Python line; the last test checks that no
// fixture case goes without one.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;

namespace {

using Inputs = std::vector<Tensor>;
using Case = std::pair<std::string, std::function<Tensor(const Inputs&)>>;

// The order of gen_dtypes.py's DTYPES.
const std::vector<DType> kDTypes = {DType::Bool, DType::Int64, DType::BFloat16, DType::Float32};

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(LOOM_TEST_DATA "/dtypes.safetensors");
  return tensors;
}

bool has(const std::string& key) { return fixture().count(key) > 0; }

int64_t index_of(DType t) {
  for (size_t i = 0; i < kDTypes.size(); ++i)
    if (kDTypes[i] == t) return static_cast<int64_t>(i);
  return -1;
}

// One case: its inputs in their PyTorch dtypes (the file's BOOL comes back as int64), float ones
// requiring grad when the case stores gradients; the output's dtype and values; then the
// gradients of sum(out * w).
void run_case(const Case& c) {
  const std::string& name = c.first;
  INFO("golden case " << name);
  REQUIRE_MESSAGE(has(name + ".out"), name << " is missing from dtypes.safetensors");
  const bool differentiable = has(name + ".w");
  const std::vector<int64_t> in_dtypes = fixture().at(name + ".in_dtypes").to_vector_i64();
  Inputs inputs;
  for (size_t i = 0; i < in_dtypes.size(); ++i) {
    Tensor x = fixture().at(name + ".in" + std::to_string(i)).to(kDTypes[in_dtypes[i]]).clone();
    if (x.dtype() == DType::Float32 && differentiable) x.requires_grad_(true);
    inputs.push_back(x);
  }
  const Tensor out = c.second(inputs);
  const Tensor expected = fixture().at(name + ".out");
  CHECK_MESSAGE(index_of(out.dtype()) == fixture().at(name + ".out_dtype").item<int64_t>(),
                name << " gives " << dtype_name(out.dtype()));
  if (is_floating_point(out.dtype()))
    testing::check_close(out, expected, 1e-6f, 1e-6f, name + " output");
  else
    CHECK_MESSAGE(out.to_vector_i64() == expected.to_vector_i64(), name << " output");
  if (!differentiable) return;
  sum(out * fixture().at(name + ".w")).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string key = name + ".grad" + std::to_string(i);
    if (!has(key)) continue;
    const Tensor grad = inputs[i].grad().defined() ? inputs[i].grad() : zeros_like(inputs[i]);
    testing::check_close(grad, fixture().at(key), 1e-6f, 1e-6f, key);
  }
}

// The value of a bool test as a 0-d Bool tensor, as the Python side stores torch.tensor(b).
Tensor boolean(bool b) { return full({}, b ? 1.0f : 0.0f, DType::Bool); }

// ------------------------------------------------------------------------------ families
// Each mirrors the Python function of the same name.

std::vector<Case> int64_arithmetic() {
  return {
      {"int_add", [](const Inputs& t) { return t[0] + t[1]; }},
      {"int_sub", [](const Inputs& t) { return t[0] - t[1]; }},
      {"int_mul", [](const Inputs& t) { return t[0] * t[1]; }},
      {"int_maximum", [](const Inputs& t) { return maximum(t[0], t[1]); }},
      {"int_minimum", [](const Inputs& t) { return minimum(t[0], t[1]); }},
      {"int_true_div", [](const Inputs& t) { return t[0] / t[1]; }},
      {"int_div_floor", [](const Inputs& t) { return div(t[0], t[1], "floor"); }},
      {"int_div_trunc", [](const Inputs& t) { return div(t[0], t[1], "trunc"); }},
      {"int_mul_int", [](const Inputs& t) { return t[0] * 3; }},
      {"int_mul_float", [](const Inputs& t) { return t[0] * 2.5; }},
      {"int_div_int", [](const Inputs& t) { return t[0] / 3; }},
      {"int_rsub_int", [](const Inputs& t) { return 7 - t[0]; }},
      {"int_div_floor_scalar", [](const Inputs& t) { return div(t[0], -4, "floor"); }},
      {"int_plus_float_tensor", [](const Inputs& t) { return t[0] + t[1]; }},
      {"bool_plus_int", [](const Inputs& t) { return t[0] + 2; }},
      {"bool_add", [](const Inputs& t) { return t[0] + t[1]; }},
      {"bool_mul", [](const Inputs& t) { return t[0] * t[1]; }},
      {"bool_sum", [](const Inputs& t) { return t[0].sum(); }},
      {"int_sum_dim", [](const Inputs& t) { return t[0].sum(1); }},
  };
}

std::vector<Case> float_rounding_division() {
  return {
      {"float_div_floor", [](const Inputs& t) { return div(t[0], t[1], "floor"); }},
      {"float_div_trunc", [](const Inputs& t) { return t[0].div(t[1], "trunc"); }},
  };
}

std::vector<Case> comparisons() {
  return {
      {"cmp_eq", [](const Inputs& t) { return t[0] == t[1]; }},
      {"cmp_eq_scalar", [](const Inputs& t) { return eq(t[0], 0.5f); }},
      {"cmp_ne", [](const Inputs& t) { return t[0] != t[1]; }},
      {"cmp_ne_scalar", [](const Inputs& t) { return t[0].ne(0.5); }},
      {"cmp_lt", [](const Inputs& t) { return lt(t[0], t[1]); }},
      {"cmp_lt_scalar", [](const Inputs& t) { return t[0] < 0.5f; }},
      {"cmp_le", [](const Inputs& t) { return t[0] <= t[1]; }},
      {"cmp_le_scalar", [](const Inputs& t) { return le(t[0], 0.5f); }},
      {"cmp_gt", [](const Inputs& t) { return t[0].gt(t[1]); }},
      {"cmp_gt_scalar", [](const Inputs& t) { return t[0] > 0.5f; }},
      {"cmp_ge", [](const Inputs& t) { return ge(t[0], t[1]); }},
      {"cmp_ge_scalar", [](const Inputs& t) { return t[0] >= 0.5; }},
      {"cmp_broadcast", [](const Inputs& t) { return t[0] < t[1]; }},
      {"cmp_int_int_scalar", [](const Inputs& t) { return t[0] >= 1; }},
      {"cmp_int_float_scalar", [](const Inputs& t) { return t[0] < 0.5f; }},
      {"cmp_int_float_tensor", [](const Inputs& t) { return t[0] == t[1]; }},
      {"cmp_bool", [](const Inputs& t) { return t[0] < t[1]; }},
      {"cmp_scalar_left", [](const Inputs& t) { return 0.5f < t[0]; }},
  };
}

std::vector<Case> logical_and_bitwise() {
  return {
      {"logical_and", [](const Inputs& t) { return logical_and(t[0], t[1]); }},
      {"logical_or", [](const Inputs& t) { return t[0].logical_or(t[1]); }},
      {"logical_xor", [](const Inputs& t) { return logical_xor(t[0], t[1]); }},
      {"logical_not", [](const Inputs& t) { return logical_not(t[0]); }},
      {"bitwise_and", [](const Inputs& t) { return t[0] & t[1]; }},
      {"bitwise_or", [](const Inputs& t) { return t[0] | t[1]; }},
      {"bitwise_xor", [](const Inputs& t) { return t[0] ^ t[1]; }},
      {"bitwise_not", [](const Inputs& t) { return ~t[0]; }},
      {"bool_and", [](const Inputs& t) { return t[0] & t[1]; }},
      {"bool_or", [](const Inputs& t) { return t[0] | t[1]; }},
      {"bool_xor", [](const Inputs& t) { return t[0] ^ t[1]; }},
      {"bool_not", [](const Inputs& t) { return ~t[0]; }},
      {"bool_int_and", [](const Inputs& t) { return t[0] & t[1]; }},
  };
}

std::vector<Case> tests() {
  return {
      {"any_all", [](const Inputs& t) { return any(t[0]); }},
      {"all_all", [](const Inputs& t) { return t[0].all(); }},
      {"any_dim", [](const Inputs& t) { return any(t[0], 1); }},
      {"all_dim_keepdim", [](const Inputs& t) { return all(t[0], 0, true); }},
      {"any_empty", [](const Inputs& t) { return any(t[0]); }},
      {"all_empty", [](const Inputs& t) { return all(t[0]); }},
      {"equal_same", [](const Inputs& t) { return boolean(equal(t[0], t[1])); }},
      {"equal_differs", [](const Inputs& t) { return boolean(t[0].equal(t[1])); }},
      {"allclose_near", [](const Inputs& t) { return boolean(allclose(t[0], t[1], 1e-5, 1e-2)); }},
      {"allclose_far", [](const Inputs& t) { return boolean(allclose(t[0], t[1])); }},
      {"allclose_inf", [](const Inputs& t) { return boolean(t[0].allclose(t[1])); }},
      {"allclose_nan", [](const Inputs& t) { return boolean(allclose(t[0], t[0])); }},
  };
}

std::vector<Case> casts() {
  return {
      {"float_to_int64", [](const Inputs& t) { return t[0].to(DType::Int64); }},
      {"float_to_bool", [](const Inputs& t) { return t[0].to(DType::Bool); }},
      {"bfloat16_to_bool",
       [](const Inputs& t) { return t[0].to(DType::BFloat16).to(DType::Bool); }},
      {"int64_to_float", [](const Inputs& t) { return t[0].to(DType::Float32); }},
      {"int64_to_bool", [](const Inputs& t) { return t[0].to(DType::Bool); }},
      {"bool_to_float", [](const Inputs& t) { return t[0].to(DType::Float32); }},
      {"bool_to_int64", [](const Inputs& t) { return t[0].to(DType::Int64); }},
  };
}

std::vector<Case> selection_with_masks() {
  return {
      {"where_bool", [](const Inputs& t) { return where(t[0], t[1], t[2]); }},
      {"where_scalar", [](const Inputs& t) { return where(t[0], t[1], 2.0); }},
      {"where_float_cond", [](const Inputs& t) { return where(t[0], t[1], t[2]); }},
      {"where_int_float", [](const Inputs& t) { return t[1].where(t[0], t[2]); }},
      {"masked_fill_bool", [](const Inputs& t) { return t[0].masked_fill(t[1], -1.5f); }},
      {"masked_fill_int", [](const Inputs& t) { return masked_fill(t[0], t[1], 7); }},
      {"mask_times_float", [](const Inputs& t) { return t[0] * t[1]; }},
  };
}

std::vector<std::vector<Case>> all_families() {
  return {int64_arithmetic(),
          float_rounding_division(),
          comparisons(),
          logical_and_bitwise(),
          tests(),
          casts(),
          selection_with_masks()};
}

// The binary ops of gen_dtypes.py's RESULT_OPS, applied to two 2-element tensors.
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
const std::vector<std::pair<std::string, Binary>>& result_ops() {
  static const std::vector<std::pair<std::string, Binary>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"div_floor", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { return a == b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a < b; }},
      {"logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); }},
      {"bitwise_and", [](const Tensor& a, const Tensor& b) { return a & b; }},
      {"where",
       [](const Tensor& a, const Tensor& b) {
         return where(tensor({1, 0}, {2}).to(DType::Bool), a, b);
       }},
  };
  return ops;
}

}  // namespace

TEST_CASE("result_type and promote_types match torch.result_type for every pair of dtypes") {
  const std::vector<int64_t> table = fixture().at("promote.tensor_tensor").to_vector_i64();
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    for (size_t j = 0; j < kDTypes.size(); ++j) {
      INFO(dtype_name(kDTypes[i]) << " with " << dtype_name(kDTypes[j]));
      const DType expected = kDTypes[table[i * kDTypes.size() + j]];
      CHECK(promote_types(kDTypes[i], kDTypes[j]) == expected);
      CHECK(result_type(ones({2}, kDTypes[i]), ones({2}, kDTypes[j])) == expected);
    }
  }
}

TEST_CASE("a number promotes a tensor by its kind, as LibTorch's Scalar") {
  const std::vector<Scalar> numbers = {true, 2, 2.5};  // gen_dtypes.py's SCALARS
  const std::vector<int64_t> table = fixture().at("promote.tensor_scalar").to_vector_i64();
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    for (size_t j = 0; j < numbers.size(); ++j) {
      INFO(dtype_name(kDTypes[i]) << " with number " << j);
      const DType expected = kDTypes[table[i * numbers.size() + j]];
      CHECK(result_type(ones({2}, kDTypes[i]), numbers[j]) == expected);
      CHECK(result_type(numbers[j], ones({2}, kDTypes[i])) == expected);
      // The operators follow the same rule (* on bool is logical and: still bool).
      CHECK((ones({2}, kDTypes[i]) * numbers[j]).dtype() == expected);
      CHECK((numbers[j] + ones({2}, kDTypes[i])).dtype() == expected);
    }
  }
}

TEST_CASE("binary ops give PyTorch's result dtype for every pair, and raise where it raises") {
  for (const auto& [name, op] : result_ops()) {
    const std::vector<int64_t> table = fixture().at("result." + name).to_vector_i64();
    for (size_t i = 0; i < kDTypes.size(); ++i) {
      for (size_t j = 0; j < kDTypes.size(); ++j) {
        INFO(name << "(" << dtype_name(kDTypes[i]) << ", " << dtype_name(kDTypes[j]) << ")");
        const Tensor a = ones({2}, kDTypes[i]), b = ones({2}, kDTypes[j]);
        const int64_t expected = table[i * kDTypes.size() + j];
        if (expected < 0) {
          CHECK_THROWS_AS(op(a, b), Error);
        } else {
          CHECK(op(a, b).dtype() == kDTypes[expected]);
        }
      }
    }
  }
}

TEST_CASE("golden dtypes: int64 arithmetic and bool arithmetic") {
  for (const Case& c : int64_arithmetic()) run_case(c);
}
TEST_CASE("golden dtypes: floor and trunc division of floats") {
  for (const Case& c : float_rounding_division()) run_case(c);
}
TEST_CASE("golden dtypes: comparisons give Bool") {
  for (const Case& c : comparisons()) run_case(c);
}
TEST_CASE("golden dtypes: logical and bitwise ops") {
  for (const Case& c : logical_and_bitwise()) run_case(c);
}
TEST_CASE("golden dtypes: any, all, equal, allclose") {
  for (const Case& c : tests()) run_case(c);
}
TEST_CASE("golden dtypes: casts among float32, int64, bfloat16 and bool") {
  for (const Case& c : casts()) run_case(c);
}
TEST_CASE("golden dtypes: where and masked_fill with Bool masks, values and gradients") {
  for (const Case& c : selection_with_masks()) run_case(c);
}

TEST_CASE("every dtypes fixture case has a C++ lambda") {
  std::set<std::string> covered;
  for (const auto& family : all_families())
    for (const Case& c : family) covered.insert(c.first);
  for (const auto& [key, value] : fixture()) {
    const std::string name = key.substr(0, key.find('.'));
    if (name == "promote" || name == "result") continue;
    CHECK_MESSAGE(covered.count(name) == 1, "fixture case " << name << " has no lambda");
  }
  for (const auto& [name, op] : result_ops()) CHECK(has("result." + name));
}
