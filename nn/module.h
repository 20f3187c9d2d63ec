// nn::Module, the base class of every layer and model, after LibTorch's C++ frontend
// (torch/csrc/api/include/torch/nn/module.h): a module owns named parameters, named buffers
// and named child modules, all kept in registration order, so that
//
//   named_parameters()  ->  {"blocks.0.attn.in_proj_weight", ...}
//
// gives the same hierarchical names as PyTorch's state_dict and checkpoints map name-for-name.
//
// Conventions:
//   * Parameters are leaf float32 tensors with requires_grad; buffers (BatchNorm's running
//     statistics, a positional-encoding table) are state that is not trained. Non-persistent
//     buffers are left out of state_dict() and checkpoints, as in PyTorch.
//   * Children are held by std::shared_ptr: `attn = register_module("attn", make_shared<...>)`.
//   * Weight tying: two modules may register the same Tensor (same TensorImpl). Tied tensors
//     are listed once by parameters()/named_parameters() (under their first name) and counted
//     once by num_parameters(), as PyTorch does.
//   * to(Device) moves every parameter and buffer *in place* (the TensorImpl keeps its identity
//     and gets new storage), so handles already held elsewhere (an optimizer's parameter list,
//     a layer's `weight` member) see the moved data.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace loom::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // A module owns shared state (its children); copying one would alias it silently.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type name shown by operator<< ("Linear", "GPT"): the C++ class name without namespaces.
  virtual std::string name() const;
  // The text inside the parentheses of this module's line, as PyTorch's extra_repr():
  // "in_features=4, out_features=3, bias=True". Empty by default.
  virtual std::string extra_repr() const { return ""; }

  // --- registration (returns the registered object, to be stored in a member) --------------
  // A float32 leaf tensor that requires grad (unless requires_grad is false). Registering an
  // undefined tensor is allowed and registers nothing (a layer built with bias=false).
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Non-trained state. persistent=false keeps it out of state_dict() and checkpoints.
  Tensor& register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  // `name` may be a dotted path, as PyTorch's state_dict spells nesting: "encoder.layer"
  // registers `layer` in the child `encoder`, which is made (a plain Module) unless it exists,
  // so a model keeps its reference's names without a member for every level of them.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> register_module(const std::string& name,
                                              std::shared_ptr<ModuleType> module) {
    add_child(name, module);
    return module;
  }
  // Replaces the child registered under `name` (a direct child, as LibTorch's replace_module);
  // throws when there is none.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> replace_module(const std::string& name,
                                             std::shared_ptr<ModuleType> module) {
    replace_child(name, module);
    return module;
  }
  // Removes the child registered under `name` (LibTorch's unregister_module); throws when
  // there is none.
  void unregister_module(const std::string& name);
  // Replaces an already registered parameter, e.g. to tie weights:
  //   lm_head->weight = lm_head->replace_parameter("weight", wte->weight);
  Tensor& replace_parameter(const std::string& name, Tensor tensor);

  // --- traversal -----------------------------------------------------------------------------
  // Registration order, depth first; tied tensors appear once, under their first name.
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // The descendant at a dotted path ("cls.predictions"), as PyTorch's get_submodule; throws
  // naming the path when there is none.
  std::shared_ptr<Module> get_submodule(const std::string& path) const;
  // Every parameter and persistent buffer under its full name, like PyTorch's state_dict():
  // a tied tensor appears under each of its names.
  NamedTensors state_dict() const;
  // Calls fn on every child module (recursively, children first) and then on this module.
  void apply(const std::function<void(Module&)>& fn);

  // --- state -----------------------------------------------------------------------------------
  // Sets training mode on this module and every descendant (Dropout, BatchNorm2d read it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter, buffer and accumulated gradient to `device`, in place.
  void to(Device device);
  // Clears the accumulated gradient of every parameter (set_to_none, the default, as in
  // LibTorch and PyTorch 2), or zeroes it in place (autograd::zero_grads).
  void zero_grad(bool set_to_none = true);
  // Number of scalar parameters; tied tensors are counted once.
  int64_t num_parameters() const;

  // --- loading a state dict ------------------------------------------------------------------
  // PyTorch's module.load_state_dict(state_dict, strict): copies the tensors of `state` (or of
  // the safetensors file at `path`) into the parameters and persistent buffers of the same
  // names. strict = true is nn::load's check: any missing or unexpected name throws one
  // loom::Error listing them all. strict = false loads the names present and returns the rest
  // ({missing, unexpected}, as PyTorch's _IncompatibleKeys). Either way a tensor of the wrong
  // shape or kind of number, or with values that are not finite, throws, and nothing is copied
  // unless everything can be. (Defined in io/checkpoint.cpp, beside nn::load: the io layer
  // reads files and owns the checks.)
  struct LoadResult {
    std::vector<std::string> missing, unexpected;
  };
  LoadResult load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);  // a state_dict()
  LoadResult load_state_dict(const std::string& path, bool strict = true);
  LoadResult load_state_dict(const char* path, bool strict = true) {
    return load_state_dict(std::string(path), strict);
  }

  // --- state a module derives instead of loading ------------------------------------------------
  // Declares that a checkpoint may hold a tensor `name` (relative to this module) which load()
  // skips instead of calling it unexpected: state the module rebuilds from its configuration,
  // e.g. Swin's relative_position_index and attn_mask, which the official checkpoints carry as
  // buffers. Such a name is never required, and every other name is still checked strictly.
  void ignore_on_load(const std::string& name);
  // Every name declared by ignore_on_load, under its full dotted name, depth first.
  std::vector<std::string> ignored_on_load() const;

  // The module tree as PyTorch prints it:
  //   Sequential(
  //     (0): Linear(in_features=4, out_features=3, bias=True)
  //     (1): ReLU()
  //   )
  std::string repr() const;

 private:
  struct NamedTensor {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  // Registers `module` at `name`, a dotted path making the levels it lacks (register_module),
  // or puts it in place of the child `name` (replace_module). Both refuse a null module here,
  // once for the templates above, whatever module type they were called with.
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void replace_child(const std::string& name, std::shared_ptr<Module> module);
  // Visits (full name, entry) for parameters or buffers, depth first.
  void visit(bool buffers, bool recurse, const std::string& prefix,
             const std::function<void(const std::string&, const NamedTensor&)>& fn) const;

  bool training_ = true;
  // deque: references returned by register_* stay valid as more entries are added.
  std::deque<NamedTensor> parameters_;
  std::deque<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::string> ignored_on_load_;  // see ignore_on_load
};

std::ostream& operator<<(std::ostream& os, const Module& module);

// Python's repr of a bool and a float ("True", "1e-05"), for extra_repr() strings.
std::string py_repr(bool value);
std::string py_repr(double value);

}  // namespace loom::nn
