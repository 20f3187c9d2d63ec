// What a classifier's evaluation leaves behind: its accuracy, and its confusion matrix (rows:
// true class, columns: predicted) printed with each class's accuracy and drawn as a heat map
// of row-normalised counts.
//
//   const double acc = data::accuracy(predictions, labels);
//   data::report_confusion(predictions, labels, data::fashion_mnist_classes(), "confusion.png");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

// The share of predictions equal to their label, over the predictions given (the first labels).
double accuracy(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels);

// Prints the matrix of the classes `names` (labels and predictions index them) and writes the
// heat map to `png`. A loom::Error names a label or prediction outside the classes.
void report_confusion(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels,
                      const std::vector<std::string>& names, const std::string& png);

}  // namespace loom::data
