// Translation metrics computed as sacreBLEU 2.x computes them, so that a number loom prints is the
// number a paper reports: corpus BLEU (Papineni et al. 2002) and chrF (Popović 2015).
//
// Conventions (sacreBLEU's, read from sacrebleu/metrics/{bleu,chrf}.py and
// tokenizers/tokenizer_13a.py):
//   - strings are UTF-8; "whitespace" is what Python's str.split() splits on (the 29 code points
//     of str.isspace(): \t \n \v \f \r, U+001C..U+001F, space, U+0085, U+00A0, U+1680,
//     U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000);
//   - BLEU: each segment is right-stripped, then tokenised by mteval-v13a's rules (tokenize_13a),
//     n-grams of 1..4 tokens are counted per segment and the counts summed over the corpus before
//     one score is computed, with the 'exp' smoothing (NIST: the k-th order with no match gets
//     precision 1 / (2^k * total)), the brevity penalty exp(1 - ref_len / sys_len), case-sensitive;
//   - chrF: whitespace removed, character n-grams of 1..6 Unicode code points, statistics summed
//     over the corpus, precision and recall averaged over the orders that occur in both (sacreBLEU
//     2's default "effective order"), then F-beta with beta 2; scores are in [0, 100].
//   - Invalid UTF-8 (which a Python str cannot hold) throws loom::Error naming the function, the
//     list, the segment index and the byte offset; so do lists of different sizes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::metrics {

// sacreBLEU's corpus_bleu(hypotheses, [references]) with its defaults -> [0, 100].
double corpus_bleu(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references);
// The same with several reference streams (sacreBLEU's corpus_bleu(hyps, [refs_a, refs_b, ...])):
// n-gram counts clipped by their largest count in any reference, the reference length closest to
// the hypothesis length (the shorter on a tie). Every stream has one segment per hypothesis.
double corpus_bleu_multi_ref(const std::vector<std::string>& hypotheses,
                             const std::vector<std::vector<std::string>>& reference_streams);

// BLEU's sufficient statistics summed over a corpus (sacreBLEU's [hyp_len, ref_len, correct,
// total]).
struct BleuStatistics {
  int64_t sys_len = 0, ref_len = 0;
  std::array<int64_t, 4> correct{}, total{};  // index n-1: matched and hypothesis n-grams
};
BleuStatistics bleu_statistics(const std::vector<std::string>& hypotheses,
                               const std::vector<std::vector<std::string>>& reference_streams);
// sacreBLEU's BLEU.compute_bleu with smooth_method 'exp' (or 'none' when exp_smoothing is false),
// max_ngram_order 4, no effective order -> [0, 100].
double bleu_from_statistics(const BleuStatistics& stats, bool exp_smoothing = true);

// mteval-v13a tokenisation as sacreBLEU's Tokenizer13a (after the rstrip sacreBLEU applies first):
// "<skipped>" and "-\n" removed, "\n" -> " ", &quot; &amp; &lt; &gt; unescaped, ASCII punctuation
// other than ' , - . split off, '.' and ',' split off unless next to a digit on that side, '-'
// split off after a digit; tokens joined by single spaces.
std::string tokenize_13a(const std::string& text);

// chrF's options; the defaults are sacreBLEU 2's CHRF() (chrF2, no word n-grams).
struct ChrfOptions {
  int64_t char_order = 6;
  double beta = 2.0;
  bool whitespace = false;      // true: keep whitespace inside the character n-grams
  bool eps_smoothing = false;   // true: chrF++.py's epsilon smoothing (mean of per-order F)
};
// sacreBLEU's corpus_chrf(hypotheses, [references]) with its defaults -> [0, 100].
double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references);
double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references, const ChrfOptions& options);

}  // namespace loom::metrics
