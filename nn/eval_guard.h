// EvalGuard: a scope in which a model is evaluated, as PyTorch's `model.eval()` under
// `torch.no_grad()`: no graph is recorded, and dropout, drop-path and batch statistics are off.
// At the end of the scope the model is back in the mode it was in (training, in a training
// loop), whichever way the scope is left:
//
//   double validation_loss(models::GPT& model, const Tensor& windows) {
//     nn::EvalGuard eval(model);
//     ... forward passes ...
//   }
//
// It lives in nn/, beside Module, so that the models' own decoding loops use it too; in a
// trainer, TrainingRun::eval_due (train/training_run.h) says when an evaluation is due (rank 0,
// every --eval-every steps) and TrainingRun::untimed keeps its time out of the throughput and
// the --minutes plan.
#pragma once

#include "autograd/node.h"
#include "nn/module.h"

namespace loom::nn {

// A model already in evaluation mode throughout is left as it is: threads that decode with one
// model at once, each under its own guard (a program's `#pragma omp parallel for` over its
// inputs), then write nothing they share.
class EvalGuard {
 public:
  explicit EvalGuard(Module& module)
      : module_(module), was_training_(module.is_training()), switched_(any_training(module)) {
    if (switched_) module_.eval();
  }
  ~EvalGuard() {
    if (switched_) module_.train(was_training_);
  }
  EvalGuard(const EvalGuard&) = delete;
  EvalGuard& operator=(const EvalGuard&) = delete;

 private:
  // Whether `module` or any module under it is in training mode.
  static bool any_training(Module& module) {
    bool any = false;
    module.apply([&any](Module& m) { any = any || m.is_training(); });
    return any;
  }

  NoGradGuard no_grad_;
  Module& module_;
  bool was_training_, switched_;
};

}  // namespace loom::nn
