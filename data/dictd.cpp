// dictd files and FreeDict English -> German pairs (see dictd.h).
#include "data/dictd.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "data/fashion_mnist.h"  // gunzip
#include "data/text_file.h"

namespace loom::data {

namespace {

constexpr std::string_view kDigits =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

int64_t word_count(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool space = c == ' ' || c == '\t';
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

// The first ", " or "; " separated alternative.
std::string first_alternative(const std::string& s) {
  const size_t cut = std::min(s.find(", "), s.find("; "));
  return std::string(trim(std::string_view(s).substr(0, cut)));
}

// Without its closed "(...)" groups (explanations such as "(bis in die Nacht hinein arbeiten)").
std::string drop_parentheticals(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t end = s[i] == '(' ? s.find(')', i + 1) : std::string::npos;
    if (end != std::string::npos) {
      i = end;
      continue;
    }
    out += s[i];
  }
  return out;
}

bool ends_sentence(const std::string& s) {
  return !s.empty() && (s.back() == '.' || s.back() == '?' || s.back() == '!');
}

}  // namespace

// ============================================================================ numbers

namespace {

// The number, or false for anything decode_dictd_number rejects (no message built: the index
// loop calls this once per field, and only on failure asks for the message).
bool try_decode(std::string_view digits, uint64_t& value) {
  if (digits.empty() || digits.size() > 11) return false;
  value = 0;
  for (char c : digits) {
    const size_t d = kDigits.find(c);
    if (d == std::string_view::npos || value > ((uint64_t{1} << 63) - 1 - d) / 64) return false;
    value = value * 64 + d;
  }
  return true;
}

}  // namespace

uint64_t decode_dictd_number(std::string_view digits, const std::string& where) {
  uint64_t value = 0;
  if (try_decode(digits, value)) return value;
  LOOM_CHECK(!digits.empty(), "dictd: {}: empty base-64 number", where);
  LOOM_CHECK(digits.size() <= 11, "dictd: {}: base-64 number '{}' has {} digits (at most 11)",
             where, digits, digits.size());
  for (char c : digits)
    LOOM_CHECK(kDigits.find(c) != std::string_view::npos,
               "dictd: {}: '{}' is not a base-64 digit in '{}'", where, c, digits);
  LOOM_FAIL("dictd: {}: base-64 number '{}' is larger than 2^63", where, digits);
}

std::string encode_dictd_number(uint64_t value) {
  std::string s;
  do {
    s.insert(s.begin(), kDigits[value % 64]);
    value /= 64;
  } while (value > 0);
  return s;
}

// ============================================================================ files

Dictd::Dictd(std::string_view index_text, std::string_view body_bytes, const std::string& source,
             size_t max_body_bytes) {
  const bool gz = body_bytes.size() >= 2 && static_cast<unsigned char>(body_bytes[0]) == 0x1f &&
                  static_cast<unsigned char>(body_bytes[1]) == 0x8b;
  if (gz) {
    body_ = gunzip(body_bytes, source + " (body)", max_body_bytes);
  } else {
    LOOM_CHECK(body_bytes.size() <= max_body_bytes, "dictd: {}: body of {} bytes exceeds {}",
               source, body_bytes.size(), max_body_bytes);
    body_ = std::string(body_bytes);
  }
  int64_t line_number = 0;
  size_t pos = 0;
  while (pos < index_text.size()) {
    const size_t end = std::min(index_text.find('\n', pos), index_text.size());
    const std::string_view line = index_text.substr(pos, end - pos);
    const uint64_t line_offset = pos;
    pos = end + 1;
    ++line_number;
    if (trim(line).empty()) continue;
    auto where = [&] {
      return fmt::format("{} (index) line {} (byte offset {})", source, line_number, line_offset);
    };
    const auto fields = split(line, '\t');
    LOOM_CHECK(fields.size() == 3 || fields.size() == 4,
               "dictd: {}: expected headword TAB offset TAB length, got {} fields", where(),
               fields.size());
    DictdEntry e;
    e.headword = std::string(fields[0]);
    if (!try_decode(trim(fields[1]), e.offset)) decode_dictd_number(trim(fields[1]), where());
    if (!try_decode(trim(fields[2]), e.length)) decode_dictd_number(trim(fields[2]), where());
    // Both bounds before any read: offset + length may not pass the body's end (nor overflow).
    LOOM_CHECK(e.offset <= body_.size() && e.length <= body_.size() - e.offset,
               "dictd: {}: definition at offset {} of length {} passes the end of the body "
               "({} bytes): the body is truncated or the index is corrupt",
               where(), e.offset, e.length, body_.size());
    entries_.push_back(std::move(e));
  }
}

std::string Dictd::body_path(const std::string& prefix) {
  std::error_code ec;
  if (!std::filesystem::exists(prefix + ".dict.dz", ec) &&
      std::filesystem::exists(prefix + ".dict", ec))
    return prefix + ".dict";
  return prefix + ".dict.dz";
}

Dictd Dictd::open(const std::string& prefix) {
  const std::string index_path = prefix + ".index", body_file = body_path(prefix);
  const std::string index = read_file_bytes(index_path, "dictd index");
  const std::string body = read_file_bytes(body_file, "dictd body");
  return Dictd(index, body, "'" + index_path + "' / '" + body_file + "'");
}

std::string_view Dictd::definition(size_t i) const {
  LOOM_CHECK(i < entries_.size(), "Dictd::definition: entry {} of {}", i, entries_.size());
  return std::string_view(body_).substr(entries_[i].offset, entries_[i].length);
}

// ============================================================================ pairs

std::string strip_annotations(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char close = c == '<' ? '>' : c == '[' ? ']' : c == '{' ? '}' : 0;
    const size_t end = close ? text.find(close, i + 1) : std::string_view::npos;
    if (end != std::string_view::npos) {
      i = end;  // skip the annotation; an unclosed bracket is kept as text
      continue;
    }
    out += (c == '\t' || c == '\r' || c == '\n') ? ' ' : c;
  }
  std::string collapsed;
  for (char c : out)
    if (c != ' ' || (!collapsed.empty() && collapsed.back() != ' ')) collapsed += c;
  std::string result(trim(collapsed));
  // An annotation removed before a comma leaves "word ," behind.
  for (size_t at; (at = result.find(" ,")) != std::string::npos;) result.erase(at, 1);
  while (!result.empty() && (result.back() == ',' || result.back() == ';')) result.pop_back();
  return std::string(trim(result));
}

namespace {

// definition_pairs, with pairs[i] an example when example[i] (else the headword pair).
std::vector<TranslationPair> tagged_pairs(std::string_view definition, std::vector<bool>& example) {
  std::vector<TranslationPair> pairs;
  const auto lines = split(definition, '\n');
  if (lines.size() < 2) return pairs;
  // Line 1: the headword, then " /IPA/" and maybe more; line 2: the translations.
  std::string_view head = lines[0];
  const size_t ipa = head.find(" /");
  if (ipa != std::string_view::npos) head = head.substr(0, ipa);
  const std::string english = strip_annotations(head);
  const std::string german =
      first_alternative(strip_annotations(drop_parentheticals(std::string(lines[1]))));
  if (!english.empty() && !german.empty() && lines[1].find('"') == std::string_view::npos) {
    pairs.push_back({english, german});
    example.push_back(false);
  }
  // Examples:   "English text"  - German text
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::string_view line = trim(lines[i]);
    if (line.size() < 2 || line.front() != '"') continue;
    const size_t sep = line.find("\"  - ");
    if (sep == std::string_view::npos || sep == 0) continue;
    TranslationPair p{strip_annotations(line.substr(1, sep - 1)),
                      strip_annotations(line.substr(sep + 5))};
    if (!ends_sentence(p.english)) p.german = first_alternative(p.german);
    if (!p.english.empty() && !p.german.empty()) {
      pairs.push_back(std::move(p));
      example.push_back(true);
    }
  }
  return pairs;
}

}  // namespace

std::vector<TranslationPair> definition_pairs(std::string_view definition) {
  std::vector<bool> example;
  return tagged_pairs(definition, example);
}

std::vector<TranslationPair> extract_pairs(const Dictd& dict, const PairOptions& options) {
  LOOM_CHECK(options.max_words > 0, "extract_pairs: max_words {} must be positive",
             options.max_words);
  std::vector<TranslationPair> pairs;
  std::unordered_set<std::string> seen_english;
  std::unordered_multimap<uint64_t, uint64_t> seen_ranges;  // offset -> length: a definition
  seen_ranges.reserve(dict.entries().size());               // listed under many words
  seen_english.reserve(dict.entries().size());
  for (size_t i = 0; i < dict.entries().size(); ++i) {
    const DictdEntry& e = dict.entries()[i];
    if (e.headword.rfind("00database", 0) == 0 || e.headword.rfind("00-database", 0) == 0)
      continue;  // dictfmt's metadata entries
    const auto [first, last] = seen_ranges.equal_range(e.offset);
    if (std::any_of(first, last, [&](const auto& r) { return r.second == e.length; })) continue;
    seen_ranges.emplace(e.offset, e.length);
    std::vector<bool> example;
    const auto found = tagged_pairs(dict.definition(i), example);
    for (size_t k = 0; k < found.size(); ++k) {
      if ((example[k] && !options.examples) || (!example[k] && !options.headwords)) continue;
      const TranslationPair& p = found[k];
      if (word_count(p.english) > options.max_words || word_count(p.german) > options.max_words)
        continue;
      if (seen_english.insert(p.english).second) pairs.push_back(p);
    }
  }
  return pairs;
}

PairSplits split_pairs(const std::vector<TranslationPair>& pairs, double valid_fraction,
                       double test_fraction) {
  LOOM_CHECK(valid_fraction >= 0 && test_fraction >= 0 && valid_fraction + test_fraction <= 1,
             "split_pairs: fractions valid {} and test {} must be >= 0 and sum to at most 1",
             valid_fraction, test_fraction);
  const auto test_cut = static_cast<uint64_t>(test_fraction * 10000.0);
  const auto valid_cut = static_cast<uint64_t>((test_fraction + valid_fraction) * 10000.0);
  PairSplits s;
  for (const auto& p : pairs) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bit
    for (unsigned char c : p.english) h = (h ^ c) * 1099511628211ull;
    const uint64_t bucket = h % 10000;
    (bucket < test_cut ? s.test : bucket < valid_cut ? s.valid : s.train).push_back(p);
  }
  return s;
}

std::string corpus_statistics(const PairSplits& splits) {
  std::string out;
  auto side = [](const std::vector<TranslationPair>& v, bool english) {
    int64_t total = 0, longest = 0;
    for (const auto& p : v) {
      const int64_t n = word_count(english ? p.english : p.german);
      total += n;
      longest = std::max(longest, n);
    }
    const double mean =
        v.empty() ? 0.0 : static_cast<double>(total) / static_cast<double>(v.size());
    return fmt::format("{:.2f} words mean, {} max", mean, longest);
  };
  bool seen[256] = {};
  for (const auto* v : {&splits.train, &splits.valid, &splits.test})
    for (const auto& p : *v)
      for (const std::string* text : {&p.english, &p.german})
        for (unsigned char c : *text) seen[c] = true;
  const auto distinct = std::count(std::begin(seen), std::end(seen), true);
  for (const auto& [name, v] : {std::pair{"train", &splits.train},
                                std::pair{"valid", &splits.valid}, std::pair{"test", &splits.test}})
    out += fmt::format("{:5}: {:7} pairs; English {}; German {}\n", name, v->size(), side(*v, true),
                       side(*v, false));
  out += fmt::format("distinct bytes: {}\n", distinct);
  return out;
}

}  // namespace loom::data
