// Containers of modules: Sequential (a pipeline of Tensor -> Tensor modules), ModuleList
// (an indexable list whose members are registered as "0", "1", ..., so parameters are named
// "blocks.0.attn.in_proj_weight" as in PyTorch) and ModuleDict (modules under string keys).
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace loom::nn {

// `module` (the one at `index` of `container`) as its concrete type; throws if it is not a
// ModuleType. What Sequential::at and ModuleList::at return.
template <typename ModuleType>
std::shared_ptr<ModuleType> module_as(const std::shared_ptr<Module>& module,
                                      const char* container, int64_t index) {
  auto typed = std::dynamic_pointer_cast<ModuleType>(module);
  LOOM_CHECK(typed != nullptr, "{}: module {} is a {}, not the requested type", container, index,
             module->name());
  return typed;
}

// index, or index + size when negative (Python's list indexing); throws naming the container
// unless the result lies in [0, size).
int64_t checked_index(int64_t index, int64_t size, const char* container);

// A module that maps one Tensor to one Tensor: what a Sequential can chain.
template <typename ModuleType>
concept TensorToTensor = requires(ModuleType& module, const Tensor& x) {
  { module.forward(x) } -> std::convertible_to<Tensor>;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  // Sequential(std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), ...)
  template <typename... Modules>
  explicit Sequential(std::shared_ptr<Modules>... modules) {
    (push_back(std::move(modules)), ...);
  }

  // Appends a module with a `Tensor forward(const Tensor&)`, named by its position.
  template <typename ModuleType>
  void push_back(std::shared_ptr<ModuleType> module) {
    push_back(std::to_string(steps_.size()), std::move(module));
  }
  template <typename ModuleType>
  void push_back(const std::string& name, std::shared_ptr<ModuleType> module) {
    // A layer with another forward (an LSTM's tuple, attention's three inputs) cannot be a
    // step of the pipeline: call it from a Module of your own instead.
    static_assert(TensorToTensor<ModuleType>,
                  "Sequential holds modules whose forward takes one Tensor and returns a Tensor");
    register_module(name, module);
    modules_.push_back(module);
    steps_.push_back([module](const Tensor& x) { return module->forward(x); });
  }

  // Feeds x through every module in order.
  Tensor forward(const Tensor& x) const;

  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  // The module at `index` as its concrete type; throws if it is not a ModuleType.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> at(int64_t index) const {
    return module_as<ModuleType>((*this)[index], "Sequential", index);
  }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};

// A list of modules of type T (PyTorch's nn.ModuleList, typed): iterating and indexing give
// std::shared_ptr<T>, so a model keeps its blocks in one place, e.g.
//   h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
//   for (const auto& block : *h) x = block->forward(x);
// ModuleList<> (= ModuleList<Module>) holds modules of any type (at<T>(i) casts one back).
template <typename T = Module>
class ModuleList : public Module {
 public:
  ModuleList() = default;
  std::string name() const override { return "ModuleList"; }

  template <typename ModuleType>
    requires std::derived_from<ModuleType, T>
  void push_back(std::shared_ptr<ModuleType> module) {
    register_module(std::to_string(modules_.size()), module);
    modules_.push_back(std::move(module));
  }

  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  bool empty() const { return modules_.empty(); }
  // Python's indexing: -1 is the last module.
  const std::shared_ptr<T>& operator[](int64_t index) const {
    return modules_[static_cast<size_t>(checked_index(index, size(), "ModuleList"))];
  }
  const std::shared_ptr<T>& front() const { return (*this)[0]; }
  const std::shared_ptr<T>& back() const { return (*this)[-1]; }
  // The module at `index` as its concrete type; throws if it is not a ModuleType.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> at(int64_t index) const {
    return module_as<ModuleType>((*this)[index], "ModuleList", index);
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<T>> modules_;
};

// Modules of any type under string keys, in insertion order (PyTorch's nn.ModuleDict): each is
// registered under its key, so parameters are named "<key>.weight", e.g.
//   heads = register_module("heads", std::make_shared<nn::ModuleDict>());
//   heads->insert("class", std::make_shared<nn::Linear>(d, classes));
//   Tensor logits = heads->at<nn::Linear>("class")->forward(x);
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(
      const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);
  std::string name() const override { return "ModuleDict"; }

  // Adds `module` under `key`, or replaces the module already there (PyTorch's
  // self[key] = module); the key follows the rules of register_module (no '.').
  void insert(const std::string& key, std::shared_ptr<Module> module);
  bool contains(const std::string& key) const;
  // The module under `key`; throws naming the key and the keys there are when it is absent.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  // The same as its concrete type; throws if it is not a ModuleType.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> at(const std::string& key) const {
    auto typed = std::dynamic_pointer_cast<ModuleType>((*this)[key]);
    LOOM_CHECK(typed != nullptr, "ModuleDict: module '{}' is a {}, not the requested type", key,
               (*this)[key]->name());
    return typed;
  }
  // Removes the module under `key` and returns it (throws when absent).
  std::shared_ptr<Module> pop(const std::string& key);
  void clear();

  int64_t size() const { return static_cast<int64_t>(items_.size()); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const;
  // (key, module) in insertion order; also what iterating gives.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items() const {
    return items_;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items_;
};

}  // namespace loom::nn
