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
//                                    beam_* fields time beam search width 4 the same way
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda
//   idle OpenMP workers spin briefly, then sleep (cli::use_short_omp_spin)
//
// loom's model masks key id 0 (pad_id) where models.py's masks nothing; random ids hit 0 about
// once per 1000 tokens, which changes no amount of work.
#include <cblas.h>
#include <fmt/format.h>

#include <string>

#include "bench_cli.h"
#include "bench_util.h"
#include "loom.h"

using namespace loom;
using loom::bench::time_steps;

namespace {

using bench::Args;

std::string common_fields(const bench::Timing& t, const Args& args, int64_t params) {
  return fmt::format("\"ms_per_step\": {:.3f}, \"ms_min\": {:.3f}, \"ms_max\": {:.3f}",
                     t.median_s * 1e3, t.min_s * 1e3, t.max_s * 1e3) +
         fmt::format(
             ", \"steps\": {}, \"warmup\": 3, \"params\": {}, \"threads\": {}, "
             "\"blas_threads\": {}, \"device\": \"{}\", \"framework\": \"loom\"",
             args.steps, params, get_num_threads(), openblas_get_num_threads(),
             device_name(args.device));
}

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
    const Tensor loss = cross_entropy(model.forward(src, tgt_in), tgt_out, -100, 0.1f);
    loss.backward();
    opt.step();
    opt.zero_grad(false);
    losses.push_back(loss.item());
  };
  const bench::Timing t = time_steps(step, args.steps);
  fmt::print(
      "{{\"case\": \"{}\", \"batch\": {}, \"src_len\": {}, \"tgt_len\": {}, "
      "\"tokens_per_s\": {:.2f}, {}, \"loss_first\": {:.5f}, \"loss_last\": {:.5f}}}\n",
      args.case_name, B, T, T, static_cast<double>(B * T) / t.median_s,
      common_fields(t, args, model.num_parameters()), losses.front(), losses.back());
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
  const bench::Timing t = time_steps(
      [&] { greedy = model.translate_batch(srcs, bos, no_eos, new_tokens, 1); }, args.steps);
  const bench::Timing tb =
      time_steps([&] { model.translate_batch(srcs, bos, no_eos, new_tokens, beam); }, args.steps);
  const double total = static_cast<double>(B * new_tokens);
  fmt::print(
      "{{\"case\": \"{}\", \"batch\": {}, \"src_len\": {}, \"new_tokens\": {}, \"beam\": {}, "
      "\"kv_cache\": true, \"cache_matches_full\": {}, \"beam_ms_per_step\": {:.3f}, "
      "\"beam_ms_min\": {:.3f}, \"beam_ms_max\": {:.3f}, \"beam_new_tokens_per_s\": {:.2f}, "
      "\"new_tokens_per_s\": {:.2f}, {}}}\n",
      args.case_name, B, S, new_tokens, beam, matches ? "true" : "false", tb.median_s * 1e3,
      tb.min_s * 1e3, tb.max_s * 1e3, total / tb.median_s, total / t.median_s,
      common_fields(t, args, model.num_parameters()));
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_cases(
      argc, argv, "seq2seq",
      "one encoder-decoder Transformer benchmark case; prints one JSON line comparable with "
      "bench/reference/bench.py CASE",
      {{"seq2seq-mini", "training step, batch 32 x 32 source and target tokens"},
       {"seq2seq-mini-translate", "greedy and beam-4 decoding of 32 x 24 new tokens"}},
      [](const bench::Args& args) {
        if (args.case_name == "seq2seq-mini")
          train_case(args);
        else
          translate_case(args);
      });
}
