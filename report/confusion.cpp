#include "report/confusion.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/image.h"

namespace loom::data {

double accuracy(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) {
  LOOM_CHECK(!predictions.empty() && predictions.size() <= labels.size(),
             "accuracy: {} predictions of {} labels", predictions.size(), labels.size());
  int64_t correct = 0;
  for (size_t i = 0; i < predictions.size(); ++i) correct += predictions[i] == labels[i];
  return static_cast<double>(correct) / static_cast<double>(predictions.size());
}

void report_confusion(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels,
                      const std::vector<std::string>& names, const std::string& png) {
  const int64_t k = static_cast<int64_t>(names.size());
  LOOM_CHECK(predictions.size() <= labels.size(), "report_confusion: {} predictions of {} labels",
             predictions.size(), labels.size());
  std::vector<int64_t> counts(static_cast<size_t>(k * k), 0);  // [true class][predicted]
  std::vector<int64_t> totals(static_cast<size_t>(k), 0);      // examples per true class
  for (size_t i = 0; i < predictions.size(); ++i) {
    LOOM_CHECK(labels[i] >= 0 && labels[i] < k && predictions[i] >= 0 && predictions[i] < k,
               "report_confusion: label {} or prediction {} of example {} is not one of {} classes",
               labels[i], predictions[i], i, k);
    ++counts[static_cast<size_t>(labels[i] * k + predictions[i])];
    ++totals[static_cast<size_t>(labels[i])];
  }
  fmt::print("\nconfusion matrix (rows: true class, columns: predicted)\n{:>12}", "");
  for (int64_t j = 0; j < k; ++j) fmt::print(" {:>5}", j);
  fmt::print("  accuracy\n");
  std::vector<float> rates(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i) {
    fmt::print("{:>12}", names[static_cast<size_t>(i)]);
    const auto total = static_cast<float>(std::max<int64_t>(totals[static_cast<size_t>(i)], 1));
    for (int64_t j = 0; j < k; ++j) {
      const auto c = counts[static_cast<size_t>(i * k + j)];
      fmt::print(" {:5d}", c);
      rates[static_cast<size_t>(i * k + j)] = static_cast<float>(c) / total;
    }
    fmt::print("  {:6.2f}%\n", 100.0 * rates[static_cast<size_t>(i * k + i)]);
  }
  write_png(
      labelled_heatmap(tensor(rates, {k, k}), names, names, "confusion (true x predicted)", 24),
      png);
}

}  // namespace loom::data
