// Shortest augmenting path assignment (Crouse 2016, section IV and the pseudocode on pp.
// 1685-1686), written for loom after reading scipy's rectangular_lsap.cpp; see the header.
//
// Notation: the matrix is nr x nc with nr <= nc (a taller one is transposed first), so every
// row gets a column. u[i], v[j] are the dual variables; the reduced cost of (i, j) is
// cost(i, j) - u[i] - v[j] >= 0 for every pair, and 0 on matched pairs. col4row / row4col hold
// the current matching (-1 = free).
#include "optim/linear_sum_assignment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace loom {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The state of the solver for one nr x nc matrix (nr <= nc).
struct Solver {
  const std::vector<double>& cost;
  int64_t nr, nc;
  std::vector<double> u, v, shortest;  // duals; shortest path cost to each column
  std::vector<int64_t> path, col4row, row4col, remaining;
  std::vector<char> row_seen, col_seen;  // Crouse's sets SR and SC

  Solver(const std::vector<double>& c, int64_t rows, int64_t cols)
      : cost(c),
        nr(rows),
        nc(cols),
        u(rows, 0.0),
        v(cols, 0.0),
        shortest(cols),
        path(cols, -1),
        col4row(rows, -1),
        row4col(cols, -1),
        remaining(cols),
        row_seen(rows),
        col_seen(cols) {}

  // Dijkstra from the free row `row` over the reduced costs until a free column is reached
  // (Crouse, Algorithm "Shortest augmenting path"). Returns that column, or -1 when every
  // column still reachable costs +inf (no full assignment exists). *min_val receives the
  // length of the path.
  int64_t augmenting_path(int64_t row, double* min_val) {
    double lowest_so_far = 0.0;
    // The columns not yet in SC, filled in reverse as scipy does: among equally short free
    // columns the lowest index is then found last and wins, so a constant matrix gives the
    // identity (scipy issue #11602).
    int64_t num_remaining = nc;
    for (int64_t it = 0; it < nc; ++it) remaining[it] = nc - it - 1;
    std::fill(row_seen.begin(), row_seen.end(), 0);
    std::fill(col_seen.begin(), col_seen.end(), 0);
    std::fill(shortest.begin(), shortest.end(), kInf);

    int64_t sink = -1, i = row;
    while (sink == -1) {
      row_seen[i] = 1;
      int64_t index = -1;
      double lowest = kInf;
      const double* cost_row = cost.data() + i * nc;
      const double u_i = u[i];  // hoisted: the stores below cannot change it
      for (int64_t it = 0; it < num_remaining; ++it) {
        const int64_t j = remaining[it];
        const double r = lowest_so_far + cost_row[j] - u_i - v[j];
        if (r < shortest[j]) {
          path[j] = i;
          shortest[j] = r;
        }
        // Prefer a free column among equally short ones: the path ends there.
        if (shortest[j] < lowest || (shortest[j] == lowest && row4col[j] == -1)) {
          lowest = shortest[j];
          index = it;
        }
      }
      lowest_so_far = lowest;
      if (lowest_so_far == kInf) return -1;  // only forbidden pairs left
      const int64_t j = remaining[index];
      if (row4col[j] == -1)
        sink = j;
      else
        i = row4col[j];
      col_seen[j] = 1;
      remaining[index] = remaining[--num_remaining];
    }
    *min_val = lowest_so_far;
    return sink;
  }

  // Adds each row in turn to the matching (Crouse, the outer loop).
  void solve() {
    for (int64_t row = 0; row < nr; ++row) {
      double min_val = 0.0;
      const int64_t sink = augmenting_path(row, &min_val);
      LOOM_CHECK(sink >= 0,
                 "linear_sum_assignment: cost matrix [{}, {}] is infeasible (every full "
                 "assignment uses a +inf pair)",
                 nr, nc);
      // Dual update keeping reduced costs >= 0 and 0 on the (new) matched pairs.
      u[row] += min_val;
      for (int64_t i = 0; i < nr; ++i)
        if (row_seen[i] && i != row) u[i] += min_val - shortest[col4row[i]];
      for (int64_t j = 0; j < nc; ++j)
        if (col_seen[j]) v[j] -= min_val - shortest[j];
      // Flip the matching along the path, from the sink back to `row`.
      for (int64_t j = sink;;) {
        const int64_t i = path[j];
        row4col[j] = i;
        std::swap(col4row[i], j);
        if (i == row) break;
      }
    }
  }
};

}  // namespace

std::pair<std::vector<int64_t>, std::vector<int64_t>> linear_sum_assignment(
    const std::vector<double>& cost, int64_t rows, int64_t cols) {
  LOOM_CHECK(rows >= 0 && cols >= 0 && static_cast<int64_t>(cost.size()) == rows * cols,
             "linear_sum_assignment: {} costs for a [{}, {}] matrix", cost.size(), rows, cols);
  if (rows == 0 || cols == 0) return {};
  for (size_t k = 0; k < cost.size(); ++k)
    LOOM_CHECK(!std::isnan(cost[k]) && cost[k] != -kInf,
               "linear_sum_assignment: cost matrix [{}, {}] contains invalid numeric entries "
               "({} at row {}, column {}; only finite values and +inf are allowed)",
               rows, cols, cost[k], static_cast<int64_t>(k) / cols, static_cast<int64_t>(k) % cols);

  // Every row must get a column: solve the transpose of a tall matrix.
  const bool transpose = cols < rows;
  std::vector<double> transposed;
  if (transpose) {
    transposed.resize(cost.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) transposed[j * rows + i] = cost[i * cols + j];
  }
  Solver solver(transpose ? transposed : cost, transpose ? cols : rows, transpose ? rows : cols);
  solver.solve();

  const int64_t k = solver.nr;
  std::vector<int64_t> out_rows(k), out_cols(k);
  if (!transpose) {
    std::iota(out_rows.begin(), out_rows.end(), 0);
    out_cols = solver.col4row;
  } else {
    // Solver row r is original column r, matched to original row col4row[r]: sort by the latter.
    std::vector<int64_t> order(k);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return solver.col4row[a] < solver.col4row[b]; });
    for (int64_t r = 0; r < k; ++r) {
      out_rows[r] = solver.col4row[order[r]];
      out_cols[r] = order[r];
    }
  }
  return {out_rows, out_cols};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> linear_sum_assignment(const Tensor& cost) {
  LOOM_CHECK(cost.defined() && cost.dim() == 2 && cost.dtype() == DType::Float32,
             "linear_sum_assignment: expected a float32 cost matrix [n, m], got {} of shape {}",
             cost.defined() ? dtype_name(cost.dtype()) : "undefined",
             cost.defined() ? shape_str(cost.shape()) : "[]");
  const std::vector<float> values = cost.to_vector();  // one copy to the host
  return linear_sum_assignment(std::vector<double>(values.begin(), values.end()), cost.size(0),
                               cost.size(1));
}

}  // namespace loom
