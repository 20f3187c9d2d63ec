// Encoder-decoder Transformer benchmark, side by side with bench/reference/bench.py: the same
// model (its Seq2Seq: vocab 1000 shared, d 256, 4 heads, 3 + 3 post-norm layers, FF 1024;
// 5,785,600 parameters), the same data, timed the same way (median of N steps after 3 warm-ups),
// one JSON line with the same keys.
//
//   seq2seq seq2seq-mini             training step on batch 32 of random 32-token sources and
//                                    33-token targets (decoder input = first 32, labels = last
//                                    32): forward + cross-entropy (label smoothing 0.1) +
//                                    backward + Adam(betas (0.9, 0.98), eps 1e-9) with the Noam
//                                    schedule (d 256, warmup 4000) + zero_grad
//   seq2seq seq2seq-mini-translate   32 random 24-token sources (random weights, eval mode);
//                                    one step = encode + decode 24 tokens per sentence from BOS
//                                    id 1 with the KV cache (eos never produced), greedy; the
//                                    beam_* fields time beam search width 4 the same way;
//                                    the timed steps run in one PackedWeightsGuard, as a
//                                    program translating many batches opens one: each weight
//                                    is packed once for them all, not once per batch
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda  --profile
//   beam_flops_per_step: the beam search's products (PyTorch's twin counts greedy only)
//   idle OpenMP workers spin briefly, then sleep (cli::use_short_omp_spin)
//
// loom's model masks key id 0 (pad_id) where models.py's masks nothing; random ids hit 0 about
// once per 1000 tokens, which changes no amount of work.
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_util.h"
#include "loom.h"

using namespace loom;

namespace {

using bench::Args;

// bench.py's seq2seq-mini: the same batch every step; LambdaLR's counter starts at 0, so
// step i (from 0) runs at noam_lr(i + 1).
void train_case(const Args& args) {
  const int64_t B = 32, T = 32;
  manual_seed(0);
  const models::TransformerConfig config = models::TransformerConfig::preset("seq2seq-mini");
  models::Transformer model(config);
  model.to(args.device);
  model.train();
  const Tensor src = randint(0, config.src_vocab_size, {B, T}).to(args.device);      // (B, T)
  const Tensor tgt = randint(0, config.tgt_vocab_size, {B, T + 1}).to(args.device);  // (B, T+1)
  const Tensor tgt_in = tgt.narrow(1, 0, T).contiguous(),
               tgt_out = tgt.narrow(1, 1, T).contiguous();
  optim::Adam opt(model.parameters(), optim::noam_lr(1, config.d_model, 4000), 0.9f, 0.98f, 1e-9f);
  std::vector<float> losses;
  int64_t step_number = 0;
  auto step = [&] {
    opt.set_lr(optim::noam_lr(++step_number, config.d_model, 4000));
    bench::update(cross_entropy(model.forward(src, tgt_in), tgt_out, -100, 0.1f), opt, losses);
  };
  const bench::Timing t = bench::time_case(step, args, args.case_name);
  bench::JsonLine(args.case_name)
      .add("batch", B)
      .add("src_len", T)
      .add("tgt_len", T)
      .add("tokens_per_s", static_cast<double>(B * T) / t.median_s, 2)
      .common(t, args.steps, model.num_parameters(), args.device)
      .achieved(bench::seq2seq_training_flops(config, B, T, T), t, args.sgemm_gflops)
      .losses(losses)
      .print();
}

// bench.py's seq2seq-mini-translate.
void translate_case(const Args& args) {
  const int64_t B = 32, S = 24, new_tokens = 24, beam = 4, bos = 1, no_eos = -1;
  manual_seed(0);
  const models::TransformerConfig config = models::TransformerConfig::preset("seq2seq-mini");
  models::Transformer model(config);
  model.to(args.device);
  model.eval();
  const std::vector<int64_t> ids = randint(0, config.src_vocab_size, {B, S}).to_vector_i64();
  std::vector<std::vector<int64_t>> srcs;
  for (int64_t b = 0; b < B; ++b) srcs.emplace_back(ids.begin() + b * S, ids.begin() + (b + 1) * S);

  auto greedy = model.translate_batch(srcs, bos, no_eos, new_tokens, 1);
  // Check: the cached decoder's greedy tokens equal the argmax of a full re-run on its prefix.
  bool matches = true;
  {
    NoGradGuard no_grad;
    std::vector<int64_t> in;
    for (const auto& g : greedy) {
      in.push_back(bos);
      in.insert(in.end(), g.begin(), g.end() - 1);
    }
    const Tensor full = model.forward(tensor_i64(ids, {B, S}).to(args.device),
                                      tensor_i64(in, {B, new_tokens}).to(args.device));
    const std::vector<int64_t> best = argmax(full, 2).to_vector_i64();  // (B, new_tokens)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < new_tokens; ++t)
        matches = matches && best[static_cast<size_t>(b * new_tokens + t)] ==
                                 greedy[static_cast<size_t>(b)][static_cast<size_t>(t)];
  }
  // Many batches translated with fixed weights, as a test set is: one guard around them all
  // keeps each weight packed from its second use (the encoder's, used once per batch,
  // included) instead of packing the decoder's again for every batch.
  PackedWeightsGuard packed;
  const bench::Timing t = bench::time_case(
      [&] { greedy = model.translate_batch(srcs, bos, no_eos, new_tokens, 1); }, args,
      args.case_name + " (greedy)");
  const bench::Timing tb = bench::time_case(
      [&] { model.translate_batch(srcs, bos, no_eos, new_tokens, beam); }, args,
      args.case_name + " (beam 4)");
  const double total = static_cast<double>(B * new_tokens);
  bench::JsonLine(args.case_name)
      .add("batch", B)
      .add("src_len", S)
      .add("new_tokens", new_tokens)
      .add("beam", beam)
      .flag("kv_cache", true)
      .flag("cache_matches_full", matches)
      .times(tb, "beam_")
      .add("beam_new_tokens_per_s", total / tb.median_s, 2)
      .add("beam_flops_per_step", bench::seq2seq_decode_flops(config, B, S, new_tokens, beam) / 1e9,
           4)
      .add("new_tokens_per_s", total / t.median_s, 2)
      .common(t, args.steps, model.num_parameters(), args.device)
      .achieved(bench::seq2seq_decode_flops(config, B, S, new_tokens, 1), t, args.sgemm_gflops)
      .print();
}

// The cases `seq2seq CASE` names, each with its --help line and the function that runs it.
const std::vector<bench::Case> kCases = {
    {"seq2seq-mini", "training step, batch 32 x 32 source and target tokens", train_case},
    {"seq2seq-mini-translate",
     "greedy and beam-4 decoding of 32 x 24 new tokens (the weights packed once for all steps)",
     translate_case}};

}  // namespace

int main(int argc, char** argv) {
  return bench::run_cases(argc, argv, "seq2seq", "one encoder-decoder Transformer benchmark case",
                          kCases);
}
