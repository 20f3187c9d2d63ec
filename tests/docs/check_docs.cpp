// Keeps the documentation true to the code: every reference in README.md and docs/**/*.md must
// resolve in the tree, every C++ block must be real code, and every printed output must be what
// the program prints. Run by ctest as
//
//   check_docs SOURCE_DIR [--learn-programs DIR [--platform PROGRAM]] CXX_COMPILER [flags...]
//   check_docs SOURCE_DIR --references-only
//
// The second form checks the links, code spans and excerpts, and counts the C++ blocks without
// compiling them: a copy of the repository (tests/docs/standalone.sh) holds the same headers and
// blocks as the tree whose check compiled them, so there only the paths can differ.
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
//   API tables     in docs/api/*.md, the ```cpp block right after a line `<!-- api-context -->`
//                  declares the page's variables, and each table row whose second cell is a
//                  code span (`| torch.topk(x, 3) | `topk(x, 3)` | ... |`) is one C++ expression
//                  using them; all of a page's rows are compiled as one function after its
//                  context (with loom and loom::indexing in scope), each under a #line naming
//                  its row, so a name the table promises cannot be missing from the library
//   ```text        printed output, when the block's first line is a learn program's command,
//   $ build/examples/learn/PROGRAM [ARGS]
//                  given the folder of the built learn programs (--learn-programs DIR), PROGRAM
//                  runs once with ARGS (split at spaces) in a scratch folder, and the lines after
//                  the command must be its standard output, line for line (trailing spaces
//                  ignored), except that a line `...` stands for any number of lines and a line
//                  ending in `...` for one line that starts with what precedes the dots (the way
//                  out for a number that varies from run to run, such as a timing). A later `$ `
//                  line starts another command, checked the same way; one of another program
//                  (`$ mpirun -np 2 ...`) or with no lines after it is shown, not run, and a
//                  `# comment` ends a command. A relative path among ARGS (the picture,
//                  docs/learn/images/x.png) gets its folders inside the scratch folder: the
//                  committed pictures are not rewritten.
//                  The learn programs run on one thread, so their numbers repeat exactly;
//                  without --learn-programs these blocks are counted, not run. The digits
//                  are those of one build, the one docs/learn/README.md's line `Printed on: `
//                  names: with --platform PROGRAM (numerics_platform, which prints this
//                  build's numerics_config()), a build that prints another line rounds differently
//                  (another compiler, build type, CPU or BLAS kernels), so there a line that
//                  differs is noted, not failed
// Paths are relative to the repository root, and a path that leaves the repository (`../x`) is
// a failure: a user has only the repository, so the docs may not lean on a folder beside it.
// A failure names the file, the line and what did not resolve.
#include <sys/wait.h>
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
  std::string compile_command;  // compiler and flags, ending in a space; empty: not compiled
  std::set<std::string> file_names;  // every file name in the tree, for bare names
  fs::path programs;  // the built learn programs (--learn-programs), or empty: outputs not run
  // Whether this build's numerics line (--platform) is another than the one the printed
  // outputs were printed on: then a differing line is a note, not a failure.
  bool other_platform = false;
  int failures = 0, links = 0, spans = 0, excerpts = 0, compiled = 0, api_rows = 0;
  int outputs = 0, outputs_run = 0, outputs_differ = 0;

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
      R"(([A-Za-z0-9_.\-]+/)*[A-Za-z0-9_\-]+\.(h|cpp|cu|cuh|py|sh|md|cmake))"
      R"((:[A-Za-z_~][A-Za-z0-9_:~]*)?)");
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
  if (const auto last = symbol.rfind("::"); last != std::string::npos)
    symbol = symbol.substr(last + 2);
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

// Runs `command` in the shell: its exit status (as pclose returns it), its standard output
// appended to `output`.
int run_command(const std::string& command, std::string& output) {
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (pipe && fgets(buffer, sizeof buffer, pipe)) output += buffer;
  return pipe ? pclose(pipe) : -1;
}

// `text` as one shell word.
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Compiles `code` (-fsyntax-only); on failure, reports `what` and the compiler's output.
void compile(Checker& c, const fs::path& doc, int line, const std::string& code,
             const std::string& what) {
  ++c.compiled;
  if (c.compile_command.empty()) return;  // --references-only
  const fs::path file = fs::temp_directory_path() /
                        ("loom_doc_snippet_" + std::to_string(::getpid()) + ".cpp");
  std::ofstream(file) << code;
  std::string output;
  const int status =
      run_command(c.compile_command + "-fsyntax-only " + file.string() + " 2>&1", output);
  fs::remove(file);
  if (status != 0) c.fail(doc, line, what + " does not compile:\n" + output);
}

void check_compiles(Checker& c, const fs::path& doc, int line,
                    const std::vector<std::string>& block) {
  std::string code;
  for (const std::string& text : block) code += text + "\n";
  const bool program = code.find("int main(") != std::string::npos;
  if (!program)
    code = "#include \"loom.h\"\nusing namespace loom;\n"
           "[[maybe_unused]] static void snippet() {\n" + code + "}\n";
  compile(c, doc, line, code, "C++ block");
}

// An API page (docs/api/*.md): its context block and the expressions of its table rows.
struct ApiPage {
  int context_line = 0;
  std::vector<std::string> context;
  std::vector<std::pair<int, std::string>> rows;  // (line, expression)
};

// The second cell of a table row, when it is a code span: `| torch.f(x) | `f(x)` | ... |`.
bool api_row(const std::string& line, std::string& expression) {
  static const std::regex row(R"(^\|[^|]*\|\s*`([^`]+)`\s*\|.*)");
  std::smatch m;
  if (!std::regex_match(line, m, row)) return false;
  expression = m[1];
  return true;
}

void check_api_page(Checker& c, const fs::path& doc, const ApiPage& page) {
  if (page.rows.empty()) return;
  if (page.context_line == 0)
    return c.fail(doc, page.rows.front().first, "API table without an <!-- api-context --> block");
  const std::string name = fs::relative(doc, c.root).string();
  std::string code =
      "#include \"loom.h\"\nusing namespace loom;\nusing namespace loom::indexing;\n"
      "[[maybe_unused]] static void api_page() {\n";
  code += "#line " + std::to_string(page.context_line + 1) + " \"" + name + "\"\n";
  for (const std::string& text : page.context) code += text + "\n";
  for (const auto& [line, expression] : page.rows)
    code += "#line " + std::to_string(line) + " \"" + name + "\"\n(void)(" + expression + ");\n";
  code += "}\n";
  c.api_rows += static_cast<int>(page.rows.size());
  compile(c, doc, page.context_line, code, "the API table (" +
                                               std::to_string(page.rows.size()) + " rows)");
}

// The command that opens a printed-output block, `$ build/examples/learn/PROGRAM [ARGS]`.
const std::string kLearnCommand = "$ build/examples/learn/";

bool is_elision(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first != std::string::npos && line.substr(first) == "...";
}

// A shown line against a printed one: equal, or, when the shown line ends in `...`, the printed
// line starts with what precedes the dots.
bool line_matches(const std::string& shown, const std::string& printed) {
  if (shown.size() > 3 && shown.ends_with("..."))
    return printed.starts_with(shown.substr(0, shown.size() - 3));
  return shown == printed;
}

// Whether `printed` is what `shown` shows: the runs of lines between `...` lines appear in
// order, each contiguous; the first run opens the output and the last closes it unless a `...`
// stands before or after it. Returns -1 when they do, else the index of the first shown line
// that is not printed where it must be (shown.size(): the output goes on after the block).
// A run after a `...` is placed as early as it fits, which leaves the most room for the runs
// after it, so the first failure is a real one.
int first_unmatched(const std::vector<std::string>& shown,
                    const std::vector<std::string>& printed) {
  size_t from = 0;       // the first printed line no run has used
  bool anchored = true;  // the next run must start at `from` (no `...` before it)
  for (size_t i = 0; i < shown.size();) {
    if (is_elision(shown[i])) {
      anchored = false;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < shown.size() && !is_elision(shown[end])) ++end;
    const size_t length = end - i;
    // The first line of the run, placed at printed line `at`, that does not match (length: none).
    auto mismatch = [&](size_t at) {
      size_t k = 0;
      while (k < length && at + k < printed.size() && line_matches(shown[i + k], printed[at + k]))
        ++k;
      return k;
    };
    const bool closes = end == shown.size();  // the last run ends the output
    size_t at = from;
    if (closes && !anchored) {
      if (printed.size() < from + length) return static_cast<int>(i);
      at = printed.size() - length;
    } else if (!anchored) {
      while (at + length <= printed.size() && mismatch(at) < length) ++at;
      if (at + length > printed.size()) return static_cast<int>(i);
    }
    if (const size_t k = mismatch(at); k < length) return static_cast<int>(i + k);
    if (closes && at + length < printed.size()) return static_cast<int>(shown.size());
    from = at + length;
    anchored = true;
    i = end;
  }
  const bool open_end = !shown.empty() && is_elision(shown.back());
  return open_end || printed.size() == from ? -1 : static_cast<int>(shown.size());
}

// One learn program's printed output (`$ build/examples/learn/PROGRAM ARGS`, then `shown`), run
// in a scratch folder and compared line by line.
void check_output(Checker& c, const fs::path& doc, int line, const std::string& command,
                  const std::vector<std::string>& shown) {
  ++c.outputs;
  if (c.programs.empty()) return;
  ++c.outputs_run;
  std::istringstream words(command.substr(kLearnCommand.size()));
  std::string program;
  words >> program;
  const fs::path executable = c.programs / program;
  if (!fs::exists(executable))
    return c.fail(doc, line, "no program " + program + " in " + c.programs.string());
  const fs::path scratch =
      fs::temp_directory_path() / ("loom_doc_output_" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::string shell =
      "cd " + shell_word(scratch.string()) + " && " + shell_word(executable.string());
  for (std::string arg; words >> arg;) {
    if (arg.find('/') != std::string::npos && fs::path(arg).is_relative())
      fs::create_directories((scratch / arg).parent_path());
    shell += " " + shell_word(arg);
  }
  std::string output;
  const int status = run_command(shell, output);
  fs::remove_all(scratch);
  const std::string name = "`" + command.substr(2) + "`";
  if (status != 0) {
    const std::string how = WIFEXITED(status) ? "exits " + std::to_string(WEXITSTATUS(status))
                                              : "is killed (wait status " +
                                                    std::to_string(status) + ")";
    return c.fail(doc, line, name + " " + how + ", having printed:\n" + output);
  }
  const int bad = first_unmatched(shown, split_lines(output));
  if (bad < 0) return;
  const std::string what =
      bad < static_cast<int>(shown.size())
          ? "'" + shown[static_cast<size_t>(bad)] + "' is not what the program prints there"
          : "the program prints more after the block's last line (a last line `...` elides it)";
  if (c.other_platform) {  // rounded differently: a note, not a failure
    ++c.outputs_differ;
    std::cerr << "note: " << fs::relative(doc, c.root).string() << ":" << line + 1 + bad << ": "
              << name << ": " << what << " on this build\n";
    return;
  }
  c.fail(doc, line + 1 + bad, name + ": " + what + "; it printed:\n" + output);
}

// The line of docs/learn/README.md that names the build the printed outputs come from.
const std::string kPrintedOn = "Printed on: ";

// With --platform PROGRAM: this build's numerics line (PROGRAM's output), compared with the one
// docs/learn/README.md names. On another build the learn programs round differently, so their
// printed numbers are compared but a differing line is only noted.
void check_platform(Checker& c, const std::string& program) {
  const fs::path readme = c.root / "docs/learn/README.md";
  std::string output;
  if (run_command(shell_word(program), output) != 0 || output.empty())
    return c.fail(readme, 1, program + " did not print the build's line");
  const std::string platform = split_lines(output).front();
  const std::vector<std::string> lines = split_lines(read_file(readme));
  const auto named = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.starts_with(kPrintedOn);
  });
  if (named == lines.end())
    return c.fail(readme, 1, "no line '" + kPrintedOn + "...' names the outputs' build");
  const std::string printed_on = named->substr(kPrintedOn.size());
  c.other_platform = printed_on != platform;
  if (c.other_platform)
    std::cerr << "note: this build (" << platform << ") is not the one the printed outputs "
              << "were printed on (" << printed_on << "): a line that differs is noted, not "
              << "failed\n";
}

// A ```text block whose first line is a learn program's command: each such command with the
// lines up to the next `$ ` line, blank lines at the end dropped. A command of another program
// (`$ mpirun ...`) or with no lines after it (one of several ways to run a program) is shown,
// not run; a `# comment` after a command is not part of it.
void check_outputs(Checker& c, const fs::path& doc, int line,
                   const std::vector<std::string>& block) {
  for (size_t i = 0; i < block.size();) {
    size_t end = i + 1;
    while (end < block.size() && !block[end].starts_with("$ ")) ++end;
    std::vector<std::string> shown(block.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                   block.begin() + static_cast<std::ptrdiff_t>(end));
    while (!shown.empty() && shown.back().empty()) shown.pop_back();
    std::string command = block[i].substr(0, block[i].find(" #"));
    while (command.ends_with(' ')) command.pop_back();
    if (command.starts_with(kLearnCommand) && !shown.empty())
      check_output(c, doc, line + 1 + static_cast<int>(i), command, shown);
    i = end;
  }
}

void check_markdown(Checker& c, const fs::path& doc) {
  const std::vector<std::string> lines = split_lines(read_file(doc));
  static const std::regex link(R"(\]\(([^)\s]+)\))"), span("`([^`]+)`");
  static const std::regex fence_open(R"(^\s*```(\w*)\s*(from=(\S+))?\s*$)");
  const bool api = doc.parent_path().filename() == "api";
  ApiPage page;
  bool context_next = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int number = static_cast<int>(i) + 1;
    std::smatch m;
    if (api && lines[i] == "<!-- api-context -->") {
      context_next = true;
      continue;
    }
    if (std::regex_match(lines[i], m, fence_open) && !m[1].str().empty()) {
      const std::string language = m[1], excerpt_of = m[3];
      std::vector<std::string> block;
      for (++i; i < lines.size() && lines[i].find("```") == std::string::npos; ++i)
        block.push_back(lines[i]);
      if (language == "text" && !block.empty() && block[0].starts_with(kLearnCommand))
        check_outputs(c, doc, number, block);
      if (language != "cpp") continue;
      if (context_next) {  // compiled with the page's rows
        page.context_line = number;
        page.context = block;
        context_next = false;
      } else if (!excerpt_of.empty()) {
        check_excerpt(c, doc, number, excerpt_of, block);
      } else {
        check_compiles(c, doc, number, block);
      }
      continue;
    }
    std::string expression;
    if (api && api_row(lines[i], expression)) {
      page.rows.emplace_back(number, expression);
      continue;  // its cells are code, not paths
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
  check_api_page(c, doc, page);
}

// loom.h parsed once for all the blocks: precompiled into `folder`, which the blocks' compile
// command then searches before the others. GCC takes it for a block that includes loom.h before
// anything else (every snippet and API page, as check_compiles and check_api_page wrap them) and
// parses loom.h anew otherwise; a compiler that cannot make it leaves every block to parse
// loom.h (slower, the same result). A small block then compiles in 1.0 s rather than 2.5, and
// the check without the learn programs takes 36 s rather than 44.
void precompile_loom_h(Checker& c, const fs::path& folder) {
  fs::create_directories(folder);
  std::string output;  // the compiler's notes, not shown: the blocks' own compiles are the check
  const std::string command = c.compile_command + "-x c++-header " +
                              shell_word((c.root / "loom.h").string()) + " -o " +
                              shell_word((folder / "loom.h.gch").string()) + " 2>&1";
  if (run_command(command, output) != 0) return;
  const auto compiler_end = c.compile_command.find(' ') + 1;  // after the compiler's word
  c.compile_command.insert(compiler_end, "-I" + shell_word(folder.string()) + " ");
}

}  // namespace

int main(int argc, char** argv) {
  int first_flag = 2;  // argv[first_flag] is the compiler
  Checker c;
  std::string platform_program;
  if (argc > 3 && std::string(argv[2]) == "--learn-programs") {
    c.programs = fs::canonical(argv[3]);
    first_flag = 4;
    if (argc > 5 && std::string(argv[4]) == "--platform") {
      platform_program = argv[5];
      first_flag = 6;
    }
  }
  const bool references_only = argc == 3 && std::string(argv[2]) == "--references-only";
  if (argc <= first_flag) {
    std::cerr << "usage: check_docs SOURCE_DIR [--learn-programs DIR [--platform PROGRAM]] "
                 "CXX_COMPILER [flags...]\n"
                 "       check_docs SOURCE_DIR --references-only\n";
    return 2;
  }
  c.root = fs::canonical(argv[1]);
  if (!platform_program.empty()) check_platform(c, platform_program);
  const fs::path pch = fs::temp_directory_path() / ("loom_doc_pch_" + std::to_string(::getpid()));
  if (!references_only) {
    for (int i = first_flag; i < argc; ++i) c.compile_command += shell_word(argv[i]) + " ";
    precompile_loom_h(c, pch);
  }
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
  const std::string differ =
      c.other_platform ? ", " + std::to_string(c.outputs_differ) + " rounded differently here" : "";
  std::printf("check_docs: %zu files, %d links, %d code-span references, %d excerpts, %d C++ "
              "blocks %s (%d API table rows among them), %d printed outputs (%d run%s); "
              "%d problems\n",
              docs.size(), c.links, c.spans, c.excerpts, c.compiled,
              references_only ? "counted, not compiled" : "compiled", c.api_rows, c.outputs,
              c.outputs_run, differ.c_str(), c.failures);
  fs::remove_all(pch);
  return c.failures == 0 ? 0 : 1;
}
