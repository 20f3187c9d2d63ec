// BPETokenizer: vocabulary, encoding, decoding and the saved-file format. Training is in
// data/bpe_train.cpp.
#include "data/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>

#include "core/error.h"
#include "data/pretokenize.h"
#include "data/text_file.h"

namespace loom::data {
namespace {

// Encoding remembers at most this many distinct chunks per call, bounding its memory.
constexpr size_t kMaxCachedChunks = size_t{1} << 20;

bool is_space_or_control(unsigned char b) { return b <= 0x20 || b == 0x7f; }

}  // namespace

BPETokenizer::BPETokenizer(std::vector<Merge> merges, std::vector<std::string> special_tokens) {
  vocab_.reserve(256 + merges.size() + special_tokens.size());
  for (int b = 0; b < 256; ++b) vocab_.emplace_back(1, static_cast<char>(b));
  for (const Merge& merge : merges)
    if (std::string why = try_add_merge(merge); !why.empty()) LOOM_FAIL("BPETokenizer: {}", why);
  for (const std::string& token : special_tokens)
    if (std::string why = try_add_special_token(token); !why.empty())
      LOOM_FAIL("BPETokenizer: {}", why);
}

std::string BPETokenizer::try_add_merge(const Merge& merge) {
  const auto k = static_cast<int64_t>(merges_.size());
  const int64_t new_id = 256 + k;
  const auto [left, right] = merge;
  if (left < 0 || left >= new_id || right < 0 || right >= new_id)
    return fmt::format(
        "merge {} ({}, {}) refers to a token that does not exist before it "
        "(ids must be in [0, {}))",
        k, left, right, new_id);
  const size_t bytes = vocab_[left].size() + vocab_[right].size();
  if (bytes > kMaxTokenBytes)
    return fmt::format("merge {} ({}, {}) makes a token of {} bytes, over the cap of {}", k, left,
                       right, bytes, kMaxTokenBytes);
  if (vocab_bytes_ + bytes > kMaxVocabBytes)
    return fmt::format("merge {} ({}, {}) takes the vocabulary over the cap of {} bytes", k, left,
                       right, kMaxVocabBytes);
  const auto [it, inserted] = ranks_.emplace(pair_key(left, right), k);
  if (!inserted)
    return fmt::format("merge {} ({}, {}) repeats merge {}", k, left, right, it->second);
  merges_.push_back(merge);
  vocab_.push_back(vocab_[left] + vocab_[right]);
  vocab_bytes_ += bytes;
  return "";
}

std::string BPETokenizer::try_add_special_token(const std::string& token) {
  if (token.empty()) return "a special token cannot be empty";
  if (token.size() > kMaxTokenBytes)
    return fmt::format("a special token of {} bytes is over the cap of {}", token.size(),
                       kMaxTokenBytes);
  if (special_tokens_.size() >= kMaxSpecialTokens)
    return fmt::format("more than {} special tokens", kMaxSpecialTokens);
  if (std::any_of(token.begin(), token.end(),
                  [](char c) { return is_space_or_control(static_cast<unsigned char>(c)); }))
    return fmt::format("special token '{}' contains whitespace or a control byte", token);
  if (std::find(special_tokens_.begin(), special_tokens_.end(), token) != special_tokens_.end())
    return fmt::format("special token '{}' is listed twice", token);
  special_tokens_.push_back(token);
  vocab_.push_back(token);
  vocab_bytes_ += token.size();
  return "";
}

int64_t BPETokenizer::rank(int64_t left, int64_t right) const {
  const auto it = ranks_.find(pair_key(left, right));
  return it == ranks_.end() ? -1 : it->second;
}

// --- encoding ------------------------------------------------------------------------------

std::vector<int64_t> BPETokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 2);
  ChunkCache cache;
  encode_ordinary(text, ids, cache);
  return ids;
}

std::vector<int64_t> BPETokenizer::encode_with_special(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 2);
  ChunkCache cache;
  // next_at[k]: the first occurrence of special token k at or after `pos` (npos if none).
  std::vector<size_t> next_at;
  for (const std::string& token : special_tokens_) next_at.push_back(text.find(token));
  size_t pos = 0;
  for (;;) {
    size_t best_at = std::string_view::npos, best = 0;
    for (size_t k = 0; k < special_tokens_.size(); ++k) {
      if (next_at[k] != std::string_view::npos && next_at[k] < pos)
        next_at[k] = text.find(special_tokens_[k], pos);
      // The earliest match wins; on a tie, the longer token.
      if (next_at[k] < best_at || (next_at[k] == best_at && next_at[k] != std::string_view::npos &&
                                   special_tokens_[k].size() > special_tokens_[best].size())) {
        best_at = next_at[k];
        best = k;
      }
    }
    if (best_at == std::string_view::npos) break;
    encode_ordinary(text.substr(pos, best_at - pos), ids, cache);
    ids.push_back(256 + static_cast<int64_t>(merges_.size() + best));
    pos = best_at + special_tokens_[best].size();
  }
  encode_ordinary(text.substr(pos), ids, cache);
  return ids;
}

void BPETokenizer::encode_ordinary(std::string_view text, std::vector<int64_t>& out,
                                   ChunkCache& cache) const {
  for (size_t start = 0; start < text.size();) {
    const size_t end = chunk_end(text, start);
    const std::string_view chunk = text.substr(start, end - start);
    start = end;
    // Natural text repeats its words, so most chunks were already encoded earlier in `out`.
    if (const auto it = cache.find(chunk); it != cache.end()) {
      for (size_t i = it->second.first; i < it->second.second; ++i) {
        const int64_t id = out[i];
        out.push_back(id);
      }
      continue;
    }
    const size_t begin = out.size();
    encode_chunk(chunk, out);
    if (cache.size() < kMaxCachedChunks) cache.emplace(chunk, std::make_pair(begin, out.size()));
  }
}

// Applies the merges in rank order, as training did: repeatedly merge the adjacent pair with
// the lowest rank (leftmost first). A min-heap of candidate pairs over a doubly linked list of
// tokens makes this O(n log n) in the chunk length, instead of rescanning the chunk after
// every merge; stale heap entries are recognised and skipped when popped.
void BPETokenizer::encode_chunk(std::string_view chunk, std::vector<int64_t>& out) const {
  const auto n = static_cast<int64_t>(chunk.size());
  if (n == 1 || merges_.empty()) {
    for (char c : chunk) out.push_back(static_cast<unsigned char>(c));
    return;
  }
  std::vector<int64_t> token(n), prev(n), next(n);  // token -1: position merged away
  for (int64_t i = 0; i < n; ++i) {
    token[i] = static_cast<unsigned char>(chunk[i]);
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  using Candidate = std::pair<int64_t, int64_t>;  // (rank, position of the left token)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](int64_t i) {
    if (i < 0 || next[i] < 0) return;
    if (const int64_t r = rank(token[i], token[next[i]]); r >= 0) heap.emplace(r, i);
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    const int64_t j = next[i];
    if (token[i] < 0 || j < 0 || rank(token[i], token[j]) != r) continue;  // stale
    // Merge (i, j) into i.
    token[i] = 256 + r;
    token[j] = -1;
    next[i] = next[j];
    if (next[i] >= 0) prev[next[i]] = i;
    push(prev[i]);
    push(i);
  }
  for (int64_t i = 0; i >= 0; i = next[i]) out.push_back(token[i]);  // position 0 never dies
}

// --- decoding and inspection -----------------------------------------------------------------

std::string BPETokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size() * 3);
  for (size_t i = 0; i < ids.size(); ++i) {
    LOOM_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
               "BPETokenizer::decode: id {} at position {} is outside the vocabulary [0, {})",
               ids[i], i, vocab_size());
    text += vocab_[ids[i]];
  }
  return text;
}

int64_t BPETokenizer::special_token_id(std::string_view token) const {
  const auto it = std::find(special_tokens_.begin(), special_tokens_.end(), token);
  LOOM_CHECK(it != special_tokens_.end(),
             "BPETokenizer::special_token_id: '{}' is not one of the {} special tokens", token,
             special_tokens_.size());
  return 256 + static_cast<int64_t>(merges_.size()) + (it - special_tokens_.begin());
}

const std::string& BPETokenizer::token_bytes(int64_t id) const {
  LOOM_CHECK(id >= 0 && id < vocab_size(),
             "BPETokenizer::token_bytes: id {} is outside the vocabulary [0, {})", id,
             vocab_size());
  return vocab_[id];
}

// --- file format -------------------------------------------------------------------------------
//   loom-bpe-tokenizer 1
//   merges <N>
//   <left id> <right id>        N lines; line k creates token 256 + k
//   special_tokens <K>
//   <token>                     K lines

void BPETokenizer::save(const std::string& path) const {
  std::string text = fmt::format("{} {}\nmerges {}\n", kMagic, kVersion, merges_.size());
  for (const auto& [left, right] : merges_) text += fmt::format("{} {}\n", left, right);
  text += fmt::format("special_tokens {}\n", special_tokens_.size());
  for (const std::string& token : special_tokens_) text += token + "\n";
  write_file_atomic(path, text, "BPETokenizer::save");
}

namespace {

// Reads a "<keyword> <count>" line.
int64_t read_count(LineReader& reader, std::string_view keyword) {
  const std::string expected = fmt::format("'{} <count>'", keyword);
  const std::string_view line = reader.next(expected);
  if (line.substr(0, keyword.size() + 1) != fmt::format("{} ", keyword))
    reader.fail(fmt::format("expected {}, got '{}'", expected, line));
  const int64_t count = reader.integers(line.substr(keyword.size() + 1), 1, expected)[0];
  if (count < 0) reader.fail(fmt::format("negative count in '{}'", line));
  return count;
}

}  // namespace

BPETokenizer BPETokenizer::load(const std::string& path) {
  LineReader reader(path, "BPETokenizer::load");
  reader.expect_header(fmt::format("{} {}", kMagic, kVersion));

  BPETokenizer tokenizer;
  const int64_t num_merges = read_count(reader, "merges");
  for (int64_t k = 0; k < num_merges; ++k) {
    const std::string expected =
        fmt::format("merge {} of {} as '<left id> <right id>'", k, num_merges);
    const std::vector<int64_t> pair = reader.integers(reader.next(expected), 2, expected);
    if (std::string why = tokenizer.try_add_merge({pair[0], pair[1]}); !why.empty())
      reader.fail(why);
  }
  const int64_t num_special = read_count(reader, "special_tokens");
  for (int64_t k = 0; k < num_special; ++k) {
    const std::string_view line =
        reader.next(fmt::format("special token {} of {}", k, num_special));
    if (std::string why = tokenizer.try_add_special_token(std::string(line)); !why.empty())
      reader.fail(why);
  }
  reader.expect_end("the last special token");
  return tokenizer;
}

}  // namespace loom::data
