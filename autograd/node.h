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

// Runs backward from `root` with the given initial gradient (Tensor::backward): the leaves'
// gradients are accumulated into their .grad. With create_graph the backward runs in grad mode,
// its ops recorded, so those gradients can be differentiated again.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph,
                  bool create_graph = false);

// torch.autograd.grad: the gradients of sum_i <outputs[i], grad_outputs[i]> with respect to
// each of `inputs` (leaves or not), returned instead of accumulated: no .grad changes. An
// output of one element may go without its grad_output (ones then); a missing grad_outputs
// gives every output ones. The graph is freed unless retain_graph or create_graph is set. With
// create_graph the backward is recorded, so the gradients have a grad_fn and can be
// differentiated again (Hessian-vector products, gradient penalties). An input the outputs do
// not depend on is an error unless allow_unused, which gives it an undefined Tensor.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// The gradients of `params` before the next backward (Optimizer::zero_grad, Module::zero_grad):
// set_to_none clears each (PyTorch 2's default: memory freed, and a parameter the next backward
// does not reach has no gradient); otherwise each defined gradient is zeroed in place (PyTorch
// 1.13's default), the contiguous float32 ones of a device by one multi-tensor kernel
// (Backend::zero_multi, PyTorch's _foreach_zero_), any other by its zero_().
void zero_grads(const std::vector<Tensor>& params, bool set_to_none);

// For backward functions. True when the backward now running builds a graph of its own
// gradients (create_graph) and one of `tensors` (the incoming gradient, the saved inputs)
// requires grad: a backward then computes through recorded ops, so that its result can be
// differentiated again, instead of through a backward kernel.
inline bool building_graph(const std::vector<Tensor>& tensors) {
  return any_requires_grad(tensors);
}
// The output of the running node, saved (detached, to keep the graph free of cycles) by its
// forward: in a backward that builds a graph it comes back attached to that node, so a
// gradient computed from it reaches the node's inputs (PyTorch's SavedVariable of an output);
// otherwise `saved` as it is. Only for single-output ops (autograd::record).
Tensor unpack_output(const Tensor& saved);
// A gradient a backward kernel computed from `inputs` (the incoming gradient and the saved
// tensors) in a backward that builds a graph, for an op with no second derivative yet: it comes
// back as the output of a node whose backward raises a loom::Error naming `op`, so
// differentiating it again is an error, never a silent zero (PyTorch's DelayedError). Outside
// such a backward `grad` is returned as it is.
Tensor not_differentiable_twice(const char* op, const Tensor& grad,
                                const std::vector<Tensor>& inputs);

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
