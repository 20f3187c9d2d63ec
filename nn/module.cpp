// nn::Module: registration, traversal, train/eval, device moves and printing.
#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <set>
#include <sstream>
#include <typeinfo>

#include "autograd/node.h"

namespace loom::nn {

// ---------------------------------------------------------------------------- names
std::string Module::name() const {
  // The demangled dynamic type, e.g. "loom::nn::Linear" -> "Linear".
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  const size_t template_start = full.find('<');
  const size_t last_scope = full.rfind("::", template_start);
  return last_scope == std::string::npos ? full : full.substr(last_scope + 2);
}

std::string py_repr(bool value) { return value ? "True" : "False"; }

std::string py_repr(double value) {
  // Shortest round-trip digits of the float32 value, then Python's "1.0" for whole numbers.
  std::string s = fmt::format("{}", static_cast<float>(value));
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

// ---------------------------------------------------------------------------- registration
void Module::check_new_name(const std::string& name, const char* what) const {
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos,
             "{}: invalid name '{}' in {} (names are non-empty and contain no '.')", what, name,
             this->name());
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.name == name) return true;
    return false;
  };
  bool child = false;
  for (const auto& [n, m] : children_) child = child || n == name;
  LOOM_CHECK(!taken(parameters_) && !taken(buffers_) && !child,
             "{}: '{}' is already registered in {}", what, name, this->name());
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (tensor.defined()) {
    LOOM_CHECK(tensor.dtype() == DType::Float32,
               "register_parameter: parameter '{}' of {} must be float32, got {}", name,
               this->name(), dtype_name(tensor.dtype()));
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.requires_grad_(requires_grad);
  }
  parameters_.push_back({name, std::move(tensor), true});
  return parameters_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "register_buffer");
  if (tensor.defined() && !tensor.is_leaf()) tensor = tensor.detach();
  buffers_.push_back({name, std::move(tensor), persistent});
  return buffers_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  LOOM_CHECK(module != nullptr, "register_module: module '{}' of {} is null", name, this->name());
  const size_t dot = name.find('.');
  if (dot == std::string::npos) {
    check_new_name(name, "register_module");
    children_.emplace_back(name, std::move(module));
    return;
  }
  // "first.rest": rest goes into the child `first`, made as a plain Module if missing.
  LOOM_CHECK(name.front() != '.' && name.back() != '.' && name.find("..") == std::string::npos,
             "register_module: invalid name '{}' in {} (an empty part between dots)", name,
             this->name());
  const std::string first = name.substr(0, dot);
  std::shared_ptr<Module> child;
  for (const auto& [n, c] : children_)
    if (n == first) child = c;
  if (child == nullptr) {
    check_new_name(first, "register_module");
    child = std::make_shared<Module>();
    child->training_ = training_;
    children_.emplace_back(first, child);
  }
  child->add_child(name.substr(dot + 1), std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  LOOM_CHECK(module != nullptr, "replace_module: module '{}' of {} is null", name, this->name());
  for (auto& [n, child] : children_)
    if (n == name) {
      child = std::move(module);
      return;
    }
  LOOM_FAIL("replace_module: {} has no submodule '{}'", this->name(), name);
}

void Module::unregister_module(const std::string& name) {
  const auto it = std::find_if(children_.begin(), children_.end(),
                               [&](const auto& entry) { return entry.first == name; });
  LOOM_CHECK(it != children_.end(), "unregister_module: {} has no submodule '{}'", this->name(),
             name);
  children_.erase(it);
}

Tensor& Module::replace_parameter(const std::string& name, Tensor tensor) {
  for (auto& entry : parameters_) {
    if (entry.name != name) continue;
    LOOM_CHECK(
        !entry.tensor.defined() || !tensor.defined() || entry.tensor.shape() == tensor.shape(),
        "replace_parameter: '{}' of {} has shape {}, the replacement has shape {}", name,
        this->name(), shape_str(entry.tensor.shape()), shape_str(tensor.shape()));
    entry.tensor = std::move(tensor);
    return entry.tensor;
  }
  LOOM_FAIL("replace_parameter: {} has no parameter '{}'", this->name(), name);
}

// ---------------------------------------------------------------------------- traversal
void Module::visit(bool buffers, bool recurse, const std::string& prefix,
                   const std::function<void(const std::string&, const NamedTensor&)>& fn) const {
  for (const NamedTensor& entry : buffers ? buffers_ : parameters_)
    if (entry.tensor.defined()) fn(prefix + entry.name, entry);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->visit(buffers, true, prefix + name + ".", fn);
}

// Named tensors with each TensorImpl listed once (the first name wins).
static NamedTensors unique_by_impl(const NamedTensors& all) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : all)
    if (seen.insert(t.impl()).second) out.emplace_back(name, t);
  return out;
}

static std::vector<Tensor> values(const NamedTensors& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all;
  visit(false, recurse, "",
        [&](const std::string& n, const NamedTensor& e) { all.emplace_back(n, e.tensor); });
  return unique_by_impl(all);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return values(named_parameters(recurse));
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors all;
  visit(true, recurse, "",
        [&](const std::string& n, const NamedTensor& e) { all.emplace_back(n, e.tensor); });
  return unique_by_impl(all);
}

std::vector<Tensor> Module::buffers(bool recurse) const { return values(named_buffers(recurse)); }

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::shared_ptr<Module> Module::get_submodule(const std::string& path) const {
  const Module* parent = this;
  std::shared_ptr<Module> found;
  for (size_t start = 0; parent != nullptr && start <= path.size();) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    found = nullptr;
    for (const auto& [name, child] : parent->children_)
      if (name == part) found = child;
    parent = found.get();
    start = dot + 1;
  }
  LOOM_CHECK(found != nullptr, "get_submodule: {} has no submodule '{}'", this->name(), path);
  return found;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  visit(false, true, "",
        [&](const std::string& n, const NamedTensor& e) { out.emplace_back(n, e.tensor); });
  visit(true, true, "", [&](const std::string& n, const NamedTensor& e) {
    if (e.persistent) out.emplace_back(n, e.tensor);
  });
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

// ---------------------------------------------------------------------------- state
void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

// Gives `t` the storage of a copy on `device`, keeping its TensorImpl (and so every handle).
static void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  const Tensor moved = t.detach().to(device);
  t.impl()->set_data(*moved.impl());
  if (t.grad().defined()) t.set_grad(t.grad().detach().to(device));
}

void Module::to(Device device) {
  NoGradGuard guard;
  for (const Tensor& t : parameters()) move_in_place(t, device);
  for (const Tensor& t : buffers()) move_in_place(t, device);
}

void Module::zero_grad(bool set_to_none) { autograd::zero_grads(parameters(), set_to_none); }

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::ignore_on_load(const std::string& name) {
  LOOM_CHECK(!name.empty(), "ignore_on_load: empty name in {}", this->name());
  ignored_on_load_.push_back(name);
}

std::vector<std::string> Module::ignored_on_load() const {
  std::vector<std::string> out = ignored_on_load_;
  for (const auto& [prefix, child] : children_)
    for (const std::string& name : child->ignored_on_load()) out.push_back(prefix + "." + name);
  return out;
}

// ---------------------------------------------------------------------------- printing
// Indents every line but the first by two spaces (PyTorch's _addindent).
static std::string add_indent(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

std::string Module::repr() const {
  // Mirrors torch.nn.Module.__repr__: extra_repr lines, then one "(name): child" per child.
  std::vector<std::string> lines;
  std::istringstream extra(extra_repr());
  for (std::string line; std::getline(extra, line);) lines.push_back(line);
  const size_t extra_lines = lines.size();
  for (const auto& [child_name, child] : children_)
    lines.push_back("(" + child_name + "): " + add_indent(child->repr()));
  std::string out = name() + "(";
  if (extra_lines == 1 && children_.empty()) {
    out += lines[0];
  } else if (!lines.empty()) {
    for (const std::string& line : lines) out += "\n  " + line;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.repr(); }

}  // namespace loom::nn
