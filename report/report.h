// The report layer: what a long run shows while it works and leaves behind. The progress line
// with its ETA and the time budget of a --minutes run (report/progress.h), the CSV log's
// curves drawn as PNG plots (report/plot.h), and a classifier's accuracy and confusion matrix
// (report/confusion.h) (included by loom.h).
#pragma once

#include "report/confusion.h"
#include "report/plot.h"
#include "report/progress.h"
