// Line plots (loss and accuracy curves) drawn into an Image, and the CSV log a trainer writes one
// row per step to and plots from at the end.
//
//   data::CsvLog log("run/log.csv", {"step", "loss", "accuracy"}, resume_step);
//   log.row({step, loss, accuracy});                      // every step, flushed
//   const auto table = data::read_csv("run/log.csv");     // at the end
//   data::save_plot("run/loss.png", {{"train", table.column("step"), table.column("loss")}},
//                   {.title = "loss", .x_label = "step", .y_label = "loss", .log_y = true});
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"

namespace loom::data {

// --- plots ------------------------------------------------------------------
// One curve: points (x[i], y[i]); x and y have the same length. Non-finite points (and, with
// log_y, y <= 0) are skipped and break the line there.
struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int64_t width = 800, height = 500;
  bool log_y = false;
};

// Axes with tick labels, grid lines, one colour per series (matplotlib's tab10 cycle), a legend
// of the named series; an isolated point is drawn as a small square. Series with no finite
// points are left out; with none at all the axes are drawn empty. RGB, width x height.
Image plot_lines(const std::vector<Series>& series, const PlotOptions& options);
void save_plot(const std::string& path, const std::vector<Series>& series,
               const PlotOptions& options);
// Several plots side by side in one PNG (e.g. loss and accuracy).
void save_plots(const std::string& path,
                const std::vector<std::pair<std::vector<Series>, PlotOptions>>& panels);

// --- CSV logs ---------------------------------------------------------------
// A comma-separated file: one header line of column names, then one row of numbers per line.
// Numbers are written in the shortest form that reads back to the same double.
class CsvLog {
 public:
  // Without resume_after_step, starts `path` afresh with the header. With resume_after_step = S,
  // keeps the rows of an existing file (whose header must be `header`) with first column <= S,
  // byte for byte, and drops the rest, so that a resumed run's log equals an uninterrupted one;
  // a missing file is started afresh. An empty path writes nothing (rows are still checked):
  // the log of the ranks but 0 of a data-parallel job.
  CsvLog(const std::string& path, std::vector<std::string> header,
         std::optional<int64_t> resume_after_step = std::nullopt);
  // Appends one row (as many values as header columns) and flushes it.
  void row(const std::vector<double>& values);
  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }

 private:
  std::string path_;
  std::vector<std::string> header_;
  std::ofstream out_;
};

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
  // The values of the column called `name`; throws naming the columns there are.
  std::vector<double> column(const std::string& name) const;
  // The curve of column `y` against column `x`, its values times `scale`, named `name` (default:
  // `y`), without the rows where `y` is NaN: a value logged only at some steps (an evaluation)
  // draws as a line through those steps.
  Series series(const std::string& x, const std::string& y, std::string name = "",
                double scale = 1) const;
};

// Reads a CsvLog file (or any CSV of numbers with a header line). Throws loom::Error naming the
// file and line for a missing header, a row of the wrong length or a field that is not a number.
CsvTable read_csv(const std::string& path);

}  // namespace loom::data
