// WordPieceTokenizer: encoding (BasicTokenizer + WordpieceTokenizer of google-research/bert's
// tokenization.py, step by step in its order), decoding and the vocabulary files. Training is
// in data/wordpiece_train.cpp.
#include "data/wordpiece_tokenizer.h"

#include <fmt/format.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/text_file.h"

namespace loom::data {
namespace {

using CodePoints = std::vector<UChar32>;

// --- the character classes of tokenization.py ------------------------------------------------

int8_t category(UChar32 c) { return u_charType(c); }

// Python's str.isspace, which str.split() splits on: general category Zs or bidirectional class
// WS, B or S (CPython's makeunicodedata.py).
bool is_python_space(UChar32 c) {
  const UCharDirection d = u_charDirection(c);
  return category(c) == U_SPACE_SEPARATOR || d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR ||
         d == U_SEGMENT_SEPARATOR;
}

// _is_whitespace: ' ', \t, \n, \r and Zs.
bool is_whitespace(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || category(c) == U_SPACE_SEPARATOR;
}

// _is_control: Cc and Cf, except \t \n \r (which _is_whitespace claims).
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return category(c) == U_CONTROL_CHAR || category(c) == U_FORMAT_CHAR;
}

// _is_punctuation: general category P*, and all non-letter/number ASCII symbols ("$", "^", "`"
// are Sc/Sk, not P, in Unicode, but the reference splits them too).
bool is_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

// _is_chinese_char: the CJK Unified Ideographs blocks as tokenization.py lists them (its own
// definition: Hangul, Hiragana and Katakana are not included).
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// --- encodings ------------------------------------------------------------------------------

// UTF-8 -> code points, ill-formed sequences dropped (Python's decode("utf-8", "ignore"): ICU's
// U8_NEXT rejects the same overlong forms, surrogates and values past U+10FFFF, each maximal
// ill-formed subpart at once, so decoding resumes where Python's does).
template <typename Visit>
void for_each_code_point(std::string_view text, Visit visit) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    const int32_t start = i;
    UChar32 c = 0;
    U8_NEXT(s, i, length, c);
    if (c >= 0) visit(c, start, i);
  }
}

bool valid_utf8(std::string_view text) {
  bool valid = true;
  int32_t expected = 0;
  for_each_code_point(text, [&](UChar32, int32_t start, int32_t end) {
    valid = valid && start == expected;
    expected = end;
  });
  return valid && expected == static_cast<int32_t>(text.size());
}

void append_utf8(std::string& out, UChar32 c) {
  uint8_t buffer[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buffer, n, c);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

std::string to_utf8(const CodePoints& chars) {
  std::string out;
  for (const UChar32 c : chars) append_utf8(out, c);
  return out;
}

std::u16string to_utf16(const CodePoints& chars) {
  std::u16string out;
  for (const UChar32 c : chars) {
    if (U_IS_BMP(c)) {
      out += static_cast<char16_t>(c);
    } else {
      out += static_cast<char16_t>(U16_LEAD(c));
      out += static_cast<char16_t>(U16_TRAIL(c));
    }
  }
  return out;
}

CodePoints from_utf16(const std::u16string& text) {
  CodePoints out;
  const auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c = 0;
    U16_NEXT(text.data(), i, length, c);
    out.push_back(c);
  }
  return out;
}

// Runs an ICU string transform `fn(dest, capacity, error)` with a buffer grown to fit.
template <typename Fn>
std::u16string icu_transform(size_t guess, const char* what, Fn fn) {
  std::u16string out(guess + 8, u'\0');
  UErrorCode error = U_ZERO_ERROR;
  int32_t n = fn(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &error);
  if (error == U_BUFFER_OVERFLOW_ERROR) {
    out.assign(static_cast<size_t>(n), u'\0');
    error = U_ZERO_ERROR;
    n = fn(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &error);
  }
  LOOM_CHECK(U_SUCCESS(error), "WordPieceTokenizer: ICU {} failed: {}", what, u_errorName(error));
  out.resize(static_cast<size_t>(n));
  return out;
}

// --- BasicTokenizer's steps ----------------------------------------------------------------

// _clean_text then _tokenize_chinese_chars on the decoded text.
CodePoints clean_text(std::string_view text) {
  CodePoints out;
  out.reserve(text.size());
  for_each_code_point(text, [&](UChar32 c, int32_t, int32_t) {
    if (c == 0 || c == 0xFFFD || is_control(c)) return;
    if (is_whitespace(c)) {
      out.push_back(' ');
    } else if (is_cjk(c)) {
      out.insert(out.end(), {' ', c, ' '});
    } else {
      out.push_back(c);
    }
  });
  return out;
}

// whitespace_tokenize: str.split().
std::vector<CodePoints> split_whitespace(const CodePoints& text) {
  std::vector<CodePoints> words;
  CodePoints word;
  for (const UChar32 c : text) {
    if (!is_python_space(c)) {
      word.push_back(c);
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// token.lower() then _run_strip_accents: NFD, Mn removed. Python's str.lower is the locale-free
// full lowercase mapping with Final_Sigma, which is ICU's u_strToLower with the root locale "".
CodePoints lower_strip_accents(const CodePoints& word) {
  const std::u16string utf16 = to_utf16(word);
  const auto* source = reinterpret_cast<const UChar*>(utf16.data());
  const auto length = static_cast<int32_t>(utf16.size());
  const std::u16string lower =
      icu_transform(utf16.size(), "lowercase", [&](UChar* dest, int32_t cap, UErrorCode* err) {
        return u_strToLower(dest, cap, source, length, "", err);
      });
  UErrorCode error = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&error);
  LOOM_CHECK(U_SUCCESS(error), "WordPieceTokenizer: ICU NFD unavailable: {}", u_errorName(error));
  const std::u16string decomposed =
      icu_transform(lower.size() * 2, "NFD", [&](UChar* dest, int32_t cap, UErrorCode* err) {
        return unorm2_normalize(nfd, reinterpret_cast<const UChar*>(lower.data()),
                                static_cast<int32_t>(lower.size()), dest, cap, err);
      });
  CodePoints out;
  for (const UChar32 c : from_utf16(decomposed))
    if (category(c) != U_NON_SPACING_MARK) out.push_back(c);
  return out;
}

// _run_split_on_punc: every punctuation character becomes a word of its own.
void split_on_punctuation(const CodePoints& word, std::vector<CodePoints>& out) {
  bool start_new = true;
  for (const UChar32 c : word) {
    if (is_punctuation(c)) {
      out.push_back({c});
      start_new = true;
    } else {
      if (start_new) out.emplace_back();
      start_new = false;
      out.back().push_back(c);
    }
  }
}

// Python's str.strip() on UTF-8 (of valid text).
std::string_view strip(std::string_view text) {
  size_t begin = text.size(), end = 0;
  for_each_code_point(text, [&](UChar32 c, int32_t start, int32_t stop) {
    if (is_python_space(c)) return;
    begin = std::min(begin, static_cast<size_t>(start));
    end = static_cast<size_t>(stop);
  });
  return begin >= end ? std::string_view() : text.substr(begin, end - begin);
}

// Why `token` cannot be a vocabulary entry, or "" if it can.
std::string token_problem(std::string_view token) {
  if (token.empty()) return "empty token";
  if (token.size() > WordPieceTokenizer::kMaxTokenBytes)
    return fmt::format("token of {} bytes, more than the {} allowed", token.size(),
                       WordPieceTokenizer::kMaxTokenBytes);
  if (!valid_utf8(token)) return "token is not valid UTF-8";
  if (token.find('\n') != std::string_view::npos || strip(token) != token)
    return fmt::format("token '{}' begins or ends with whitespace", token);
  return "";
}

}  // namespace

// ============================================================================ encoding

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, bool lower_case)
    : vocab_(std::move(vocab)), lower_case_(lower_case) {
  LOOM_CHECK(static_cast<int64_t>(vocab_.size()) <= kMaxVocabSize,
             "WordPieceTokenizer: {} tokens, more than the {} allowed", vocab_.size(),
             kMaxVocabSize);
  ids_.reserve(vocab_.size());
  for (size_t id = 0; id < vocab_.size(); ++id) {
    const std::string why = token_problem(vocab_[id]);
    LOOM_CHECK(why.empty(), "WordPieceTokenizer: token {}: {}", id, why);
    ids_[vocab_[id]] = static_cast<int64_t>(id);
  }
  const auto unk = ids_.find("[UNK]");
  LOOM_CHECK(unk != ids_.end(), "WordPieceTokenizer: the vocabulary of {} tokens has no [UNK]",
             vocab_.size());
  unk_id_ = unk->second;
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(std::string_view text,
                                                            bool lower_case) {
  std::vector<CodePoints> pieces;
  for (const CodePoints& word : split_whitespace(clean_text(text)))
    split_on_punctuation(lower_case ? lower_strip_accents(word) : word, pieces);
  // whitespace_tokenize(" ".join(split_tokens)): drops what became empty.
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const CodePoints& piece : pieces)
    for (const CodePoints& word : split_whitespace(piece)) out.push_back(to_utf8(word));
  return out;
}

void WordPieceTokenizer::wordpiece(const std::string& word, std::vector<int64_t>& out) const {
  // Byte offsets of the code points of `word`: chars[i] is word[offset[i], offset[i + 1]).
  std::vector<size_t> offset;
  for_each_code_point(word, [&](UChar32, int32_t start, int32_t) { offset.push_back(start); });
  const size_t n = offset.size();
  if (static_cast<int64_t>(n) > kMaxInputCharsPerWord) {
    out.push_back(unk_id_);
    return;
  }
  offset.push_back(word.size());
  const size_t before = out.size();
  std::string piece;
  for (size_t start = 0; start < n;) {
    // Greedy longest-match-first: the longest chars[start:end] in the vocabulary.
    int64_t match = -1;
    size_t end = n;
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(word, offset[start], offset[end] - offset[start]);
      if (const auto it = ids_.find(piece); it != ids_.end()) {
        match = it->second;
        break;
      }
    }
    if (match < 0) {  // is_bad: the whole word is unknown
      out.resize(before);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(match);
    start = end;
  }
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  for (const std::string& word : basic_tokenize(text, lower_case_)) wordpiece(word, ids);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  for (const int64_t id : encode(text)) pieces.push_back(vocab_[static_cast<size_t>(id)]);
  return pieces;
}

// ============================================================================ decoding, lookup

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  // Hugging Face's " ".join(tokens).replace(" ##", "").strip(), literally.
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    LOOM_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
               "WordPieceTokenizer::decode: id {} at position {} is outside the vocabulary [0, {})",
               ids[i], i, vocab_size());
    if (i > 0) joined += ' ';
    joined += vocab_[static_cast<size_t>(ids[i])];
  }
  std::string text;
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, 3, " ##") == 0) {
      i += 3;
    } else {
      text += joined[i++];
    }
  }
  return std::string(strip(text));
}

int64_t WordPieceTokenizer::token_id(const std::string& token) const {
  const auto it = ids_.find(token);
  LOOM_CHECK(it != ids_.end(), "WordPieceTokenizer::token_id: '{}' is not in the vocabulary of {}",
             token, vocab_.size());
  return it->second;
}

const std::string& WordPieceTokenizer::token(int64_t id) const {
  LOOM_CHECK(id >= 0 && id < vocab_size(),
             "WordPieceTokenizer::token: id {} is outside the vocabulary [0, {})", id,
             vocab_size());
  return vocab_[static_cast<size_t>(id)];
}

// ============================================================================ files

namespace {

// Reads the tokens of lines [reader's next line, +count), or to the end when count < 0.
std::vector<std::string> read_tokens(LineReader& reader, int64_t count) {
  std::vector<std::string> vocab;
  while (count < 0 ? !reader.at_end() : static_cast<int64_t>(vocab.size()) < count) {
    const std::string_view line = reader.next(fmt::format("token {} of {}", vocab.size(), count));
    if (!valid_utf8(line)) reader.fail("the line is not valid UTF-8");
    const std::string_view token = strip(line);
    if (std::string why = token_problem(token); !why.empty()) reader.fail(why);
    if (static_cast<int64_t>(vocab.size()) >= WordPieceTokenizer::kMaxVocabSize)
      reader.fail(fmt::format("more than {} tokens", WordPieceTokenizer::kMaxVocabSize));
    vocab.emplace_back(token);
  }
  if (std::find(vocab.begin(), vocab.end(), "[UNK]") == vocab.end())
    reader.fail(fmt::format("the vocabulary of {} tokens has no [UNK]", vocab.size()));
  return vocab;
}

void check_file_size(const std::string& path, const char* what) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  LOOM_CHECK(!error, "{}: cannot open '{}' for reading", what, path);
  LOOM_CHECK(bytes <= static_cast<uintmax_t>(WordPieceTokenizer::kMaxFileBytes),
             "{}: '{}' has {} bytes, more than the {} a vocabulary may have", what, path, bytes,
             WordPieceTokenizer::kMaxFileBytes);
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& vocab_txt,
                                                       bool lower_case) {
  check_file_size(vocab_txt, "WordPieceTokenizer::from_vocab_file");
  LineReader reader(vocab_txt, "WordPieceTokenizer::from_vocab_file");
  LOOM_CHECK(!reader.at_end(), "WordPieceTokenizer::from_vocab_file: '{}' is empty", vocab_txt);
  return WordPieceTokenizer(read_tokens(reader, -1), lower_case);
}

// File format:
//   loom-wordpiece-tokenizer 1
//   lower_case <0|1>
//   vocab <N>
//   <token>              N lines, token id = line - 4
void WordPieceTokenizer::save(const std::string& path) const {
  std::string text = fmt::format("{} {}\nlower_case {}\nvocab {}\n", kMagic, kVersion,
                                 lower_case_ ? 1 : 0, vocab_.size());
  for (const std::string& token : vocab_) text += token + "\n";
  write_file_atomic(path, text, "WordPieceTokenizer::save");
}

WordPieceTokenizer WordPieceTokenizer::load(const std::string& path) {
  check_file_size(path, "WordPieceTokenizer::load");
  LineReader reader(path, "WordPieceTokenizer::load");
  reader.expect_header(fmt::format("{} {}", kMagic, kVersion));
  const std::string_view lower = reader.next("'lower_case 0' or 'lower_case 1'");
  if (lower != "lower_case 0" && lower != "lower_case 1")
    reader.fail(fmt::format("expected 'lower_case 0' or 'lower_case 1', got '{}'", lower));
  const std::string_view count_line = reader.next("'vocab <count>'");
  if (!count_line.starts_with("vocab "))
    reader.fail(fmt::format("expected 'vocab <count>', got '{}'", count_line));
  const int64_t count = reader.integers(count_line.substr(6), 1, "'vocab <count>'")[0];
  if (count < 1 || count > kMaxVocabSize)
    reader.fail(fmt::format("vocabulary size {} outside [1, {}]", count, kMaxVocabSize));
  std::vector<std::string> vocab = read_tokens(reader, count);
  reader.expect_end("the last token");
  return WordPieceTokenizer(std::move(vocab), lower == "lower_case 1");
}

}  // namespace loom::data
