// Sequential: forward through a pipeline; bounds-checked indexing for it and ModuleList;
// ModuleDict's keyed registration.
#include "nn/container.h"

namespace loom::nn {

int64_t checked_index(int64_t index, int64_t size, const char* container) {
  const int64_t i = index < 0 ? index + size : index;
  LOOM_CHECK(i >= 0 && i < size, "{}: index {} out of range for {} modules", container, index,
             size);
  return i;
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor out = x;
  for (const auto& step : steps_) out = step(out);
  return out;
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const {
  return modules_[checked_index(index, size(), "Sequential")];
}

ModuleDict::ModuleDict(
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
  for (const auto& [key, module] : modules) insert(key, module);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  LOOM_CHECK(module != nullptr, "ModuleDict: module '{}' is null", key);
  for (auto& [k, m] : items_)
    if (k == key) {
      m = replace_module(key, std::move(module));
      return;
    }
  items_.emplace_back(key, register_module(key, std::move(module)));
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : items_)
    if (k == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_)
    if (k == key) return m;
  std::string known;
  for (const auto& [k, m] : items_) known += (known.empty() ? "'" : ", '") + k + "'";
  LOOM_FAIL("ModuleDict: no module under key '{}' (keys: {})", key,
            known.empty() ? "none" : known);
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& key) {
  std::shared_ptr<Module> module = (*this)[key];
  unregister_module(key);
  std::erase_if(items_, [&](const auto& item) { return item.first == key; });
  return module;
}

void ModuleDict::clear() {
  for (const auto& [key, module] : items_) unregister_module(key);
  items_.clear();
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, module] : items_) out.push_back(key);
  return out;
}

std::vector<std::shared_ptr<Module>> ModuleDict::values() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [key, module] : items_) out.push_back(module);
  return out;
}

}  // namespace loom::nn
