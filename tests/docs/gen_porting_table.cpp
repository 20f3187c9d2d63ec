// Writes the name table of the porting guide (docs/guide/porting-from-pytorch.md) from the API
// reference: every row of every `| PyTorch | loom | notes |` table in docs/api/*.md, one table
// per page in the order of docs/api/README.md, each row with the section it comes from. The
// table lies between the page's two marker lines
//
//   <!-- begin generated: ... -->
//   <!-- end generated -->
//
// and everything else on the page is left as it is. Run by hand after changing docs/api, and by
// ctest with --check, which regenerates the page into a temporary file and fails, naming the
// first line that differs, when the committed page is not what this program writes:
//
//   gen_porting_table SOURCE_DIR [--check]
//
// A C++ program rather than a script: the build needs only a compiler and CMake, and a fresh
// Debian machine has no Python unless something asks for it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const char* const kPage = "docs/guide/porting-from-pytorch.md";
const char* const kBegin = "<!-- begin generated: ";
const char* const kEnd = "<!-- end generated -->";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The cells of a table row `| a | b | c |`. A `|` inside a code span (`x | y`) or escaped
// (`\|`) belongs to its cell, as Markdown reads it.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  bool code = false;
  for (size_t i = 1; i < row.size(); ++i) {
    const char ch = row[i];
    if (ch == '`') code = !code;
    if (ch == '|' && !code && row[i - 1] != '\\') {
      cells.push_back(trim(cell));
      cell.clear();
    } else {
      cell += ch;
    }
  }
  return cells;
}

// The pages of docs/api: first those docs/api/README.md's table lists, in its order, then any
// other page, by name.
std::vector<std::string> api_pages(const fs::path& api) {
  std::vector<std::string> pages;
  static const std::regex listed(R"(^\| \[([a-z_\-]+\.md)\]\(([a-z_\-]+\.md)\) \|.*)");
  for (const std::string& line : lines_of(read_file(api / "README.md"))) {
    std::smatch m;
    if (std::regex_match(line, m, listed) && fs::exists(api / m[2].str()))
      pages.push_back(m[2]);
  }
  std::vector<std::string> others;
  for (const auto& entry : fs::directory_iterator(api)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".md" && name != "README.md" &&
        std::find(pages.begin(), pages.end(), name) == pages.end())
      others.push_back(name);
  }
  std::sort(others.begin(), others.end());
  pages.insert(pages.end(), others.begin(), others.end());
  return pages;
}

// One page's rows as the guide shows them: a heading, then `| PyTorch | loom | section |`.
std::string page_table(const fs::path& api, const std::string& page) {
  std::string title = page, section, rows;
  bool in_table = false;
  int count = 0;
  for (const std::string& line : lines_of(read_file(api / page))) {
    if (line.starts_with("# ")) title = line.substr(2);
    if (line.starts_with("## ")) section = line.substr(3);
    if (!line.starts_with("|")) {
      in_table = false;
      continue;
    }
    const std::vector<std::string> cells = cells_of(line);
    if (cells.size() < 2) continue;
    if (cells[1] == "loom") {  // the header of a name table
      in_table = true;
      continue;
    }
    if (!in_table || cells[0].starts_with("---")) continue;
    rows += "| " + cells[0] + " | " + cells[1] + " | " + section + " |\n";
    ++count;
  }
  if (count == 0) return "";
  return "### " + title + "\n\nFrom [" + page + "](../api/" + page + "), " +
         std::to_string(count) + " names.\n\n| PyTorch | loom | section |\n| --- | --- | --- |\n" +
         rows;
}

// The page with the text between its markers replaced by the tables; an error message instead
// when the markers are missing.
bool generate(const fs::path& root, std::string& page, std::string& error) {
  const std::vector<std::string> lines = lines_of(read_file(root / kPage));
  const auto begin = std::find_if(lines.begin(), lines.end(),
                                  [](const std::string& l) { return l.starts_with(kBegin); });
  const auto end = std::find(begin, lines.end(), kEnd);
  if (begin == lines.end() || end == lines.end()) {
    error = std::string(kPage) + ": no lines '" + kBegin + "...' and '" + kEnd +
            "' to write between";
    return false;
  }
  page.clear();
  for (auto it = lines.begin(); it <= begin; ++it) page += *it + "\n";
  const fs::path api = root / "docs/api";
  for (const std::string& name : api_pages(api)) {
    const std::string table = page_table(api, name);
    if (!table.empty()) page += "\n" + table;
  }
  page += "\n";
  for (auto it = end; it != lines.end(); ++it) page += *it + "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc == 3 && std::string(argv[2]) == "--check";
  if (argc != 2 && !check) {
    std::cerr << "usage: gen_porting_table SOURCE_DIR [--check]\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::string page, error;
  if (!generate(root, page, error)) {
    std::cerr << "gen_porting_table: " << error << "\n";
    return 1;
  }
  if (!check) {
    std::ofstream(root / kPage, std::ios::binary) << page;
    std::printf("gen_porting_table: wrote the name table of %s\n", kPage);
    return 0;
  }
  // --check: the page as it would be written, in a temporary file, against the committed one.
  const fs::path fresh =
      fs::temp_directory_path() / ("loom_porting_" + std::to_string(::getpid()) + ".md");
  std::ofstream(fresh, std::ios::binary) << page;
  const std::vector<std::string> want = lines_of(read_file(fresh)),
                                 have = lines_of(read_file(root / kPage));
  fs::remove(fresh);
  const auto [w, h] = std::mismatch(want.begin(), want.end(), have.begin(), have.end());
  if (w == want.end() && h == have.end()) {
    std::printf("gen_porting_table: %s's name table is what docs/api gives\n", kPage);
    return 0;
  }
  const long line = static_cast<long>(w - want.begin()) + 1;
  std::cerr << kPage << ":" << line << ": the name table is not what docs/api gives\n"
            << "  committed: " << (h == have.end() ? "(end of file)" : *h) << "\n"
            << "  generated: " << (w == want.end() ? "(end of file)" : *w) << "\n"
            << "regenerate it: build/tests/gen_porting_table . (then review the diff)\n";
  return 1;
}
