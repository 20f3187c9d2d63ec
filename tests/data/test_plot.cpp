// Line plots (size, drawn curves, robustness to empty/NaN/single-point series) and the CSV log
// (header once, exact resume truncation, read_csv round trip and its errors).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "report/plot.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::read_file;
using loom::testing::TempDir;
using loom::testing::write_file;

namespace {

int64_t count_colour(const Image& image, RGB rgb) {
  int64_t n = 0;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)
      n +=
          image.at(x, y)[0] == rgb[0] && image.at(x, y)[1] == rgb[1] && image.at(x, y)[2] == rgb[2];
  return n;
}

const RGB kFirst{31, 119, 180}, kSecond{255, 127, 14};  // tab10's first two colours

Series curve(const std::string& name, int n, double scale) {
  Series s{name, {}, {}};
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i);
    s.y.push_back(scale * std::exp(-i / 30.0) + 0.1);
  }
  return s;
}

}  // namespace

TEST_CASE("plot_lines draws each series in its own colour on an image of the asked size") {
  const PlotOptions options{"loss", "step", "loss", 640, 420, false};
  const Image image = plot_lines({curve("train", 100, 2.0), curve("val", 100, 1.0)}, options);
  CHECK(image.width == 640);
  CHECK(image.height == 420);
  CHECK(image.channels == 3);
  CHECK(count_colour(image, kFirst) > 200);
  CHECK(count_colour(image, kSecond) > 200);
  CHECK(count_colour(image, {0, 0, 0}) > 100);  // text
  PlotOptions log = options;
  log.log_y = true;
  CHECK(count_colour(plot_lines({curve("train", 100, 2.0)}, log), kFirst) > 200);
}

TEST_CASE("plot_lines survives empty, NaN-only, single-point and constant series") {
  const PlotOptions options{"t", "x", "y", 300, 200, false};
  const Image empty = plot_lines({}, options);
  CHECK(empty.width == 300);
  CHECK(count_colour(empty, {255, 255, 255}) < 300 * 200);  // axes are drawn
  const Image skipped =
      plot_lines({{"none", {}, {}}, {"nan", {0, 1}, {NAN, NAN}}, curve("ok", 20, 1)}, options);
  CHECK(count_colour(skipped, kFirst) > 20);  // skipped series take no colour
  CHECK(count_colour(skipped, kSecond) == 0);
  const Image one = plot_lines({{"one", {3}, {5}}}, options);
  CHECK(count_colour(one, kFirst) >= 9);  // a small square
  CHECK(count_colour(plot_lines({{"flat", {0, 1, 2}, {1, 1, 1}}}, options), kFirst) > 20);
  PlotOptions log = options;
  log.log_y = true;  // y <= 0 cannot be drawn on a log axis
  CHECK(plot_lines({{"neg", {0, 1}, {-1, 0}}}, log).width == 300);
  check_error([&] { plot_lines({{"bad", {0, 1}, {1}}}, options); }, {"plot_lines", "bad"});
  check_error([&] { plot_lines({}, {"t", "", "", 10, 10, false}); }, {"plot_lines", "10 x 10"});
}

TEST_CASE("save_plot and save_plots write PNGs of the panels side by side") {
  TempDir dir;
  const PlotOptions a{"loss", "step", "", 300, 200, false}, b{"acc", "step", "", 240, 220, false};
  save_plot(dir.file("one.png"), {curve("train", 10, 1)}, a);
  CHECK(read_image(dir.file("one.png")).width == 300);
  save_plots(dir.file("two.png"), {{{curve("train", 10, 1)}, a}, {{curve("val", 10, 1)}, b}});
  const Image two = read_image(dir.file("two.png"));
  CHECK(two.width == 540);
  CHECK(two.height == 220);
}

TEST_CASE("CsvLog writes the header once and one flushed row per call") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  CsvLog log(path, {"step", "loss", "acc"});
  log.row({1, 2.5, 0.1});
  CHECK(read_file(path) == "step,loss,acc\n1,2.5,0.1\n");  // flushed before the log closes
  log.row({2, 0.1 + 0.2, NAN});
  CHECK(read_file(path) == "step,loss,acc\n1,2.5,0.1\n2,0.30000000000000004,nan\n");
  check_error([&] { log.row({1, 2}); }, {"CsvLog", "log.csv", "2 values", "3"});
  check_error([&] { CsvLog(dir.file("x.csv"), {"a,b"}); }, {"CsvLog", "a,b"});
  // Without resume the file starts afresh.
  CsvLog again(path, {"step", "loss", "acc"});
  CHECK(read_file(path) == "step,loss,acc\n");
}

TEST_CASE("CsvLog with an empty path (ranks > 0 of a data-parallel job) writes nothing") {
  CsvLog quiet("", {"step", "loss"}, std::optional<int64_t>(3));  // resume: no file to read
  quiet.row({1, 2.5});
  CHECK(quiet.path().empty());
  check_error([&] { quiet.row({1}); }, {"CsvLog", "1 values", "2"});  // rows still checked
  check_error([&] { CsvLog("", {}); }, {"CsvLog", "empty header"});
}

TEST_CASE("CsvLog resumed at step S equals the log of an uninterrupted run") {
  TempDir dir;
  const std::vector<std::string> header = {"step", "loss"};
  auto run = [&](const std::string& path, int64_t from, int64_t to) {
    CsvLog log(path, header, from > 0 ? std::optional<int64_t>(from - 1) : std::nullopt);
    for (int64_t s = from; s <= to; ++s) log.row({static_cast<double>(s), 1.0 / (s + 3)});
  };
  run(dir.file("straight.csv"), 0, 20);
  // Interrupted after logging step 14 (a crash, then a resume from the checkpoint of step 9:
  // the rows of steps 10..14 and a half-written line must go).
  run(dir.file("resumed.csv"), 0, 14);
  { std::ofstream(dir.file("resumed.csv"), std::ios::app) << "15,0.05"; }
  run(dir.file("resumed.csv"), 10, 20);
  CHECK(read_file(dir.file("resumed.csv")) == read_file(dir.file("straight.csv")));
  // Resuming a missing file starts it; resuming with another header is refused.
  run(dir.file("new.csv"), 5, 6);
  CHECK(read_csv(dir.file("new.csv")).rows.size() == 2);
  check_error(
      [&] {
        CsvLog(dir.file("straight.csv"), {"step", "acc"}, 3);
      },
      {"CsvLog", "straight.csv", "step,loss", "step,acc"});
  write_file(dir.file("bad.csv"), "step,loss\n1,2\nx,3\n");
  check_error([&] { CsvLog(dir.file("bad.csv"), header, 3); }, {"CsvLog", "bad.csv", "line 3"});
}

TEST_CASE("read_csv reads back what CsvLog wrote and names malformed lines") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  {
    CsvLog log(path, {"step", "loss"});
    log.row({0, 1e-12});
    log.row({1, -3.25});
    log.row({2, INFINITY});
  }
  const CsvTable table = read_csv(path);
  CHECK(table.header == std::vector<std::string>{"step", "loss"});
  REQUIRE(table.rows.size() == 3);
  CHECK(table.column("loss")[0] == 1e-12);
  CHECK(table.column("loss")[1] == -3.25);
  CHECK(std::isinf(table.column("loss")[2]));
  CHECK(table.column("step") == std::vector<double>{0, 1, 2});
  check_error([&] { table.column("acc"); }, {"acc", "step,loss"});
  write_file(dir.file("short.csv"), "a,b\n1,2\n3\n");
  check_error([&] { read_csv(dir.file("short.csv")); }, {"read_csv", "short.csv", "line 3"});
  write_file(dir.file("word.csv"), "a,b\r\n1,2\r\n3,four\r\n");
  check_error([&] { read_csv(dir.file("word.csv")); }, {"read_csv", "line 3", "four"});
  write_file(dir.file("empty.csv"), "");
  check_error([&] { read_csv(dir.file("empty.csv")); }, {"read_csv", "empty.csv"});
  check_error([&] { read_csv(dir.file("missing.csv")); }, {"read_csv", "missing.csv"});
}

TEST_CASE("CsvTable::series: a column against another, scaled, rows without a value left out") {
  CsvTable table;
  table.header = {"step", "loss", "accuracy"};
  const double nan = std::nan("");
  table.rows = {{1, 2.5, nan}, {2, 2.0, 0.5}, {3, 1.5, nan}, {4, nan, 0.75}};
  const Series accuracy = table.series("step", "accuracy", "test accuracy", 100);
  CHECK(accuracy.name == "test accuracy");
  CHECK(accuracy.x == std::vector<double>{2, 4});
  CHECK(accuracy.y == std::vector<double>{50, 75});
  const Series loss = table.series("step", "loss");
  CHECK(loss.name == "loss");  // the column's name by default
  CHECK(loss.x == std::vector<double>{1, 2, 3});
  CHECK_THROWS_WITH_AS(table.series("step", "bleu"), doctest::Contains("no column 'bleu'"),
                       loom::Error);
}
