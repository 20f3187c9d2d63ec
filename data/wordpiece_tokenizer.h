// WordPieceTokenizer: BERT's tokenizer (Devlin et al. 2018, sec. 3 "we use WordPiece embeddings
// with a 30,000 token vocabulary"; Wu et al. 2016), exactly google-research/bert's
// tokenization.py FullTokenizer = BasicTokenizer + WordpieceTokenizer:
//
//   bytes --UTF-8, invalid bytes dropped--> code points
//     --_clean_text--------> U+0000, U+FFFD and Cc/Cf characters removed (but \t \n \r),
//                            \t \n \r and Zs characters become ' '
//     --_tokenize_chinese_chars--> ' ' around every CJK ideograph (the reference's ranges)
//     --str.split()--------> words (Python's whitespace: Zs, bidi classes WS/B/S)
//     --lower_case: str.lower, NFD, Mn marks removed (_run_strip_accents)
//     --_run_split_on_punc-> each punctuation character (P* or ASCII symbols) its own word
//     --WordpieceTokenizer-> greedy longest-match-first pieces, "##" before a non-initial
//                            piece; the whole word is [UNK] if some part matches nothing or
//                            it has more than 100 code points (max_input_chars_per_word).
//
// Unicode properties (general categories, bidi classes, case mapping, NFD) come from ICU.
// Lower-casing is Python's str.lower: the full (SpecialCasing) lowercase of the root locale,
// with the Final_Sigma rule, e.g. U+0130 'İ' -> "i" U+0307 (then "i" once accents are stripped),
// never a locale's (Turkish) mapping; the test suite checks it against Python 3.11 on all 1,433
// code points str.lower changes. The reference's other two tables are its own, copied as
// it states them: the ASCII symbols it counts as punctuation and the CJK blocks.
//
// Vocabulary: one token per id. [UNK] must be present; [PAD] [CLS] [SEP] [MASK] are looked up by
// name where needed (token_id). Special-token strings in the text are not recognised: "[MASK]"
// in the input is tokenized as "[", "mask", "]".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace loom::data {

class WordPieceTokenizer : public Tokenizer {
 public:
  // Header line of the saved file: "<kMagic> <kVersion>".
  static constexpr const char* kMagic = "loom-wordpiece-tokenizer";
  static constexpr int kVersion = 1;
  // Hugging Face's max_input_chars_per_word (google-research/bert's default is 200).
  static constexpr int64_t kMaxInputCharsPerWord = 100;
  // Caps against hostile files: bert-base's vocabulary has 30,522 tokens, the multilingual one
  // 119,547; its longest token has 18 bytes.
  static constexpr int64_t kMaxVocabSize = int64_t{1} << 22;
  static constexpr size_t kMaxTokenBytes = 1024;
  static constexpr int64_t kMaxFileBytes = int64_t{256} << 20;
  // The special tokens train() puts first, in BERT's order.
  static std::vector<std::string> special_tokens() {
    return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  }

  // `vocab[id]` is token id's string: non-empty, valid UTF-8, no whitespace, at most
  // kMaxTokenBytes bytes; it must contain "[UNK]". A token listed twice keeps its later id for
  // encoding (as tokenization.py's load_vocab dict), both ids decode to it.
  explicit WordPieceTokenizer(std::vector<std::string> vocab, bool lower_case = true);

  // A BERT vocab.txt: one token a line, id = line number (0-based), each line stripped of
  // whitespace (so "\r\n" endings work). Throws loom::Error naming the file and line for a line
  // that is empty, not UTF-8 or too long, and for a file without "[UNK]".
  static WordPieceTokenizer from_vocab_file(const std::string& vocab_txt, bool lower_case = true);
  // Learns a vocabulary of (at most) `vocab_size` tokens from `texts`, as the Hugging Face
  // tokenizers WordPiece trainer: special_tokens(), then every character of the basic-tokenized
  // words (alone for a word's first character, "##c" for the others), then BPE merges on the
  // words weighted by frequency until the size is reached or no pair is left; merging a and b
  // gives a + b without b's "##". Ties go to the earlier-added pair of tokens.
  static WordPieceTokenizer train(const std::vector<std::string>& texts, int64_t vocab_size,
                                  bool lower_case = true);

  // The ids of `text`, without [CLS]/[SEP].
  std::vector<int64_t> encode(std::string_view text) const override;
  // The same as strings: FullTokenizer.tokenize.
  std::vector<std::string> tokenize(std::string_view text) const;
  // Hugging Face's convert_tokens_to_string: the pieces joined by spaces, " ##" removed. Lossy:
  // case, accents, spacing around punctuation and [UNK]'s word are gone.
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  void save(const std::string& path) const override;
  // Reads a file written by save(); loom::Error naming the file and line if it is corrupt.
  static WordPieceTokenizer load(const std::string& path);

  // The id of `token` (e.g. "[MASK]"); throws loom::Error if it is not in the vocabulary.
  int64_t token_id(const std::string& token) const;
  // The string of token `id`; throws if `id` is outside the vocabulary.
  const std::string& token(int64_t id) const;
  bool lower_case() const { return lower_case_; }
  const std::vector<std::string>& vocab() const { return vocab_; }

  // BasicTokenizer.tokenize: the words (and punctuation marks) of `text`, UTF-8.
  static std::vector<std::string> basic_tokenize(std::string_view text, bool lower_case);

 private:
  // Appends the WordPiece pieces of one basic token to `out` (as ids).
  void wordpiece(const std::string& word, std::vector<int64_t>& out) const;

  std::vector<std::string> vocab_;                // id -> token
  std::unordered_map<std::string, int64_t> ids_;  // token -> id (the last one if repeated)
  bool lower_case_ = true;
  int64_t unk_id_ = 0;
};

}  // namespace loom::data
