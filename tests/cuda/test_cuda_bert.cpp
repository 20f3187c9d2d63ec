// BERT on CUDA against the same BERT on the CPU: the four outputs with a padding mask, every
// parameter gradient of the pre-training loss, a few AdamW steps, and the classification head.
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <string>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

models::BertConfig tiny_bert() {
  models::BertConfig c{50, 16, 2, 2, 32, 16};
  c.dropout = 0.0f;
  return c;
}

}  // namespace

TEST_CASE("BERT on CUDA: outputs, every gradient and AdamW steps match the CPU") {
  LOOM_REQUIRE_GPU();
  const models::BertConfig config = tiny_bert();
  const Tensor ids = tensor_i64({2, 7, 9, 3, 11, 12, 3, 2, 8, 3, 13, 3, 0, 0}, {2, 7});
  const Tensor types = tensor_i64({0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0}, {2, 7});
  const Tensor mask = tensor_i64({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 7});
  const Tensor mlm_labels = tensor_i64(
      {-100, 5, -100, -100, 20, -100, -100, -100, 30, -100, -100, -100, -100, -100}, {2, 7});
  const Tensor nsp_labels = tensor_i64({0, 1}, {2});
  auto cuda = [](const Tensor& t) { return t.to(Device::CUDA); };
  manual_seed(7);
  models::Bert cpu(config);
  manual_seed(7);
  models::Bert gpu(config);
  gpu.to(Device::CUDA);
  // Still tied after the move: the decoder is the word embedding.
  CHECK(gpu.decoder->weight.impl() == gpu.bert->embeddings->word_embeddings->weight.impl());

  const models::BertOutput a = cpu.forward(ids, types, mask);
  const models::BertOutput b = gpu.forward(cuda(ids), cuda(types), cuda(mask));
  REQUIRE(b.mlm_logits.device() == Device::CUDA);
  check_close(b.hidden.narrow(0, 0, 1), a.hidden.narrow(0, 0, 1), 2e-4f, 2e-5f, "hidden");
  check_close(b.pooled, a.pooled, 2e-4f, 2e-5f, "pooled");
  check_close(b.nsp_logits, a.nsp_logits, 2e-4f, 2e-5f, "nsp_logits");
  models::bert_pretraining_loss(a, mlm_labels, nsp_labels).backward();
  models::bert_pretraining_loss(b, cuda(mlm_labels), cuda(nsp_labels)).backward();
  const auto p_cpu = cpu.named_parameters(), p_gpu = gpu.named_parameters();
  REQUIRE(p_cpu.size() == p_gpu.size());
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    REQUIRE_MESSAGE(p_gpu[i].second.grad().defined(), p_gpu[i].first << " got no gradient");
    check_close(p_gpu[i].second.grad(), p_cpu[i].second.grad(), 1e-3f, 1e-5f,
                "grad " + p_cpu[i].first);
  }

  optim::AdamW opt_cpu(cpu.parameters(), 1e-2f), opt_gpu(gpu.parameters(), 1e-2f);
  opt_cpu.zero_grad(), opt_gpu.zero_grad();
  float loss_cpu = 0, loss_gpu = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor l1 =
        models::bert_pretraining_loss(cpu.forward(ids, types, mask), mlm_labels, nsp_labels);
    Tensor l2 = models::bert_pretraining_loss(gpu.forward(cuda(ids), cuda(types), cuda(mask)),
                                              cuda(mlm_labels), cuda(nsp_labels));
    l1.backward(), l2.backward();
    opt_cpu.step(), opt_gpu.step();
    opt_cpu.zero_grad(), opt_gpu.zero_grad();
    loss_cpu = l1.item(), loss_gpu = l2.item();
  }
  CHECK(loss_gpu == doctest::Approx(loss_cpu).epsilon(1e-4));
}

TEST_CASE("BertForSequenceClassification on CUDA matches the CPU") {
  LOOM_REQUIRE_GPU();
  const Tensor ids = tensor_i64({2, 7, 9, 3, 2, 8, 3, 0}, {2, 4});
  const Tensor mask = tensor({1, 1, 1, 1, 1, 1, 1, 0}, {2, 4});
  manual_seed(9);
  models::BertForSequenceClassification cpu(tiny_bert(), 3);
  manual_seed(9);
  models::BertForSequenceClassification gpu(tiny_bert(), 3);
  gpu.to(Device::CUDA);
  check_close(gpu.forward(ids.to(Device::CUDA), Tensor(), mask.to(Device::CUDA)),
              cpu.forward(ids, Tensor(), mask), 2e-4f, 2e-5f, "logits");
}
