// BERT benchmark, side by side with bench/reference/bench.py bert-mini: the same model, the
// same data, timed the same way (median of N steps after 3 warm-ups), one JSON line with the
// same keys.
//
//   bert bert-mini   one pre-training step of models.py's BertForPreTraining (vocab 8192,
//                    H 256, 4 layers, 4 heads, intermediate 1024, dropout 0.1 in training mode;
//                    5,430,786 parameters) on batch 32 x 128: ids uniform in [1, 8192), token
//                    type 0 for the first 64 positions and 1 for the rest, exactly 614 positions
//                    (15% of 4096, drawn over the whole batch) masked to id 4 with the original
//                    id as label (-100 elsewhere), random NSP labels
//   one step = forward + (MLM CE over the 614 + NSP CE) + backward + AdamW(lr 1e-4, eps 1e-6,
//              wd 0.01) step + zero_grad
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda  --profile
//   idle OpenMP workers spin briefly, then sleep (cli::use_short_omp_spin)
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_util.h"
#include "loom.h"

using namespace loom;

namespace {

using bench::Args;

struct Batch {
  Tensor ids, types, mlm_labels, nsp_labels;
  int64_t masked = 0;
};

// bench.py's bert-mini data, generated once (from loom's generator, not torch's).
Batch make_batch(int64_t B, int64_t T, int64_t V, Device device) {
  std::vector<int64_t> ids = randint(1, V, {B, T}).to_vector_i64();
  // The first round(15%) positions of a random permutation of all B*T (torch.randperm).
  const std::vector<float> keys = rand({B * T}).to_vector();
  std::vector<int64_t> order(static_cast<size_t>(B * T));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  const auto n_mask = static_cast<int64_t>(std::llround(0.15 * static_cast<double>(B * T)));
  std::vector<int64_t> labels(static_cast<size_t>(B * T), -100);
  for (int64_t i = 0; i < n_mask; ++i) {
    labels[order[i]] = ids[order[i]];
    ids[order[i]] = 4;  // a [MASK] id
  }
  std::vector<int64_t> types(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) types[i] = (i % T) < T / 2 ? 0 : 1;
  return {tensor_i64(ids, {B, T}).to(device), tensor_i64(types, {B, T}).to(device),
          tensor_i64(labels, {B, T}).to(device), randint(0, 2, {B}).to(device), n_mask};
}

void pretraining_case(const Args& args) {
  const models::BertConfig config = models::BertConfig::preset("bert-mini");
  const int64_t B = 32, T = 128;
  manual_seed(0);
  models::Bert model(config);
  model.to(args.device);
  model.train();  // dropout active, as bench.py
  const Batch batch = make_batch(B, T, config.vocab_size, args.device);
  optim::AdamW opt(model.parameters(), 1e-4f, 0.9f, 0.999f, 1e-6f, 0.01f);
  std::vector<float> losses;
  auto step = [&] {
    const models::BertOutput out = model.forward(batch.ids, batch.types);
    bench::update(models::bert_pretraining_loss(out, batch.mlm_labels, batch.nsp_labels), opt,
                  losses);
  };
  const bench::Timing t = bench::time_case(step, args, args.case_name);
  bench::JsonLine(args.case_name)
      .add("batch", B)
      .add("seq", T)
      .add("masked", batch.masked)
      .add("tokens_per_s", static_cast<double>(B * T) / t.median_s, 2)
      .common(t, args.steps, model.num_parameters(), args.device)
      .achieved(bench::bert_training_flops(config, B, T), t, args.sgemm_gflops)
      .losses(losses)
      .print();
}

// The cases `bert CASE` names, each with its --help line and the function that runs it.
const std::vector<bench::Case> kCases = {
    {"bert-mini", "MLM + NSP pre-training step, batch 32 x 128 (5,430,786 parameters)",
     pretraining_case}};

}  // namespace

int main(int argc, char** argv) {
  return bench::run_cases(argc, argv, "bert", "the BERT benchmark case", kCases);
}
