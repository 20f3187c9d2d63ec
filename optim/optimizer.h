// The optimizer base class: parameter groups, the per-parameter state, the step loop,
// zero_grad, learning-rate access, and state_dict save/load for exact resume. Subclasses
// (SGD, Adam, AdamW, RMSprop, Adagrad) supply only the update rule of one parameter.
//
//   optim::AdamW opt(model.parameters(), 3e-4f);
//   for (int64_t step = 0; step < steps; ++step) {
//     opt.set_lr(optim::warmup_cosine_lr(step, warmup, steps, 3e-4f));
//     opt.zero_grad();
//     loss_fn(model).backward();
//     optim::clip_grad_norm_(model.parameters(), 1.0f);
//     opt.step();
//   }
//   // model, optimizer and trainer state in one atomic file (io/checkpoint.h):
//   nn::save_checkpoint("ckpt.safetensors", {{"model", &model}}, &opt, {{"step", "100"}});
//   opt.save("opt.safetensors");           // or the optimizer alone
//
// Which parameters move, as in PyTorch: step() updates the parameters that require grad and
// have a gradient this step; the others (a frozen backbone, a parameter the loss did not reach)
// are skipped, and their state and step count do not advance. So an optimizer may be built over
// every parameter of a model before part of it is frozen with requires_grad_(false). A
// learning rate of 0 is allowed (a schedule may start there); negative ones are not.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "optim/param_group.h"

namespace loom::optim {

// An optimizer's complete progress as named tensors (0-d ones for scalars):
//   "step_count"                      int64   calls to step()
//   "hparams.<name>"                  float32 constructor hyper-parameters (betas, momentum...)
//   "param_groups.<g>.lr"             float32 the group's current learning rate
//   "param_groups.<g>.weight_decay"   float32
//   "param_groups.<g>.num_params"     int64
//   "state.<g>.<i>.step"              int64   updates parameter i of group g has received
//   "state.<g>.<i>.<buffer>"          float32 e.g. exp_avg, exp_avg_sq, momentum_buffer
// Parameters that never received a gradient have no "state.<g>.<i>.*" entries, like PyTorch.
using StateDict = std::map<std::string, Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;  // would share the state buffers
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that requires grad and has a gradient; the others are
  // skipped (their state and step count do not advance), as in PyTorch.
  void step();
  // set_to_none = true (the default, as in PyTorch 2.x) clears each gradient, freeing its memory,
  // so parameters unused by the next backward are skipped by step(). false zeroes the gradient
  // tensors in place (PyTorch 1.13's default): such parameters then take a step with a zero
  // gradient, which still moves them through momentum and weight decay.
  void zero_grad(bool set_to_none = true);

  float lr() const;                     // the first group's learning rate
  void set_lr(float lr);                // every group's, as a scheduler would; lr >= 0
  void set_lr(size_t group, float lr);  // one group's
  // PyTorch's param_group["initial_lr"]: the lr a group started from, set by the first
  // scheduler built over the optimizer (optim/lr_scheduler.h) and read by the later ones;
  // empty until then. Not part of state_dict() (a scheduler's state holds its base lrs).
  std::optional<double> initial_lr(size_t group) const;
  void set_initial_lr(size_t group, double lr);
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  int64_t step_count() const { return step_count_; }
  const std::string& name() const { return name_; }

  // A copy of the state (see StateDict); later steps do not change it.
  StateDict state_dict() const;
  // Restores step count, group learning rates and weight decays and every parameter's state.
  // The dict must come from an optimizer of the same kind, with the same constructor
  // hyper-parameters and the same groups of parameters of the same shapes, and its buffers
  // (exp_avg, momentum_buffer, ...) must be finite; anything else is a loom::Error naming the
  // key, raised before anything is changed.
  void load_state_dict(const StateDict& state);
  // The state dict alone as a safetensors file (metadata: format=loom.optim,
  // optimizer=<name>), written atomically. nn::save_checkpoint stores it with the model instead.
  void save(const std::string& path) const;
  void load(const std::string& path);

 protected:
  struct ParamState {
    int64_t step = 0;                       // updates this parameter has received
    std::map<std::string, Tensor> buffers;  // on the parameter's device
  };

  // Checks every group (non-negative lr and weight decay, float32 leaf parameters, no parameter
  // twice); `name` prefixes every error message. Parameters that do not require grad are
  // accepted (step() skips them while they do not).
  Optimizer(std::string name, std::vector<ParamGroup> groups);

  // Updates `param` in place from `grad` (same shape and device), with grad recording off.
  // state.step has already been incremented, so it is 1 on a parameter's first update.
  virtual void update(const ParamGroup& group, Tensor& param, const Tensor& grad,
                      ParamState& state) = 0;
  // Updates every parameter of `group` that has a gradient at once: params[k] with grads[k]
  // and *states[k] (state.step already incremented). The default calls update() on each in
  // turn; Adam overrides it to update a whole group in one multi-tensor call.
  virtual void update_group(const ParamGroup& group, std::span<Tensor> params,
                            std::span<const Tensor> grads, std::span<ParamState*> states);
  // The buffers every parameter holds after its first update (to validate a loaded state).
  virtual std::vector<std::string> buffer_names() const = 0;
  // The constructor hyper-parameters, stored in state dicts and compared on load.
  virtual std::vector<std::pair<std::string, float>> hyperparameters() const = 0;

  // Every subclass overrides these three (update_group only where it has a faster way): its
  // class declares them in one line, LOOM_OPTIMIZER_OVERRIDES; in its private section (see
  // optim/sgd.h), and defines them in its .cpp file. Private is enough: step(), state_dict()
  // and load_state_dict() call them through the base.
#define LOOM_OPTIMIZER_OVERRIDES                                                           \
  void update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) \
      override;                                                                            \
  std::vector<std::string> buffer_names() const override;                                  \
  std::vector<std::pair<std::string, float>> hyperparameters() const override

 private:
  // The state as named tensors; the buffers are the live ones (state_dict() copies them).
  std::vector<std::pair<std::string, Tensor>> entries() const;

  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // [group][index]
  std::vector<std::optional<double>> initial_lrs_;  // [group]
  int64_t step_count_ = 0;
};

}  // namespace loom::optim
