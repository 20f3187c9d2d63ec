// A node of the autograd graph: the backward rule of one recorded op.
// Each op in autograd/ops_*.cpp computes its output through the backend and, when any input
// requires grad, records a Node whose `backward` maps dL/d(output) to dL/d(input_i).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loom::autograd {

struct Node;

// Where the gradient of one input goes: into another node (a non-leaf input), into a leaf's
// .grad, or nowhere (the input does not require grad).
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  bool active() const { return node != nullptr || leaf != nullptr; }
};

// grads[i] is dL/d(input i), or an undefined Tensor when input i needs no gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  std::string name;           // the op's name, for error messages
  std::vector<Edge> inputs;   // one per input of the op
  BackwardFn backward;        // released after use unless the graph is retained
  bool released = false;
  Shape output_shape;         // for checking incoming gradients

  // Whether input i needs a gradient (lets a backward skip work).
  bool needs_grad(size_t i) const { return i < inputs.size() && inputs[i].active(); }
};

// True when grad recording is on (the default) — see NoGradGuard.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// Attaches a node computing `backward` to `out` if grad mode is on and any input requires
// grad. Tensors captured by `backward` are kept alive until the graph is freed. Returns out.
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor out,
              BackwardFn backward);

// True if grad mode is on and any of the tensors requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Runs backward from `root` with the given initial gradient.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace loom::autograd

namespace loom {

// RAII scope in which ops are not recorded (inference, optimizer updates, weight init).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(autograd::grad_mode_enabled()) { autograd::set_grad_mode(false); }
  ~NoGradGuard() { autograd::set_grad_mode(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace loom
