// The profiler (core/profiler.h): which calls it records, under which name and pass, and that
// it records nothing when off. No test reads a time: only calls, names, passes and FLOPs, and
// how the times of scopes that were open together relate.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <latch>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/internal.h"
#include "backends/gemm/tiled_gemm.h"
#include "loom.h"
#include "test_util.h"

using namespace loom;
using loom::testing::expect_error;
namespace profiler = loom::autograd::profiler;  // the PyTorch spelling reaches the same names

namespace {

// The row of `name` in `pass`, or a row of 0 calls when there is none.
profiler::Row find_row(const profiler::Profile& p, const std::string& name,
                       profiler::Pass pass = profiler::Pass::Forward) {
  const std::vector<profiler::Row> rows = p.key_averages();
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const profiler::Row& r) {
    return r.name == name && r.pass == pass;
  });
  return it == rows.end() ? profiler::Row{} : *it;
}

}  // namespace

TEST_CASE("profiler: off, kernels record nothing; a stopped profile takes no more rows") {
  const Tensor a = randn({4, 3}), b = randn({3, 5});
  CHECK_FALSE(profiler::enabled());
  matmul(a, b);  // before any profile: nowhere to go
  profiler::Profile p;
  CHECK(profiler::enabled());
  CHECK(p.key_averages().empty());  // a profile starts from empty tallies
  p.stop();
  CHECK_FALSE(profiler::enabled());
  matmul(a, b);
  CHECK(p.key_averages().empty());
}

TEST_CASE("profiler: each kernel call is one call of its backend method, with a product's FLOPs") {
  const Tensor a = randn({4, 3}), b = randn({3, 5});
  profiler::Profile p;
  matmul(a, b);
  matmul(a, b);
  exp(a);
  p.stop();
  const profiler::Row gemm = find_row(p, "gemm");
  CHECK(gemm.calls == 2);
  CHECK(gemm.flops == doctest::Approx(2 * 2.0 * 4 * 3 * 5));  // 2 per multiply-add
  CHECK(gemm.seconds >= 0);
  CHECK(find_row(p, "unary Exp").calls == 1);  // a unary kernel is named by its function
  CHECK(find_row(p, "unary Exp").flops == 0);
  CHECK(p.other_seconds() >= 0);
  CHECK(p.wall_seconds() >= gemm.seconds);
}

TEST_CASE("profiler: products are tallied again by shape and pass, with their FLOPs") {
  const Tensor a = randn({4, 3}).requires_grad_(), b = randn({3, 5}).requires_grad_();
  const Tensor batched = randn({6, 2, 3});
  profiler::Profile p;
  Tensor loss = sum(matmul(a, b));
  matmul(a, b);
  matmul(batched, b.detach());  // [6, 2, 3] @ [3, 5]: the batch's rows as one [12, 3] product
  loss.backward();
  p.stop();
  const std::vector<profiler::ProductRow> rows = p.products();
  const auto find = [&](profiler::ProductShape shape, profiler::Pass pass) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const profiler::ProductRow& r) {
      return r.shape == shape && r.pass == pass;
    });
    return it == rows.end() ? profiler::ProductRow{} : *it;
  };
  const profiler::ProductRow forward = find({4, 5, 3, 1, false, false}, profiler::Pass::Forward);
  CHECK(forward.calls == 2);
  CHECK(forward.flops == doctest::Approx(2 * 2.0 * 4 * 5 * 3));
  CHECK(find({12, 5, 3, 1, false, false}, profiler::Pass::Forward).calls == 1);
  // Backward: dA = dC B^T ([4, 5] x [5, 3], B transposed) and dB = A^T dC ([3, 4] x [4, 5]).
  CHECK(find({4, 3, 5, 1, false, true}, profiler::Pass::Backward).calls == 1);
  CHECK(find({3, 5, 4, 1, true, false}, profiler::Pass::Backward).calls == 1);
  int64_t calls = 0;
  for (const profiler::ProductRow& r : rows) calls += r.calls;
  const int64_t gemm_calls = find_row(p, "gemm").calls +
                             find_row(p, "gemm", profiler::Pass::Backward).calls;
  CHECK(calls == gemm_calls);  // every gemm row's call, once
  CHECK(profiler::ProductShape{4, 5, 3, 1, false, false}.str() == "4x5x3 NN");
  CHECK(profiler::ProductShape{50, 50, 32, 512, false, true}.str() == "512 x 50x50x32 NT");
  const std::string table = p.products_table(1, 2);
  CHECK(table.find("product (m x n x k, op A B)") != std::string::npos);
  CHECK(table.find("(2 more shapes)") != std::string::npos);  // 4 shapes, 2 shown
  expect_error([&] { (void)p.products_table(0); }, {"products_table", "steps"});
}

TEST_CASE("profiler: kernels of backward() are rows of the backward pass") {
  const Tensor a = randn({4, 3}).requires_grad_(), b = randn({3, 5}).requires_grad_();
  profiler::Profile p;
  Tensor loss = sum(matmul(a, b));
  loss.backward();
  p.stop();
  CHECK(find_row(p, "gemm", profiler::Pass::Forward).calls == 1);
  // dA = dC B^T and dB = A^T dC: two products of the forward's size.
  const profiler::Row backward = find_row(p, "gemm", profiler::Pass::Backward);
  CHECK(backward.calls == 2);
  CHECK(backward.flops == doctest::Approx(2 * 2.0 * 4 * 3 * 5));
  CHECK(find_row(p, "gemm", profiler::Pass::Optimizer).calls == 0);
}

TEST_CASE("profiler: a PassGuard sets the pass of the kernels inside it, then restores it") {
  Tensor w = randn({8});
  profiler::Profile p;
  {
    profiler::PassGuard optimizer(profiler::Pass::Optimizer);
    w.fill_(0.0f);
  }
  w.fill_(1.0f);
  p.stop();
  CHECK(find_row(p, "fill", profiler::Pass::Optimizer).calls == 1);
  CHECK(find_row(p, "fill", profiler::Pass::Forward).calls == 1);
}

TEST_CASE("profiler: time goes to the outermost scope, so nested scopes count once") {
  const Tensor a = randn({4, 3}), b = randn({3, 5});
  profiler::Profile p;
  {
    profiler::RecordFunction outer("attention block");
    matmul(a, b);  // inside: part of the block's row, not a gemm row
    {
      profiler::RecordFunction inner(std::string("inner"));  // nested: no row either
      matmul(a, b);
    }
  }
  matmul(a, b);  // outside any scope: a gemm row again
  p.stop();
  CHECK(find_row(p, "attention block").calls == 1);
  CHECK(find_row(p, "inner").calls == 0);
  CHECK(find_row(p, "gemm").calls == 1);
  CHECK(p.key_averages().size() == 2);
}

TEST_CASE("profiler: a PackedWeightsGuard's packing of a weight is a row of its own") {
  // Decoding packs each weight once for its steps (autograd/packed_weights.h): that copy is
  // part of the step's time and is named, not left in the time outside kernels.
  const Tensor w = randn({256, 128}).requires_grad_(), x = randn({64, 128});
  NoGradGuard no_grad;
  PackedWeightsGuard packed;
  profiler::Profile p;
  for (int i = 0; i < 3; ++i) linear(x, w, Tensor());  // packed at the second use, once
  p.stop();
  const int64_t packs = cpu::use_tiled_gemm(64, 256) ? 1 : 0;  // AVX-512 builds pack
  CHECK(find_row(p, "pack_weight").calls == packs);
  CHECK(find_row(p, "gemm").calls == 3);
  CHECK(PackedWeightsGuard::cached() == packs);
}

TEST_CASE("profiler: the table lists each row, the time outside kernels and the total") {
  const Tensor a = randn({4, 3}), b = randn({3, 5});
  profiler::Profile p;
  matmul(a, b);
  p.stop();
  const std::string table = p.table(2);
  CHECK(table.find("gemm") != std::string::npos);
  CHECK(table.find("forward") != std::string::npos);
  CHECK(table.find("other (outside kernels)") != std::string::npos);
  CHECK(table.find("total") != std::string::npos);
  CHECK(table.find("0.5") != std::string::npos);  // one call over 2 steps: 0.5 calls per step
  // The products' FLOPs per step (2 * 4 * 3 * 5 / 2 steps = 60) and their own rate.
  CHECK(table.find("the products' kernels did 0.0000 GFLOP per step in ") != std::string::npos);
  CHECK(table.find("GFLOP/s alone") != std::string::npos);
  CHECK(table.find("overlap") == std::string::npos);  // one thread: the rows are the time
  CHECK(find_row(p, "gemm").flops == 120);
  CHECK(p.covered_seconds() == doctest::Approx(find_row(p, "gemm").seconds).epsilon(0.01));
}

// The bound against the machine's peak is arithmetic on the profile's times: checked on numbers
// chosen by hand, then on a profile, where it must agree with the profile's own rows.
TEST_CASE("profiler: a step's bound against the peak, with its products at the peak") {
  // 100 ms a step, 80 of them in products doing 24 GFLOP; a peak of 400 GFLOP/s: at the peak the
  // products take 60 ms, so the step could reach 60 / (60 + 20) = 75%; now it reaches 60%.
  const profiler::Bound b{.step_ms = 100, .products_ms = 80, .gflop = 24, .peak_gflops = 400};
  CHECK(b.rest_ms() == doctest::Approx(20));
  CHECK(b.products_gflops() == doctest::Approx(300));
  CHECK(b.products_at_peak_ms() == doctest::Approx(60));
  CHECK(b.share() == doctest::Approx(0.6));
  CHECK(b.best_share() == doctest::Approx(0.75));
  CHECK(b.rest_allowed_ms(0.8) == doctest::Approx(15));  // 60 / 0.8 = 75 ms in all
  CHECK(b.rest_allowed_ms(b.best_share()) == doctest::Approx(b.rest_ms()));
  // 70% leaves the products 60 / 0.7 - 20 = 65.71 ms: 24 GFLOP in that is 365.2 GFLOP/s.
  CHECK(b.products_gflops_needed(0.7) == doctest::Approx(24 / (60 / 0.7 - 20) * 1e3));
  CHECK(b.products_gflops_needed(0.8) > b.peak_gflops);  // beyond the best share: out of reach
  const profiler::Bound all_rest{.step_ms = 100, .products_ms = 10, .gflop = 4, .peak_gflops = 400};
  CHECK(all_rest.products_gflops_needed(0.5) == std::numeric_limits<double>::infinity());
  expect_error([&] { (void)b.rest_allowed_ms(0); }, {"rest_allowed_ms", "share", "0"});

  const Tensor a = randn({64, 48}), w = randn({48, 32});
  profiler::Profile p;
  for (int i = 0; i < 4; ++i) relu(matmul(a, w));
  p.stop();
  const profiler::Bound measured = p.bound(4, 1000.0);
  const profiler::Row gemm = find_row(p, "gemm");
  CHECK(measured.gflop == doctest::Approx(2.0 * 64 * 48 * 32 / 1e9));  // per step of 4
  CHECK(measured.products_ms == doctest::Approx(gemm.seconds * 1e3 / 4));
  CHECK(measured.step_ms == doctest::Approx(p.wall_seconds() * 1e3 / 4));
  CHECK(measured.rest_ms() > 0);  // the relus and the time outside kernels
  CHECK(measured.best_share() > measured.share());
  const std::string text = p.bound_text(4, 1000.0, 0.8);
  CHECK(text.find("against the peak of 1000.0 GFLOP/s") != std::string::npos);
  CHECK(text.find("% at best") != std::string::npos);
  CHECK(text.find("80% needs") != std::string::npos);
  // A peak so low that the products at it outlast any rest: their rate decides the target.
  CHECK(p.bound_text(4, 1e-6, 0.8).find("80% needs the products at") != std::string::npos);
  // One so high that they would take no time: the rest must shrink.
  CHECK(p.bound_text(4, 1e12, 0.8).find("80% needs the rest within") != std::string::npos);
  expect_error([&] { (void)p.bound(0, 1000.0); }, {"profiler::Profile::bound", "steps", "0"});
  expect_error([&] { (void)p.bound(4, 0.0); }, {"profiler::Profile::bound", "peak", "0"});
  expect_error([&] { (void)p.bound_text(4, 1000.0, 1.5); }, {"bound_text", "target", "1.5"});
}

// Beam search's groups run kernels on both threads at once: the products' summed time is then
// not a share of the step's, and the text says so instead of bounding it.
TEST_CASE("profiler: with scopes on several threads at once the text gives no bound") {
  // Products long enough to be most of the other thread's scope (which adds the threads' waits).
  const Tensor a = randn({256, 256}), w = randn({256, 256});
  profiler::Profile p;
  std::latch opened(1), done(1);
  std::thread other([&] {
    profiler::RecordFunction scope("other thread");  // open on its thread while the product runs
    opened.count_down();
    done.wait();
  });
  opened.wait();
  for (int i = 0; i < 8; ++i) matmul(a, w);
  done.count_down();
  other.join();
  p.stop();
  CHECK(p.bound_text(1, 100.0).find("several threads at once") != std::string::npos);
  CHECK(p.bound(1, 100.0).gflop > 0);  // the numbers are there; only the text withholds a bound
}

TEST_CASE("profiler: a step without products has no bound against the peak") {
  const Tensor a = randn({64, 48});
  profiler::Profile p;
  relu(a);
  p.stop();
  CHECK(p.bound(1, 100.0).gflop == 0);
  CHECK(p.bound(1, 100.0).best_share() == 0);
  CHECK(p.bound_text(1, 100.0) == "no products ran: no bound against the peak\n");
}

// A program that calls loom from its own threads (beam search's groups of sentences): the rows
// sum every thread's time, while "other" is the time no scope was open on any thread.
TEST_CASE("profiler: scopes open on several threads at once overlap, and the table says so") {
  profiler::Profile p;
  std::latch both_open(2);
  const auto block = [&] {
    profiler::RecordFunction scope("block");
    both_open.arrive_and_wait();  // from here both scopes are open together for 20 ms at least
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  std::thread other(block);
  block();
  other.join();
  p.stop();
  const profiler::Row row = find_row(p, "block");
  CHECK(row.calls == 2);
  CHECK(p.covered_seconds() <= row.seconds - 0.019);  // the 20 ms together count once
  CHECK(p.covered_seconds() <= p.wall_seconds());
  CHECK(p.other_seconds() == doctest::Approx(p.wall_seconds() - p.covered_seconds()));
  CHECK(p.table(1).find("the rows overlap") != std::string::npos);
}

TEST_CASE("profiler: one profile at a time; bad steps for a table are errors") {
  {
    profiler::Profile p;
    expect_error([] { profiler::Profile second; }, {"profiler::Profile", "already running"});
    expect_error([&] { p.table(0); }, {"profiler::Profile::table", "steps", "0"});
    p.stop();  // stopped, its rows still readable: a second would clear them
    expect_error([] { profiler::Profile second; }, {"profiler::Profile", "already running"});
  }
  profiler::Profile after;  // the first has ended
  CHECK(profiler::enabled());
}

// Heads split out of a (B, T, h, hs) projection, (B, h, T, hs): their items are not one stride
// apart but lie in groups of h (GemmArgs::group). Where the CPU computes float32 products in
// its register tiles it reads them in place, with no copy, to the same bits as from contiguous
// copies.
TEST_CASE("profiler: matmul reads heads split out of a projection without copying them") {
  manual_seed(12);
  const Tensor qkv = randn({3, 7, 2, 4, 5});  // (B, T, q|k, h, hs)
  const Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
  profiler::Profile profile;
  const Tensor scores = matmul(q, k.transpose(-1, -2));  // (B, h, T, T)
  profile.stop();
  CHECK(find_row(profile, "gemm").calls == 1);
  CHECK(find_row(profile, "copy").calls == (cpu::use_tiled_gemm(7, 7) ? 0 : 2));
  CHECK(equal(scores, matmul(q.contiguous(), k.contiguous().transpose(-1, -2))));
}

// Attention over interleaved heads, as a model runs it: P V is written interleaved as V is, so
// that the heads' merge, y.transpose(1, 2).reshape(B, T, C), is a view; and q's, k's and v's
// gradients come interleaved as the views of the projection they came from, which take them
// back without a copy. Where the tiles do not take the product (one query) it is computed
// contiguous and copied into the interleaved layout, to the same values.
TEST_CASE("profiler: attention over interleaved heads copies no head, forward or backward") {
  manual_seed(13);
  for (const int64_t queries : {7, 1}) {
    Tensor qkv = randn({3, 7, 60}).requires_grad_();  // (B, T, 3C), C = 4 heads x 5
    // (B, T, C) -> (B, h, rows, hs): the last `rows` positions, heads split by views
    const auto heads = [](const Tensor& t, int64_t rows) {
      const Tensor last = rows < 7 ? t.narrow(1, 7 - rows, rows) : t;
      return last.view({3, rows, 4, 5}).transpose(1, 2);
    };
    const std::vector<Tensor> parts = qkv.split(20, 2);
    const Tensor q = heads(parts[0], queries), k = heads(parts[1], 7), v = heads(parts[2], 7);
    auto profile = std::make_unique<profiler::Profile>();
    const Tensor p = softmax(matmul(q, k.transpose(-1, -2)), -1);
    const Tensor y = matmul(p, v);  // (B, h, queries, hs)
    const Tensor merged = y.transpose(1, 2).reshape({3, queries, 20});
    const Tensor w = randn({3, queries, 20});
    (merged * w).sum().backward();
    profile->stop();
    const int64_t copies = find_row(*profile, "copy").calls;
    const int64_t backward_copies = find_row(*profile, "copy", profiler::Pass::Backward).calls;
    profile.reset();
    CHECK(y.transpose(1, 2).is_contiguous());
    CHECK(equal(y, matmul(p.detach(), v.detach().contiguous())));
    if (queries == 7 && cpu::use_tiled_gemm(7, 7)) {
      CHECK(copies == 0);
      // The backward copies only what any use of the split's three parts copies (joining their
      // gradients, handing the result to the leaf).
      Tensor plain = qkv.detach().clone().requires_grad_();
      const std::vector<Tensor> pieces = plain.split(20, 2);
      profiler::Profile split_only;
      (pieces[0] + pieces[1] + pieces[2]).sum().backward();
      split_only.stop();
      CHECK(backward_copies == find_row(split_only, "copy", profiler::Pass::Backward).calls);
    }
    // the gradient against one computed from contiguous heads
    Tensor qkv2 = qkv.detach().clone().requires_grad_();
    const std::vector<Tensor> parts2 = qkv2.split(20, 2);
    const auto heads2 = [&](int64_t i, int64_t rows) {
      return heads(parts2[i], rows).contiguous();
    };
    const Tensor p2 = softmax(matmul(heads2(0, queries), heads2(1, 7).transpose(-1, -2)), -1);
    (matmul(p2, heads2(2, 7)).transpose(1, 2).reshape({3, queries, 20}) * w).sum().backward();
    loom::testing::check_close(qkv.grad(), qkv2.grad(), 1e-5f, 1e-6f);
  }
}

// detail::SharedGradient's rule: views of one storage, one shape and strides, each a run of
// columns of its own in rows of one pitch; anything else keeps its own gradient.
TEST_CASE("SharedGradient: only views side by side share a buffer, each place taken once") {
  using detail::SharedGradient;
  const Tensor qkv = randn({2, 3, 12}).requires_grad_();  // (B, T, 3 x 4)
  const std::vector<Tensor> parts = qkv.split(4, 2);
  const auto heads = [](const Tensor& t) { return t.view({2, 3, 2, 2}).transpose(1, 2); };
  const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  const std::shared_ptr<SharedGradient> shared = SharedGradient::of({q, k, v});
  REQUIRE(shared != nullptr);
  const Tensor gq = shared->take(0), gk = shared->take(1);
  CHECK(gq.shape() == q.shape());
  CHECK(gq.strides() == q.strides());
  CHECK(gk.data_ptr<float>() == gq.data_ptr<float>() + 4);  // k's place, 4 columns on
  CHECK_FALSE(shared->take(0).defined());                     // taken already
  const Tensor gv = shared->take(2);  // the last place: the next backward gets a new buffer
  CHECK(gv.data_ptr<float>() == gq.data_ptr<float>() + 8);
  CHECK(shared->take(0).data_ptr<float>() != gq.data_ptr<float>());
  CHECK(SharedGradient::of({q, q, v}) == nullptr);                 // one place twice
  CHECK(SharedGradient::of({q, k.detach(), v.detach()}) == nullptr);  // one needs a gradient
  CHECK(SharedGradient::of({q, k.contiguous()}) == nullptr);       // another storage
  CHECK(SharedGradient::of({q, qkv.narrow(2, 2, 4).view({2, 3, 2, 2}).transpose(1, 2)}) ==
        nullptr);  // columns 2-5 cross q's 0-3
  CHECK(SharedGradient::of({q, k.transpose(2, 3)}) == nullptr);  // other strides
}

// q, k and v split from one projection and attended by scaled_dot_product_attention, as the
// models do: their gradients are written side by side in one buffer laid out as the projection
// (detail::SharedGradient), which split's backward hands on whole instead of joining three
// copies. The same bits as attention over contiguous copies of the heads, in a backward, in a
// second backward through the same graph, and through a recorded backward (create_graph).
TEST_CASE("profiler: attention's q, k and v gradients reach their projection without a copy") {
  manual_seed(14);
  // x (B, T, 8) -> qkv (B, T, 3C) -> attention of 4 heads of 5 -> (B, T, C), C = 20
  const auto attend = [](const Tensor& x, const Tensor& w, bool contiguous_heads) {
    std::vector<Tensor> heads = matmul(x, w).split(20, 2);
    for (Tensor& t : heads) {
      t = t.view({3, 7, 4, 5}).transpose(1, 2);
      if (contiguous_heads) t = t.contiguous();
    }
    const Tensor y = nn::functional::scaled_dot_product_attention(heads[0], heads[1], heads[2]);
    return y.transpose(1, 2).reshape({3, 7, 20});
  };
  const Tensor x0 = randn({3, 7, 8}), w0 = randn({8, 60}), r = randn({3, 7, 20});
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
  Tensor xc = x0.clone().requires_grad_(), wc = w0.clone().requires_grad_();
  const Tensor loss = (attend(x, w, false) * r).sum();
  auto profile = std::make_unique<profiler::Profile>();
  loss.backward({}, /*retain_graph=*/true);
  profile->stop();
  const int64_t copies = find_row(*profile, "copy", profiler::Pass::Backward).calls;
  profile.reset();
  (attend(xc, wc, true) * r).sum().backward();
  CHECK(equal(x.grad(), xc.grad()));
  CHECK(equal(w.grad(), wc.grad()));
  if (cpu::use_tiled_gemm(7, 7)) {  // where the tiles read the heads in place
    // The backward copies only what the projection's own backward copies.
    Tensor xp = x0.clone().requires_grad_(), wp = w0.clone().requires_grad_();
    const Tensor projection_only = (matmul(xp, wp) * randn({3, 7, 60})).sum();
    profiler::Profile projection;
    projection_only.backward();
    projection.stop();
    CHECK(copies == find_row(projection, "copy", profiler::Pass::Backward).calls);
  }
  // A second backward through the graph writes a new buffer: the first gradients are intact.
  const Tensor first = w.grad().clone();
  loss.backward();
  CHECK(equal(w.grad(), first * 2.0f));
  // A recorded backward joins the gradients by a recorded cat, and its own backward runs.
  x.grad() = Tensor(), xc.grad() = Tensor();
  const Tensor gx = autograd::grad({(attend(x, w, false) * r).sum()}, {x}, {}, false, true)[0];
  const Tensor gxc = autograd::grad({(attend(xc, wc, true) * r).sum()}, {xc}, {}, false, true)[0];
  CHECK(gx.requires_grad());
  CHECK(equal(gx, gxc));
  const Tensor ggx = autograd::grad({(gx * gx).sum()}, {x})[0];
  const Tensor ggxc = autograd::grad({(gxc * gxc).sum()}, {xc})[0];
  loom::testing::check_close(ggx, ggxc, 1e-5f, 1e-6f);
  // One view as q, k and v: no buffer holds three gradients of the same place; they add up.
  const auto self_attend = [&](const Tensor& xs, bool contiguous_heads) {
    Tensor h = matmul(xs, w0.narrow(1, 0, 20)).view({3, 7, 4, 5}).transpose(1, 2);
    if (contiguous_heads) h = h.contiguous();
    return (nn::functional::scaled_dot_product_attention(h, h, h) * r.view({3, 4, 7, 5})).sum();
  };
  Tensor xs = x0.clone().requires_grad_(), xsc = x0.clone().requires_grad_();
  self_attend(xs, false).backward();
  self_attend(xsc, true).backward();
  CHECK(equal(xs.grad(), xsc.grad()));
}
