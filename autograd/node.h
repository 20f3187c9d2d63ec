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
  size_t output = 0;  // which of node's outputs the input is (0 but for split's pieces)
  bool active() const { return node != nullptr || leaf != nullptr; }
};

// A tensor a backward reads, with the version of its storage when it was saved. An in-place
// change before backward would make the gradient silently wrong, so the engine compares the
// versions first and refuses (PyTorch's SavedVariable). Holding the storage costs nothing: the
// backward function keeps the saved tensor alive anyway.
struct SavedVersion {
  std::shared_ptr<Storage> storage;
  uint64_t version = 0;
  Shape shape;  // for the error message
};

// grads[i] is dL/d(input i), or an undefined Tensor when input i needs no gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;
// The same for an op with several outputs (split): grad_outputs[j] is dL/d(output j), undefined
// for an output no gradient reached.
using MultiBackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

struct Node {
  std::string name;           // the op's name, for error messages
  std::vector<Edge> inputs;   // one per input of the op
  BackwardFn backward;        // released after use unless the graph is retained
  bool released = false;
  Shape output_shape;         // for checking incoming gradients
  std::vector<SavedVersion> saved;  // the tensors `backward` reads, checked before it runs
  // An op recorded by record_outputs runs backward_outputs instead of backward, once, with
  // every output's gradient.
  size_t num_outputs = 1;
  MultiBackwardFn backward_outputs;

  // Whether input i needs a gradient (lets a backward skip work).
  bool needs_grad(size_t i) const { return i < inputs.size() && inputs[i].active(); }
};

// True when grad recording is on (the default) — see NoGradGuard.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// Attaches a node computing `backward` to `out` if grad mode is on and any input requires
// grad. Tensors captured by `backward` are kept alive until the graph is freed. Those whose
// values it reads are listed in `saved`: their versions are recorded now and checked when the
// backward runs (an in-place change in between is an error). Returns out.
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor out,
              BackwardFn backward, const std::vector<Tensor>& saved = {});
// record for an op with several outputs: one node of outs.size() outputs whose `backward`
// receives all their gradients at once, so it can join them in one pass (split: one cat).
// Each output gets a node of its own that hands its gradient to its slot of that node.
std::vector<Tensor> record_outputs(const char* name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> outs, MultiBackwardFn backward);

// Anomaly mode (torch.autograd.set_detect_anomaly): while on, every backward step checks the
// gradients it produced and throws a loom::Error naming the first op whose backward gave a NaN
// or Inf, and the input. Off by default: the check copies each gradient to the host.
void set_detect_anomaly(bool enabled);
bool is_anomaly_enabled();

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
