#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace loom::optim {

namespace {

std::string group_key(size_t g, const char* field) {
  return fmt::format("param_groups.{}.{}", g, field);
}
std::string state_key(size_t g, size_t i, const std::string& field) {
  return fmt::format("state.{}.{}.{}", g, i, field);
}
Tensor int64_scalar(int64_t value) { return tensor_i64({value}, {}); }

// Reads entries of a state dict, remembering which were used so that leftovers (entries for
// groups or parameters this optimizer does not have) can be reported.
class StateReader {
 public:
  StateReader(const StateDict& dict, const std::string& op) : dict_(dict), op_(op) {}

  bool has(const std::string& key) const { return dict_.count(key) != 0; }

  const Tensor& get(const std::string& key) {
    auto it = dict_.find(key);
    LOOM_CHECK(it != dict_.end(), "{}: the state dict has no entry \"{}\"", op_, key);
    LOOM_CHECK(it->second.defined(), "{}: state dict entry \"{}\" is undefined", op_, key);
    used_.insert(key);
    return it->second;
  }
  float get_float(const std::string& key) {
    const Tensor& t = get(key);
    LOOM_CHECK(t.numel() == 1 && t.dtype() == DType::Float32,
               "{}: state dict entry \"{}\" should be one float32, got {} {}", op_, key,
               dtype_name(t.dtype()), shape_str(t.shape()));
    return t.item();
  }
  int64_t get_int(const std::string& key) {
    const Tensor& t = get(key);
    LOOM_CHECK(t.numel() == 1 && t.dtype() == DType::Int64,
               "{}: state dict entry \"{}\" should be one int64, got {} {}", op_, key,
               dtype_name(t.dtype()), shape_str(t.shape()));
    return t.to_vector_i64()[0];
  }
  void check_all_used() const {
    for (const auto& [key, value] : dict_)
      LOOM_CHECK(used_.count(key), "{}: unexpected state dict entry \"{}\" (shape {})", op_, key,
                 value.defined() ? shape_str(value.shape()) : "undefined");
  }

 private:
  const StateDict& dict_;
  std::string op_;
  std::set<std::string> used_;
};

// Zero is a valid learning rate (warmup schedules start there, and it freezes a group while
// its state stays), as in PyTorch.
void check_lr(const std::string& op, size_t group, float lr) {
  LOOM_CHECK(std::isfinite(lr) && lr >= 0.0f,
             "{}: learning rate {} of param group {} must be non-negative", op, lr, group);
}

// The NaN and infinite values of a float32 tensor: x * 0 is 0 for a finite x and NaN
// otherwise, and NaN is the one value unequal to itself.
int64_t count_non_finite(const Tensor& t) {
  if (t.numel() == 0) return 0;
  const Tensor zeroed = t * 0.0f;
  return static_cast<int64_t>(sum(ne(zeroed, zeroed)).item());
}

void check_weight_decay(const std::string& op, size_t group, float weight_decay) {
  LOOM_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0f,
             "{}: weight_decay {} of param group {} must be non-negative", op, weight_decay, group);
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups)
    : name_(std::move(name)), groups_(std::move(groups)) {
  // Where each parameter was first seen, to report duplicates by position.
  std::map<const TensorImpl*, std::pair<size_t, size_t>> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    check_lr(name_, g, groups_[g].lr);
    check_weight_decay(name_, g, groups_[g].weight_decay);
    const std::vector<Tensor>& params = groups_[g].params;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      LOOM_CHECK(p.defined(), "{}: parameter {} of group {} is an undefined tensor", name_, i, g);
      LOOM_CHECK(p.dtype() == DType::Float32,
                 "{}: parameter {} of group {} ({}) is {}, not float32", name_, i, g,
                 shape_str(p.shape()), dtype_name(p.dtype()));
      LOOM_CHECK(p.is_leaf(), "{}: parameter {} of group {} ({}) is not a leaf tensor", name_, i, g,
                 shape_str(p.shape()));
      auto [it, inserted] = seen.emplace(p.impl(), std::make_pair(g, i));
      LOOM_CHECK(inserted, "{}: parameter {} of group {} ({}) is also parameter {} of group {}",
                 name_, i, g, shape_str(p.shape()), it->second.second, it->second.first);
    }
    state_.emplace_back(params.size());
  }
  initial_lrs_.resize(groups_.size());
  LOOM_CHECK(!seen.empty(), "{}: got an empty parameter list", name_);
}

void Optimizer::step() {
  NoGradGuard no_grad;
  // Every gradient is checked before any parameter moves.
  std::vector<std::vector<size_t>> updated(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& param = groups_[g].params[i];
      // A frozen parameter is skipped even if it still holds a gradient from before it was
      // frozen; PyTorch's optimizers skip it because its grad stays None.
      const Tensor grad = param.grad();
      if (!param.requires_grad() || !grad.defined()) continue;
      LOOM_CHECK(grad.shape() == param.shape() && grad.device() == param.device(),
                 "{}: gradient {} on {} does not match parameter {} of group {} ({} on {})", name_,
                 shape_str(grad.shape()), device_name(grad.device()), i, g,
                 shape_str(param.shape()), device_name(param.device()));
      updated[g].push_back(i);
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (updated[g].empty()) continue;
    std::vector<Tensor> params, grads;
    std::vector<ParamState*> states;
    for (size_t i : updated[g]) {
      params.push_back(groups_[g].params[i]);
      grads.push_back(params.back().grad());
      states.push_back(&state_[g][i]);
      ++states.back()->step;
    }
    update_group(groups_[g], params, grads, states);
  }
  ++step_count_;
}

void Optimizer::update_group(const ParamGroup& group, std::span<Tensor> params,
                             std::span<const Tensor> grads, std::span<ParamState*> states) {
  for (size_t k = 0; k < params.size(); ++k) update(group, params[k], grads[k], *states[k]);
}

void Optimizer::zero_grad(bool set_to_none) {
  std::vector<Tensor> params;
  for (const ParamGroup& group : groups_)
    params.insert(params.end(), group.params.begin(), group.params.end());
  autograd::zero_grads(params, set_to_none);
}

float Optimizer::lr() const { return groups_.front().lr; }

void Optimizer::set_lr(float lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

void Optimizer::set_lr(size_t group, float lr) {
  LOOM_CHECK(group < groups_.size(), "{}: set_lr: group {} out of range (the optimizer has {})",
             name_, group, groups_.size());
  check_lr(name_ + ": set_lr", group, lr);
  groups_[group].lr = lr;
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  LOOM_CHECK(group < groups_.size(), "{}: initial_lr: group {} out of range (the optimizer has {})",
             name_, group, groups_.size());
  return initial_lrs_[group];
}

void Optimizer::set_initial_lr(size_t group, double lr) {
  LOOM_CHECK(group < groups_.size(),
             "{}: set_initial_lr: group {} out of range (the optimizer has {})", name_, group,
             groups_.size());
  LOOM_CHECK(std::isfinite(lr) && lr >= 0.0, "{}: initial lr {} of param group {} must be "
             "non-negative", name_, lr, group);
  initial_lrs_[group] = lr;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::entries() const {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("step_count", int64_scalar(step_count_));
  for (const auto& [key, value] : hyperparameters())
    out.emplace_back("hparams." + key, scalar_tensor(value));
  for (size_t g = 0; g < groups_.size(); ++g) {
    out.emplace_back(group_key(g, "lr"), scalar_tensor(groups_[g].lr));
    out.emplace_back(group_key(g, "weight_decay"), scalar_tensor(groups_[g].weight_decay));
    out.emplace_back(group_key(g, "num_params"),
                     int64_scalar(static_cast<int64_t>(groups_[g].params.size())));
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& s = state_[g][i];
      if (s.step == 0) continue;
      out.emplace_back(state_key(g, i, "step"), int64_scalar(s.step));
      for (const auto& [buffer, value] : s.buffers)
        out.emplace_back(state_key(g, i, buffer), value);
    }
  }
  return out;
}

StateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  StateDict dict;
  for (auto& [key, value] : entries()) dict.emplace(key, value.clone());
  return dict;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string op = name_ + ": load_state_dict";
  StateReader reader(dict, op);
  NoGradGuard no_grad;

  for (const auto& [key, value] : hyperparameters()) {
    const float saved = reader.get_float("hparams." + key);
    LOOM_CHECK(saved == value, "{}: {} is {} in the state dict but {} in this optimizer", op, key,
               saved, value);
  }
  const int64_t step_count = reader.get_int("step_count");
  LOOM_CHECK(step_count >= 0, "{}: step_count {} is negative", op, step_count);

  // Everything is read into copies first, so a bad dict leaves the optimizer untouched.
  std::vector<ParamGroup> groups = groups_;
  std::vector<std::vector<ParamState>> state(groups_.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].lr = reader.get_float(group_key(g, "lr"));
    check_lr(op, g, groups[g].lr);
    groups[g].weight_decay = reader.get_float(group_key(g, "weight_decay"));
    check_weight_decay(op, g, groups[g].weight_decay);
    const int64_t num_params = reader.get_int(group_key(g, "num_params"));
    const std::vector<Tensor>& params = groups[g].params;
    LOOM_CHECK(num_params == static_cast<int64_t>(params.size()),
               "{}: param group {} has {} parameters in the state dict but {} in this optimizer",
               op, g, num_params, params.size());
    state[g].resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!reader.has(state_key(g, i, "step"))) continue;  // never updated
      ParamState& s = state[g][i];
      s.step = reader.get_int(state_key(g, i, "step"));
      LOOM_CHECK(s.step >= 1, "{}: {} is {}, expected at least 1", op, state_key(g, i, "step"),
                 s.step);
      for (const std::string& buffer : buffer_names()) {
        const std::string key = state_key(g, i, buffer);
        const Tensor& saved = reader.get(key);
        LOOM_CHECK(saved.shape() == params[i].shape() && saved.dtype() == DType::Float32,
                   "{}: {} is {} {}, but parameter {} of group {} is float32 {}", op, key,
                   dtype_name(saved.dtype()), shape_str(saved.shape()), i, g,
                   shape_str(params[i].shape()));
        const int64_t non_finite = count_non_finite(saved);
        LOOM_CHECK(non_finite == 0,
                   "{}: {} holds {} NaN or infinite values of {}; the next step would make "
                   "parameter {} of group {} NaN",
                   op, key, non_finite, saved.numel(), i, g);
        // A fresh buffer on the parameter's device, never sharing storage with the dict.
        Tensor buf = Tensor::empty(params[i].shape(), DType::Float32, params[i].device());
        buf.copy_(saved);
        s.buffers.emplace(buffer, buf);
      }
    }
  }
  reader.check_all_used();

  groups_ = std::move(groups);
  state_ = std::move(state);
  step_count_ = step_count;
}

}  // namespace loom::optim
