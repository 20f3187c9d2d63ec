// The dictd dictionary format (RFC 2229's servers' files, written by dictfmt) and English ->
// German sentence pairs from FreeDict's eng-deu dictionary, for the translation example.
//
//   NAME.index     one line per headword: headword TAB offset TAB length [TAB original headword]
//                  offset and length in dictd's base-64 numbers (digits A-Z a-z 0-9 + /, most
//                  significant first, no padding): "BWPZk" = 1*64^4 + 22*64^3 + ...
//   NAME.dict.dz   the definitions, concatenated: dictzip is gzip with random-access chunk
//                  tables in the header's extra field, so zlib reads it as ordinary gzip.
//                  (A plain NAME.dict is read as it is.)
//
// Every offset/length is checked against the body's size before anything is read; a bad or
// truncated file is a loom::Error naming the file, the line and the offset.
//
// FreeDict eng-deu definitions (Debian's dict-freedict-eng-deu) look like
//   slope /slˈəʊp/                                          headword, IPA
//   Abdachung <fem>, Schräge <fem>, Böschung <fem>          translations with annotations
//         "side slope of a dam"  - seitliche Abdachung eines Damms        an example
//      Synonym: {talus}
// and give two kinds of pairs: each quoted example ("English"  - German) and headword -> first
// translation, with <gender>, [domain], {cross-references} and the IPA stripped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

inline constexpr const char* kFreedictEngDeu = "/usr/share/dictd/freedict-eng-deu";

// One index line.
struct DictdEntry {
  std::string headword;
  uint64_t offset = 0, length = 0;  // a range of the (decompressed) body
};

// A dictd dictionary held in memory: the index and the whole decompressed body.
class Dictd {
 public:
  // Parses index text and a body (gzip/dictzip, recognised by its magic 1f 8b, or plain);
  // `source` names the files in errors. The decompressed body is capped at max_body_bytes.
  Dictd(std::string_view index_text, std::string_view body_bytes, const std::string& source,
        size_t max_body_bytes = size_t{1} << 30);
  // Reads PREFIX.index and PREFIX.dict.dz (or PREFIX.dict when there is no .dict.dz).
  static Dictd open(const std::string& prefix);
  // The body file open() reads: PREFIX.dict.dz, or PREFIX.dict when there is no .dict.dz.
  static std::string body_path(const std::string& prefix);

  const std::vector<DictdEntry>& entries() const { return entries_; }
  size_t body_size() const { return body_.size(); }
  // The definition text of entry i (bounds checked when the index was read).
  std::string_view definition(size_t i) const;

 private:
  std::vector<DictdEntry> entries_;
  std::string body_;
};

// dictd's base-64 number ("A" = 0, "BA" = 64); empty, invalid digits or a value past 2^63 throw,
// naming `where`.
uint64_t decode_dictd_number(std::string_view digits, const std::string& where);
// The inverse, for writing test dictionaries: 0 -> "A".
std::string encode_dictd_number(uint64_t value);

// ---------------------------------------------------------------------------- sentence pairs
struct TranslationPair {
  std::string english, german;
  bool operator==(const TranslationPair&) const = default;
};

// Removes FreeDict's annotations from a line: <...> (grammar), [...] (domain, register) and
// {...} (cross-references) (an unclosed bracket stays text), collapses runs of spaces, trims,
// and drops a trailing ',' or ';'. (The IPA /.../ follows the headword, which definition_pairs
// cuts at " /".)
std::string strip_annotations(std::string_view text);

// The pairs of one definition, in order: headword -> first translation (its "(...)"
// explanations dropped), then every example.
// An example whose English ends in . ? ! keeps its whole German side; a phrase keeps the first
// of its ", " / "; " separated alternatives.
std::vector<TranslationPair> definition_pairs(std::string_view definition);

struct PairOptions {
  bool headwords = true;   // headword -> first translation
  bool examples = true;    // quoted example sentences and phrases
  int64_t max_words = 40;  // pairs with more whitespace-separated words on either side dropped
};

// Every pair of the dictionary in index order (each distinct definition parsed once), without
// empty sides and over-long pairs, deduplicated by the English side (its first German kept).
std::vector<TranslationPair> extract_pairs(const Dictd& dict, const PairOptions& options = {});

struct PairSplits {
  std::vector<TranslationPair> train, valid, test;
};
// Deterministic split by a 64-bit FNV-1a hash of the English side (so one English sentence is
// in exactly one split, whatever else the corpus holds): hash % 10000 below test_fraction *
// 10000 -> test, below (test + valid) * 10000 -> valid, else train. Order is kept.
PairSplits split_pairs(const std::vector<TranslationPair>& pairs, double valid_fraction = 0.01,
                       double test_fraction = 0.01);

// Corpus statistics as text: pairs per split, words per side (mean, max), distinct characters.
std::string corpus_statistics(const PairSplits& splits);

}  // namespace loom::data
