// Chapter 07 (docs/learn/07-encoder-decoder.md): the encoder-decoder, beam search and BLEU.
// Trains a tiny Transformer to reverse sequences, draws its cross-attention (an anti-diagonal:
// output position t reads source position L-1-t) and every attention map of every layer and
// head, decodes with greedy and beam search and prints their log-probabilities and GNMT scores;
// then BLEU of a toy corpus step by step; then T5's three mask patterns, built with
// nn::functional's mask helpers.
//   learn_07_reverse [out.png]   (default learn_07_reverse.png; reverse_attention_grid.png and
//                                 t5_masks.png beside it)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "examples/learn/reverse_task.h"
#include "loom.h"
using namespace loom;

namespace {
using learn::kBos, learn::kEos, learn::kLen, learn::kPad;  // examples/learn/reverse_task.h

// Greedy (beam 1) and beam-4 decoding of one source with GNMT's alpha 0.6 -> {greedy, beam}.
std::vector<models::Translation> decode(models::Transformer& model, const char* when) {
  std::printf("\n%s, source 5 3 9 4 6 8:\n", when);
  std::vector<models::Translation> found;
  for (int64_t beam : {1, 4}) {
    found.push_back(
        models::beam_search(model, {{5, 3, 9, 4, 6, 8}}, kBos, kEos, 10, beam, 0.6f)[0]);
    std::printf("  %-8s", beam == 1 ? "greedy" : "beam 4");
    for (int64_t id : found.back().tokens) std::printf(" %lld", static_cast<long long>(id));
    std::printf("   log P %.4f  score %.4f\n", found.back().log_prob, found.back().score);
  }
  return found;
}

// One attention of the model: what it is, its probabilities (heads, rows, columns) and the
// tokens of its rows and columns.
struct AttentionMap {
  std::string title;
  Tensor probs;
  std::vector<std::string> rows, cols;
};

// Every attention map of the model on one (src, tgt) pair, layer by layer: the encoder's
// self-attention, the decoder's self-attention and its cross-attention. It walks the stacks as
// Transformer::encode and ::decode do (eval mode, post-norm: each self-attention reads its
// layer's input) and asks each attention for its probabilities.
std::vector<AttentionMap> every_attention(const models::Transformer& model, const Tensor& src,
                                          const Tensor& tgt) {
  auto tokens = [](const Tensor& ids, const char* bos) {
    std::vector<std::string> names;
    for (int64_t id : ids.to_vector_i64()) names.push_back(id == kBos ? bos : std::to_string(id));
    return names;
  };
  const std::vector<std::string> source = tokens(src, "bos"), target = tokens(tgt, "bos");
  const float scale = std::sqrt(static_cast<float>(model.config().d_model));
  const Tensor src_mask = model.key_padding_mask(src), tgt_mask = model.key_padding_mask(tgt);
  std::vector<AttentionMap> maps;
  Tensor x = model.pos->forward(model.emb->forward(src) * scale);  // (1, S, D), sec. 3.4-3.5
  for (int64_t l = 0; l < model.encoder_layers().size(); ++l) {
    const auto& layer = model.encoder_layers()[l];
    Tensor probs;
    layer->attn->forward(x, x, src_mask, false, &probs);
    maps.push_back({"encoder " + std::to_string(l) + " self", probs.select(0, 0), source, source});
    x = layer->forward(x, src_mask);
  }
  const Tensor memory = x;
  Tensor y = model.pos->forward(model.emb->forward(tgt) * scale);  // (1, T, D)
  for (int64_t l = 0; l < model.decoder_layers().size(); ++l) {
    const auto& layer = model.decoder_layers()[l];
    Tensor self, cross;
    layer->self_attn->forward(y, y, tgt_mask, true, &self);
    y = layer->forward(y, memory, tgt_mask, src_mask, &cross);
    maps.push_back({"decoder " + std::to_string(l) + " self", self.select(0, 0), target, target});
    maps.push_back({"decoder " + std::to_string(l) + " cross", cross.select(0, 0), target, source});
  }
  return maps;
}

// The grid of every map: a row per attention (as every_attention orders them), a column per
// head.
data::Image attention_grid(const std::vector<AttentionMap>& maps) {
  std::vector<data::Image> cells;
  for (const AttentionMap& map : maps)
    for (int64_t h = 0; h < map.probs.size(0); ++h)
      cells.push_back(data::labelled_heatmap(map.probs.select(0, h), map.rows, map.cols,
                                             map.title + ", head " + std::to_string(h), 16));
  return data::tile(cells, maps[0].probs.size(0), 12);
}

// T5's three attention patterns (Raffel et al. 2020, fig. 3) as loom's additive masks
// (0 = attend, -inf = blocked) over `length` positions: fully visible (an encoder: every
// position sees every other), causal (a decoder or a language model: the past and itself) and
// causal with a prefix (a prefix language model: the first `prefix` positions see each other,
// the rest is causal).
std::vector<std::pair<std::string, Tensor>> t5_masks(int64_t length, int64_t prefix) {
  std::vector<int64_t> blocked;  // PyTorch's boolean form: nonzero = blocked
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j) blocked.push_back(j > i && j >= prefix);
  return {{"fully visible", zeros({length, length})},
          {"causal", nn::functional::causal_mask(length)},
          {"causal with prefix " + std::to_string(prefix),
           nn::functional::additive_mask(tensor_i64(blocked, {length, length}))}};
}

// A mask drawn as T5's figure draws it, 20 pixels a position: exp(mask) through the colour map,
// yellow where the query (row) attends to the key (column), dark where it is blocked; the title
// above.
data::Image mask_picture(const std::string& title, const Tensor& mask) {
  const int64_t cell = 20, n = mask.size(0), title_h = data::text_size(title)[1] + 6;
  data::Image picture(std::max(n * cell, data::text_size(title)[0]), title_h + n * cell, 3, 255);
  data::draw_text(picture, 0, 0, title, {0, 0, 0});
  data::paste(picture, data::resize_nearest(data::heatmap(exp(mask), 0, 1), n * cell, n * cell),
              0, title_h);
  return picture;
}
}  // namespace

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 07 (docs/learn/07-encoder-decoder.md): reversal, every attention map, beam "
      "search, BLEU, T5's three masks.");
  models::TransformerConfig c = learn::reverse_config();  // D 32, 2 heads, 1 + 1 layers
  manual_seed(0);
  models::Transformer model(c);
  optim::Adam opt(model.parameters(), 1e-3f, 0.9f, 0.98f, 1e-9f);  // sec. 5.3
  // The claim reads the last kRecent steps' mean loss: one batch's loss can jump tenfold for a
  // step (a batch of harder sequences, Adam's large steps under the schedule), and where it does
  // depends on the order of the float sums, which differs from build to build.
  constexpr int kSteps = 400, kRecent = 50;
  float loss_value = 0.0f, recent_loss = 0.0f;
  // Decoded after 110 of the 400 steps, while the model still hesitates: greedy search commits
  // to one token at a time and beam search keeps four prefixes, so they can part ways.
  std::vector<models::Translation> early;
  for (int step = 0; step < kSteps; ++step) {
    opt.set_lr(optim::noam_lr(step + 1, c.d_model, 60, 1.0f));
    const learn::ReverseBatch b = learn::reverse_batch(32);  // sources and their reversals
    // Teacher forcing: the decoder reads bos + answer and predicts answer + eos.
    const Tensor logits = model.forward(b.src, b.tgt_in);  // (B, L + 1, V)
    const Tensor loss = cross_entropy(logits, b.tgt_out, kPad);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
    if (step >= kSteps - kRecent) recent_loss += loss_value / kRecent;
    if (step % 100 == 0 || step == kSteps - 1)
      std::printf("step %3d  loss %.4f\n", step, loss_value);
    if (step + 1 == 110) early = decode(model, "after 110 steps");
  }

  NoGradGuard no_grad;
  model.eval();
  std::vector<Tensor> cross;  // per decoder layer (B, heads, T, S)
  const Tensor src = tensor_i64({3, 4, 5, 6, 7, 8}, {1, kLen}),
               tgt = tensor_i64({kBos, 8, 7, 6, 5, 4, 3}, {1, kLen + 1});
  model.forward(src, tgt, &cross);
  const Tensor map = cross[0].select(0, 0).mean(0);  // heads averaged: (T, S)
  const std::vector<std::string> rows = {"bos", "8", "7", "6", "5", "4", "3"},
                                 cols = {"3", "4", "5", "6", "7", "8"};
  data::write_png(data::labelled_heatmap(map, rows, cols, "cross-attention: target -> source", 24),
                  out);
  const std::vector<AttentionMap> maps = every_attention(model, src, tgt);
  const std::string grid_png = learn::picture_beside(out, "reverse_attention_grid.png");
  data::write_png(attention_grid(maps), grid_png);
  // The walk gives forward's cross-attention, and the decoder's self-attention is causal:
  // nothing above the diagonal.
  float walk_diff = 0.0f, future = 0.0f;
  size_t next_cross = 0;
  for (const AttentionMap& m : maps) {
    if (m.title.ends_with("cross"))
      walk_diff += (m.probs - cross[next_cross++].select(0, 0)).abs().max().item();
    else if (m.title.starts_with("decoder"))
      future += triu(m.probs, 1).sum().item();
  }
  // Row t predicts answer token t, the source's token L-1-t: its weight on that column.
  float on_mirror = 0.0f;
  for (int64_t t = 0; t < kLen; ++t) on_mirror += map.select(0, t).select(0, kLen - 1 - t).item();
  on_mirror /= kLen;

  const auto trained = decode(model, "after 400 steps");
  std::printf("cross-attention on the mirrored source position, mean of rows 0..5: %.2f\n",
              on_mirror);
  std::printf("attention maps: %zu of %lld heads each; walked cross-attention - forward's: "
              "max |diff| %.1e\ndecoder self-attention above the diagonal (the future): %.1e\n",
              maps.size(), static_cast<long long>(c.n_head), walk_diff, future);

  // BLEU by hand (Papineni et al. 2002): clipped n-gram precisions, brevity penalty.
  const std::vector<std::string> hyps = {"the cat sat on the mat", "a dog runs"},
                                 refs = {"the cat sat on a mat", "the dog runs fast"};
  const metrics::BleuStatistics s = metrics::bleu_statistics(hyps, {refs});
  std::printf("\nBLEU of 2 sentences: hypothesis length %lld, reference length %lld\n",
              static_cast<long long>(s.sys_len), static_cast<long long>(s.ref_len));
  double log_sum = 0.0;
  for (size_t n = 0; n < 4; ++n) {
    const double p = double(s.correct[n]) / double(s.total[n]);
    log_sum += std::log(p);
    std::printf("  %zu-grams: %lld of %lld match (clipped)  p%zu = %.4f\n", n + 1,
                static_cast<long long>(s.correct[n]), static_cast<long long>(s.total[n]), n + 1, p);
  }
  const double bp =
      s.sys_len < s.ref_len ? std::exp(1.0 - double(s.ref_len) / double(s.sys_len)) : 1.0;
  const double by_hand = 100.0 * bp * std::exp(log_sum / 4.0);
  const double bleu = metrics::corpus_bleu(hyps, refs);
  std::printf("  BP = %.4f   BLEU = 100 BP exp(mean log p) = %.4f;  corpus_bleu %.4f\n", bp,
              by_hand, bleu);

  // T5's patterns, row = query (output) position, column = key (input) position.
  const auto masks = t5_masks(6, 3);
  auto row = [&](size_t k, int64_t i) {
    std::string marks;
    for (float v : masks[k].second.select(0, i).to_vector()) marks += v == 0.0f ? '.' : 'x';
    return marks;
  };
  std::printf("\nT5's attention patterns (row = query, column = key; '.' attends, 'x' is "
              "blocked):\n  %-24s%-24s%s\n",
              masks[0].first.c_str(), masks[1].first.c_str(), masks[2].first.c_str());
  for (int64_t i = 0; i < 6; ++i)
    std::printf("  %-24s%-24s%s\n", row(0, i).c_str(), row(1, i).c_str(), row(2, i).c_str());
  std::vector<data::Image> panels;
  std::vector<int64_t> attended;
  for (const auto& [name, mask] : masks) {
    panels.push_back(mask_picture(name, mask));
    attended.push_back(static_cast<int64_t>(sum(eq(mask, 0.0f)).item()));
  }
  const std::string masks_png = learn::picture_beside(out, "t5_masks.png");
  data::write_png(data::tile(panels, 3, 16), masks_png);
  // Attended pairs: all 36; 1 + ... + 6 = 21; and 3 more, the prefix's pairs above the diagonal.
  std::printf("attended pairs: %lld, %lld, %lld\nwrote %s\nwrote %s\nwrote %s\n",
              static_cast<long long>(attended[0]), static_cast<long long>(attended[1]),
              static_cast<long long>(attended[2]), out.c_str(), grid_png.c_str(),
              masks_png.c_str());
  // Beam search never scores below greedy; where both find the same sentence, their scores
  // differ only by rounding (4 rows against 1 in the products), so they are compared to 1e-4,
  // as tests/models/test_transformer_decode.cpp does.
  const auto at_least = [](float beam, float greedy) { return beam >= greedy - 1e-4f; };
  const bool ok = recent_loss < 0.1f &&
                  trained[1].tokens == std::vector<int64_t>{8, 6, 4, 9, 3, 5} &&
                  at_least(early[1].score, early[0].score) &&
                  at_least(trained[1].score, trained[0].score) &&
                  on_mirror > 0.5f && std::abs(by_hand - bleu) < 1e-6 && walk_diff == 0.0f &&
                  future == 0.0f && attended == std::vector<int64_t>{36, 21, 24};
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
