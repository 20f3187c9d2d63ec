// The backward engine: accumulation, broadcasting, freed graphs, NoGradGuard, detach.
#include "test_util.h"

using namespace loom;

TEST_CASE("gradients accumulate when a tensor is used more than once") {
  Tensor x = tensor({1, 2, 3}, {3}).requires_grad_();
  Tensor y = sum(x * x + x * 3.0f + x);  // dy/dx = 2x + 4
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<float>{6, 8, 10});
  sum(x).backward();  // a second graph accumulates into .grad, like PyTorch
  CHECK(x.grad().to_vector() == std::vector<float>{7, 9, 11});
}

TEST_CASE("a gradient added in place changes no other tensor's gradient") {
  // The engine adds a second contribution into a node's gradient in place where nothing else
  // holds that gradient's memory. An add's backward hands one gradient to both of its inputs:
  // here m's goes to n and to p, n's to p and to q, so p's first contribution is shared with
  // n's (and n's with q's), and p's sum must be a new tensor: dL/dq stays 1 (added into the
  // shared one, it would be 2, and x's gradient 10).
  Tensor x = tensor({1.5f, -2.0f}, {2}).requires_grad_();
  Tensor p = x * 2.0f, q = x * 3.0f;
  Tensor n = p + q;
  Tensor m = n + p;
  sum(m * 1.0f).backward();  // (m's gradient a contiguous tensor, not sum's broadcast view)
  CHECK(x.grad().to_vector() == std::vector<float>{7, 7});  // 2 dL/dp + 3 dL/dq = 2 * 2 + 3 * 1
  // p's and q's gradients one tensor (an add's), then another added to p's while q still waits
  // for one of its own, the three branches summed in every order (which decides the order the
  // engine visits them in): dL/dp = 1 + 5 and dL/dq = 1 + 7 (with the add's gradient changed
  // under q, dL/dq would be 13).
  std::vector<int> order{0, 1, 2};
  do {
    Tensor z = tensor({0.25f, 3.0f}, {2}).requires_grad_();
    Tensor pz = z * 2.0f, qz = z * 3.0f;
    Tensor loss;
    for (const int branch : order) {
      const Tensor value = branch == 0 ? pz + qz : branch == 1 ? pz * 5.0f : qz * 7.0f;
      const Tensor term = sum(value * 1.0f);  // (contiguous gradients)
      loss = loss.defined() ? loss + term : term;
    }
    loss.backward();
    CHECK(z.grad().to_vector() == std::vector<float>{36, 36});  // 2 * 6 + 3 * 8
  } while (std::next_permutation(order.begin(), order.end()));
  // Contributions that are fresh tensors of their own: added in place, the same values.
  Tensor w = tensor({0.5f, 4.0f, -1.0f}, {3}).requires_grad_();
  Tensor h = w * w;
  Tensor y = sum(h * 3.0f + h * 4.0f + exp(h));  // dy/dh = 7 + e^h, dh/dw = 2w
  y.backward();
  const std::vector<float> wv = w.detach().to_vector(), dw = w.grad().to_vector();
  for (size_t i = 0; i < wv.size(); ++i)
    CHECK(dw[i] == doctest::Approx((7.0f + std::exp(wv[i] * wv[i])) * 2.0f * wv[i]));
}

TEST_CASE("gradients are summed over broadcast dimensions") {
  Tensor a = ones({2, 3}).requires_grad_();
  Tensor b = tensor({1, 2, 3}, {3}).requires_grad_();
  Tensor c = scalar_tensor(2.0f).requires_grad_();
  sum((a * b) * c).backward();
  CHECK(b.grad().to_vector() == std::vector<float>{4, 4, 4});
  CHECK(a.grad().to_vector() == std::vector<float>{2, 4, 6, 2, 4, 6});
  CHECK(c.grad().item() == 12.0f);
}

TEST_CASE("a diamond graph visits each node once, in reverse topological order") {
  Tensor x = scalar_tensor(2.0f).requires_grad_();
  Tensor h = x * x;            // 4
  Tensor y = exp(h) + h * h;   // dy/dx = (e^h + 2h) * 2x
  y.backward();
  CHECK(x.grad().item() == doctest::Approx((std::exp(4.0) + 8.0) * 4.0).epsilon(1e-5));
}

TEST_CASE("a second backward through a freed graph is a clear error") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("second time"), Error);
  Tensor z = sum(exp(x));
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();  // allowed: the first call kept the graph
  CHECK(x.grad().to_vector()[0] == doctest::Approx(3 * std::exp(1.0)));
}

TEST_CASE("backward of a non-scalar needs an explicit gradient") {
  Tensor x = ones({2, 2}).requires_grad_();
  Tensor y = x * 2.0f;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("shape [2,2]"), Error);
  y.backward(tensor({1, 2, 3, 4}, {2, 2}));
  CHECK(x.grad().to_vector() == std::vector<float>{2, 4, 6, 8});
  CHECK_THROWS_AS(y.backward(ones({3})), Error);
}

TEST_CASE("NoGradGuard and detach stop recording") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = x * 2.0f;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  Tensor y = x * 2.0f;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.impl()->storage() == y.impl()->storage());
  CHECK_THROWS_AS(sum(d).backward(), Error);
  CHECK(x.grad().defined() == false);
}

TEST_CASE("in-place changes to leaves that require grad need NoGradGuard") {
  Tensor w = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(w.fill_(0.0f), doctest::Contains("in place"), Error);
  NoGradGuard guard;
  w.fill_(3.0f);
  CHECK(w.to_vector() == std::vector<float>{3, 3});
}

TEST_CASE("int64 tensors cannot require grad") {
  CHECK_THROWS_AS(arange(3).requires_grad_(), Error);
}

TEST_CASE("split is one node of several outputs: one cat joins the pieces' gradients") {
  Tensor x = randn({4, 6}).requires_grad_();
  const std::vector<Tensor> pieces = split(x, 2, 1);  // three [4, 2] views of x
  REQUIRE(pieces.size() == 3);
  const auto& shared = pieces[0].grad_fn()->inputs.at(0).node;  // the op's own node
  for (size_t i = 0; i < pieces.size(); ++i) {
    CHECK(pieces[i].impl()->storage() == x.impl()->storage());  // views, no copy
    const autograd::Edge& edge = pieces[i].grad_fn()->inputs.at(0);
    CHECK(edge.node == shared);
    CHECK(edge.output == i);
  }
  CHECK(shared->name == "split");
  CHECK(shared->num_outputs == 3);
  CHECK(shared->inputs.at(0).leaf == x.impl_ptr());
  // Piece 1 unused: its slot of x's gradient is zero; the others get theirs.
  sum(pieces[0] * 2.0f + pieces[2]).backward();
  const std::vector<float> g = x.grad().to_vector();
  for (int64_t row = 0; row < 4; ++row)
    for (int64_t col = 0; col < 6; ++col)
      CHECK(g[static_cast<size_t>(row * 6 + col)] == (col < 2 ? 2.0f : col < 4 ? 0.0f : 1.0f));
}

TEST_CASE("split of a tensor that needs no gradient records nothing") {
  for (const Tensor& piece : chunk(randn({3, 4}), 2, 1)) CHECK(piece.grad_fn() == nullptr);
  Tensor x = randn({3, 4}).requires_grad_();
  NoGradGuard no_grad;
  for (const Tensor& piece : x.chunk(2, 1)) CHECK_FALSE(piece.requires_grad());
}
