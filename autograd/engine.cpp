// The backward engine: a topological sort of the recorded graph and a reverse walk that
// accumulates gradients (micrograd's `backward`, with nodes instead of values).
#include <atomic>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"

namespace loom::autograd {

namespace {
thread_local bool g_grad_mode = true;
std::atomic<bool> g_detect_anomaly{false};

// Adds g into the accumulated gradient `slot` (the first contribution is taken as is).
void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
  } else {
    slot = slot + g;
  }
}

// SavedVersion's check: refuses to run a backward whose saved tensors were changed in place
// after the forward (the message follows PyTorch's).
void check_saved_versions(const Node& node) {
  for (const SavedVersion& s : node.saved)
    LOOM_CHECK(s.storage->version == s.version,
               "backward: one of the variables needed for gradient computation has been modified "
               "by an inplace operation: the tensor of shape {} saved by '{}' is at version {}; "
               "expected version {} instead",
               shape_str(s.shape), node.name, s.storage->version, s.version);
}

// Anomaly mode: the gradients a node produced must be finite.
void check_finite_gradients(const Node& node, const std::vector<Tensor>& input_grads) {
  for (size_t i = 0; i < input_grads.size(); ++i) {
    if (!input_grads[i].defined()) continue;
    for (float v : input_grads[i].to_vector())
      LOOM_CHECK(std::isfinite(v),
                 "backward: anomaly detected: the backward of '{}' produced {} in the gradient "
                 "of its input {} (shape {})",
                 node.name, std::isnan(v) ? "NaN" : "Inf", i, shape_str(input_grads[i].shape()));
  }
}
// The post-accumulate-grad hooks (Tensor::register_post_accumulate_grad_hook). A leaf's gradient
// is complete once every edge into it from a node of this backward has been settled (delivered
// a gradient, or had none to deliver), so each hooked leaf counts its pending edges.
class GradReadyHooks {
 public:
  explicit GradReadyHooks(const std::vector<Node*>& order) {
    for (Node* node : order)
      for (const Edge& e : node->inputs)
        if (e.leaf && !e.leaf->grad_ready_hooks().empty()) ++leaves_[e.leaf.get()].pending;
  }
  // Called once per node of the walk, after its gradients were accumulated (or when none
  // reached it). `delivered[i]`: input i received a gradient.
  void settle(const Node& node, const std::vector<bool>& delivered) {
    if (leaves_.empty()) return;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Edge& e = node.inputs[i];
      auto found = e.leaf ? leaves_.find(e.leaf.get()) : leaves_.end();
      if (found == leaves_.end()) continue;
      Leaf& leaf = found->second;
      leaf.accumulated = leaf.accumulated || delivered[i];
      if (--leaf.pending == 0 && leaf.accumulated) run_hooks(Tensor(e.leaf));
    }
  }
  static void run_hooks(const Tensor& leaf) {
    for (const GradReadyHook& hook : leaf.impl()->grad_ready_hooks()) hook(leaf);
  }

 private:
  struct Leaf {
    int pending = 0;
    bool accumulated = false;
  };
  std::unordered_map<TensorImpl*, Leaf> leaves_;
};
}  // namespace

void set_detect_anomaly(bool enabled) { g_detect_anomaly = enabled; }
bool is_anomaly_enabled() { return g_detect_anomaly; }

bool grad_mode_enabled() { return g_grad_mode; }
void set_grad_mode(bool enabled) { g_grad_mode = enabled; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {

// A node of op `name` with an edge per input and the versions of the tensors it saves.
std::shared_ptr<Node> make_node(const char* name, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& saved) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->saved.reserve(saved.size());
  for (const Tensor& t : saved)
    if (t.defined()) node->saved.push_back({t.impl()->storage(), t.version(), t.shape()});
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn()) e.node = t.grad_fn();
      else e.leaf = t.impl_ptr();
    }
    node->inputs.push_back(std::move(e));
  }
  return node;
}

}  // namespace

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor out,
              BackwardFn backward, const std::vector<Tensor>& saved) {
  if (!any_requires_grad(inputs)) return out;
  auto node = make_node(name, inputs, saved);
  node->output_shape = out.shape();
  node->backward = std::move(backward);
  out.impl()->set_grad_fn(std::move(node));  // and so out requires grad
  return out;
}

std::vector<Tensor> record_outputs(const char* name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> outs, MultiBackwardFn backward) {
  if (!any_requires_grad(inputs)) return outs;
  auto node = make_node(name, inputs, {});
  node->num_outputs = outs.size();
  node->backward_outputs = std::move(backward);
  for (size_t i = 0; i < outs.size(); ++i) {
    auto handover = std::make_shared<Node>();  // output i's gradient, as it is, into slot i
    handover->name = name;
    handover->output_shape = outs[i].shape();
    handover->inputs.push_back({node, nullptr, i});
    handover->backward = [](const Tensor& g) { return std::vector<Tensor>{g}; };
    outs[i].impl()->set_grad_fn(std::move(handover));
  }
  return outs;
}

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  NoGradGuard no_grad;  // gradients are plain tensors (no double backward)
  if (!root.grad_fn()) {  // backward on a leaf: its gradient is the seed itself
    Tensor slot = root.grad();
    accumulate(slot, grad.detach());
    root.set_grad(slot);
    GradReadyHooks::run_hooks(root);
    return;
  }
  // Reverse topological order by an iterative depth-first post-order walk.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack{{root.grad_fn().get(), 0}};
  seen.insert(root.grad_fn().get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      Node* child = node->inputs[next++].node.get();
      if (child && seen.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  // The gradients that reached each node, one per output of its op (most ops have one).
  std::unordered_map<Node*, std::vector<Tensor>> grads;
  grads[root.grad_fn().get()] = {grad};
  GradReadyHooks hooks(order);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    std::vector<bool> delivered(node->inputs.size(), false);
    auto found = grads.find(node);
    if (found == grads.end()) {  // no gradient reached this node
      hooks.settle(*node, delivered);
      continue;
    }
    std::vector<Tensor> g = std::move(found->second);
    grads.erase(found);
    LOOM_CHECK(!node->released,
               "backward: trying to backward through the graph a second time (the buffers of "
               "'{}' were freed); pass retain_graph=true to the first backward",
               node->name);
    check_saved_versions(*node);
    std::vector<Tensor> input_grads =
        node->backward_outputs ? node->backward_outputs(g) : node->backward(g[0]);
    if (g_detect_anomaly) check_finite_gradients(*node, input_grads);
    if (!retain_graph) {
      node->backward = nullptr;  // frees the tensors saved for backward
      node->backward_outputs = nullptr;
      node->saved.clear();
      node->released = true;
    }
    for (size_t i = 0; i < node->inputs.size() && i < input_grads.size(); ++i) {
      const Edge& e = node->inputs[i];
      Tensor gi = input_grads[i];
      if (!e.active() || !gi.defined()) continue;
      delivered[i] = true;
      if (e.node) {
        std::vector<Tensor>& slots = grads[e.node.get()];
        slots.resize(e.node->num_outputs);
        accumulate(slots[e.output], gi);
      } else {
        Tensor leaf(e.leaf);
        LOOM_CHECK(gi.shape() == leaf.shape(),
                   "backward: op '{}' produced a gradient of shape {} for an input of shape {}",
                   node->name, shape_str(gi.shape()), shape_str(leaf.shape()));
        // A leaf's gradient has the leaf's dtype (PyTorch's engine casts it the same way).
        if (gi.dtype() != leaf.dtype()) gi = gi.to(leaf.dtype());
        Tensor slot = leaf.grad();
        if (slot.defined() && slot.dtype() != DType::Float32) {
          leaf.set_grad(slot + gi);  // bfloat16: added in float32, rounded once
        } else if (slot.defined() && slot.is_contiguous() && gi.shape() == slot.shape() &&
                   slot.is_leaf()) {
          backend(slot.device()).axpy(1.0f, gi.contiguous(), slot);  // in place, no realloc
        } else {
          // Own the buffer: a gradient may alias a tensor saved by the graph.
          leaf.set_grad(gi.contiguous().impl_ptr() == gi.impl_ptr() ? gi.clone() : gi.contiguous());
        }
      }
    }
    hooks.settle(*node, delivered);
  }
}

}  // namespace loom::autograd
