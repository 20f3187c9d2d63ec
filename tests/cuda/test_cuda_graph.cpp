// CudaGraph (backends/graph.h): work recorded once and replayed on the same memory, the errors of
// what a capture cannot record, and device-side errors raised inside a replay. Without a GPU
// the cases return at once (test_cuda.cpp's first case reports that once); on the emulator
// (tests/cuda/emulator) a capture records closures and a replay runs them.
#include <vector>

#include "backends/graph.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("CudaGraph: a capture records the work, each replay runs it on the current inputs") {
  LOOM_REQUIRE_GPU();
  Tensor x = tensor({1, 2, 3}, {3}).to(Device::CUDA);
  Tensor out = zeros({3}, Device::CUDA);
  Tensor inner;  // created during the capture: it lives in the graph's memory pool
  CudaGraph graph;
  CHECK_FALSE(graph.captured());
  graph.capture([&] {
    inner = exp(x) * 0.0f + x * 3.0f;  // several kernels, one intermediate freed inside
    out.copy_(inner + 1.0f);
  });
  CHECK(graph.captured());
  CHECK(out.to_vector() == std::vector<float>{0, 0, 0});  // recording runs nothing
  graph.replay();
  CHECK(out.to_vector() == std::vector<float>{4, 7, 10});
  CHECK(inner.to_vector() == std::vector<float>{3, 6, 9});
  x.copy_(tensor({-1, 0, 1}, {3}));  // a new input, written in place
  graph.replay();
  graph.replay();  // replays queue like kernels; the result is the same
  CHECK(out.to_vector() == std::vector<float>{-2, 1, 4});
  // Work after the capture uses the ordinary memory and runs at once.
  CHECK((x + 1.0f).to_vector() == std::vector<float>{0, 1, 2});
  graph.reset();
  CHECK_FALSE(graph.captured());
  CHECK(inner.to_vector() == std::vector<float>{-3, 0, 3});  // the pool lives while inner does
}

TEST_CASE("CudaGraph: a matrix product and a sampled token, advanced by device counters") {
  LOOM_REQUIRE_GPU();
  manual_seed(2);
  const Tensor w = randn({5, 4}).to(Device::CUDA);
  Tensor h = randn({1, 4}).to(Device::CUDA);
  Tensor draws = zeros({1}, DType::Int64, Device::CUDA);  // the sampler's counter, on the device
  Tensor token = zeros({1}, DType::Int64, Device::CUDA);
  const Tensor next_count = arange(8, Device::CUDA).narrow(0, 1, 7).contiguous();  // n -> n + 1
  CudaGraph graph;
  graph.capture([&] {
    const Tensor logits = matmul(h, w.t());  // (1, 5)
    token.copy_(models::sample_next(logits, 1.0f, 0, 1.0f, 9, 100, draws));
    draws.copy_(index_select(next_count, 0, draws));
  });
  const Tensor logits = matmul(h, w.t());
  for (uint64_t step = 0; step < 4; ++step) {
    graph.replay();
    // The replay drew counter 100 + step, as a direct call with that offset does.
    CHECK(token.to_vector_i64() ==
          models::sample_next(logits, 1.0f, 0, 1.0f, 9, 100 + step).to_vector_i64());
    CHECK(draws.to_vector_i64() == std::vector<int64_t>{static_cast<int64_t>(step + 1)});
  }
}

TEST_CASE("CudaGraph: what needs the host fails the capture with loom::Error, and nothing leaks") {
  LOOM_REQUIRE_GPU();
  Tensor x = tensor({1, 2}, {2}).to(Device::CUDA);
  CudaGraph graph;
  expect_error([&] { graph.capture([&] { (void)(x * 2.0f).sum().item(); }); },
               {"graph capture", "copy to the host", "cannot record"});
  CHECK_FALSE(graph.captured());
  expect_error([&] { graph.capture([&] { (void)tensor({1}, {1}).to(Device::CUDA); }); },
               {"graph capture", "copy from the host"});
  expect_error([&] { graph.capture([&] { backend(Device::CUDA).synchronize(); }); },
               {"graph capture", "synchronize()"});
  // The device works as before after each failed capture, and a new capture succeeds.
  CHECK((x * 2.0f).to_vector() == std::vector<float>{2, 4});
  Tensor out = zeros({2}, Device::CUDA);
  graph.capture([&] { out.copy_(x - 1.0f); });
  graph.replay();
  CHECK(out.to_vector() == std::vector<float>{0, 1});
  expect_error([&] { CudaGraph().replay(); }, {"CudaGraph::replay", "nothing was captured"});
  expect_error([&] { CudaGraph().capture([] {}, Device::CPU); },
               {"graph capture", "cpu", "CUDA graphs need a CUDA device"});
}

TEST_CASE("CudaGraph: a bad index met by a replay is a loom::Error at the next wait") {
  LOOM_REQUIRE_GPU();
  const Tensor table = tensor({10, 20, 30}, {3, 1}).to(Device::CUDA);
  Tensor index = zeros({1}, DType::Int64, Device::CUDA);
  Tensor out = zeros({1, 1}, Device::CUDA);
  CudaGraph graph;
  graph.capture([&] { out.copy_(index_select(table, 0, index)); });
  index.fill_(2.0f);
  graph.replay();
  CHECK(out.to_vector() == std::vector<float>{30});
  index.fill_(7.0f);  // out of range: the replay's kernel raises its flag, read at the next wait
  graph.replay();
  expect_error([&] { (void)out.to_vector(); },
               {"index_select", "index 7", "size 3", "replayed CUDA graph"});
  index.fill_(1.0f);  // the flag was read and cleared: the graph runs on
  graph.replay();
  CHECK(out.to_vector() == std::vector<float>{20});
}

#ifdef LOOM_CUDA_EMULATED
#include "emu.h"

TEST_CASE("CudaGraph: a replay is one launch, and a destroyed graph gives its memory back") {
  // Counted by the emulator: each replay queues one graph launch; the capture's private pool
  // (its intermediates and the graph's error flags) is freed when the graph goes, so capturing
  // and dropping graphs again and again holds no more device memory.
  Tensor x = tensor({1, 2, 3}, {3}).to(Device::CUDA);
  Tensor out = zeros({3}, Device::CUDA);
  const long long blocks = emu::device_blocks();
  for (int round = 0; round < 3; ++round) {
    CudaGraph graph;
    graph.capture([&] { out.copy_(index_select(x * 2.0f + 1.0f, 0, arange(3, Device::CUDA))); });
    const unsigned long long launches = emu::graph_launches();
    graph.replay();
    graph.replay();
    CHECK(emu::graph_launches() == launches + 2);
    CHECK(out.to_vector() == std::vector<float>{3, 5, 7});
    graph.reset();
    CHECK_MESSAGE(emu::device_blocks() == blocks, "round " << round);
  }
}
#endif
