// Decoding with the encoder-decoder Transformer: the incremental decoder equals re-running the
// full decoder (tokens and logits), beam 1 is greedy, beam 4 never scores worse than greedy
// under the model, a batch decodes as its sentences one by one, eos and max_len stop, errors;
// and the Annotated Transformer's toy task: a tiny model learns to copy random sequences.
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/packed_weights.h"
#include "backends/gemm/tiled_gemm.h"
#include "models/beam_search.h"
#include "models/transformer.h"
#include "optim/optim.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::Transformer;
using models::TransformerConfig;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2;

TransformerConfig decode_config() {
  TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 13;
  c.d_model = 16;
  c.n_head = 2;
  c.d_ff = 32;
  c.n_encoder_layers = c.n_decoder_layers = 2;
  c.max_len = 24;
  c.dropout = 0.0f;
  return c;
}

// A random model whose distributions are peaked enough that eos and search matter.
std::unique_ptr<Transformer> random_model(uint64_t seed,
                                          const TransformerConfig& c = decode_config(),
                                          float scale = 0.5f) {
  manual_seed(seed);
  auto model = std::make_unique<Transformer>(c);
  NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_(randn(p.shape()) * scale);
  model->eval();
  return model;
}

Tensor row(const std::vector<int64_t>& ids) {
  return tensor_i64(ids, {1, static_cast<int64_t>(ids.size())});
}

// log P(tokens, then eos if `eos`) under the model, by the full (non-incremental) forward.
double sequence_log_prob(Transformer& model, const std::vector<int64_t>& src,
                         const std::vector<int64_t>& tokens, bool eos) {
  NoGradGuard no_grad;
  std::vector<int64_t> in = {kBos}, out = tokens;
  in.insert(in.end(), tokens.begin(), tokens.end());
  if (eos) out.push_back(kEos);
  in.resize(out.size());
  const std::vector<float> logp = log_softmax(model.forward(row(src), row(in)), 2).to_vector();
  const int64_t V = model.config().tgt_vocab_size;
  double total = 0.0;
  for (size_t t = 0; t < out.size(); ++t) total += logp[t * V + static_cast<size_t>(out[t])];
  return total;
}

// Greedy decoding by re-running the full decoder on the whole prefix at every step.
std::vector<int64_t> full_greedy(Transformer& model, const std::vector<int64_t>& src,
                                 int64_t max_len) {
  NoGradGuard no_grad;
  std::vector<int64_t> prefix = {kBos};
  for (int64_t t = 0; t < max_len; ++t) {
    const Tensor logits = model.forward(row(src), row(prefix));  // (1, t + 1, V)
    const int64_t next = argmax(logits.narrow(1, t, 1).reshape({-1}), 0).to_vector_i64()[0];
    if (next == kEos) break;
    prefix.push_back(next);
  }
  return {prefix.begin() + 1, prefix.end()};
}

std::vector<int64_t> random_ids(int64_t n, int64_t lo, int64_t hi) {
  const std::vector<float> u = rand({n}).to_vector();
  std::vector<int64_t> ids;
  for (float x : u)
    ids.push_back(lo + std::min<int64_t>(hi - lo - 1, static_cast<int64_t>(x * (hi - lo))));
  return ids;
}

// Four random sources of 4, 7, 2 and 5 ids, none of them pad, bos or eos.
std::vector<std::vector<int64_t>> four_sources() {
  std::vector<std::vector<int64_t>> srcs;
  for (int64_t n : {4, 7, 2, 5}) srcs.push_back(random_ids(n, 3, 13));
  return srcs;
}

}  // namespace

TEST_CASE("Transformer incremental decoding gives the full decoder's logits and tokens") {
  for (bool norm_first : {false, true}) {
    TransformerConfig c = decode_config();
    c.norm_first = norm_first;
    auto owner = random_model(11, c);
    Transformer& model = *owner;
    NoGradGuard no_grad;
    // Two sentences of different lengths (padding in the second), 2 rows each (beam-like).
    const Tensor src = tensor_i64({3, 4, 5, 6, 7, 8, 9, 10, 0, 0}, {2, 5});
    models::DecoderCache cache = model.start_decoding(src, 6, 2);
    CHECK(cache.rows() == 4);
    std::vector<std::vector<int64_t>> prefix(4, {kBos});
    const std::vector<int64_t> steps = {5, 11, 3, 8, 12};
    for (size_t t = 0; t < steps.size(); ++t) {
      std::vector<int64_t> last;
      for (const auto& p : prefix) last.push_back(p.back());
      const Tensor step = model.decode_step(tensor_i64(last, {4}), cache);  // (4, V)
      for (int64_t r = 0; r < 4; ++r) {
        const Tensor s = src.narrow(0, r / 2, 1);
        const Tensor full = model.forward(s, row(prefix[static_cast<size_t>(r)]));
        check_close(step.narrow(0, r, 1).reshape({-1}),
                    full.narrow(1, static_cast<int64_t>(t), 1).reshape({-1}), 1e-5f, 1e-5f,
                    "step " + std::to_string(t) + " row " + std::to_string(r));
        prefix[static_cast<size_t>(r)].push_back(3 + (steps[t] + r) % 10);  // never pad
      }
    }
    CHECK(cache.length == 5);
    for (uint64_t seed : {1, 2, 3}) {
      manual_seed(seed);
      const std::vector<int64_t> s = random_ids(6, 3, 13);
      CHECK(model.translate(s, kBos, kEos, 12) == full_greedy(model, s, 12));
    }
  }
}

TEST_CASE("Beam search: beam 1 is greedy and beam 4 never scores worse than greedy") {
  auto owner = random_model(21, decode_config(), 1.0f);
  Transformer& model = *owner;
  int compared = 0, better = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    manual_seed(100 + seed);
    const std::vector<int64_t> src = random_ids(3 + static_cast<int64_t>(seed % 5), 3, 13);
    const auto greedy = full_greedy(model, src, 10);
    CHECK(model.translate(src, kBos, kEos, 10, 1) == greedy);
    const auto beam = models::beam_search(model, {src}, kBos, kEos, 10, 4)[0];
    const bool greedy_eos = static_cast<int64_t>(greedy.size()) < 10;
    const double greedy_lp = sequence_log_prob(model, src, greedy, greedy_eos);
    // The beam's own score is the model's log-probability of what it returned.
    CHECK(std::fabs(beam.log_prob - sequence_log_prob(model, src, beam.tokens, beam.finished)) <
          1e-3);
    if (beam.finished == greedy_eos) {  // comparable: both complete, or both cut at max_len
      ++compared;
      CHECK_MESSAGE(beam.log_prob >= greedy_lp - 1e-4, "seed " << seed);
      better += beam.log_prob > greedy_lp + 1e-4;
    }
  }
  CHECK(compared >= 8);
  MESSAGE("beam 4 beat greedy on " << better << " of " << compared << " sentences");
}

TEST_CASE("Beam search as wide as the vocabulary finds the most probable sequence") {
  auto owner = random_model(23, decode_config(), 1.0f);
  Transformer& model = *owner;
  const std::vector<int64_t> src = {4, 9, 7};
  // eos never produced: every hypothesis has 3 tokens; 13^3 sequences searched exhaustively.
  double best = -1e30;
  std::vector<int64_t> argbest;
  for (int64_t a = 0; a < 13; ++a)
    for (int64_t b = 0; b < 13; ++b)
      for (int64_t c = 0; c < 13; ++c) {
        const double lp = sequence_log_prob(model, src, {a, b, c}, false);
        if (lp > best) best = lp, argbest = {a, b, c};
      }
  const auto found = models::beam_search(model, {src}, kBos, -1, 3, 13)[0];
  CHECK(found.tokens == argbest);
  CHECK(found.log_prob == doctest::Approx(best).epsilon(1e-5));
  const auto greedy = models::beam_search(model, {src}, kBos, -1, 3, 1)[0];
  MESSAGE("exhaustive " << best << ", greedy " << greedy.log_prob);
}

TEST_CASE("gnmt_length_penalty is GNMT's eq. 14 and beam scores are log P / lp(|Y| + eos)") {
  // lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016), alpha 0 = no penalty.
  CHECK(models::gnmt_length_penalty(1, 0.6) == 1.0);
  CHECK(models::gnmt_length_penalty(4, 0.6) == doctest::Approx(std::pow(1.5, 0.6)));
  CHECK(models::gnmt_length_penalty(10, 0.6) == doctest::Approx(std::pow(2.5, 0.6)));
  CHECK(models::gnmt_length_penalty(3, 2.0) == doctest::Approx(16.0 / 9.0));
  CHECK(models::gnmt_length_penalty(25, 0.0) == 1.0);
  auto owner = random_model(21, decode_config(), 1.0f);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    manual_seed(200 + seed);
    const std::vector<int64_t> src = random_ids(3 + static_cast<int64_t>(seed % 4), 3, 13);
    for (int64_t beam : {1, 4}) {
      const auto t = models::beam_search(*owner, {src}, kBos, kEos, 10, beam, 0.6f)[0];
      const auto length = static_cast<int64_t>(t.tokens.size()) + (t.finished ? 1 : 0);
      CHECK(t.score == doctest::Approx(t.log_prob / std::pow((5.0 + length) / 6.0, 0.6)));
    }
  }
}

TEST_CASE("translate_batch equals translating each sentence alone, greedy and beam") {
  auto owner = random_model(31);
  Transformer& model = *owner;
  const std::vector<std::vector<int64_t>> srcs = four_sources();
  for (int64_t beam : {1, 3}) {
    const auto batch = model.translate_batch(srcs, kBos, kEos, 9, beam, 0.6f);
    REQUIRE(batch.size() == srcs.size());
    for (size_t i = 0; i < srcs.size(); ++i)
      CHECK_MESSAGE(batch[i] == model.translate(srcs[i], kBos, kEos, 9, beam, 0.6f),
                    "beam " << beam << " sentence " << i);
  }
}

// On the CPU, translate_batch cuts the sentences into one group per thread, each decoded as a
// batch of its own (models/beam_search.cpp), when every group gets at least 32 rows (sentences x
// beams): the groups' tokens, in order, are one batch's. 100 sentences give two groups on two
// threads and three, uneven, on three or more; beam 3's 300 rows give one a thread, up to nine.
TEST_CASE("translate_batch cut among threads gives the tokens of one batch on one thread") {
  auto owner = random_model(47);
  Transformer& model = *owner;
  model.train();  // decoding switches to evaluation mode once, for all the groups
  std::vector<std::vector<int64_t>> srcs;
  for (int i = 0; i < 100; ++i) srcs.push_back(random_ids(2 + i % 7, 3, 13));
  const int saved = get_num_threads();
  for (int64_t beam : {1, 3}) {
    CAPTURE(beam);
    set_num_threads(1);
    const auto whole = model.translate_batch(srcs, kBos, kEos, 9, beam, 0.6f);
    REQUIRE(whole.size() == srcs.size());
    for (int threads : {2, 3, 8}) {
      CAPTURE(threads);
      set_num_threads(threads);
      const auto cut = model.translate_batch(srcs, kBos, kEos, 9, beam, 0.6f);
      REQUIRE(cut.size() == srcs.size());
      for (size_t i = 0; i < srcs.size(); ++i) CHECK_MESSAGE(cut[i] == whole[i], "sentence " << i);
    }
  }
  set_num_threads(saved);
  CHECK(model.is_training());  // the caller's mode, restored once after all the groups
}

// A program translating batch after batch (a test set's BLEU, translate's lines) keeps one
// PackedWeightsGuard open around them all: the encoder's weights are packed too, from the second
// batch on, the tokens stay those without the guard, and each finished decoding's stacked
// projections are dropped, so the copies do not grow with the number of batches.
TEST_CASE("One PackedWeightsGuard around many translations: the same tokens, bounded copies") {
  auto owner = random_model(43);
  Transformer& model = *owner;
  const std::vector<std::vector<int64_t>> srcs = four_sources();
  for (int64_t beam : {1, 3}) {
    CAPTURE(beam);
    const auto want = model.translate_batch(srcs, kBos, kEos, 9, beam, 0.6f);
    std::vector<int64_t> cached;  // after each batch
    {
      PackedWeightsGuard packed;
      for (int batch = 0; batch < 4; ++batch) {
        CHECK(model.translate_batch(srcs, kBos, kEos, 9, beam, 0.6f) == want);
        cached.push_back(PackedWeightsGuard::cached());
      }
    }
    if (cpu::use_tiled_gemm(srcs.size() * beam, model.config().d_model))  // loom's tiles pack
      CHECK(cached[1] > cached[0]);  // the encoder's weights, at their second use
    CHECK(cached[2] == cached[1]);
    CHECK(cached[3] == cached[1]);
    CHECK(PackedWeightsGuard::cached() == 0);
  }
}

// A program may translate from its own OpenMP team, one model shared by the threads (in
// evaluation mode already, so that EvalGuard writes nothing they share): each sentence gets the
// tokens it gets alone. Before loom's loops ran in a team of their own there, an `omp for` in
// them shared its range out among the program's threads, which were inside other calls.
TEST_CASE("translating from a program's own OpenMP threads gives each sentence its own tokens") {
  auto owner = random_model(37);
  Transformer& model = *owner;
  model.eval();
  std::vector<std::vector<int64_t>> srcs;
  for (int64_t n : {6, 3, 8, 5, 7, 4, 9, 2}) srcs.push_back(random_ids(n, 3, 13));
  for (int64_t beam : {1, 3}) {
    CAPTURE(beam);
    std::vector<std::vector<int64_t>> alone, together(srcs.size());
    for (const auto& src : srcs) alone.push_back(model.translate(src, kBos, kEos, 9, beam));
    const auto count = static_cast<int64_t>(srcs.size());
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int64_t i = 0; i < count; ++i)
      together[static_cast<size_t>(i)] =
          model.translate(srcs[static_cast<size_t>(i)], kBos, kEos, 9, beam);
    for (size_t i = 0; i < srcs.size(); ++i)
      CHECK_MESSAGE(together[i] == alone[i], "sentence " << i);
  }
  CHECK_FALSE(model.is_training());
}

TEST_CASE("Decoding stops at max_len when eos is never produced, and at eos otherwise") {
  auto owner = random_model(41);
  Transformer& model = *owner;
  const std::vector<int64_t> src = {3, 4, 5};
  // An eos id outside the vocabulary is never produced: exactly max_len tokens (the benchmark).
  for (int64_t beam : {1, 4}) CHECK(model.translate(src, kBos, /*eos=*/-1, 7, beam).size() == 7);
  for (int64_t beam : {1, 4})
    for (int64_t t : model.translate(src, kBos, kEos, 20, beam)) CHECK(t != kEos);
  CHECK(models::gnmt_length_penalty(7, 0.0) == 1.0);
  CHECK(models::gnmt_length_penalty(7, 1.0) == doctest::Approx(2.0));
  model.train();
  model.translate(src, kBos, kEos, 3);
  CHECK(model.is_training());  // restored after decoding in evaluation mode
}

TEST_CASE("translate rejects bad arguments, naming the values") {
  auto owner = random_model(51);
  Transformer& model = *owner;
  expect_error([&] { model.translate({}, kBos, kEos, 5); }, {"translate", "0 ids"});
  expect_error([&] { model.translate({3, 13}, kBos, kEos, 5); }, {"id 13", "[0, 13)"});
  expect_error([&] { model.translate({3}, kBos, kEos, 25); }, {"max_len 25", "24"});
  expect_error([&] { model.translate({3}, kBos, kEos, 5, 0); }, {"beam 0"});
  expect_error([&] { model.translate({3}, 13, kEos, 5); }, {"bos_id 13"});
  expect_error([&] { model.translate({3}, kBos, kEos, 5, 1, -1.0f); }, {"length_penalty -1"});
  expect_error([&] { model.translate_batch({}, kBos, kEos, 5); }, {"no source"});
}

TEST_CASE("A tiny Transformer learns to copy random sequences (the Annotated Transformer's task)") {
  TransformerConfig c = decode_config();
  c.d_model = 32;
  c.n_head = 4;
  c.d_ff = 64;
  manual_seed(1);
  Transformer model(c);
  // The paper's optimiser and schedule (sec. 5.3), warmup shortened to the run.
  // The factor 0.25 and 800 steps: with 0.5 and 500 the loss still jumped between 0.04 and 0.23
  // from step to step at the end, and a change in the last bits of a gradient's sums failed the
  // test. Seeds 1 to 5 end at 0.0004-0.012, and copy 15 or 16 of the 16 (seed 1: 16).
  optim::Adam opt(model.parameters(), 1e-3f, 0.9f, 0.98f, 1e-9f);
  const int64_t B = 32, L = 8;
  float last = 0.0f;  // the mean loss of the last 10 steps
  for (int step = 0; step < 800; ++step) {  // about 5 s on one core
    opt.set_lr(optim::noam_lr(step + 1, c.d_model, 60, 0.25f));
    const std::vector<int64_t> seq = random_ids(B * L, 3, 13);
    std::vector<int64_t> in, out;
    for (int64_t b = 0; b < B; ++b) {
      in.push_back(kBos);
      for (int64_t t = 0; t < L; ++t) {
        const int64_t id = seq[static_cast<size_t>(b * L + t)];
        in.push_back(id);  // in = bos + sequence, out = sequence + eos
        out.push_back(id);
      }
      out.push_back(kEos);
    }
    const Tensor src = tensor_i64(seq, {B, L});
    const Tensor loss = cross_entropy(model.forward(src, tensor_i64(in, {B, L + 1})),
                                      tensor_i64(out, {B, L + 1}), kPad);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step >= 790) last += loss.item() / 10.0f;
  }
  CHECK(last < 0.05f);
  std::vector<std::vector<int64_t>> tests;
  for (int i = 0; i < 16; ++i) tests.push_back(random_ids(L, 3, 13));
  const auto got = model.translate_batch(tests, kBos, kEos, L + 2);
  int correct = 0;
  for (size_t i = 0; i < tests.size(); ++i) correct += got[i] == tests[i];
  CHECK(correct >= 15);
}
