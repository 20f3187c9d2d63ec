// BLEU and chrF against sacreBLEU's own published test vectors (test/test_bleu.py,
// test/test_chrf.py, the README example), NLTK's corpus_bleu on random corpora
// (tests/golden/gen_metrics.py), the 13a tokeniser's rules, and the error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "metrics/text.h"

namespace metrics = loom::metrics;
using Strings = std::vector<std::string>;

namespace {

// Runs `f`, which must throw loom::Error whose message holds every piece of `pieces`.
template <typename F>
void check_error(F f, const Strings& pieces) {
  try {
    f();
    FAIL("no loom::Error thrown");
  } catch (const loom::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : pieces) CHECK_MESSAGE(msg.find(p) != std::string::npos, msg);
  }
}

// sacreBLEU's README example: three hypotheses, two reference streams.
const Strings kHyps = {"The dog bit the man.", "It wasn't surprising.",
                       "The man had just bitten him."};
const std::vector<Strings> kRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

}  // namespace

TEST_CASE("corpus_bleu: sacreBLEU's README example scores 48.530827 (two references)") {
  // test_bleu.py's tolerance: |score - 48.530827| < 1e-8 (loom: 48.530827009929865)
  CHECK(std::abs(metrics::corpus_bleu_multi_ref(kHyps, kRefs) - 48.530827) < 1e-8);
  // 'none' smoothing gives the same here: every order has a match
  CHECK(std::abs(metrics::bleu_from_statistics(metrics::bleu_statistics(kHyps, kRefs), false) -
                 48.530827) < 1e-8);
  // empty hypotheses are kept (and score 0), not dropped
  CHECK(metrics::corpus_bleu_multi_ref({"", "", ""}, kRefs) == 0.0);
}

TEST_CASE("bleu_statistics: sacreBLEU's sufficient-statistics case") {
  const auto s = metrics::bleu_statistics({"am I am a character sequence"},
                                          {{"I am a symbol string sequence a a"}});
  CHECK(s.correct == std::array<int64_t, 4>{4, 2, 1, 0});
  CHECK(s.total == std::array<int64_t, 4>{6, 5, 4, 3});
  CHECK(s.sys_len == 6);
  CHECK(s.ref_len == 8);
}

TEST_CASE("bleu_from_statistics: sacreBLEU's scoring case and the exp smoothing") {
  metrics::BleuStatistics s;
  s.correct = {9, 7, 5, 3};
  s.total = {10, 8, 6, 4};
  s.sys_len = s.ref_len = 11;
  CHECK(metrics::bleu_from_statistics(s) == doctest::Approx(83.75922397).epsilon(1e-9));
  // no 3- or 4-gram match: precisions 100/(2*6) and 100/(4*4) (mteval's NIST smoothing)
  s.correct = {9, 7, 0, 0};
  const double want = std::exp((std::log(90.0) + std::log(87.5) + std::log(100.0 / 12) +
                                std::log(100.0 / 16)) / 4);
  CHECK(metrics::bleu_from_statistics(s) == doctest::Approx(want).epsilon(1e-12));
  // brevity penalty exp(1 - 11/10) when the hypotheses are shorter
  s.sys_len = 10;
  CHECK(metrics::bleu_from_statistics(s) == doctest::Approx(want * std::exp(-0.1)).epsilon(1e-12));
  s.correct = {0, 0, 0, 0};  // no match at all: 0 (sacreBLEU's early stop)
  CHECK(metrics::bleu_from_statistics(s) == 0.0);
}

TEST_CASE("tokenize_13a splits as sacreBLEU's Tokenizer13a (expectations from its regexes)") {
  CHECK(metrics::tokenize_13a("Hello, world! It's 3.14-5 and 1,000.") ==
        "Hello , world ! It's 3.14 - 5 and 1,000 .");
  CHECK(metrics::tokenize_13a("&quot;Quoted&quot; (x/y) a.b e.g., U.S.A.") ==
        "\" Quoted \" ( x / y ) a . b e . g . , U . S . A .");
  CHECK(metrics::tokenize_13a("naïve café. Ünïcödé,ok") ==
        "naïve café . Ünïcödé , ok");
  CHECK(metrics::tokenize_13a("pre-\nfix line\nbreak <skipped> end ") == "prefix line break end");
  CHECK(metrics::tokenize_13a("a.,b 5-6 x-y 12.5% $3,50") == "a . , b 5 - 6 x-y 12.5 % $ 3,50");
  // Python's whitespace: tab, U+00A0 and U+3000 split words as a space does
  CHECK(metrics::tokenize_13a("tabs\tand\u00a0nbsp\u3000ideographic  ") ==
        "tabs and nbsp ideographic");
  CHECK(metrics::tokenize_13a("") == "");
}

TEST_CASE("corpus_bleu equals 100 x NLTK's corpus_bleu (method3) on random corpora") {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/metrics_golden.txt");
  REQUIRE(in.good());
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.rfind("bleu\t", 0) != 0) continue;
    std::istringstream fields(line.substr(5));
    size_t n = 0;
    double want = 0;
    fields >> n >> want;
    Strings hyps, refs;
    for (size_t i = 0; i < n; ++i) {
      std::string h, r;
      REQUIRE(std::getline(in, h));
      REQUIRE(std::getline(in, r));
      REQUIRE(h.rfind("hyp\t", 0) == 0);
      REQUIRE(r.rfind("ref\t", 0) == 0);
      hyps.push_back(h.substr(4));
      refs.push_back(r.substr(4));
    }
    CHECK(metrics::corpus_bleu(hyps, refs) == doctest::Approx(want).epsilon(1e-12));
    ++cases;
  }
  CHECK(cases == 8);
}

namespace {

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The golden file's records whose first field is `tag`, split at tabs.
std::vector<Strings> golden_records(const std::string& tag) {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/metrics_golden.txt");
  REQUIRE(in.good());
  std::vector<Strings> records;
  for (std::string line; std::getline(in, line);) {
    Strings f;
    std::istringstream s(line);
    for (std::string x; std::getline(s, x, '\t');) f.push_back(x);
    if (!f.empty() && (f[0] == tag || (tag == "chrf" && f[0] == "pair"))) records.push_back(f);
  }
  return records;
}

}  // namespace

TEST_CASE("tokenize_13a equals sacreBLEU's regexes on random messy strings") {
  // punctuation, digits, entities, <skipped>, "-\n", non-ASCII letters, Unicode whitespace
  const auto records = golden_records("tok13a");
  CHECK(records.size() == 150);
  for (const auto& r : records) {
    REQUIRE(r.size() >= 2);
    const std::string input = unhex(r[1]), want = r.size() > 2 ? unhex(r[2]) : "";
    CHECK_MESSAGE(metrics::tokenize_13a(input) == want, "input hex " << r[1]);
  }
}

TEST_CASE("corpus_chrf equals sacreBLEU's CHRF statistics on random messy strings") {
  const auto records = golden_records("chrf");
  int cases = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i][0] != "chrf") continue;
    const size_t n = std::stoul(records[i][1]);
    const double want = std::stod(records[i][2]);
    Strings hyps, refs;
    for (size_t k = 1; k <= n; ++k) {
      const auto& p = records[i + k];
      REQUIRE(p[0] == "pair");
      hyps.push_back(unhex(p[1]));
      refs.push_back(p.size() > 2 ? unhex(p[2]) : "");
    }
    CHECK(metrics::corpus_chrf(hyps, refs) == doctest::Approx(want).epsilon(1e-12));
    ++cases;
  }
  CHECK(cases == 20);
}

TEST_CASE("corpus_bleu: identical corpora score 100; Unicode whitespace separates tokens") {
  const Strings refs = {"The quick brown fox jumps over the lazy dog."};
  CHECK(metrics::corpus_bleu(refs, refs) == doctest::Approx(100.0).epsilon(1e-12));
  // U+00A0 and U+2009 are whitespace to Python's str.split, so this is the same token sequence
  CHECK(metrics::corpus_bleu({"The quick\u00a0brown fox\u2009jumps over the lazy dog."},
                             refs) == doctest::Approx(100.0).epsilon(1e-12));
}

TEST_CASE("corpus_chrf: sacreBLEU's sentence-level vectors (chrF2, eps smoothing)") {
  metrics::ChrfOptions eps;
  eps.eps_smoothing = true;
  const std::vector<std::array<std::string, 2>> pairs = {
      {"Co nás nejvíc trápí, protože lékaři si "
       "vybírají, kdo bude žít a kdo zemře.",
       "Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, "
       "kdo bude žít a kdo zemře."},
      {"Nebo prostě nemají vybavení, které by jim pomohlo, uvedli "
       "lékaři.",
       "A někdy nemáme ani potřebný materiál, abychom jim "
       "pomohli, popsali lékaři."},
      {"Lapali po dechu, jejich životy skončily dřív, než "
       "skutečně začaly.",
       "Lapali po dechu a pak jejich život skončil - dřív, než "
       "skutečně mohl začít, připomněli."}};
  const double want[] = {39.14078509, 31.22557079, 57.15704367};
  for (size_t i = 0; i < pairs.size(); ++i)
    CHECK(metrics::corpus_chrf({pairs[i][0]}, {pairs[i][1]}, eps) ==
          doctest::Approx(want[i]).epsilon(1e-9));
}

TEST_CASE("corpus_chrf: sacreBLEU's corpus vectors (beta 3; eps smoothing, effective order)") {
  struct Case {
    Strings hyps, refs;
    double want;
  };
  metrics::ChrfOptions opt;
  opt.beta = 3;
  opt.eps_smoothing = true;
  const std::vector<Case> eps_cases = {
      {{"abcdefg"}, {"hijklmnop"}, 0.0},
      {{"a"}, {"b"}, 0.0},
      {{""}, {"b"}, 0.0},
      {{""}, {"ref"}, 0.0},
      {{""}, {"reference"}, 0.0},
      {{"aa"}, {"ab"}, 8.3333},
      {{"a", "b"}, {"a", "c"}, 8.3333},
      {{"a"}, {"a"}, 16.6667},
      {{"a b c"}, {"a b c"}, 50.0},
      {{"a b c"}, {"abc"}, 50.0},
      {{" risk assessment must be made of those who are qualified and expertise in the sector - "
        "these are the scientists ."},
       {"risk assessment has to be undertaken by those who are qualified and expert in that area "
        "- that is the scientists ."},
       63.361730},
      {{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
       64.1302698},
      {{"Niemand hat die Absicht, eine Mauer zu errichten"},
       {"Niemand hat die Absicht, eine Mauer zu errichten"},
       100.0}};
  for (const auto& c : eps_cases)
    CHECK(std::abs(metrics::corpus_chrf(c.hyps, c.refs, opt) - c.want) < 1e-4);  // test_chrf.py's EPSILON
  opt.eps_smoothing = false;  // sacreBLEU < 2.0 mode: average over the orders that occur
  const std::vector<Case> eff_cases = {
      {{"a"}, {"a"}, 100.0},       {{""}, {"reference"}, 0.0}, {{"a b c"}, {"a b c"}, 100.0},
      {{"a b c"}, {"abc"}, 100.0}, {{""}, {"c"}, 0.0},         {{"a", "b"}, {"a", "c"}, 50.0},
      {{"aa"}, {"ab"}, 25.0}};
  for (const auto& c : eff_cases)
    CHECK(metrics::corpus_chrf(c.hyps, c.refs, opt) == doctest::Approx(c.want).epsilon(1e-9));
  opt.whitespace = true;
  CHECK(metrics::corpus_chrf(
            {"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
            {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
            opt) == doctest::Approx(67.3481606).epsilon(1e-9));
  CHECK(metrics::corpus_chrf(
            {"risk assessment must be made of those who are qualified and expertise in the sector "
             "- these are the scientists ."},
            {"risk assessment has to be undertaken by those who are qualified and expert in that "
             "area - that is the scientists ."},
            opt) == doctest::Approx(65.2414427).epsilon(1e-9));
}

TEST_CASE("corpus_chrf defaults: chrF2 over code points, whitespace removed, statistics summed") {
  CHECK(metrics::corpus_chrf({"a b c"}, {"abc"}) == doctest::Approx(100.0));
  CHECK(metrics::corpus_chrf({"x\u3000y"}, {"xy"}) == doctest::Approx(100.0));  // U+3000
  // "ü" is one character: "aü" vs "aü" matches at orders 1 and 2, nothing else occurs
  CHECK(metrics::corpus_chrf({"aü"}, {"aü"}) == doctest::Approx(100.0));
  // corpus statistics are summed before the F-score: ("a","a") + ("b","c") is not the mean of
  // the sentence scores (100 and 0): unigram precision = recall = 1/2 -> F = 50
  CHECK(metrics::corpus_chrf({"a", "b"}, {"a", "c"}) == doctest::Approx(50.0));
  // beta 2 weights recall: hypothesis "ab" vs reference "abcd": P = 1, R = (2/4 + 1/3) / 2
  const double p = 1.0, r = (0.5 + 1.0 / 3) / 2;
  CHECK(metrics::corpus_chrf({"ab"}, {"abcd"}) ==
        doctest::Approx(100 * 5 * p * r / (4 * p + r)).epsilon(1e-12));
}

TEST_CASE("metrics: different list sizes, invalid UTF-8 and empty references throw") {
  check_error([] { metrics::corpus_bleu({"a", "b", "c"}, {"a", "b"}); },
              {"corpus_bleu", "3 hypotheses", "2 references"});
  check_error([] { metrics::corpus_chrf({"a"}, {"a", "b"}); },
              {"corpus_chrf", "1 hypotheses", "2 references"});
  check_error([] { metrics::corpus_bleu_multi_ref({"a"}, {{"a"}, {"a", "b"}}); },
              {"bleu_statistics", "1 hypotheses", "2 references"});
  check_error([] { metrics::corpus_bleu({"ok", "bad \xff"}, {"ok", "ok"}); },
              {"hypotheses[1]", "UTF-8", "0xff", "offset 4"});
  check_error([] { metrics::corpus_chrf({"ok"}, {"\xc0\xaf"}); },  // overlong '/'
              {"corpus_chrf", "references[0]", "UTF-8"});
  check_error([] { metrics::corpus_chrf({"ok"}, {"\xed\xa0\x80"}); },  // a surrogate
              {"references[0]", "UTF-8"});
  check_error([] { metrics::corpus_bleu({"a"}, {""}); }, {"reference 0 is empty"});
  check_error([] { metrics::corpus_chrf({"a"}, {""}); }, {"reference 0 is empty"});
  check_error([] { metrics::tokenize_13a("\xe2\x82"); }, {"tokenize_13a", "UTF-8"});
  metrics::ChrfOptions bad;
  bad.char_order = 0;
  check_error([&] { metrics::corpus_chrf({"a"}, {"a"}, bad); }, {"char_order 0"});
  // empty corpora: nothing to score, as sacreBLEU's statistics would give
  CHECK(metrics::corpus_bleu({}, {}) == 0.0);
  CHECK(metrics::corpus_chrf({}, {}) == 0.0);
}
