// Containers of modules: Sequential (a pipeline of Tensor -> Tensor modules) and ModuleList
// (an indexable list whose members are registered as "0", "1", ..., so parameters are named
// "blocks.0.attn.in_proj_weight" as in PyTorch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace loom::nn {

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
    auto typed = std::dynamic_pointer_cast<ModuleType>((*this)[index]);
    LOOM_CHECK(typed != nullptr, "Sequential: module {} is a {}, not the requested type", index,
               (*this)[index]->name());
    return typed;
  }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};

class ModuleList : public Module {
 public:
  ModuleList() = default;

  template <typename ModuleType>
  void push_back(std::shared_ptr<ModuleType> module) {
    register_module(std::to_string(modules_.size()), module);
    modules_.push_back(std::move(module));
  }

  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  template <typename ModuleType>
  std::shared_ptr<ModuleType> at(int64_t index) const {
    auto typed = std::dynamic_pointer_cast<ModuleType>((*this)[index]);
    LOOM_CHECK(typed != nullptr, "ModuleList: module {} is a {}, not the requested type", index,
               (*this)[index]->name());
    return typed;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace loom::nn
