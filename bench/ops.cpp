// Op-level benchmark: matmul through loom vs cblas_sgemm directly, memory-bound kernels, and
// the tensor ops a PyTorch user reaches for.
//   ops                      all cases, human-readable
//   ops CASE [--steps N] [--threads T]   one JSON line, the keys of bench/reference/bench.py CASE:
//     sgemm                  matmul of two 1024x1024 float32 matrices ("gflops"), and the same
//                            product by cblas_sgemm ("cblas_gflops": the machine's BLAS)
//     einsum topk index cumsum
//                            one op on a [256, 1024] float32 x (and y): einsum("ij,kj->ik", x, y);
//                            topk(x, 10) along the last dim; x.index({rows}) with 256 int64 row
//                            indices, then x.index({x > 0}) (a Bool mask); cumsum(x, 1)
#include <cblas.h>
#include <fmt/format.h>

#include "bench_util.h"
#include "examples/cli.h"
#include "loom.h"

using namespace loom;
using loom::bench::time_steps;

namespace {

constexpr int64_t kN = 1024;

double gflops(double seconds) { return 2.0 * kN * kN * kN / seconds / 1e9; }

void sgemm_json(int steps) {
  manual_seed(0);
  Tensor a = randn({kN, kN}), b = randn({kN, kN});
  Tensor c = Tensor::empty({kN, kN});
  auto t = time_steps([&] { matmul(a, b); }, steps);
  auto blas = time_steps([&] { bench::blas_matmul(a, b, c); }, steps);
  bench::JsonLine("sgemm")
      .add("n", kN)
      .times(t)
      .add("gflops", gflops(t.median_s), 2)
      .add("cblas_gflops", gflops(blas.median_s), 2)
      .add("steps", steps)
      .add("warmup", bench::kWarmup)
      .threads()
      .print();
}

// The tensor-op cases, as bench/reference/bench.py's case_tensor_op draws them.
void tensor_op_json(const std::string& name, int steps) {
  manual_seed(0);
  Tensor x = randn({256, 1024}), y = randn({256, 1024});
  Tensor rows = randint(0, 256, {256});
  std::function<void()> op;
  if (name == "einsum") op = [&] { einsum("ij,kj->ik", {x, y}); };
  if (name == "topk") op = [&] { topk(x, 10); };
  if (name == "index") op = [&] { x.index({rows}), x.index({x > 0}); };
  if (name == "cumsum") op = [&] { cumsum(x, 1); };
  auto t = time_steps(op, steps);
  bench::JsonLine(name)
      .add("shape", std::string("[256, 1024]"))
      .times(t)
      .add("steps", steps)
      .add("warmup", bench::kWarmup)
      .threads()
      .print();
}

void all_cases(int steps) {
  manual_seed(0);
  Tensor a = randn({kN, kN}), b = randn({kN, kN});
  auto loom_mm = time_steps([&] { matmul(a, b); }, steps);
  Tensor c = Tensor::empty({kN, kN});
  auto blas_mm = time_steps([&] { bench::blas_matmul(a, b, c); }, steps);
  auto loom_mm_t = time_steps([&] { matmul(a, b.t()); }, steps);
  fmt::print("matmul 1024^3        loom {:7.1f} GFLOP/s   cblas_sgemm {:7.1f} GFLOP/s   "
             "ratio {:.3f}\n",
             gflops(loom_mm.median_s), gflops(blas_mm.median_s),
             blas_mm.median_s / loom_mm.median_s);
  fmt::print("matmul 1024^3 (B^T)  loom {:7.1f} GFLOP/s   "
             "(transposed view passed as a BLAS flag)\n",
             gflops(loom_mm_t.median_s));

  const int64_t n = 16 << 20;
  Tensor x = randn({n}), y = randn({n});
  auto add = time_steps([&] { x + y; }, steps);
  fmt::print("add 16M float32      {:7.2f} GB/s  ({:.2f} ms)\n", 3.0 * 4 * n / add.median_s / 1e9,
             add.median_s * 1e3);
  Tensor rows = randn({16384, 1024});
  auto sm = time_steps([&] { softmax(rows, -1); }, steps);
  fmt::print("softmax 16384x1024   {:7.2f} GB/s  ({:.2f} ms)\n",
             2.0 * 4 * rows.numel() / sm.median_s / 1e9, sm.median_s * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string case_name;
  int threads = 2, steps = 0;
  CLI::App app{"ops: matmul (loom vs cblas_sgemm), add and softmax bandwidth, tensor ops"};
  cli::show_defaults(app);
  app.add_option("case", case_name,
                 "sgemm, einsum, topk, index or cumsum: one JSON line, comparable with "
                 "bench/reference/bench.py CASE (none: matmul, add and softmax, human-readable)")
      ->check(CLI::IsMember({"sgemm", "einsum", "topk", "index", "cumsum"}));
  app.add_option("--steps", steps, "timed steps (0 = 20 for sgemm, 10 otherwise)")
      ->check(cli::range(0, 1000000));
  app.add_option("--threads", threads, "CPU threads")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  CLI11_PARSE(app, argc, argv);
  if (steps == 0) steps = case_name == "sgemm" ? 20 : 10;
  set_num_threads(threads);
  if (case_name.empty())
    all_cases(steps);
  else if (case_name == "sgemm")
    sgemm_json(steps);
  else
    tensor_op_json(case_name, steps);
  return 0;
}
