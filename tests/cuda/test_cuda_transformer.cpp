// The encoder-decoder Transformer on CUDA against the same model on the CPU: logits with source
// and target padding, cross-attention maps, every parameter gradient, a few Adam steps, and the
// tokens of greedy and beam decoding (the incremental decoder on the GPU). Without a GPU the
// case returns at once (test_cuda.cpp's first case reports that once).
#include <string>
#include <vector>

#include "models/transformer.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

models::TransformerConfig tiny_transformer() {
  models::TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 13;
  c.d_model = 16, c.n_head = 2, c.d_ff = 32, c.max_len = 16;
  c.n_encoder_layers = c.n_decoder_layers = 2;
  c.dropout = 0.0f;
  return c;
}

}  // namespace

TEST_CASE("a Transformer on CUDA: logits, gradients, Adam steps and decoded tokens match the CPU") {
  LOOM_REQUIRE_GPU();
  const models::TransformerConfig config = tiny_transformer();
  const Tensor src = tensor_i64({3, 7, 2, 9, 5, 4, 8, 6, 0, 0}, {2, 5});  // padding in row 1
  const Tensor tgt_in = tensor_i64({1, 6, 3, 10, 1, 9, 0, 0}, {2, 4});
  const Tensor tgt_out = tensor_i64({6, 3, 10, 2, 9, 2, 0, 0}, {2, 4});
  manual_seed(7);
  models::Transformer cpu(config);
  manual_seed(7);
  models::Transformer gpu(config);
  gpu.to(Device::CUDA);
  for (auto& [name, p] : gpu.named_parameters()) CHECK_MESSAGE(p.device() == Device::CUDA, name);

  std::vector<Tensor> cross_cpu, cross_gpu;
  const Tensor logits_cpu = cpu.forward(src, tgt_in, &cross_cpu);
  const Tensor logits_gpu = gpu.forward(src.to(Device::CUDA), tgt_in.to(Device::CUDA), &cross_gpu);
  REQUIRE(logits_gpu.device() == Device::CUDA);
  check_close(logits_gpu, logits_cpu, 2e-4f, 2e-5f, "logits");
  REQUIRE(cross_gpu.size() == cross_cpu.size());
  for (size_t i = 0; i < cross_cpu.size(); ++i)
    check_close(cross_gpu[i], cross_cpu[i], 2e-4f, 2e-5f, "cross-attention " + std::to_string(i));
  cross_entropy(logits_cpu, tgt_out, 0, 0.1f).backward();
  cross_entropy(logits_gpu, tgt_out.to(Device::CUDA), 0, 0.1f).backward();
  const auto p_cpu = cpu.named_parameters(), p_gpu = gpu.named_parameters();
  REQUIRE(p_cpu.size() == p_gpu.size());
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    REQUIRE_MESSAGE(p_gpu[i].second.grad().defined(), p_gpu[i].first << " got no gradient");
    check_close(p_gpu[i].second.grad(), p_cpu[i].second.grad(), 1e-3f, 1e-5f,
                "grad " + p_cpu[i].first);
  }

  // Three Adam steps (the paper's betas) on both devices from the same weights.
  optim::Adam opt_cpu(cpu.parameters(), 1e-2f, 0.9f, 0.98f, 1e-9f),
      opt_gpu(gpu.parameters(), 1e-2f, 0.9f, 0.98f, 1e-9f);
  opt_cpu.zero_grad(), opt_gpu.zero_grad();
  float loss_cpu = 0, loss_gpu = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor l1 = cross_entropy(cpu.forward(src, tgt_in), tgt_out, 0, 0.1f);
    Tensor l2 = cross_entropy(gpu.forward(src.to(Device::CUDA), tgt_in.to(Device::CUDA)),
                              tgt_out.to(Device::CUDA), 0, 0.1f);
    l1.backward(), l2.backward();
    opt_cpu.step(), opt_gpu.step();
    opt_cpu.zero_grad(), opt_gpu.zero_grad();
    loss_cpu = l1.item(), loss_gpu = l2.item();
  }
  CHECK(loss_gpu == doctest::Approx(loss_cpu).epsilon(1e-4));
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    const std::string& name = p_cpu[i].first;
    // A key bias adds the same q.b_k to every score of a query, which softmax cancels: its true
    // gradient is 0, and Adam turns the rounding noise in its place into steps of either sign.
    if (name.ends_with(".k.bias")) continue;
    check_close(p_gpu[i].second, p_cpu[i].second, 1e-3f, 1e-5f, "after 3 Adam steps: " + name);
  }

  // Decoding on the GPU gives the CPU's tokens, greedy and beam.
  const std::vector<std::vector<int64_t>> srcs = {{3, 7, 2, 9}, {4, 8}, {5, 6, 11, 12, 3}};
  for (int64_t beam : {1, 3})
    CHECK(gpu.translate_batch(srcs, 1, 2, 8, beam, 0.6f) ==
          cpu.translate_batch(srcs, 1, 2, 8, beam, 0.6f));
}
