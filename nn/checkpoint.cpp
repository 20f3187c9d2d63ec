// save/load of module state in safetensors files, with all-or-nothing loading.
#include "nn/checkpoint.h"

#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "nn/safetensors.h"

namespace loom::nn {

namespace {

// One tensor of the module with all the names it is registered under (several when tied).
struct Slot {
  Tensor target;
  std::vector<std::string> names;
};

std::vector<Slot> slots_of(const Module& module) {
  std::vector<Slot> slots;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (const auto& [name, t] : module.state_dict()) {
    auto [it, fresh] = index.emplace(t.impl(), slots.size());
    if (fresh) slots.push_back({t, {}});
    slots[it->second].names.push_back(name);
  }
  return slots;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

void save(const Module& module, const std::string& path) {
  NamedTensors tensors;
  for (const Slot& slot : slots_of(module)) tensors.emplace_back(slot.names.front(), slot.target);
  write_safetensors(path, tensors, {{"format", "pt"}});
}

void load_state_dict(Module& module, const std::map<std::string, Tensor>& state,
                     const std::string& source) {
  std::vector<std::string> missing, unexpected, wrong_shape;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (model tensor, checkpoint tensor)
  std::set<std::string> known;
  for (const Slot& slot : slots_of(module)) {
    bool found = false;
    for (const std::string& name : slot.names) {
      known.insert(name);
      auto it = state.find(name);
      if (it == state.end()) continue;
      if (it->second.shape() != slot.target.shape()) {
        wrong_shape.push_back(fmt::format("{} (checkpoint {}, model {})", name,
                                          shape_str(it->second.shape()),
                                          shape_str(slot.target.shape())));
      } else if (!found) {
        copies.emplace_back(slot.target, it->second);
      }
      found = true;
    }
    if (!found) {
      std::string name = slot.names.front();
      if (slot.names.size() > 1)
        name += " (tied with " + join({slot.names.begin() + 1, slot.names.end()}) + ")";
      missing.push_back(name);
    }
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) unexpected.push_back(name);

  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty()) {
    std::string message =
        fmt::format("load_state_dict: {} does not match the {} module; nothing was loaded.", source,
                    module.name());
    if (!missing.empty())
      message += fmt::format("\n  missing ({}): {}", missing.size(), join(missing));
    if (!unexpected.empty())
      message += fmt::format("\n  unexpected ({}): {}", unexpected.size(), join(unexpected));
    if (!wrong_shape.empty())
      message += fmt::format("\n  wrong shape ({}): {}", wrong_shape.size(), join(wrong_shape));
    throw Error(message);
  }
  NoGradGuard guard;
  for (auto& [target, value] : copies) target.copy_(value);
}

void load(Module& module, const std::string& path) {
  // read_safetensors validates the whole file (header, offsets, sizes) before we touch the model.
  const std::map<std::string, Tensor> state = read_safetensors(path);
  load_state_dict(module, state, "checkpoint '" + path + "'");
}

}  // namespace loom::nn
