// The backward engine: a topological sort of the recorded graph and a reverse walk that
// accumulates gradients (micrograd's `backward`, with nodes instead of values). The same walk
// serves Tensor::backward (into the leaves' .grad) and autograd::grad (gradients returned). A
// plain walk runs with grad mode off; with create_graph it runs with grad mode on, so the ops
// of each backward function are recorded like any forward and the gradients can be
// differentiated again (double backward): the saved inputs keep their place in the graph
// (detail::saved), and kernel backwards switch to recorded ops (autograd::building_graph).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"
#include "core/profiler.h"

namespace loom::autograd {

namespace {
thread_local bool g_grad_mode = true;
std::atomic<bool> g_detect_anomaly{false};

// Whether g can be added into `slot` in place: slot's memory is its alone (no other tensor,
// node or hook holds its TensorImpl or its storage: the first contribution, taken as is, may be
// another slot's too, as an add's backward hands one gradient to both of its inputs; g itself
// holds a reference when it is slot's tensor), neither is part of a graph (create_graph), and
// both are contiguous float32 of one shape on one device.
bool adds_in_place(const Tensor& slot, const Tensor& g) {
  const auto float32 = [](const Tensor& t) {
    return t.dtype() == DType::Float32 && t.is_contiguous() && !t.requires_grad();
  };
  return slot.impl_ptr().use_count() == 1 && slot.impl()->storage().use_count() == 1 &&
         float32(slot) && float32(g) && slot.shape() == g.shape() && slot.device() == g.device();
}

// Adds g into the accumulated gradient `slot` (the first contribution is taken as is): in
// place where nothing else sees slot's memory, the same sums as slot + g (1 * g is g, and one
// rounding either way) without a new tensor's memory to allocate and fill.
void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
  } else if (adds_in_place(slot, g)) {
    backend(slot.device()).axpy(1.0f, g, slot);
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

namespace {

// Sets grad mode for a scope: off for a plain backward, on for one that builds a graph.
class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(g_grad_mode) { g_grad_mode = enabled; }
  ~GradModeScope() { g_grad_mode = previous_; }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

// The node whose backward function is running (for unpack_output), on this thread.
thread_local const std::shared_ptr<Node>* g_running = nullptr;

// The nodes reachable from the roots' grad_fns, each after every node it feeds a gradient to
// (a reverse topological order), by an iterative depth-first post-order walk, reversed.
std::vector<std::shared_ptr<Node>> walk_order(const std::vector<Tensor>& roots) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  for (const Tensor& root : roots) {
    if (!root.grad_fn() || !seen.insert(root.grad_fn().get()).second) continue;
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root.grad_fn(), 0}};
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        const std::shared_ptr<Node>& child = node->inputs[next++].node;
        if (child && seen.insert(child.get()).second) stack.push_back({child, 0});
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

// Runs node's backward on the gradients of its outputs, as the running node (unpack_output).
std::vector<Tensor> call_backward(const std::shared_ptr<Node>& node,
                                  const std::vector<Tensor>& g) {
  struct Running {
    const std::shared_ptr<Node>* outer = g_running;
    ~Running() { g_running = outer; }
  } running;
  g_running = &node;
  return node->backward_outputs ? node->backward_outputs(g) : node->backward(g[0]);
}

// Adds the gradient gi that `node` produced for a leaf into the leaf's .grad.
void accumulate_into_leaf(const Tensor& leaf, Tensor gi, const Node& node, bool create_graph) {
  LOOM_CHECK(gi.shape() == leaf.shape(),
             "backward: op '{}' produced a gradient of shape {} for an input of shape {}",
             node.name, shape_str(gi.shape()), shape_str(leaf.shape()));
  // A leaf's gradient has the leaf's dtype (PyTorch's engine casts it the same way).
  if (gi.dtype() != leaf.dtype()) gi = gi.to(leaf.dtype());
  Tensor slot = leaf.grad();
  if (slot.defined() && slot.dtype() != DType::Float32) {
    leaf.set_grad(slot + gi);  // bfloat16: added in float32, rounded once
  } else if (!create_graph && slot.defined() && slot.is_contiguous() &&
             gi.shape() == slot.shape() && slot.is_leaf()) {
    backend(slot.device()).axpy(1.0f, gi.contiguous(), slot);  // in place, no realloc
  } else if (slot.defined()) {
    leaf.set_grad(slot + gi);  // recorded when the backward builds a graph
  } else {
    // Own the buffer: a gradient may alias a tensor saved by the graph.
    leaf.set_grad(gi.contiguous().impl_ptr() == gi.impl_ptr() ? gi.clone() : gi.contiguous());
  }
}

// One backward pass from `roots`, seeded with `seeds` (one each). Without `inputs`
// (Tensor::backward) the leaves' gradients are accumulated into their .grad; with `inputs`
// (autograd::grad) nothing is accumulated: the gradients of those tensors are returned, caught
// at a leaf's edges or at the grad_fn of any other tensor, and only the nodes that lead to one
// of them run.
std::vector<Tensor> run_pass(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                             bool retain_graph, bool create_graph,
                             const std::vector<Tensor>* inputs) {
  GradModeScope mode(create_graph);  // a plain backward's gradients are plain tensors
  profiler::PassGuard pass(profiler::Pass::Backward);  // the profiler's rows of backward
  const bool catching = inputs != nullptr;
  std::vector<Tensor> caught(catching ? inputs->size() : 0);
  std::unordered_map<TensorImpl*, std::vector<size_t>> caught_at_leaf;
  std::unordered_map<Node*, std::vector<size_t>> caught_at_node;
  for (size_t i = 0; i < caught.size(); ++i) {
    const Tensor& x = (*inputs)[i];
    if (x.grad_fn()) caught_at_node[x.grad_fn().get()].push_back(i);
    else caught_at_leaf[x.impl()].push_back(i);
  }
  // The gradients that reached each node, one per output of its op (most ops have one).
  std::unordered_map<Node*, std::vector<Tensor>> grads;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    if (root.grad_fn()) {
      std::vector<Tensor>& slots = grads[root.grad_fn().get()];
      slots.resize(root.grad_fn()->num_outputs);
      accumulate(slots[0], seeds[r]);
    } else if (catching) {  // a root that is itself a leaf input: its gradient is the seed
      auto found = caught_at_leaf.find(root.impl());
      if (found != caught_at_leaf.end())
        for (size_t i : found->second) accumulate(caught[i], seeds[r]);
    } else {  // backward on a leaf: its gradient is the seed itself
      Tensor slot = root.grad();
      accumulate(slot, create_graph ? seeds[r] : seeds[r].detach());
      root.set_grad(slot);
      GradReadyHooks::run_hooks(root);
    }
  }
  const std::vector<std::shared_ptr<Node>> order = walk_order(roots);
  // autograd::grad runs only the nodes from which a caught input can be reached.
  std::unordered_set<Node*> leads_to_input;
  if (catching) {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // inputs' producers first
      for (const Edge& e : (*it)->inputs) {
        if ((e.leaf && caught_at_leaf.count(e.leaf.get())) ||
            (e.node && (leads_to_input.count(e.node.get()) || caught_at_node.count(e.node.get()))))
          leads_to_input.insert(it->get());
      }
    }
  }
  std::vector<Node*> hooked;  // the post-accumulate-grad hooks are Tensor::backward's only
  if (!catching)
    for (const auto& node : order) hooked.push_back(node.get());
  GradReadyHooks hooks(hooked);
  for (const std::shared_ptr<Node>& node_ptr : order) {
    Node* node = node_ptr.get();
    std::vector<bool> delivered(node->inputs.size(), false);
    auto found = grads.find(node);
    if (found == grads.end()) {  // no gradient reached this node
      if (!catching) hooks.settle(*node, delivered);
      continue;
    }
    std::vector<Tensor> g = std::move(found->second);
    grads.erase(found);
    if (catching) {
      auto at = caught_at_node.find(node);
      if (at != caught_at_node.end())
        for (size_t i : at->second) caught[i] = g[0];  // every contribution is in by now
      if (!leads_to_input.count(node)) continue;
    }
    LOOM_CHECK(!node->released,
               "backward: trying to backward through the graph a second time (the buffers of "
               "'{}' were freed); pass retain_graph=true to the first backward",
               node->name);
    check_saved_versions(*node);
    std::vector<Tensor> input_grads = call_backward(node_ptr, g);
    if (g_detect_anomaly) check_finite_gradients(*node, input_grads);
    if (!retain_graph) {
      node->backward = nullptr;  // frees the tensors saved for backward
      node->backward_outputs = nullptr;
      node->saved.clear();
      node->released = true;
    }
    for (size_t i = 0; i < node->inputs.size() && i < input_grads.size(); ++i) {
      const Edge& e = node->inputs[i];
      const Tensor& gi = input_grads[i];
      if (!e.active() || !gi.defined()) continue;
      delivered[i] = true;
      if (e.node) {
        std::vector<Tensor>& slots = grads[e.node.get()];
        slots.resize(e.node->num_outputs);
        accumulate(slots[e.output], gi);
      } else if (!catching) {
        accumulate_into_leaf(Tensor(e.leaf), gi, *node, create_graph);
      } else if (auto at = caught_at_leaf.find(e.leaf.get()); at != caught_at_leaf.end()) {
        const Tensor leaf(e.leaf);
        LOOM_CHECK(gi.shape() == leaf.shape(),
                   "grad: op '{}' produced a gradient of shape {} for an input of shape {}",
                   node->name, shape_str(gi.shape()), shape_str(leaf.shape()));
        for (size_t k : at->second)
          accumulate(caught[k], gi.dtype() == leaf.dtype() ? gi : gi.to(leaf.dtype()));
      }
    }
    if (!catching) hooks.settle(*node, delivered);
  }
  return caught;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph) {
  run_pass({root}, {grad}, retain_graph || create_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  LOOM_CHECK(!outputs.empty(), "grad: no outputs to differentiate");
  LOOM_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
             "grad: got {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  std::vector<Tensor> seeds(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    LOOM_CHECK(y.defined(), "grad: output {} is an undefined tensor", i);
    LOOM_CHECK(y.requires_grad(),
               "grad: output {} (shape {}) does not require grad and has no grad_fn", i,
               shape_str(y.shape()));
    if (!grad_outputs.empty() && grad_outputs[i].defined()) {
      seeds[i] = grad_outputs[i];
      LOOM_CHECK(seeds[i].shape() == y.shape(),
                 "grad: grad_output {} of shape {} does not match output {} of shape {}", i,
                 shape_str(seeds[i].shape()), i, shape_str(y.shape()));
    } else {
      LOOM_CHECK(y.numel() == 1,
                 "grad: grad can be implicitly created only for one-element outputs; output {} "
                 "has shape {} (pass its grad_outputs)",
                 i, shape_str(y.shape()));
      seeds[i] = ones(y.shape(), y.dtype(), y.device());
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    LOOM_CHECK(inputs[i].defined(), "grad: input {} is an undefined tensor", i);
    LOOM_CHECK(inputs[i].requires_grad(), "grad: input {} (shape {}) does not require grad", i,
               shape_str(inputs[i].shape()));
  }
  std::vector<Tensor> grads =
      run_pass(outputs, seeds, retain_graph || create_graph, create_graph, &inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    LOOM_CHECK(grads[i].defined() || allow_unused,
               "grad: input {} (shape {}) was not used in the graph of the outputs; pass "
               "allow_unused=true to get an undefined gradient for it",
               i, shape_str(inputs[i].shape()));
  return grads;
}

Tensor unpack_output(const Tensor& saved) {
  if (g_running == nullptr || !g_grad_mode || !saved.defined()) return saved;
  Tensor output = saved.detach();
  output.impl()->set_grad_fn(*g_running);
  return output;
}

Tensor not_differentiable_twice(const char* op, const Tensor& grad,
                                const std::vector<Tensor>& inputs) {
  if (!grad.defined() || !any_requires_grad(inputs)) return grad;
  return record(op, inputs, grad.detach(),
                [name = std::string(op)](const Tensor&) -> std::vector<Tensor> {
    LOOM_FAIL("backward: '{}' cannot be differentiated twice: its backward is a kernel with no "
              "derivative of its own (a gradient of its gradient was asked for)",
              name);
  });
}

void zero_grads(const std::vector<Tensor>& params, bool set_to_none) {
  std::map<Device, std::vector<Tensor>> in_place;  // by device, for one kernel each
  for (const Tensor& p : params) {
    if (set_to_none) {
      p.set_grad(Tensor());
      continue;
    }
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::Float32 && g.is_contiguous())
      in_place[g.device()].push_back(g);
    else
      g.zero_();
  }
  for (auto& [device, grads] : in_place) {
    backend(device).zero_multi(grads);
    for (Tensor& g : grads) g.impl()->bump_version();  // in place, like Tensor::zero_
  }
}

}  // namespace loom::autograd
