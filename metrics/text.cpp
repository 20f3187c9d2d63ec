// BLEU and chrF as sacreBLEU 2.x computes them (see text.h). The work is done on Unicode code
// points (std::u32string), as Python's str does, and n-grams are keyed by their code points.
#include "metrics/text.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"

namespace loom::metrics {
namespace {

using CodePoints = std::u32string;
using Counts = std::unordered_map<CodePoints, int64_t>;

// Strict UTF-8 as Python's decoder: no overlong forms, no surrogates, nothing above U+10FFFF.
CodePoints decode_utf8(const std::string& s, const char* fn, const char* list, size_t index) {
  CodePoints out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    int len = 0;
    char32_t cp = 0, min = 0;
    if (b < 0x80) { len = 1; cp = b; }
    else if ((b & 0xE0) == 0xC0) { len = 2; cp = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; cp = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; cp = b & 0x07; min = 0x10000; }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    LOOM_CHECK(ok, "{}: {}[{}] is not valid UTF-8 (byte 0x{:02x} at offset {})", fn, list, index,
               b, i);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(const CodePoints& cps) {
  std::string out;
  for (char32_t c : cps) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Python's str.isspace(), the set str.split() and str.rstrip() use.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's s.split(): the maximal runs of non-whitespace.
std::vector<CodePoints> split(const CodePoints& s) {
  std::vector<CodePoints> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) words.emplace_back(s.substr(start, i - start));
  }
  return words;
}

CodePoints rstrip(CodePoints s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

// Python's str.replace: every non-overlapping occurrence, left to right.
void replace_all(CodePoints& s, const CodePoints& from, const CodePoints& to) {
  CodePoints out;
  size_t i = 0;
  for (size_t hit; (hit = s.find(from, i)) != CodePoints::npos; i = hit + from.size())
    out += s.substr(i, hit - i) + to;
  s = out + s.substr(i);
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_period_comma(char32_t c) { return c == U'.' || c == U','; }
// tokenizer_re.py's first class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation but ' , - .
bool is_split_punct(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == U'/';
}

// re.sub for a pattern of two one-character classes (first)(second) -> pre \1 mid \2 post,
// scanning left to right and resuming after each match, as Python's re.sub does.
template <typename First, typename Second>
CodePoints sub_pair(const CodePoints& s, First first, Second second, const CodePoints& pre,
                    const CodePoints& mid, const CodePoints& post) {
  CodePoints out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += pre + s[i] + mid + s[i + 1] + post;
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// sacreBLEU's BLEU._preprocess_segment: rstrip, then Tokenizer13a -> tokens.
std::vector<CodePoints> tokens_13a(CodePoints line) {
  line = rstrip(std::move(line));
  replace_all(line, U"<skipped>", U"");
  replace_all(line, U"-\n", U"");
  replace_all(line, U"\n", U" ");
  replace_all(line, U"&quot;", U"\"");
  replace_all(line, U"&amp;", U"&");
  replace_all(line, U"&lt;", U"<");
  replace_all(line, U"&gt;", U">");
  line = U" " + line + U" ";
  CodePoints spaced;
  for (char32_t c : line) {
    if (is_split_punct(c)) spaced += CodePoints{U' ', c, U' '};
    else spaced += c;
  }
  const auto not_digit = [](char32_t c) { return !is_digit(c); };
  // period and comma split unless preceded by a digit, then unless followed by one
  spaced = sub_pair(spaced, not_digit, is_period_comma, U"", U" ", U" ");
  spaced = sub_pair(spaced, is_period_comma, not_digit, U" ", U" ", U"");
  // dash split when preceded by a digit
  spaced = sub_pair(spaced, is_digit, [](char32_t c) { return c == U'-'; }, U"", U" ", U" ");
  return split(spaced);
}

// Counter of the word n-grams of 1..4 tokens, keyed by the tokens joined with spaces.
Counts word_ngrams(const std::vector<CodePoints>& tokens) {
  Counts counts;
  for (size_t n = 1; n <= 4; ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      CodePoints key = tokens[i];
      for (size_t k = 1; k < n; ++k) key += U' ' + tokens[i + k];
      ++counts[key];
    }
  }
  return counts;
}

int64_t ngram_order(const CodePoints& key) {
  return 1 + std::count(key.begin(), key.end(), U' ');
}

void check_sizes(const char* fn, size_t hyps, size_t refs, const char* what = "references") {
  LOOM_CHECK(hyps == refs, "{}: {} hypotheses but {} {}: one reference per hypothesis", fn, hyps,
             refs, what);
}

}  // namespace

std::string tokenize_13a(const std::string& text) {
  std::string out;
  for (const CodePoints& t : tokens_13a(decode_utf8(text, "tokenize_13a", "text", 0))) {
    if (!out.empty()) out += ' ';
    out += encode_utf8(t);
  }
  return out;
}

BleuStatistics bleu_statistics(const std::vector<std::string>& hypotheses,
                               const std::vector<std::vector<std::string>>& reference_streams) {
  const char* fn = "bleu_statistics";
  LOOM_CHECK(!reference_streams.empty(), "{}: no reference stream", fn);
  for (const auto& stream : reference_streams) check_sizes(fn, hypotheses.size(), stream.size());
  BleuStatistics stats;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    // references: empty ones dropped (sacreBLEU's _cache_references), counts merged by max
    Counts ref_counts;
    std::vector<int64_t> ref_lens;
    for (const auto& stream : reference_streams) {
      if (stream[s].empty()) continue;
      const auto tokens = tokens_13a(decode_utf8(stream[s], fn, "references", s));
      ref_lens.push_back(static_cast<int64_t>(tokens.size()));
      for (const auto& [ngram, count] : word_ngrams(tokens))
        ref_counts[ngram] = std::max(ref_counts[ngram], count);
    }
    LOOM_CHECK(!ref_lens.empty(), "{}: reference {} is empty (sacreBLEU refuses empty references)",
               fn, s);
    const auto hyp_tokens = tokens_13a(decode_utf8(hypotheses[s], fn, "hypotheses", s));
    const auto hyp_len = static_cast<int64_t>(hyp_tokens.size());
    // the closest reference length, the shorter one on a tie (BLEU._get_closest_ref_len)
    int64_t closest = ref_lens[0];
    for (int64_t len : ref_lens) {
      const int64_t d = std::abs(hyp_len - len), best = std::abs(hyp_len - closest);
      if (d < best || (d == best && len < closest)) closest = len;
    }
    stats.sys_len += hyp_len;
    stats.ref_len += closest;
    for (const auto& [ngram, count] : word_ngrams(hyp_tokens)) {
      const int64_t n = ngram_order(ngram) - 1;
      stats.total[n] += count;
      if (auto it = ref_counts.find(ngram); it != ref_counts.end())
        stats.correct[n] += std::min(count, it->second);
    }
  }
  return stats;
}

// Papineni et al. 2002, eq. 1: BP * exp(sum_n log p_n / 4), as sacreBLEU's compute_bleu.
double bleu_from_statistics(const BleuStatistics& stats, bool exp_smoothing) {
  double bp = 1.0;
  if (stats.sys_len < stats.ref_len)
    bp = stats.sys_len > 0 ? std::exp(1.0 - static_cast<double>(stats.ref_len) /
                                                static_cast<double>(stats.sys_len))
                           : 0.0;
  if (std::all_of(stats.correct.begin(), stats.correct.end(), [](int64_t c) { return c == 0; }))
    return 0.0;  // sacreBLEU's early stop (#141)
  std::array<double, 4> precisions{};
  double smooth = 1.0;
  for (size_t n = 0; n < 4; ++n) {
    if (stats.total[n] == 0) break;
    const auto total = static_cast<double>(stats.total[n]);
    if (stats.correct[n] == 0) {
      if (exp_smoothing) {
        smooth *= 2;  // NIST smoothing: 1 / 2^k for the k-th order without a match
        precisions[n] = 100.0 / (smooth * total);
      }
    } else {
      precisions[n] = 100.0 * static_cast<double>(stats.correct[n]) / total;
    }
  }
  double log_sum = 0.0;  // sacreBLEU's my_log: log(0) is -9999999999
  for (double p : precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  return bp * std::exp(log_sum / 4.0);
}

double corpus_bleu_multi_ref(const std::vector<std::string>& hypotheses,
                             const std::vector<std::vector<std::string>>& reference_streams) {
  return bleu_from_statistics(bleu_statistics(hypotheses, reference_streams));
}

double corpus_bleu(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references) {
  check_sizes("corpus_bleu", hypotheses.size(), references.size());
  return corpus_bleu_multi_ref(hypotheses, {references});
}

namespace {

// chrF: counters of character n-grams, orders 1..max_order (extract_all_char_ngrams).
std::vector<Counts> char_ngrams(CodePoints line, int64_t max_order, bool whitespace) {
  if (!whitespace) {
    CodePoints joined;
    for (const auto& w : split(line)) joined += w;
    line = std::move(joined);
  }
  std::vector<Counts> counters(static_cast<size_t>(max_order));
  for (size_t n = 1; n <= counters.size(); ++n)
    for (size_t i = 0; i + n <= line.size(); ++i) ++counters[n - 1][line.substr(i, n)];
  return counters;
}

// Popović 2015: character n-gram F-beta from the corpus statistics [hyp, ref, match] per order
// (sacreBLEU's CHRF._compute_f_score).
double chrf_from_statistics(const std::vector<std::array<int64_t, 3>>& stats,
                            const ChrfOptions& opt) {
  const double eps = 1e-16, factor = opt.beta * opt.beta;
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int64_t effective_order = 0;
  for (const auto& [n_hyp, n_ref, n_match] : stats) {
    const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opt.eps_smoothing) return 100 * score / static_cast<double>(stats.size());
  if (effective_order == 0) return 0.0;
  avg_prec /= static_cast<double>(effective_order);
  avg_rec /= static_cast<double>(effective_order);
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

}  // namespace

double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references, const ChrfOptions& options) {
  const char* fn = "corpus_chrf";
  check_sizes(fn, hypotheses.size(), references.size());
  LOOM_CHECK(options.char_order >= 1 && options.char_order <= 64,
             "{}: char_order {} is not in 1..64", fn, options.char_order);
  LOOM_CHECK(std::isfinite(options.beta) && options.beta > 0, "{}: beta {} is not positive", fn,
             options.beta);
  std::vector<std::array<int64_t, 3>> stats(static_cast<size_t>(options.char_order));
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    LOOM_CHECK(!references[s].empty(),
               "{}: reference {} is empty (sacreBLEU refuses empty references)", fn, s);
    const auto hyp = char_ngrams(decode_utf8(hypotheses[s], fn, "hypotheses", s),
                                 options.char_order, options.whitespace);
    const auto ref = char_ngrams(decode_utf8(references[s], fn, "references", s),
                                 options.char_order, options.whitespace);
    for (size_t n = 0; n < stats.size(); ++n) {
      int64_t hyp_count = 0, match = 0, ref_count = 0;
      for (const auto& [ngram, count] : hyp[n]) {
        hyp_count += count;
        if (auto it = ref[n].find(ngram); it != ref[n].end()) match += std::min(count, it->second);
      }
      for (const auto& [ngram, count] : ref[n]) ref_count += count;
      // _get_match_statistics: no hypothesis count where the reference has no n-gram
      stats[n][0] += ref[n].empty() ? 0 : hyp_count;
      stats[n][1] += ref_count;
      stats[n][2] += match;
    }
  }
  return chrf_from_statistics(stats, options);
}

double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references) {
  return corpus_chrf(hypotheses, references, ChrfOptions{});
}

}  // namespace loom::metrics
