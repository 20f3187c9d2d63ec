// The linear sum assignment problem (the "Hungarian" matching of DETR's set loss), as
// scipy.optimize.linear_sum_assignment.
//
//   cost [n, m] float32  ->  (rows, cols), k = min(n, m) pairs, rows ascending, such that each
//                            row and each column is used at most once and
//                            sum_i cost[rows[i], cols[i]] is the least possible.
//
// The solver is the O(n^2 m) shortest augmenting path method (Jonker & Volgenant 1987) in the
// form Crouse 2016 ("On implementing 2D rectangular assignment algorithms", IEEE TAES 52(4),
// pp. 1685-1686) gives it, which scipy's rectangular_lsap.cpp implements: one row at a time is
// added to the matching along a Dijkstra shortest path in the reduced costs, and the dual
// variables u (rows) and v (columns) are updated so the reduced costs stay non-negative.
// The search visits columns and breaks ties in scipy's order (a constant matrix gives the
// identity), so both return the same pairs, ties included (tests/golden/gen_lsa.py checks it on
// matrices of small integers), as long as the double arithmetic rounds the same way.
//
// Conventions (scipy's): costs are summed in double; +inf marks a forbidden pair; NaN and -inf
// are invalid; an n x 0 or 0 x m matrix gives two empty vectors.
//
// It lives in optim/ as scipy.optimize's counterpart beside torch.optim's: a general problem
// solved exactly, needing only tensors, below every model that matches sets (DETR's matcher).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loom {

// Throws loom::Error for a tensor that is not a 2-D float32 matrix, for NaN or -inf entries,
// and when every full assignment uses a forbidden (+inf) pair. Any device: the matrix is read
// to the host once.
std::pair<std::vector<int64_t>, std::vector<int64_t>> linear_sum_assignment(const Tensor& cost);

// The same on a row-major host matrix of doubles (what the Tensor form calls).
std::pair<std::vector<int64_t>, std::vector<int64_t>> linear_sum_assignment(
    const std::vector<double>& cost, int64_t rows, int64_t cols);

}  // namespace loom
