// Finite-difference gradient checks for every differentiable op, on several shapes including
// broadcast operands and non-contiguous (transposed, narrowed, expanded) inputs.
#include <limits>

#include "autograd/internal.h"
#include "test_util.h"

using namespace loom;
using loom::testing::gradcheck;
using loom::testing::weighted;

namespace {

// A transposed (non-contiguous) tensor of the given final shape [a, b].
Tensor transposed(int64_t a, int64_t b) { return randn({b, a}).transpose(0, 1); }
// A narrowed (offset, strided) tensor of shape [a, b].
Tensor narrowed(int64_t a, int64_t b) { return randn({a, b + 3}).narrow(1, 2, b); }
// Strictly positive values (for log, sqrt, pow, div).
Tensor positive(Shape s) { return abs(randn(std::move(s))) + 0.5f; }

}  // namespace

TEST_CASE("gradcheck: unary functions on contiguous and strided inputs") {
  manual_seed(1);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fns = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu_tanh(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"neg", [](const Tensor& x) { return -x; }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5f, 0.7f); }},
      {"pow3", [](const Tensor& x) { return pow(x, 3.0f); }},
      {"affine", [](const Tensor& x) { return 2.0f - x * 3.0f + 1.0f; }},
  };
  for (const auto& [name, f] : fns) {
    for (Tensor x :
         {randn({3, 4}), transposed(3, 4), narrowed(2, 5), randn({}), randn({2, 1, 3})}) {
      // Keep clear of the kinks of relu/abs/clamp where finite differences are meaningless
      // (copy_ keeps x's strided layout).
      for (float kink : {0.0f, 0.7f, -0.5f})
        x.copy_(where(lt(abs(x - kink), scalar_tensor(0.05f)), x + 0.2f, x));
      gradcheck(weighted([f = f](const std::vector<Tensor>& in) { return f(in[0]); }), {x}, 1e-2f,
                2e-2f, 2e-3f, name);
    }
  }
}

TEST_CASE("gradcheck: functions of positive inputs (log, sqrt, rsqrt, pow, rdiv)") {
  manual_seed(2);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fns = {
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"pow-1.5", [](const Tensor& x) { return pow(x, -1.5f); }},
      {"pow0.5", [](const Tensor& x) { return pow(x, 0.5f); }},
      {"rdiv", [](const Tensor& x) { return 2.0f / x; }},
  };
  for (const auto& [name, f] : fns)
    for (Tensor x : {positive({4, 3}), (positive({3, 4})).transpose(0, 1)})
      gradcheck(weighted([f = f](const std::vector<Tensor>& in) { return f(in[0]); }),
                {x.detach()}, 1e-3f, 2e-2f, 2e-3f, name);
}

TEST_CASE("gradcheck: broadcasting binary ops") {
  manual_seed(3);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{}, {2, 3}}, {{2, 3}, {1}}};
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>>
      fns = {
          {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
          {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
          {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
          {"div", [](const Tensor& a, const Tensor& b) { return a / (abs(b) + 0.5f); }},
          {"pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a) + 0.5f, b); }},
          {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
          {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      };
  for (const auto& [name, f] : fns)
    for (const auto& [sa, sb] : shapes)
      // eps 1e-3 keeps maximum/minimum clear of ties between nearby random values
      gradcheck(weighted([f = f](const std::vector<Tensor>& in) { return f(in[0], in[1]); }),
                {randn(sa), randn(sb)}, 1e-3f, 2e-2f, 3e-3f, name);
  // a non-contiguous operand
  gradcheck(weighted([](const std::vector<Tensor>& in) { return in[0] * in[1] + in[1]; }),
            {transposed(3, 4), narrowed(3, 4)}, 1e-2f, 2e-2f, 2e-3f, "mul strided");
}

TEST_CASE("gradcheck: where and masked_fill") {
  manual_seed(4);
  Tensor cond = gt(randn({3, 4}), scalar_tensor(0.0f));
  gradcheck(weighted([cond](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }),
            {randn({3, 4}), randn({4})}, 1e-2f, 2e-2f, 2e-3f, "where");
  Tensor mask = gt(randn({1, 4}), scalar_tensor(0.0f));
  gradcheck(
      weighted([mask](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, -3.0f); }),
      {transposed(3, 4)}, 1e-2f, 2e-2f, 2e-3f, "masked_fill");
}

TEST_CASE("gradcheck: where and masked_fill with broadcast and non-contiguous operands") {
  manual_seed(12);
  // cond [3,1] broadcast over the rows; a [1,4] and b [3,1] are both broadcast, so their
  // gradients are sums over the expanded dims.
  Tensor row_cond = gt(randn({3, 1}), scalar_tensor(0.0f));
  gradcheck(
      weighted([row_cond](const std::vector<Tensor>& in) { return where(row_cond, in[0], in[1]); }),
      {randn({1, 4}), randn({3, 1})}, 1e-2f, 2e-2f, 2e-3f, "where broadcast cond and operands");
  // A transposed cond with transposed and narrowed operands.
  Tensor strided_cond = gt(randn({4, 3}), scalar_tensor(0.0f)).transpose(0, 1);
  gradcheck(weighted([strided_cond](const std::vector<Tensor>& in) {
              return where(strided_cond, in[0], in[1]);
            }),
            {transposed(3, 4), narrowed(3, 4)}, 1e-2f, 2e-2f, 2e-3f, "where strided");
  // mask [3,1] broadcast over x [2,3,4] (batch and columns), x narrowed or transposed.
  Tensor mask = gt(randn({3, 1}), scalar_tensor(0.0f));
  for (Tensor x : {randn({2, 3, 7}).narrow(2, 2, 4), randn({2, 4, 3}).transpose(1, 2)})
    gradcheck(
        weighted([mask](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, 0.5f); }),
        {x}, 1e-2f, 2e-2f, 2e-3f, "masked_fill broadcast mask, strided x");
}

TEST_CASE("gradcheck: reductions") {
  manual_seed(5);
  for (Tensor x : {randn({3, 4, 5}), randn({5, 4, 3}).permute({2, 1, 0})}) {
    gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]) * 0.3f; }, {x}, 1e-2f, 2e-2f,
              2e-3f, "sum all");
    gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}, 1e-2f, 2e-2f, 2e-3f,
              "mean all");
    // Each reduction over one dim with its finite-difference step: max and min take a small
    // one, which keeps neighbouring random values from swapping places.
    struct ByDim {
      const char* name;
      Tensor (*f)(const Tensor&, int64_t, bool);
      float eps;
    };
    const ByDim by_dim[] = {
        {"sum dim", [](const Tensor& t, int64_t d, bool k) { return sum(t, d, k); }, 1e-2f},
        {"mean dim", [](const Tensor& t, int64_t d, bool k) { return mean(t, d, k); }, 1e-2f},
        {"max dim", [](const Tensor& t, int64_t d, bool k) { return max(t, d, k); }, 1e-3f},
        {"min dim", [](const Tensor& t, int64_t d, bool k) { return min(t, d, k); }, 1e-3f},
        {"var dim", [](const Tensor& t, int64_t d, bool k) { return var(t, d, true, k); }, 1e-2f},
    };
    for (int64_t dim : {0, 1, -1})
      for (bool keep : {false, true})
        for (const ByDim& r : by_dim)
          gradcheck(weighted([r, dim, keep](const std::vector<Tensor>& in) {
                      return r.f(in[0], dim, keep);
                    }),
                    {x}, r.eps, 2e-2f, 2e-3f, r.name);
    gradcheck([](const std::vector<Tensor>& in) { return max(in[0]); }, {x}, 1e-3f, 2e-2f, 2e-3f,
              "max all");
  }
  gradcheck(weighted([](const std::vector<Tensor>& in) { return sum_to(in[0], {3, 1}); }),
            {randn({2, 3, 4})}, 1e-2f, 2e-2f, 2e-3f, "sum_to");
}

TEST_CASE("gradcheck: softmax and log_softmax along every dim") {
  manual_seed(6);
  for (Tensor x : {randn({3, 5}), randn({2, 3, 4}), transposed(4, 3)})
    for (int64_t dim = 0; dim < x.dim(); ++dim) {
      gradcheck(weighted([dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }),
                {x}, 1e-2f, 2e-2f, 2e-3f, "softmax");
      gradcheck(weighted([dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }),
                {x}, 1e-2f, 2e-2f, 2e-3f, "log_softmax");
    }
}

TEST_CASE("gradcheck: matmul in every form") {
  manual_seed(7);
  const std::vector<std::pair<Tensor, Tensor>> cases = {
      {randn({4}), randn({4})},                 // dot
      {randn({3, 4}), randn({4, 2})},           // mm
      {randn({4}), randn({4, 2})},              // vector @ matrix
      {randn({3, 4}), randn({4})},              // matrix @ vector
      {randn({2, 3, 4}), randn({4, 5})},        // batched @ matrix (folded)
      {randn({3, 4}), randn({2, 4, 5})},        // matrix @ batched
      {randn({2, 1, 3, 4}), randn({3, 4, 2})},  // broadcast batch dims
      {transposed(3, 4), transposed(4, 2)},     // transposed views -> BLAS trans flags
      {narrowed(3, 4), randn({2, 3, 4}).transpose(1, 2)},
      {randn({2, 3, 4}), randn({4})},           // batched @ vector
      // heads split out of (B, T, h, hs) projections, read in place in groups of h
      {randn({2, 5, 3, 4}).transpose(1, 2), randn({2, 6, 3, 4}).transpose(1, 2).transpose(2, 3)},
  };
  for (const auto& [a, b] : cases) {
    const std::string shapes = shape_str(a.shape()) + shape_str(b.shape());
    gradcheck(weighted([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }),
              {a, b}, 1e-2f, 2e-2f, 3e-3f, "matmul " + shapes);
    // alpha (a @ b) as the GEMM's own alpha (attention's scores): alpha (a @ b), and
    // gradients alpha dC B^T and alpha A^T dC through every one of these layouts.
    loom::testing::check_close(detail::scaled_matmul(a, b, 0.37f), matmul(a, b) * 0.37f, 1e-5f,
                               1e-6f);
    gradcheck(weighted([](const std::vector<Tensor>& in) {
                return detail::scaled_matmul(in[0], in[1], 0.37f);
              }),
              {a, b}, 1e-2f, 2e-2f, 3e-3f, "scaled_matmul " + shapes);
  }
}

// matmul hands an operand stored transposed (attention's keys, k.transpose(-2, -1)) its
// gradient in the operand's own layout, (dS^T q)^T, where a gradient laid out as the view's
// shape would later be copied across rows into the keys' layout. An identity op whose backward
// keeps what it receives shows the layout.
TEST_CASE("matmul's gradient for an operand read transposed is laid out as the operand") {
  manual_seed(11);
  Tensor q = randn({2, 3, 5, 4}).requires_grad_(), k = randn({2, 3, 6, 4}).requires_grad_();
  const Tensor w = randn({2, 3, 5, 6});
  Tensor seen;
  const Tensor kt = autograd::record("spy", {k}, k.transpose(-1, -2).detach(),
                                     [&seen](const Tensor& grad) {
                                       seen = grad;
                                       return std::vector<Tensor>{grad.transpose(-1, -2)};
                                     });
  (matmul(q, kt) * w).sum().backward();
  REQUIRE(seen.defined());
  CHECK(seen.shape() == Shape{2, 3, 4, 6});
  CHECK(seen.transpose(-1, -2).is_contiguous());  // laid out as k: (2, 3, 6, 4)
  // dk = dS^T q and dq = dS k, dS = w
  loom::testing::check_close(k.grad(), matmul(w.transpose(-1, -2), q), 1e-5f, 1e-6f);
  loom::testing::check_close(q.grad(), matmul(w, k), 1e-5f, 1e-6f);
}

TEST_CASE("gradcheck: linear (one GEMM from the bias) with and without bias, on strided inputs") {
  manual_seed(17);
  const std::vector<std::pair<Tensor, Tensor>> inputs = {
      {randn({4}), randn({3, 4})},           // one vector
      {randn({2, 3, 4}), randn({5, 4})},     // leading dims fold into rows
      {transposed(3, 4), transposed(5, 4)},  // transposed input and weight
      {narrowed(1, 4), narrowed(2, 4)},      // a single row (the bias is one row)
  };
  for (const auto& [x, w] : inputs) {
    const Tensor b = randn({w.size(0)});
    const std::string shapes = shape_str(x.shape()) + shape_str(w.shape());
    gradcheck(weighted([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }),
              {x, w, b}, 1e-2f, 2e-2f, 3e-3f, "linear " + shapes);
    gradcheck(
        weighted([](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); }),
        {x, w}, 1e-2f, 2e-2f, 3e-3f, "linear without bias " + shapes);
  }
}

TEST_CASE("linear equals matmul + bias and leaves its bias untouched") {
  manual_seed(18);
  for (const Shape& shape : {Shape{1, 4}, Shape{4}, Shape{3, 2, 4}}) {
    const Tensor x = randn(shape), w = randn({3, 4}), b = randn({3});
    const std::vector<float> bias_before = b.to_vector();
    const Tensor y = linear(x, w, b);
    const std::vector<float> expected = (matmul(x, w.t()) + b).to_vector(), got = y.to_vector();
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    CHECK(b.to_vector() == bias_before);  // the GEMM accumulates into a copy of the bias
  }
}

TEST_CASE("gradcheck: views and layout ops on contiguous, transposed and narrowed inputs") {
  manual_seed(8);
  // Three [2,3,4] inputs: contiguous; a transposed view (strides 12,1,3); a narrowed view with
  // an offset and gaps (strides 21,7,1). Backward of a view must scatter into the input's layout.
  const std::vector<std::pair<const char*, Tensor>> inputs = {
      {"contiguous", randn({2, 3, 4})},
      {"transposed", randn({2, 4, 3}).transpose(1, 2)},
      {"narrowed", randn({3, 3, 7}).narrow(0, 1, 2).narrow(2, 2, 4)},
  };
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fns = {
      {"reshape", [](const Tensor& t) { return t.reshape({4, -1}); }},
      // view needs a contiguous tensor (it never copies and, unlike PyTorch, never views strided
      // data), hence contiguous() first, a no-op on the contiguous input; the .t() hands view's
      // backward a non-contiguous gradient.
      {"view", [](const Tensor& t) { return t.contiguous().view({6, -1}).t(); }},
      {"view split", [](const Tensor& t) { return t.contiguous().view({2, 3, 2, 2}); }},
      {"transpose", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"permute", [](const Tensor& t) { return t.permute({1, 2, 0}); }},
      {"narrow", [](const Tensor& t) { return t.narrow(2, 1, 2); }},
      {"select", [](const Tensor& t) { return t.select(1, -1); }},
      {"expand", [](const Tensor& t) { return t.narrow(1, 0, 1).expand({2, 5, 4}); }},
      {"unsqueeze", [](const Tensor& t) { return t.unsqueeze(1); }},
      {"squeeze dim", [](const Tensor& t) { return t.narrow(1, 1, 1).squeeze(1); }},
      // [1,2,1,4,1] -> [2,4]: every size-1 dim goes
      {"squeeze all",
       [](const Tensor& t) { return t.unsqueeze(0).narrow(2, 1, 1).unsqueeze(-1).squeeze(); }},
      {"flatten", [](const Tensor& t) { return t.flatten(1); }},
      {"contiguous", [](const Tensor& t) { return t.transpose(0, 1).contiguous(); }},
      {"contiguous as is", [](const Tensor& t) { return t.contiguous(); }},
      {"clone", [](const Tensor& t) { return t.clone(); }},
      {"transposed reshape", [](const Tensor& t) { return t.transpose(1, 2).reshape({-1}); }},
      {"tril", [](const Tensor& t) { return tril(t); }},
      {"triu", [](const Tensor& t) { return triu(t, 1); }},
  };
  for (const auto& [layout, x] : inputs) {
    CHECK(x.shape() == Shape{2, 3, 4});
    CHECK(x.is_contiguous() == (std::string(layout) == "contiguous"));
    for (const auto& [name, f] : fns)
      gradcheck(weighted([f = f](const std::vector<Tensor>& in) { return f(in[0]); }), {x}, 1e-2f,
                2e-2f, 2e-3f, std::string(name) + " of " + layout);
  }
}

TEST_CASE("gradcheck: roll by any shift, along one dim or several, on strided inputs") {
  manual_seed(14);
  // roll along one dim is composed of narrow + cat: its backward (a roll by -shift) comes from
  // theirs; along several it copies blocks and has a backward of its own (the next test).
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fns = {
      {"roll 1", [](const Tensor& t) { return roll(t, 1, 0); }},
      {"roll -1 last dim", [](const Tensor& t) { return roll(t, -1, -1); }},
      {"roll beyond the size", [](const Tensor& t) { return roll(t, 7, 1); }},
      {"roll by a multiple of the size", [](const Tensor& t) { return roll(t, -6, 1); }},
      {"roll two dims",
       [](const Tensor& t) {
         return roll(t, {1, -2}, {0, 2});
       }},
      {"roll a dim twice",
       [](const Tensor& t) {
         return roll(t, {2, 2}, {1, 1});
       }},
      {"roll method", [](const Tensor& t) { return t.roll(-4, 2); }},
  };
  for (Tensor x : {randn({2, 3, 4}), randn({2, 4, 3}).transpose(1, 2),
                   randn({3, 3, 7}).narrow(0, 1, 2).narrow(2, 2, 4)})
    for (const auto& [name, f] : fns)
      gradcheck(weighted([f = f](const std::vector<Tensor>& in) { return f(in[0]); }), {x}, 1e-2f,
                2e-2f, 2e-3f, name);
}

// roll along several dims is one op that copies each element once, forward and backward: the
// same values as one roll after another, to the bit, and the same gradient.
TEST_CASE("roll along several dims: one roll after another, one copy per block each way") {
  manual_seed(16);
  const Tensor g = randn({3, 5, 4});
  for (const Tensor& base : {randn({3, 5, 4}), randn({4, 5, 3}).transpose(0, 2)}) {
    struct Case {
      std::vector<int64_t> shifts, dims;
    };
    for (const Case& c : {Case{{-2, -2}, {1, 2}}, Case{{7, -1, 2}, {0, 1, 2}},
                          Case{{2, 3}, {1, 1}}, Case{{5, 1}, {1, -1}}, Case{{3, 1}, {0, 2}}}) {
      Tensor x = base.clone().requires_grad_(), y = base.clone().requires_grad_();
      // The copy kernels fn() calls.
      const auto copies = [](const std::function<void()>& fn) {
        profiler::Profile profile;
        fn();
        profile.stop();
        int64_t calls = 0;
        for (const profiler::Row& row : profile.key_averages())
          if (row.name == "copy") calls += row.calls;
        return calls;
      };
      Tensor at_once;
      const int64_t forward_copies = copies([&] { at_once = roll(x, c.shifts, c.dims); });
      const int64_t backward_copies = copies([&] { at_once.backward(g); });
      Tensor one_by_one = y;
      for (size_t i = 0; i < c.dims.size(); ++i)
        one_by_one = roll(one_by_one, c.shifts[i], c.dims[i]);
      one_by_one.backward(g);
      const std::string what = shape_str(c.shifts) + " along " + shape_str(c.dims);
      INFO(what);
      CHECK(equal(at_once, one_by_one));
      CHECK(equal(x.grad(), y.grad()));
      // A block per combination of the moving dims' two parts, forward and backward.
      int64_t moving = 0;
      for (int64_t d = 0; d < 3; ++d) {
        int64_t s = 0;
        for (size_t i = 0; i < c.dims.size(); ++i)
          if ((c.dims[i] + 3) % 3 == d) s += c.shifts[i];
        moving += s % base.size(d) != 0 ? 1 : 0;
      }
      // What any backward from a given gradient to a leaf copies besides (clone's passes the
      // gradient through).
      const Tensor through = base.clone().requires_grad_().clone();
      const int64_t handing = copies([&] { through.backward(g); });
      // (Nothing moving, the roll is a clone, whose backward passes the gradient through.)
      CHECK(forward_copies == int64_t{1} << moving);
      CHECK(backward_copies == (moving > 0 ? int64_t{1} << moving : 0) + handing);
    }
  }
  // Any dtype: the blocks are copies.
  const Tensor ids = arange(12).reshape({3, 4});  // int64
  CHECK(equal(roll(ids, {1, -1}, {0, 1}), roll(roll(ids, 1, 0), -1, 1)));
  // Nothing moves: a copy, not x itself.
  const Tensor x = randn({2, 3});
  const Tensor same = roll(x, {2, 3}, {0, 1});
  CHECK(equal(same, x));
  CHECK(same.data_ptr<float>() != x.data_ptr<float>());
}

// add_softmax is softmax(x + bias, -1) in one pass: the composite's values and gradients to the
// bit, for the masks attention adds, a bias read where it lies (strided) and one broadcast along
// the row (the add and the softmax then run one after the other).
TEST_CASE("add_softmax: softmax(x + bias) to the bit, values and gradients") {
  manual_seed(17);
  const float inf = std::numeric_limits<float>::infinity();
  // The same bits, NaN where the other is NaN (a row of -inf gives NaN, as in PyTorch).
  const auto same = [](const Tensor& a, const Tensor& b) {
    return equal(a != a, b != b) && equal(where(a != a, 0.0f, a), where(b != b, 0.0f, b));
  };
  const Tensor causal = triu(full({5, 5}, -inf), 1);
  struct Case {
    const char* name;
    Tensor x, bias;
  };
  for (const Case& c : {Case{"causal [5, 5] over [2, 3, 5, 5]", randn({2, 3, 5, 5}), causal},
                        Case{"windows [4, 2, 7, 7] over [3, 4, 2, 7, 7]", randn({3, 4, 2, 7, 7}),
                             randn({4, 2, 7, 7})},
                        Case{"padding [2, 1, 1, 6]", randn({2, 4, 3, 6}),
                             where(rand({2, 1, 1, 6}) < 0.3f, -inf, zeros({2, 1, 1, 6}))},
                        Case{"same shape, strided x", randn({6, 4}).t(), randn({4, 6})},
                        Case{"strided bias", randn({3, 5, 4}), randn({4, 5}).t()},
                        Case{"bias per row", randn({3, 4}), randn({3, 1})},
                        Case{"a row of -inf", randn({2, 3}), tensor({0, 0, 0, -inf, -inf, -inf},
                                                                    {2, 3})}}) {
    INFO(c.name);
    const Tensor g = randn(c.x.shape());
    Tensor x1 = c.x.detach().clone().requires_grad_(), b1 = c.bias.detach().requires_grad_();
    Tensor x2 = c.x.detach().clone().requires_grad_(), b2 = c.bias.detach().requires_grad_();
    const Tensor fused = add_softmax(x1, b1), composite = softmax(x2 + b2, -1);
    CHECK(same(fused, composite));
    fused.backward(g);
    composite.backward(g);
    CHECK(same(x1.grad(), x2.grad()));
    CHECK(same(b1.grad(), b2.grad()));
  }
  // Without gradients, and with a bias that needs none (a constant mask): x's alone.
  const Tensor x = randn({2, 4, 4}).requires_grad_();
  add_softmax(x, causal.narrow(0, 0, 4).narrow(1, 0, 4)).sum().backward();
  CHECK(x.grad().defined());
  NoGradGuard no_grad;
  CHECK(equal(add_softmax(x, zeros({4})), softmax(x, -1)));
}

// Attention with a mask adds it inside the softmax's pass: no kernel writes the sum out. (In
// training: inference on the CPU may take the fused attention kernel, which adds the mask too.)
TEST_CASE("attention with an additive mask runs add_softmax, not an add and a softmax") {
  manual_seed(18);
  const Tensor q = randn({2, 3, 5, 4}).requires_grad_(), k = randn({2, 3, 5, 4}),
               v = randn({2, 3, 5, 4});
  const Tensor mask = randn({3, 5, 5});
  profiler::Profile profile;
  const Tensor y = nn::functional::scaled_dot_product_attention(q, k, v, mask);
  profile.stop();
  int64_t adds = 0, softmaxes = 0, fused = 0;
  for (const profiler::Row& row : profile.key_averages()) {
    adds += row.name == "binary" ? row.calls : 0;
    softmaxes += row.name == "softmax" ? row.calls : 0;
    fused += row.name == "add_softmax" ? row.calls : 0;
  }
  CHECK(fused == 1);
  CHECK(adds == 0);
  CHECK(softmaxes == 0);
  const float scale = 0.5f;  // 1 / sqrt(4)
  NoGradGuard no_grad;
  CHECK(allclose(y, matmul(softmax(matmul(q, k.transpose(-2, -1)) * scale + mask, -1), v),
                 1e-5f, 1e-6f));
}

TEST_CASE("gradcheck: split and chunk, every piece or some, on strided inputs") {
  manual_seed(15);
  // The pieces weighted differently (and one left out), so each slot of the one cat counts.
  const std::vector<std::pair<const char*, std::function<std::vector<Tensor>(const Tensor&)>>>
      fns = {
          {"split 2 along dim 1", [](const Tensor& t) { return split(t, 2, 1); }},
          {"split sizes along dim -1",
           [](const Tensor& t) { return split(t, std::vector<int64_t>{1, 0, 3}, -1); }},
          {"chunk 3 along dim 0", [](const Tensor& t) { return chunk(t, 3, 0); }},
          {"split method", [](const Tensor& t) { return t.split(3, -2); }},
          {"chunk method", [](const Tensor& t) { return t.chunk(2, 2); }},
      };
  for (Tensor x : {randn({2, 3, 4}), randn({2, 4, 3}).transpose(1, 2),
                   randn({3, 3, 7}).narrow(0, 1, 2).narrow(2, 2, 4)})
    for (const auto& [name, f] : fns)
      for (bool skip_one : {false, true})
        gradcheck(weighted([f = f, skip_one](const std::vector<Tensor>& in) {
                    const std::vector<Tensor> pieces = f(in[0]);
                    Tensor total = sum(pieces[0] * pieces[0]);
                    for (size_t i = skip_one ? 2 : 1; i < pieces.size(); ++i)  // piece 1 skipped
                      total = total + sum(pieces[i] * pieces[i]) * static_cast<float>(i + 1);
                    return total;
                  }),
                  {x}, 1e-2f, 2e-2f, 2e-3f, name);
}

TEST_CASE("gradcheck: cat, stack and indexing") {
  manual_seed(9);
  gradcheck(weighted([](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, 1); }),
            {randn({2, 3}), transposed(2, 1), randn({2, 2})}, 1e-2f, 2e-2f, 2e-3f, "cat");
  gradcheck(weighted([](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, -1); }),
            {randn({2, 3}), narrowed(2, 3)}, 1e-2f, 2e-2f, 2e-3f, "stack");
  Tensor idx = tensor_i64({2, 0, 2, 1}, {4});  // repeated index: gradients must accumulate
  gradcheck(weighted([idx](const std::vector<Tensor>& in) { return index_select(in[0], 1, idx); }),
            {randn({2, 3, 2})}, 1e-2f, 2e-2f, 2e-3f, "index_select");
  Tensor gidx = tensor_i64({0, 2, 2, 1, 0, 0}, {2, 3});
  gradcheck(weighted([gidx](const std::vector<Tensor>& in) { return gather(in[0], 1, gidx); }),
            {randn({2, 4})}, 1e-2f, 2e-2f, 2e-3f, "gather");
  Tensor ids = tensor_i64({1, 3, 1, 0, 2, 3}, {2, 3});
  gradcheck(weighted([ids](const std::vector<Tensor>& in) { return embedding(in[0], ids); }),
            {randn({4, 5})}, 1e-2f, 2e-2f, 2e-3f, "embedding");
  gradcheck(
      weighted([idx](const std::vector<Tensor>& in) { return index_add(in[0], 0, idx, in[1]); }),
      {randn({3, 2}), randn({4, 2})}, 1e-2f, 2e-2f, 2e-3f, "index_add");
  gradcheck(weighted([gidx](const std::vector<Tensor>& in) {
              return scatter_add(in[0], 1, gidx, in[1]);
            }),
            {randn({2, 4}), randn({2, 3})}, 1e-2f, 2e-2f, 2e-3f, "scatter_add");
}

TEST_CASE("gradcheck: index ops on transposed and narrowed inputs") {
  manual_seed(13);
  Tensor idx = tensor_i64({2, 0, 2, 1}, {4});  // repeated index: gradients must accumulate
  for (Tensor x : {transposed(2, 3), narrowed(2, 3)})
    for (int64_t dim : {0, 1}) {
      const Tensor i = dim == 0 ? tensor_i64({1, 0, 1}, {3}) : idx;
      gradcheck(
          weighted([dim, i](const std::vector<Tensor>& in) { return index_select(in[0], dim, i); }),
          {x}, 1e-2f, 2e-2f, 2e-3f, "index_select strided");
    }
  Tensor gidx = tensor_i64({0, 2, 2, 1, 0, 0}, {2, 3});
  for (Tensor x : {transposed(2, 4), narrowed(2, 4)})
    gradcheck(weighted([gidx](const std::vector<Tensor>& in) { return gather(in[0], 1, gidx); }),
              {x}, 1e-2f, 2e-2f, 2e-3f, "gather strided");
  Tensor gidx0 = tensor_i64({1, 0, 1, 1, 1, 0, 0, 0}, {2, 4});  // along dim 0 of [2,4]
  gradcheck(weighted([gidx0](const std::vector<Tensor>& in) { return gather(in[0], 0, gidx0); }),
            {transposed(2, 4)}, 1e-2f, 2e-2f, 2e-3f, "gather dim 0 strided");
  Tensor ids = tensor_i64({1, 3, 1, 0, 2, 3}, {2, 3});
  for (Tensor w : {transposed(4, 5), narrowed(4, 5)})
    gradcheck(weighted([ids](const std::vector<Tensor>& in) { return embedding(in[0], ids); }), {w},
              1e-2f, 2e-2f, 2e-3f, "embedding strided weight");
  // x and src each transposed or narrowed, in both pairings.
  const std::vector<std::pair<Tensor, Tensor>> index_add_args = {
      {transposed(3, 2), narrowed(4, 2)}, {narrowed(3, 2), transposed(4, 2)}};
  for (const auto& [x, src] : index_add_args)
    gradcheck(
        weighted([idx](const std::vector<Tensor>& in) { return index_add(in[0], 0, idx, in[1]); }),
        {x, src}, 1e-2f, 2e-2f, 2e-3f, "index_add strided");
  gradcheck(weighted([](const std::vector<Tensor>& in) {
              return index_add(in[0], 1, tensor_i64({0, 2, 0}, {3}), in[1]);
            }),
            {transposed(2, 4), narrowed(2, 3)}, 1e-2f, 2e-2f, 2e-3f, "index_add dim 1 strided");
  const std::vector<std::pair<Tensor, Tensor>> scatter_add_args = {
      {transposed(2, 4), narrowed(2, 3)}, {narrowed(2, 4), transposed(2, 3)}};
  for (const auto& [x, src] : scatter_add_args)
    gradcheck(weighted([gidx](const std::vector<Tensor>& in) {
                return scatter_add(in[0], 1, gidx, in[1]);
              }),
              {x, src}, 1e-2f, 2e-2f, 2e-3f, "scatter_add strided");
  // A transposed index (non-contiguous int64) must be read in logical order too.
  Tensor tidx = tensor_i64({0, 1, 2, 2, 0, 1}, {3, 2}).transpose(0, 1);  // [[0,2,0],[1,2,1]]
  gradcheck(weighted([tidx](const std::vector<Tensor>& in) { return gather(in[0], 1, tidx); }),
            {narrowed(2, 4)}, 1e-2f, 2e-2f, 2e-3f, "gather transposed index");
  gradcheck(weighted([tidx](const std::vector<Tensor>& in) {
              return scatter_add(in[0], 1, tidx, in[1]);
            }),
            {transposed(2, 4), randn({2, 3})}, 1e-2f, 2e-2f, 2e-3f, "scatter_add transposed index");
}

TEST_CASE("gradcheck: layer_norm, cross_entropy, dropout") {
  manual_seed(10);
  gradcheck(weighted([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }),
            {randn({3, 5}), randn({5}), randn({5})}, 1e-2f, 2e-2f, 3e-3f, "layer_norm");
  gradcheck(weighted([](const std::vector<Tensor>& in) {
              return layer_norm(in[0], Tensor(), Tensor(), 1e-3f);
            }),
            {randn({2, 5, 4}).transpose(1, 2)}, 1e-2f, 2e-2f, 3e-3f, "layer_norm no affine");
  // add_layer_norm: both outputs feed the loss, as in a pre-norm block.
  gradcheck(weighted([](const std::vector<Tensor>& in) {
              const auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
              return y * 2.0f + h * h;
            }),
            {randn({3, 5}), randn({3, 5}), randn({5}), randn({5})}, 1e-2f, 2e-2f, 3e-3f,
            "add_layer_norm");
  gradcheck(weighted([](const std::vector<Tensor>& in) {
              return add_layer_norm(in[0], in[1], Tensor(), Tensor(), 1e-3f).second;
            }),
            {randn({2, 5, 4}).transpose(1, 2), randn({2, 4, 5})}, 1e-2f, 2e-2f, 3e-3f,
            "add_layer_norm no affine, strided x");
  // add_softmax: x and the bias, broadcast over leading dims (Swin's windows) or along a row.
  gradcheck(weighted([](const std::vector<Tensor>& in) { return add_softmax(in[0], in[1]); }),
            {randn({2, 3, 4, 4}), randn({3, 4, 4})}, 1e-2f, 2e-2f, 3e-3f, "add_softmax");
  gradcheck(weighted([](const std::vector<Tensor>& in) { return add_softmax(in[0], in[1]); }),
            {randn({5, 3}).t(), randn({3, 1})}, 1e-2f, 2e-2f, 3e-3f,
            "add_softmax strided x, a bias per row");
  // bias_gelu and friends: x and the bias (summed over every leading position), x strided.
  gradcheck(weighted([](const std::vector<Tensor>& in) { return bias_gelu(in[0], in[1]); }),
            {randn({2, 3, 4}), randn({4})}, 1e-2f, 2e-2f, 3e-3f, "bias_gelu");
  gradcheck(weighted([](const std::vector<Tensor>& in) { return bias_gelu_tanh(in[0], in[1]); }),
            {randn({5, 3}).t(), randn({5})}, 1e-2f, 2e-2f, 3e-3f, "bias_gelu_tanh strided x");
  gradcheck(weighted([](const std::vector<Tensor>& in) { return bias_relu(in[0], in[1]); }),
            {randn({4, 6}) + 0.5f, randn({6})}, 1e-2f, 2e-2f, 3e-3f, "bias_relu");
  gradcheck(weighted([](const std::vector<Tensor>& in) {
              return linear_activation(in[0], in[1], in[2], UnaryOp::GeluTanh);
            }),
            {randn({2, 3, 4}), randn({5, 4}), randn({5})}, 1e-2f, 2e-2f, 3e-3f,
            "linear_activation");
  Tensor target = tensor_i64({1, 0, 3, -100, 2}, {5});
  for (float smoothing : {0.0f, 0.1f})
    gradcheck([target, smoothing](const std::vector<Tensor>& in) {
                return cross_entropy(in[0], target, -100, smoothing);
              },
              {randn({5, 4})}, 1e-2f, 2e-2f, 2e-3f, "cross_entropy");
  gradcheck([](const std::vector<Tensor>& in) {
              return cross_entropy(in[0], tensor_i64({0, 2, 1, 1, 0, 2}, {2, 3}));
            },
            {randn({2, 3, 3})}, 1e-2f, 2e-2f, 2e-3f, "cross_entropy 3-D");
  // Dropout with a fixed seed draws the same mask in every evaluation, so it is checkable.
  gradcheck([](const std::vector<Tensor>& in) {
              manual_seed(77);
              return sum(dropout(in[0], 0.3f, true) * in[0]);
            },
            {randn({4, 6})}, 1e-2f, 2e-2f, 2e-3f, "dropout");
}

TEST_CASE("gradcheck: a composition (two-layer MLP with softmax cross-entropy)") {
  manual_seed(11);
  Tensor target = tensor_i64({2, 0, 1}, {3});
  gradcheck([target](const std::vector<Tensor>& p) {
              Tensor h = gelu(matmul(p[0], p[1].t()) + p[2]);
              return cross_entropy(matmul(h, p[3].t()) + p[4], target);
            },
            {randn({3, 4}), randn({5, 4}), randn({5}), randn({3, 5}), randn({3})}, 1e-2f, 3e-2f,
            3e-3f, "mlp");
}
