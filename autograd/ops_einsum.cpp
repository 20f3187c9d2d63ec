// einsum and the batched products PyTorch names apart (outer, bmm, baddbmm, addmm). None has a
// backward of its own: einsum is lowered to diagonals (index_select), sums, permutes, reshapes
// and matmul, the others to matmul and arithmetic, so their gradients are those ops'.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "autograd/internal.h"

namespace loom {

namespace {

// ---------------------------------------------------------------------------- the equation
// A subscript is a letter, numbered 0..51 (A-Z, then a-z: PyTorch's order, so an implicit
// output lists upper case first); the dims an ellipsis stands for get labels 52, 53, ...,
// right-aligned across operands, so that they broadcast as NumPy's dims do.
constexpr int kLetters = 52;
using Labels = std::vector<int>;

int letter_label(char c) {
  return std::isupper(static_cast<unsigned char>(c)) ? c - 'A' : c - 'a' + 26;
}
char label_letter(int l) {
  return l < 26 ? static_cast<char>('A' + l) : static_cast<char>('a' + l - 26);
}

struct Term {
  Labels labels;  // the letters in order, with kEllipsis where "..." stands
  bool ellipsis = false;
};
constexpr int kEllipsis = -1;

Term parse_term(const std::string& eq, const std::string& text, const char* what) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      LOOM_CHECK(!term.ellipsis && text.compare(i, 3, "...") == 0,
                 "einsum: {} '{}' of \"{}\" has a '.' that is not one \"...\"", what, text, eq);
      term.ellipsis = true;
      term.labels.push_back(kEllipsis);
      i += 2;
    } else {
      LOOM_CHECK(std::isalpha(static_cast<unsigned char>(c)),
                 "einsum: invalid subscript '{}' in \"{}\" (letters a-z, A-Z and \"...\")", c, eq);
      term.labels.push_back(letter_label(c));
    }
  }
  return term;
}

// One operand with a label per dim (an ellipsis expanded to its labels).
struct Operand {
  Tensor t;
  Labels labels;
};

// The operand's labels once its "..." is given its `ell` dims, right-aligned among `max_ell`.
Labels expand_labels(const Term& term, int64_t ell, int64_t max_ell) {
  Labels out;
  for (int l : term.labels) {
    if (l != kEllipsis) {
      out.push_back(l);
      continue;
    }
    for (int64_t e = max_ell - ell; e < max_ell; ++e) out.push_back(kLetters + static_cast<int>(e));
  }
  return out;
}

bool contains(const Labels& ls, int l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); }

// ---------------------------------------------------------------------------- the lowering
// x's diagonal over the dims i < j (equal sizes n), as a new last dim: torch.diagonal(x, 0, i, j).
// The two dims are moved to the end, merged into one of n * n, and every (n + 1)-th element kept.
Tensor diagonal_of(const Tensor& x, int64_t i, int64_t j) {
  const int64_t n = x.size(i);
  Shape order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != i && d != j) order.push_back(d);
  Shape rest;
  for (int64_t d : order) rest.push_back(x.size(d));
  order.push_back(i);
  order.push_back(j);
  Shape flat = rest;
  flat.push_back(n * n);
  Tensor picks = arange(n, x.device()) * (n + 1);  // int64 positions 0, n + 1, 2 (n + 1), ...
  return index_select(x.permute(order).reshape(flat), static_cast<int64_t>(rest.size()), picks);
}

// A label repeated in one operand ("ii->i") takes its diagonal, as often as it repeats.
Operand take_diagonals(Operand op) {
  for (size_t a = 0; a < op.labels.size(); ++a)
    for (size_t b = a + 1; b < op.labels.size(); ++b) {
      if (op.labels[a] != op.labels[b]) continue;
      const int label = op.labels[a];
      op.t = diagonal_of(op.t, static_cast<int64_t>(a), static_cast<int64_t>(b));
      op.labels.erase(op.labels.begin() + static_cast<int64_t>(b));
      op.labels.erase(op.labels.begin() + static_cast<int64_t>(a));
      op.labels.push_back(label);
      return take_diagonals(std::move(op));
    }
  return op;
}

// Sums away the labels of op that `keep` does not hold.
Operand sum_out(Operand op, const Labels& keep) {
  Shape dims;
  Labels left;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (contains(keep, op.labels[d]))
      left.push_back(op.labels[d]);
    else
      dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return op;
  return {sum(op.t, dims, false), left};
}

// op's dims reordered as `order` (a permutation of its labels), grouped into the given runs of
// labels, each run merged into one dim: [prod run0, prod run1, ...].
Tensor grouped(const Operand& op, const std::vector<Labels>& runs) {
  Shape perm, shape;
  for (const Labels& run : runs) {
    int64_t size = 1;
    for (int l : run) {
      const auto d = std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin();
      perm.push_back(d);
      size *= op.t.size(d);
    }
    shape.push_back(size);
  }
  return op.t.permute(perm).reshape(shape);
}

int64_t label_size(const Operand& op, int l) {
  return op.t.size(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
}

// a and b contracted over the labels they share that `keep` (the output and the operands
// still to come) does not hold: batch labels (shared and kept) lead, then a's own, then b's,
// as one matmul [batch, a's, shared] @ [batch, shared, b's].
Operand contract(Operand a, Operand b, const Labels& keep) {
  Labels batch, summed, only_a, only_b;
  for (int l : a.labels) {
    if (!contains(b.labels, l))
      only_a.push_back(l);
    else if (contains(keep, l))
      batch.push_back(l);
    else
      summed.push_back(l);
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) only_b.push_back(l);
  // Shared labels of size 1 on one side broadcast against the other (as NumPy's dims do).
  auto broadcast = [](Operand& x, const Operand& y, const Labels& shared) {
    Shape shape = x.t.shape();
    for (int l : shared) {
      const auto d = std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin();
      if (shape[d] == 1) shape[d] = label_size(y, l);
    }
    if (shape != x.t.shape()) x.t = x.t.expand(shape);
  };
  Labels shared = batch;
  shared.insert(shared.end(), summed.begin(), summed.end());
  broadcast(a, b, shared);
  broadcast(b, a, shared);
  Operand result;
  for (const Labels& run : {batch, only_a, only_b})  // the result's dims: batch, a's, b's
    result.labels.insert(result.labels.end(), run.begin(), run.end());
  Shape out_shape;
  for (int l : result.labels) out_shape.push_back(label_size(contains(a.labels, l) ? a : b, l));
  // [B, M, K] @ [B, K, N] -> [B, M, N], or without batch labels [M, K] @ [K, N] -> [M, N]
  const bool batched = !batch.empty();
  const Tensor am = batched ? grouped(a, {batch, only_a, summed}) : grouped(a, {only_a, summed});
  const Tensor bm = batched ? grouped(b, {batch, summed, only_b}) : grouped(b, {summed, only_b});
  result.t = matmul(am, bm).reshape(out_shape);
  return result;
}

}  // namespace

// torch.einsum. Each operand first takes its diagonals and sums away the labels nothing else
// needs; the operands are then contracted left to right, each pair by one matmul; what is left
// is summed over the labels the output lacks and permuted into the output's order.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(equation, lhs.substr(start, comma - start), "operand"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  LOOM_CHECK(terms.size() == tensors.size(),
             "einsum: \"{}\" names {} operands, but {} tensors were given", equation, terms.size(),
             tensors.size());
  // The operands, their "..." expanded, and the sizes each label takes.
  int64_t max_ell = 0;
  std::vector<int64_t> ells(terms.size());
  for (size_t k = 0; k < terms.size(); ++k) {
    detail::check_defined(tensors[k], "einsum");
    const int64_t letters = static_cast<int64_t>(terms[k].labels.size()) - terms[k].ellipsis;
    const int64_t dims = tensors[k].dim();
    LOOM_CHECK(terms[k].ellipsis ? dims >= letters : dims == letters,
               "einsum: operand {} has {} subscripts in \"{}\" but {} dims (shape {})", k, letters,
               equation, dims, shape_str(tensors[k].shape()));
    ells[k] = dims - letters;
    max_ell = std::max(max_ell, ells[k]);
  }
  std::vector<Operand> ops;
  std::array<int64_t, 256> size_of{};
  size_of.fill(-1);
  std::array<int, 256> count{};
  for (size_t k = 0; k < terms.size(); ++k) {
    Operand op{tensors[k], expand_labels(terms[k], ells[k], max_ell)};
    for (size_t d = 0; d < op.labels.size(); ++d) {
      const int l = op.labels[d];
      const int64_t n = op.t.size(static_cast<int64_t>(d));
      ++count[l];
      const bool ellipsis = l >= kLetters;
      if (size_of[l] == -1 || size_of[l] == 1) size_of[l] = std::max(n, size_of[l]);
      // Letters must agree (or be 1, which broadcasts); so must "..." dims, NumPy's rule.
      LOOM_CHECK(n == 1 || n == size_of[l],
                 "einsum: {} of operand {} has size {}, but {} elsewhere in \"{}\"",
                 ellipsis ? std::string("an ellipsis dim")
                          : fmt::format("subscript '{}'", label_letter(l)),
                 k, n, size_of[l], equation);
    }
    ops.push_back(std::move(op));
  }
  // The output's labels: as written after "->", or the letters that appear once, sorted,
  // after the ellipsis dims.
  Labels out;
  if (arrow != std::string::npos) {
    const Term term = parse_term(equation, eq.substr(arrow + 2), "output");
    for (int l : term.labels) {
      if (l == kEllipsis) {
        for (int64_t e = 0; e < max_ell; ++e) out.push_back(kLetters + static_cast<int>(e));
        continue;
      }
      LOOM_CHECK(count[l] > 0, "einsum: output subscript '{}' of \"{}\" names no input dim",
                 label_letter(l), equation);
      LOOM_CHECK(!contains(out, l), "einsum: output subscript '{}' appears twice in \"{}\"",
                 label_letter(l), equation);
      out.push_back(l);
    }
  } else {
    for (int64_t e = 0; e < max_ell; ++e) out.push_back(kLetters + static_cast<int>(e));
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) out.push_back(l);
  }
  // The labels still needed after operand k: the output's and those of the operands after k.
  auto needed_after = [&](size_t k) {
    Labels keep = out;
    for (size_t j = k + 1; j < ops.size(); ++j)
      keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  Operand acc;
  for (size_t k = 0; k < ops.size(); ++k) {
    Labels keep = needed_after(k);
    if (k > 0) keep.insert(keep.end(), acc.labels.begin(), acc.labels.end());
    Operand op = sum_out(take_diagonals(ops[k]), keep);
    if (k == 0) {
      acc = std::move(op);
      continue;
    }
    Labels keep_acc = needed_after(k);
    keep_acc.insert(keep_acc.end(), op.labels.begin(), op.labels.end());
    acc = contract(sum_out(std::move(acc), keep_acc), std::move(op), needed_after(k));
  }
  acc = sum_out(std::move(acc), out);
  Shape perm;
  for (int l : out)
    perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  return acc.t.permute(perm);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "outer");
  detail::check_defined(b, "outer");
  LOOM_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected two 1-D tensors, got shapes {} and {}",
             shape_str(a.shape()), shape_str(b.shape()));
  return a.reshape({a.numel(), 1}) * b.reshape({1, b.numel()});  // [n, 1] * [1, m] -> [n, m]
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "bmm");
  detail::check_defined(b, "bmm");
  LOOM_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
             "bmm: expected [b, n, k] and [b, k, m] tensors, got shapes {} and {}",
             shape_str(a.shape()), shape_str(b.shape()));
  return matmul(a, b);
}

// beta * input + alpha * (a @ b), where beta = 0 drops input (NaNs included) and a beta of 1 is
// not applied, as PyTorch's addmm and baddbmm do; alpha is the product's own (the GEMM's).
static Tensor scaled_sum(const char* name, const Tensor& input, const Tensor& a, const Tensor& b,
                         float beta, float alpha) {
  detail::check_defined(input, name);
  const Tensor scaled = detail::scaled_matmul(a, b, alpha);
  LOOM_CHECK(broadcast_shapes(input.shape(), scaled.shape(), name) == scaled.shape(),
             "{}: input of shape {} does not broadcast to the product's shape {}", name,
             shape_str(input.shape()), shape_str(scaled.shape()));
  if (beta == 0.0f) return scaled;
  return (beta == 1.0f ? input : input * beta) + scaled;
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, float beta,
               float alpha) {
  detail::check_defined(batch1, "baddbmm");
  detail::check_defined(batch2, "baddbmm");
  LOOM_CHECK(batch1.dim() == 3 && batch2.dim() == 3 && batch1.size(0) == batch2.size(0) &&
                 batch1.size(2) == batch2.size(1),
             "baddbmm: expected [b, n, k] and [b, k, m] batches, got shapes {} and {}",
             shape_str(batch1.shape()), shape_str(batch2.shape()));
  return scaled_sum("baddbmm", input, batch1, batch2, beta, alpha);
}

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, float beta, float alpha) {
  detail::check_defined(mat1, "addmm");
  detail::check_defined(mat2, "addmm");
  LOOM_CHECK(mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0),
             "addmm: expected [n, k] and [k, m] matrices, got shapes {} and {}",
             shape_str(mat1.shape()), shape_str(mat2.shape()));
  return scaled_sum("addmm", input, mat1, mat2, beta, alpha);
}

}  // namespace loom
