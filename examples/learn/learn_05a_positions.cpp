// Chapter 05a (docs/learn/05a-positions-and-scale.md): positions and the 1/sqrt(d) scale.
// Draws the sinusoid table and four of its dimensions, checks that PE(t + k) is PE(t) turned by
// rotations that depend on k only, measures the variance of q.k and the softmax's saturation
// with and without the scale, then trains chapter 07's reversal task with the positions, the
// scale or the causal mask removed and checks that each fails the way the chapter predicts.
//   learn_05a_positions [out.png]   (default learn_05a_positions.png)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "examples/learn/learn.h"
#include "examples/learn/reverse_task.h"
#include "loom.h"
using namespace loom;
using learn::kLen;

namespace {

// ------------------------------------------------------------------ the encoder-decoder, broken
// What a run keeps of chapter 07's model (two heads of d_k = 16: D 32 split in two).
struct Variant {
  const char* name;
  bool positions = true, scale = true, causal = true;
  int64_t heads = 2;
};

// One attention sub-layer of models::Transformer. attend() divides the scores by sqrt(d_k)
// itself, so "no scale" multiplies the queries by sqrt(d_k) first: the scores are then q.k.
Tensor attention(const models::Seq2SeqAttention& a, const Tensor& x, const Tensor& mem, bool causal,
                 const Variant& v, Tensor* probs = nullptr) {
  Tensor q = a.heads(x, *a.q);  // (B, h, T, d_k)
  if (!v.scale) q = q * std::sqrt(static_cast<float>(q.size(-1)));
  return a.attend(q, a.heads(mem, *a.k), a.heads(mem, *a.v), Tensor(), causal, probs);
}

// models::Transformer::forward written out with the model's own modules (post-norm, no dropout,
// no padding), each of the three pieces behind a switch; with all three on it is the model's.
// src (B, S), tgt (B, T) -> logits (B, T, V); enc_probs receives the encoder's attention.
Tensor forward(const models::Transformer& m, const Tensor& src, const Tensor& tgt, const Variant& v,
               Tensor* enc_probs = nullptr) {
  auto embed = [&](const Tensor& ids) {  // sec. 3.4 and 3.5: emb * sqrt(D) + PE
    const Tensor x = m.emb->forward(ids) * std::sqrt(static_cast<float>(m.config().d_model));
    return v.positions ? m.pos->forward(x) : x;
  };
  Tensor x = embed(src);  // (B, S, D)
  for (const auto& l : *m.enc) {
    x = l->ln1->forward(x + attention(*l->attn, x, x, false, v, enc_probs));
    x = l->ln2->forward(x + l->ff->forward(x));
  }
  Tensor y = embed(tgt);  // (B, T, D)
  for (const auto& l : *m.dec) {
    y = l->ln1->forward(y + attention(*l->self_attn, y, y, v.causal, v));
    y = l->ln2->forward(y + attention(*l->cross_attn, y, x, false, v));
    y = l->ln3->forward(y + l->ff->forward(y));
  }
  return m.generator(y);  // (B, T, V)
}

// Rows of attention probabilities (..., T_k) -> {mean max probability, mean entropy in nats}.
std::pair<float, float> saturation(const Tensor& probs) {
  const Tensor entropy = -(probs * log(probs + 1e-30f)).sum(-1);
  return {probs.max(-1).mean().item(), entropy.mean().item()};
}

// guess (rows, L) against answer (rows, L) -> {fraction of tokens right, of rows all right}.
std::pair<double, double> accuracy(const Tensor& guess, const Tensor& answer) {
  const std::vector<int64_t> g = guess.to_vector_i64(), a = answer.to_vector_i64();
  const int64_t rows = answer.size(0);
  int64_t tokens = 0, sequences = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t right = 0;
    for (int64_t t = 0; t < kLen; ++t) right += g[r * kLen + t] == a[r * kLen + t];
    tokens += right, sequences += right == kLen;
  }
  return {double(tokens) / double(rows * kLen), double(sequences) / double(rows)};
}

// The best token accuracy a model blind to order can reach under teacher forcing. It knows
// which tokens are left (the source's tokens less the prefix) but not where they stood, so at
// step t the answer is any of the L - t left, equally likely, and its best guess, the most
// frequent of them, is right with probability count / (L - t). Averaged over `answer`'s steps.
double order_blind_ceiling(const Tensor& answer) {
  const std::vector<int64_t> a = answer.to_vector_i64();
  double sum = 0.0;
  for (size_t r = 0; r < a.size(); r += kLen)
    for (int64_t t = 0; t < kLen; ++t) {
      int64_t most = 0;
      for (int64_t u = t; u < kLen; ++u)
        most = std::max(most, static_cast<int64_t>(std::count(&a[r + t], &a[r + kLen], a[r + u])));
      sum += double(most) / double(kLen - t);
    }
  return sum / double(a.size());
}

struct Outcome {
  float loss = 0, entropy0 = 0;  // last training loss; encoder attention entropy at step 0
  double forced = 0;             // token accuracy with teacher forcing (all inputs at once)
  double greedy = 0, rows = 0;   // token accuracy and rows all right, decoding greedily
  double looks_ahead = 0;        // predictions that change given only the inputs up to them
};

// Chapter 07's recipe (Adam of sec. 5.3, the Noam schedule, 400 steps of 32 rows), then the
// held-out rows three ways: teacher forcing, each position given only its prefix, and greedy
// decoding, which feeds back its own tokens.
Outcome train(const Variant& v, const learn::ReverseBatch& test) {
  manual_seed(0);
  models::TransformerConfig c = learn::reverse_config();
  c.n_head = v.heads;
  models::Transformer model(c);
  optim::Adam opt(model.parameters(), 1e-3f, 0.9f, 0.98f, 1e-9f);
  Outcome o;
  for (int step = 0; step < 400; ++step) {
    opt.set_lr(optim::noam_lr(step + 1, c.d_model, 60, 1.0f));
    const learn::ReverseBatch b = learn::reverse_batch(32);
    Tensor probs;  // (B, h, S, S)
    const Tensor loss = cross_entropy(forward(model, b.src, b.tgt_in, v, &probs), b.tgt_out);
    if (step == 0) o.entropy0 = saturation(probs).second;
    opt.zero_grad();
    loss.backward();
    opt.step();
    o.loss = loss.item();
  }

  NoGradGuard no_grad;
  const Tensor forced = forward(model, test.src, test.tgt_in, v).argmax(-1);  // (B, L + 1)
  o.forced = accuracy(forced.narrow(1, 0, kLen), test.answer).first;
  std::vector<Tensor> from_prefix;  // position t given inputs 0..t: bos and the answer's first t
  Tensor out = test.tgt_in.narrow(1, 0, 1);  // bos, then one greedy token a step
  for (int64_t t = 0; t < kLen; ++t) {
    const Tensor prefix = test.tgt_in.narrow(1, 0, t + 1);
    from_prefix.push_back(forward(model, test.src, prefix, v).select(1, t).argmax(-1));
    const Tensor next = forward(model, test.src, out, v).select(1, t).argmax(-1);  // (B)
    out = cat({out, next.reshape({-1, 1})}, 1);
  }
  o.looks_ahead = 1.0 - accuracy(stack(from_prefix, 1), forced.narrow(1, 0, kLen)).first;
  std::tie(o.greedy, o.rows) = accuracy(out.narrow(1, 1, kLen), test.answer);
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 05a (docs/learn/05a-positions-and-scale.md): the sinusoids, the sqrt(d) scale, "
      "and the reversal task without positions, scale or causal mask.");

  // 1. The sinusoid table of Vaswani et al. 2017, sec. 3.5, for D = 64 and positions 0..63:
  // columns 2i and 2i + 1 hold sin(w_i t) and cos(w_i t), w_i = 10000^(-2i/D), wavelengths
  // 2 pi / w_i from 2 pi (columns 0, 1) to nearly 10000 * 2 pi (columns 62, 63).
  constexpr int64_t kD = 64, kT = 64;
  const nn::SinusoidalPositionalEncoding sinusoid(kD, kT);
  const Tensor& pe = sinusoid.pe;  // (T, D): row t is PE(t)
  std::vector<std::string> row_labels(kT), col_labels(kD);
  for (int64_t j = 0; j < kT; j += 8) row_labels[j] = col_labels[j] = std::to_string(j);
  const data::Image map = data::labelled_heatmap(
      pe, row_labels, col_labels, "PE(t, j): row = position t, column = dimension j", 5);
  const std::vector<float> table = pe.to_vector();
  std::vector<data::Series> curves;
  for (int64_t j : {2, 3, 16, 32}) {
    const double wavelength =
        2 * std::numbers::pi * std::pow(10000.0, double(j - j % 2) / double(kD));
    data::Series s{
        fmt::format("column {} ({}, wavelength {:.1f})", j, j % 2 ? "cos" : "sin", wavelength),
        {},
        {}};
    for (int64_t t = 0; t < kT; ++t) s.x.push_back(double(t)), s.y.push_back(table[t * kD + j]);
    curves.push_back(s);
  }
  const data::Image plot = data::plot_lines(curves, {.title = "four columns against the position",
                                                     .x_label = "position t",
                                                     .y_label = "PE(t, j)",
                                                     .width = 520,
                                                     .height = map.height});
  data::Image both(map.width + plot.width, map.height, 3, 255);  // side by side
  data::paste(both, map, 0, 0);
  data::paste(both, plot, map.width, 0);
  data::write_png(both, out);
  std::printf("wrote %s\n", out.c_str());

  // The relative-shift property: pair i of PE(t) is (sin w_i t, cos w_i t), w_i = 10000^(-2i/D),
  // so PE(t + k) = R(k) PE(t) with R(k) the 2x2 rotation by w_i k on every pair: a linear map
  // that depends on k, not on t. And PE(t).PE(t + k) = sum_i cos(w_i k), the same for every t.
  std::printf(
      "\nover t = 0..%lld - k and all %lld pairs:\n"
      "   k   max |R(k) PE(t) - PE(t + k)|   PE(t).PE(t + k) from  to       "
      "sum_i cos(w_i k)\n",
      static_cast<long long>(kT - 1), static_cast<long long>(kD / 2));
  double worst_rotation = 0.0, worst_dot = 0.0;
  for (int64_t k : {1, 5, 20}) {
    double err = 0.0, dot_lo = 1e9, dot_hi = -1e9, sum_cos = 0.0;
    for (int64_t t = 0; t + k < kT; ++t) {
      double dot = 0.0;
      for (int64_t i = 0; i < kD / 2; ++i) {
        const double w = std::pow(10000.0, -2.0 * double(i) / double(kD)), a = w * double(k);
        const double s0 = table[t * kD + 2 * i], c0 = table[t * kD + 2 * i + 1];
        const double s1 = table[(t + k) * kD + 2 * i], c1 = table[(t + k) * kD + 2 * i + 1];
        // [sin w(t+k)]   [ cos wk  sin wk] [sin wt]
        // [cos w(t+k)] = [-sin wk  cos wk] [cos wt]
        err = std::max({err, std::fabs(std::cos(a) * s0 + std::sin(a) * c0 - s1),
                        std::fabs(-std::sin(a) * s0 + std::cos(a) * c0 - c1)});
        dot += s0 * s1 + c0 * c1;
        if (t == 0) sum_cos += std::cos(a);
      }
      dot_lo = std::min(dot_lo, dot), dot_hi = std::max(dot_hi, dot);
    }
    std::printf("  %2lld   %28.1e   %20.4f  %-8.4f %16.4f\n", static_cast<long long>(k), err,
                dot_lo, dot_hi, sum_cos);
    worst_rotation = std::max(worst_rotation, err);
    worst_dot = std::max({worst_dot, std::fabs(dot_lo - sum_cos), std::fabs(dot_hi - sum_cos)});
  }

  // 2. Why sqrt(d): q.k of unit-variance q, k is a sum of d products of variance 1, so its
  // variance is d. Scores that large make softmax rows nearly one-hot (max p -> 1, entropy -> 0).
  manual_seed(0);
  std::printf(
      "\nq, k ~ N(0, I_d); one query against 16 keys, 512 times:\n"
      "     d   var(q.k)  var(q.k/sqrt(d))   unscaled: max p  entropy   scaled: max p  "
      "entropy\n");
  bool variance_ok = true;
  std::pair<float, float> unscaled_last, scaled_last;
  for (int64_t d : {4, 16, 64, 256, 1024}) {
    const Tensor q = randn({512, 1, d}), k = randn({512, 16, d});
    const Tensor scores = matmul(q, k.transpose(-2, -1));  // (512, 1, 16)
    const Tensor scaled = scores / std::sqrt(static_cast<float>(d));
    const float var_raw = var(scores.flatten(), 0).item(),
                var_scaled = var(scaled.flatten(), 0).item();
    unscaled_last = saturation(softmax(scores, -1));
    scaled_last = saturation(softmax(scaled, -1));
    std::printf("  %4lld   %8.1f   %15.3f   %15.3f  %7.3f   %13.3f  %7.3f\n",
                static_cast<long long>(d), var_raw, var_scaled, unscaled_last.first,
                unscaled_last.second, scaled_last.first, scaled_last.second);
    variance_ok = variance_ok && std::fabs(var_raw / float(d) - 1.0f) < 0.1f &&
                  std::fabs(var_scaled - 1.0f) < 0.1f;
  }
  std::printf("  (a uniform row over 16 keys: max p %.3f, entropy ln 16 = %.3f)\n", 1.0 / 16,
              std::log(16.0));

  // 3. Break it and watch: the reversal task of chapter 07 without each piece. First, the
  // forward above with nothing removed is the model's own.
  manual_seed(1);
  const learn::ReverseBatch test = learn::reverse_batch(256);
  models::Transformer fresh(learn::reverse_config());
  const float same = (forward(fresh, test.src, test.tgt_in, Variant{"paper"}) -
                      fresh.forward(test.src, test.tgt_in))
                         .abs()
                         .max()
                         .item();
  const double ceiling = order_blind_ceiling(test.answer);
  std::printf(
      "\nforward() here against models::Transformer::forward: max |difference| %.1e\n"
      "reversal, 400 steps each, then 256 held-out rows (order-blind ceiling %.3f):\n"
      "  run                   loss  entropy(0)  forced  greedy  rows right  looks ahead\n",
      same, ceiling);
  const Variant variants[] = {{.name = "the paper's model"},
                              {.name = "no positions", .positions = false},
                              {.name = "no causal mask", .causal = false},
                              {.name = "no scale (d_k 16)", .scale = false},
                              {.name = "one head (d_k 32)", .heads = 1},
                              {.name = "one head, no scale", .scale = false, .heads = 1}};
  std::vector<Outcome> o;
  for (const Variant& v : variants) {
    o.push_back(train(v, test));
    std::printf("  %-19s %6.4f  %10.3f  %6.3f  %6.3f  %9.3f  %11.3f\n", v.name, o.back().loss,
                o.back().entropy0, o.back().forced, o.back().greedy, o.back().rows,
                o.back().looks_ahead);
  }
  const Outcome &paper = o[0], &unplaced = o[1], &unmasked = o[2], &unscaled = o[3],
                &one_head = o[4], &one_head_unscaled = o[5];

  // What the chapter claims. The sinusoids: a rotation, dot products that depend on k only;
  // the forward written out is the model's.
  bool ok = worst_rotation < 1e-4 && worst_dot < 1e-3 && same < 1e-6f;
  // The scale: variance d without it, 1 with it; unscaled rows saturate as d grows.
  ok = ok && variance_ok && unscaled_last.second < 0.2f && scaled_last.second > 2.0f;
  // The paper's model learns the task (a run learns with over half the rows right, fails with
  // under a tenth), and no causal decoder's prediction looks ahead (but for a float near-tie).
  ok = ok && paper.rows > 0.5 && paper.looks_ahead < 0.01 && one_head.rows > 0.5;
  // Without positions: no better than a model blind to order, hardly a row right.
  ok = ok && unplaced.forced < ceiling + 0.04 && unplaced.rows < 0.1;
  // Without the causal mask: the loss says solved, while greedy decoding fails here, because the
  // model learned to read each answer token from the next input.
  ok = ok && unmasked.loss < 0.1f && unmasked.forced > 0.99 && unmasked.looks_ahead > 0.5 &&
       unmasked.rows < 0.1;
  // Without the scale: saturated attention from the first step; with d_k = 32 it never learns.
  ok = ok && unscaled.entropy0 < paper.entropy0 - 0.3f &&
       one_head_unscaled.entropy0 < one_head.entropy0 - 0.3f && one_head_unscaled.rows < 0.1;
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
