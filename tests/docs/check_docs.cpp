// Keeps the documentation true to the code: every reference in README.md and docs/**/*.md must
// resolve in the tree, and every C++ block must be real code. Run by ctest as
//
//   check_docs SOURCE_DIR CXX_COMPILER [compiler flags...]
//
// What it checks, in each Markdown file:
//   links          [text](path): a relative target exists (anchors and web addresses skipped)
//   code spans     `models/swin_window.h`, `models/swin.cpp:shifted_window_mask`: the file exists
//                  and, after a colon, the symbol (its last `::` part) appears in it as a whole
//                  word; a bare file name (`engine.cpp`, in a table whose row names the folder)
//                  must name a file somewhere in the tree
//   ```cpp from=autograd/engine.cpp
//                  an excerpt: its lines appear in that file in this order, each run between
//                  `// ...` lines contiguous (trailing spaces ignored), so a quoted function
//                  cannot drift from the real one
//   ```cpp         code to compile (-fsyntax-only): a block with `int main(` is a whole program;
//                  any other block is wrapped in a function after `#include "loom.h"` and
//                  `using namespace loom;`, so a fragment such as `Tensor y = relu(x);` is checked
//                  against the real API (its free names must then be declared in the block)
// Paths are relative to the repository root, and a path that leaves the repository (`../x`) is
// a failure: a user has only the repository, so the docs may not lean on a folder beside it.
// A failure names the file, the line and what did not resolve.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Checker {
  fs::path root;
  std::string compile_command;  // compiler and flags, ending in a space
  std::set<std::string> file_names;  // every file name in the tree, for bare names
  int failures = 0, links = 0, spans = 0, excerpts = 0, compiled = 0;

  void fail(const fs::path& doc, int line, const std::string& what) {
    std::cerr << fs::relative(doc, root).string() << ":" << line << ": " << what << "\n";
    ++failures;
  }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool skipped_path(const std::string& path) { return path.rfind("http", 0) == 0 || path[0] == '#'; }

// True when `path`, taken relative to `from`, names something outside the repository.
bool leaves_tree(const Checker& c, const fs::path& from, const std::string& path) {
  const fs::path resolved = (from / path).lexically_normal();
  const auto [end, _] =
      std::mismatch(c.root.begin(), c.root.end(), resolved.begin(), resolved.end());
  return end != c.root.end();
}

// `path` or `path:symbol` in a code span; only spans that look like a tree path are checked.
void check_span(Checker& c, const fs::path& doc, int line, const std::string& span) {
  static const std::regex ref(
      R"(([A-Za-z0-9_.\-]+/)*[A-Za-z0-9_\-]+\.(h|cpp|cu|cuh|py|sh|md|cmake)(:[A-Za-z_~][A-Za-z0-9_:~]*)?)");
  if (!std::regex_match(span, ref) || skipped_path(span)) return;
  ++c.spans;
  const auto colon = span.find(':');
  const std::string path = span.substr(0, colon);
  if (leaves_tree(c, c.root, path))
    return c.fail(doc, line, "`" + span + "`: outside the repository (a user has only it)");
  if (path.find('/') == std::string::npos && colon == std::string::npos) {
    if (!c.file_names.count(path)) c.fail(doc, line, "`" + span + "`: no file of that name");
    return;
  }
  if (!fs::exists(c.root / path)) return c.fail(doc, line, "`" + span + "`: no file " + path);
  if (colon == std::string::npos) return;
  std::string symbol = span.substr(colon + 1);
  if (const auto last = symbol.rfind("::"); last != std::string::npos) symbol = symbol.substr(last + 2);
  const std::regex word("(^|[^A-Za-z0-9_])" + symbol + "([^A-Za-z0-9_]|$)");
  if (!std::regex_search(read_file(c.root / path), word))
    c.fail(doc, line, "`" + span + "`: " + path + " has no '" + symbol + "'");
}

void check_link(Checker& c, const fs::path& doc, int line, std::string target) {
  if (target.empty() || skipped_path(target) || target.find("://") != std::string::npos) return;
  target = target.substr(0, target.find('#'));
  ++c.links;
  if (leaves_tree(c, doc.parent_path(), target))
    return c.fail(doc, line, "link target " + target + " is outside the repository");
  if (!fs::exists(doc.parent_path() / target))
    c.fail(doc, line, "link target " + target + " does not exist");
}

// An excerpt's runs (split at `// ...` lines) must appear in `source`, in order, each contiguous.
void check_excerpt(Checker& c, const fs::path& doc, int line, const std::string& path,
                   const std::vector<std::string>& block) {
  ++c.excerpts;
  if (!fs::exists(c.root / path)) return c.fail(doc, line, "excerpt of " + path + ": no such file");
  const std::vector<std::string> source = split_lines(read_file(c.root / path));
  size_t from = 0;
  std::vector<std::string> run;
  auto find_run = [&]() {
    if (run.empty()) return true;
    for (size_t i = from; i + run.size() <= source.size(); ++i) {
      if (std::equal(run.begin(), run.end(), source.begin() + static_cast<std::ptrdiff_t>(i))) {
        from = i + run.size();
        return true;
      }
    }
    c.fail(doc, line, "excerpt of " + path + ": the lines from '" + run.front() +
                          "' are not in the file (in this order)");
    return false;
  };
  for (const std::string& text : block) {
    const auto first = text.find_first_not_of(' ');
    if (first != std::string::npos && text.substr(first) == "// ...") {
      if (!find_run()) return;
      run.clear();
    } else {
      run.push_back(text);
    }
  }
  find_run();
}

void check_compiles(Checker& c, const fs::path& doc, int line, const std::vector<std::string>& block) {
  std::string code;
  for (const std::string& text : block) code += text + "\n";
  const bool program = code.find("int main(") != std::string::npos;
  if (!program)
    code = "#include \"loom.h\"\nusing namespace loom;\n[[maybe_unused]] static void snippet() {\n" +
           code + "}\n";
  const fs::path file = fs::temp_directory_path() /
                        ("loom_doc_snippet_" + std::to_string(::getpid()) + ".cpp");
  std::ofstream(file) << code;
  ++c.compiled;
  const std::string command = c.compile_command + "-fsyntax-only " + file.string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (pipe && fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pipe ? pclose(pipe) : -1;
  fs::remove(file);
  if (status != 0) c.fail(doc, line, "C++ block does not compile:\n" + output);
}

void check_markdown(Checker& c, const fs::path& doc) {
  const std::vector<std::string> lines = split_lines(read_file(doc));
  static const std::regex link(R"(\]\(([^)\s]+)\))"), span("`([^`]+)`");
  static const std::regex fence_open(R"(^\s*```(\w*)\s*(from=(\S+))?\s*$)");
  for (size_t i = 0; i < lines.size(); ++i) {
    const int number = static_cast<int>(i) + 1;
    std::smatch m;
    if (std::regex_match(lines[i], m, fence_open) && !m[1].str().empty()) {
      const std::string language = m[1], excerpt_of = m[3];
      std::vector<std::string> block;
      for (++i; i < lines.size() && lines[i].find("```") == std::string::npos; ++i)
        block.push_back(lines[i]);
      if (language != "cpp") continue;
      if (!excerpt_of.empty()) check_excerpt(c, doc, number, excerpt_of, block);
      else check_compiles(c, doc, number, block);
      continue;
    }
    if (lines[i].find("```") != std::string::npos) {  // an unnamed fence: skip to its end
      for (++i; i < lines.size() && lines[i].find("```") == std::string::npos; ++i) {
      }
      continue;
    }
    for (auto it = std::sregex_iterator(lines[i].begin(), lines[i].end(), link);
         it != std::sregex_iterator(); ++it)
      check_link(c, doc, number, (*it)[1]);
    for (auto it = std::sregex_iterator(lines[i].begin(), lines[i].end(), span);
         it != std::sregex_iterator(); ++it)
      check_span(c, doc, number, (*it)[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_docs SOURCE_DIR CXX_COMPILER [flags...]\n";
    return 2;
  }
  Checker c;
  c.root = fs::canonical(argv[1]);
  for (int i = 2; i < argc; ++i) c.compile_command += std::string("'") + argv[i] + "' ";
  using tree = fs::recursive_directory_iterator;
  for (auto it = tree(c.root); it != tree(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name[0] == '.'))
      it.disable_recursion_pending();
    else if (it->is_regular_file())
      c.file_names.insert(name);
  }
  std::vector<fs::path> docs{c.root / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(c.root / "docs"))
    if (entry.path().extension() == ".md") docs.push_back(entry.path());
  std::sort(docs.begin(), docs.end());
  for (const fs::path& doc : docs) check_markdown(c, doc);
  std::printf("check_docs: %zu files, %d links, %d code-span references, %d excerpts, %d C++ "
              "blocks compiled; %d problems\n",
              docs.size(), c.links, c.spans, c.excerpts, c.compiled, c.failures);
  return c.failures == 0 ? 0 : 1;
}
