#include "data/fortunes.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "data/splitmix.h"
#include "data/text_file.h"

namespace loom::data {
namespace fs = std::filesystem;
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

// Whether a file name marks a file that is not a plain, inoffensive fortune file.
bool skipped_by_name(const std::string& name) {
  if (name.empty() || name[0] == '.') return true;
  if (name.ends_with(".dat") || name.ends_with(".u8") || name.ends_with("-o")) return true;
  if (name.find("offensive") != std::string::npos) return true;
  // "off" as a word of the name: "off", "off-jokes", "jokes.off", ...
  size_t start = 0;
  for (;;) {
    const size_t end = name.find_first_of("-.", start);
    if (name.substr(start, end == std::string::npos ? end : end - start) == "off") return true;
    if (end == std::string::npos) return false;
    start = end + 1;
  }
}

// The entry without its leading blank lines and trailing whitespace.
std::string_view trim_entry(std::string_view entry) {
  size_t end = entry.size();
  while (end > 0 && is_blank(entry[end - 1])) --end;
  entry = entry.substr(0, end);
  size_t start = 0;  // start of the first line that holds something other than whitespace
  for (size_t i = 0; i < entry.size() && is_blank(entry[i]); ++i)
    if (entry[i] == '\n') start = i + 1;
  return entry.substr(start);
}

// The fortune files to read in `dir`, in name order.
std::vector<fs::path> fortune_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    paths.push_back(it->path());
  LOOM_CHECK(!ec, "read_fortunes: cannot list '{}': {}", dir.string(), ec.message());
  std::sort(paths.begin(), paths.end());
  std::vector<fs::path> files;
  std::set<fs::path> seen;  // canonical paths, so a link and its target are read once
  for (const fs::path& path : paths) {
    // is_regular_file follows links: a dangling link or a directory is skipped here.
    if (skipped_by_name(path.filename().string()) || !fs::is_regular_file(path, ec)) continue;
    const fs::path target = fs::canonical(path, ec);
    if (ec) continue;
    // A link into the offensive collection (Debian: off/) or to a skipped name is skipped too.
    if (skipped_by_name(target.filename().string()) || target.parent_path().filename() == "off")
      continue;
    if (seen.insert(target).second) files.push_back(path);
  }
  return files;
}

}  // namespace

std::vector<std::string> parse_fortunes(std::string_view text) {
  std::vector<std::string> entries;
  const auto flush = [&](std::string_view entry) {
    if (const std::string_view trimmed = trim_entry(entry); !trimmed.empty())
      entries.emplace_back(trimmed);
  };
  size_t entry_start = 0;
  for (size_t line_start = 0; line_start < text.size();) {
    const size_t newline = text.find('\n', line_start);
    const size_t line_end = newline == std::string_view::npos ? text.size() : newline;
    const size_t next = newline == std::string_view::npos ? text.size() : newline + 1;
    const std::string_view line = text.substr(line_start, line_end - line_start);
    if (line == "%" || line == "%\r") {
      flush(text.substr(entry_start, line_start - entry_start));
      entry_start = next;
    }
    line_start = next;
  }
  flush(text.substr(entry_start));
  return entries;
}

std::vector<std::string> read_fortunes(const std::string& dir) {
  std::error_code ec;
  LOOM_CHECK(fs::is_directory(dir, ec),
             "read_fortunes: '{}' is not a directory; the fortune files come from the Debian "
             "package 'fortunes' (apt-get install fortunes)",
             dir);
  std::vector<std::string> entries;
  for (const fs::path& file : fortune_files(dir)) {
    std::vector<std::string> more = parse_fortunes(read_file_bytes(file.string(), "read_fortunes"));
    entries.insert(entries.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
  }
  LOOM_CHECK(!entries.empty(),
             "read_fortunes: no fortunes in '{}' (expected files of entries separated by '%' "
             "lines, as installed by 'apt-get install fortunes')",
             dir);
  return entries;
}

TrainValSplit split_train_val(const std::vector<std::string>& entries, double val_fraction,
                              uint64_t seed) {
  LOOM_CHECK(std::isfinite(val_fraction) && val_fraction >= 0.0 && val_fraction < 1.0,
             "split_train_val: val_fraction must be in [0, 1), got {}", val_fraction);
  const auto n = static_cast<int64_t>(entries.size());
  const auto num_val = static_cast<int64_t>(std::llround(val_fraction * static_cast<double>(n)));
  // The first num_val positions of a seeded permutation pick the validation entries.
  const std::vector<int64_t> perm = random_permutation(n, seed);
  std::vector<bool> is_val(entries.size(), false);
  for (int64_t k = 0; k < num_val; ++k) is_val[perm[k]] = true;
  TrainValSplit split;
  for (size_t i = 0; i < entries.size(); ++i)
    (is_val[i] ? split.val : split.train).push_back(entries[i]);
  return split;
}

std::string join_entries(const std::vector<std::string>& entries, std::string_view separator) {
  size_t total = 0;
  for (const std::string& e : entries) total += e.size() + separator.size();
  std::string text;
  text.reserve(total);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) text += separator;
    text += entries[i];
  }
  return text;
}

}  // namespace loom::data
