// Chapter 01 (docs/learn/01-tensors.md): a tensor is storage + shape + strides + offset.
// Prints the geometry of a tensor and of its views, shows that views share storage, and finds
// one element by hand with the address formula of core/tensor.h.
#include <cstdio>
#include <iostream>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {

void show(const char* what, const Tensor& t, const Tensor& base) {
  std::printf("%-26s shape %-9s strides %-9s offset %lld  contiguous %-3s  same storage: %s\n",
              what, shape_str(t.shape()).c_str(), shape_str(t.strides()).c_str(),
              static_cast<long long>(t.offset()), t.is_contiguous() ? "yes" : "no",
              t.impl()->storage() == base.impl()->storage() ? "yes" : "no");
}

}  // namespace

int main(int argc, char** argv) try {
  learn::parse_args(
      argc, argv,
      "Chapter 01 (docs/learn/01-tensors.md): the geometry of a tensor and of its views.");
  // 0, 1, ..., 11 in one storage of 12 floats, seen as 3 rows of 4.
  const Tensor x = arange_f(0, 12).reshape({3, 4});
  std::cout << "x =\n" << x << "\n\n";

  show("x", x, x);
  show("x.transpose(0, 1)", x.transpose(0, 1), x);
  show("x.narrow(1, 1, 2)", x.narrow(1, 1, 2), x);
  show("x.select(0, 2)", x.select(0, 2), x);
  show("x.unsqueeze(0)", x.unsqueeze(0), x);
  show("x.select(0, 0).expand", x.select(0, 0).expand({3, 4}), x);
  show("x.t().contiguous()", x.t().contiguous(), x);
  show("x.t().reshape({12})", x.t().reshape({12}), x);

  // Element [i, j] of a view is storage[offset + i * strides[0] + j * strides[1]].
  const Tensor v = x.transpose(0, 1).narrow(0, 1, 2);  // rows 1..2 of x^T: shape [2, 3]
  const float* storage = static_cast<const float*>(v.impl()->storage()->data);
  const int64_t i = 1, j = 2;
  const int64_t address = v.offset() + i * v.stride(0) + j * v.stride(1);
  std::cout << "\nv = x.transpose(0, 1).narrow(0, 1, 2) =\n" << v << "\n";
  std::printf("v[1, 2]: offset %lld + 1 * %lld + 2 * %lld = storage[%lld] = %.0f (v says %.0f)\n",
              static_cast<long long>(v.offset()), static_cast<long long>(v.stride(0)),
              static_cast<long long>(v.stride(1)), static_cast<long long>(address),
              storage[address], v.select(0, i).select(0, j).item());

  // A view writes through to its base: fill one column of x through a narrow view.
  Tensor y = arange_f(0, 12).reshape({3, 4});
  y.narrow(1, 3, 1).fill_(-1.0f);
  std::cout << "\nafter y.narrow(1, 3, 1).fill_(-1), y =\n" << y << "\n";
  return y.select(1, 3).sum().item() == -3.0f && storage[address] == 10.0f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
