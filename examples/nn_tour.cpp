// A tour of the modules, optimizers, schedulers and data loading, written as a PyTorch user
// writes them: every layer of torch.nn a small model reaches for, the losses and functional
// ops, the optimizers and learning-rate schedulers of torch.optim, and datasets, transforms and
// the DataLoader. Each line is the LibTorch spelling of a line of bench/reference/nn_tour.py.
//
//   build/examples/nn_tour                                  prints every result
//   build/examples/nn_tour --check tests/golden/nn_tour.txt compares them with PyTorch's
//
// Both sides set every parameter to the same deterministic values (by parameter name, in
// sorted order: the names must be PyTorch's for the values to line up), so outputs and
// gradients can be compared number for number. Random draws (dropout, shuffling, crops) differ
// between the frameworks: for them the tour shows what must hold.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "examples/tour.h"
#include "loom.h"

using namespace loom;
namespace F = nn::functional;
namespace T = data::transforms;

namespace {

// Deterministic inputs and parameter values, the same in both frameworks.
Tensor wave(const Shape& shape, float phase = 0.0f) {
  return (arange_f(0, static_cast<float>(shape_numel(shape))) * 0.7f + phase).sin().reshape(shape);
}

// Every parameter of `model`, by name in sorted order, set to 0.3 * wave(shape, k + 1).
void set_parameters(nn::Module& model) {
  auto named = model.named_parameters();
  std::sort(named.begin(), named.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  NoGradGuard no_grad;
  for (size_t k = 0; k < named.size(); ++k)
    named[k].second.copy_(wave(named[k].second.shape(), static_cast<float>(k + 1)) * 0.3f);
}

// The layers of torch.nn a small model reaches for, in one module so that their parameter
// names (and PyTorch's) are checked all at once.
class Zoo : public nn::Module {
 public:
  Zoo() {
    // a 3x2 kernel, stride (1, 2), padding (1, 0)
    conv = register_module("conv", std::make_shared<nn::Conv2d>(
                                       3, 4, nn::ExpandingArray<2>{3, 2},
                                       nn::ExpandingArray<2>{1, 2}, nn::ExpandingArray<2>{1, 0}));
    conv_grouped = register_module("conv_grouped",
                                   std::make_shared<nn::Conv2d>(4, 4, 3, 1, 2, 2, /*groups=*/2));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(4));
    gn = register_module("gn", std::make_shared<nn::GroupNorm>(2, 4));
    up = register_module("up", std::make_shared<nn::ConvTranspose2d>(4, 2, 3, 2, 1, 1));
    conv1d = register_module("conv1d", std::make_shared<nn::Conv1d>(3, 5, 3, 2, 1));
    bn1d = register_module("bn1d", std::make_shared<nn::BatchNorm1d>(5));
    rms = register_module("rms", std::make_shared<nn::RMSNorm>(6));
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(6, 5, 2, true, true, 0.0f, true));
    gru = register_module("gru", std::make_shared<nn::GRU>(6, 5));
    heads = register_module("heads", std::make_shared<nn::ModuleDict>());
    heads->insert("a", std::make_shared<nn::Linear>(6, 3));
    heads->insert("b", std::make_shared<nn::Linear>(6, 3, /*bias=*/false));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList<nn::Linear>>());
    for (int i = 0; i < 2; ++i) blocks->push_back(std::make_shared<nn::Linear>(6, 6));
    mlp = register_module(
        "mlp", std::make_shared<nn::Sequential>(
                   std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::SiLU>(),
                   std::make_shared<nn::Identity>(), std::make_shared<nn::Linear>(8, 2)));
  }

  std::shared_ptr<nn::Conv2d> conv, conv_grouped;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::GroupNorm> gn;
  std::shared_ptr<nn::ConvTranspose2d> up;
  std::shared_ptr<nn::Conv1d> conv1d;
  std::shared_ptr<nn::BatchNorm1d> bn1d;
  std::shared_ptr<nn::RMSNorm> rms;
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::GRU> gru;
  std::shared_ptr<nn::ModuleDict> heads;
  std::shared_ptr<nn::ModuleList<nn::Linear>> blocks;
  std::shared_ptr<nn::Sequential> mlp;
};

}  // namespace

int main(int argc, char** argv) {
  tour::Tour tour = tour::from_command_line(
      argc, argv, "nn_tour",
      "modules, optimizers, schedulers and data as a PyTorch user writes them");
  auto show = [&](const std::string& name, const auto& value) { tour.show(name, value); };

  // --- modules ------------------------------------------------------------------------------
  Zoo zoo;
  set_parameters(zoo);
  Tensor image = wave({2, 3, 8, 8}).requires_grad_();
  Tensor a = zoo.conv->forward(image);                              // [2, 4, 8, 4]
  Tensor b = zoo.gn->forward(zoo.bn->forward(zoo.conv_grouped->forward(a)));
  show("conv_bn_gn", b);
  show("pools", nn::MaxPool2d(2).forward(b).sum() + nn::AvgPool2d(3, 2, 1).forward(b).sum() +
                    nn::AdaptiveAvgPool2d({3, 2}).forward(b).sum());
  Tensor c = zoo.up->forward(b);                                    // [2, 2, 16, 8]
  show("conv_transpose", c);
  show("flatten", nn::Unflatten(1, {4, 64}).forward(nn::Flatten().forward(c)).sum(1));
  Tensor seq = wave({2, 3, 10}, 0.5f).requires_grad_();
  Tensor d = nn::AdaptiveAvgPool1d(4).forward(zoo.bn1d->forward(zoo.conv1d->forward(seq)));
  show("conv1d_bn1d", d);
  Tensor x = wave({2, 4, 6}, 1.0f).requires_grad_();
  show("activations", nn::ReLU().forward(x) + nn::GELU().forward(x) + nn::SiLU().forward(x) +
                          nn::Sigmoid().forward(x) + nn::Tanh().forward(x) +
                          nn::Softmax(-1).forward(x) + nn::LeakyReLU(0.2f).forward(x));
  Tensor r = zoo.rms->forward(x);
  show("rms_norm", r);
  auto [out, state] = zoo.lstm->forward(x);
  show("lstm", out);
  show("lstm_state", std::get<0>(state) + std::get<1>(state));
  auto [gru_out, h] = zoo.gru->forward(x, wave({1, 2, 5}, 2.0f));
  show("gru", gru_out.sum(1) + h.squeeze(0));
  Tensor e =
      zoo.heads->at<nn::Linear>("a")->forward(x) * zoo.heads->at<nn::Linear>("b")->forward(x);
  for (const auto& block : *zoo.blocks) x = x + block->forward(x).tanh();
  show("dict_list_sequential", e.sum(-1, true) + zoo.mlp->forward(x));
  Tensor total = b.square().sum() + c.sum() + d.square().sum() + out.square().sum() +
                 h.sum() + e.sum() + zoo.mlp->forward(x).sum() + r.square().sum();
  total.backward();
  show("grad_image", image.grad());
  show("grad_seq", seq.grad());
  auto named = zoo.named_parameters();
  std::sort(named.begin(), named.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });
  for (const auto& [name, p] : named) show("grad." + name, p.grad().abs().sum());
  show("running_mean", zoo.bn->running_mean + zoo.bn1d->running_var.sum());

  // load_state_dict without strict: the names missing and unexpected, the rest loaded.
  std::map<std::string, Tensor> state_dict;
  for (const auto& [name, t] : zoo.state_dict()) state_dict[name] = t;
  state_dict.erase("rms.weight");
  state_dict["extra.weight"] = zeros({1});
  const auto [missing, unexpected] = Zoo().load_state_dict(state_dict, /*strict=*/false);
  show("load_state_dict", static_cast<double>(missing.size() * 10 + unexpected.size()));

  // --- functional ops and losses ------------------------------------------------------------
  Tensor img = wave({1, 2, 3, 4}, 0.3f);
  show("pad", F::pad(img, {1, 2, 1, 1}, "reflect").sum(-1).sum(-1, true) +
                  F::pad(img, {1, 1, 2, 0}, "replicate").sum(-2).sum(-1, true) +
                  F::pad(img, {2, 1, 1, 0}, "circular").sum(-1).sum(-1, true) +
                  F::pad(img, {1, 0}, "constant", 0.5f).sum(-1));
  show("interpolate", F::interpolate(img, {5, 7}, "bilinear").sum(1) +
                          F::interpolate(img, {5, 7}, "bilinear", true).sum(1) +
                          F::interpolate(img, {5, 7}, "nearest").sum(1));
  Tensor logits = wave({4, 3}, 0.1f) * 2, probs = wave({4, 3}, 0.9f).abs();
  Tensor labels = tensor_i64({2, 0, 1, 2}, {4});
  show("losses", F::binary_cross_entropy_with_logits(logits, probs / 1.5f) +
                     F::nll_loss(log_softmax(logits, 1), labels) +
                     F::smooth_l1_loss(logits, probs, F::Reduction::Mean, 0.5f) +
                     F::kl_div(log_softmax(logits, 1), softmax(probs, 1),
                               F::Reduction::BatchMean));
  show("similarity", F::cosine_similarity(logits, probs, 1) + F::normalize(logits, 2, 1).sum(1));

  // --- optimizers: three steps on sum(c * (w - 1)^2) ---------------------------------------
  auto run_optimizer = [&](const std::string& name, auto make) {
    Tensor w = wave({3, 4}, 0.2f).requires_grad_();
    Tensor frozen = ones({2}).requires_grad_(false);   // skipped, as PyTorch skips it
    auto opt = make(std::vector<Tensor>{w, frozen});
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      (wave({3, 4}, 0.4f).abs() * (w - 1).square()).sum().backward();
      opt.step();
    }
    show("optim." + name, w);
  };
  run_optimizer("sgd", [](auto p) { return optim::SGD(p, 0.1f, 0.9f, 0.1f, 0.01f, false); });
  run_optimizer("sgd_nesterov",
                [](auto p) { return optim::SGD(p, 0.1f, 0.9f, 0.0f, 0.01f, true); });
  run_optimizer("rmsprop",
                [](auto p) { return optim::RMSprop(p, 0.01f, 0.9f, 1e-8f, 0.01f, 0.5f); });
  run_optimizer("adagrad", [](auto p) { return optim::Adagrad(p, 0.1f, 0.01f, 0.01f); });
  run_optimizer("adamw", [](auto p) { return optim::AdamW(p, 0.1f); });
  Tensor g = wave({5}).requires_grad_();
  (g * wave({5}, 1.0f) * 3).sum().backward();
  optim::clip_grad_value_({g}, 1.0f);
  show("clip_grad_value", g.grad());

  // --- schedulers: the learning rate at each of 12 steps -----------------------------------
  auto lrs = [&](const std::string& name, auto make) {
    Tensor w = zeros({1}).requires_grad_();
    optim::SGD opt({w}, 0.1f, 0.9f);
    auto sched = make(opt);
    std::vector<float> seen;
    for (int step = 0; step < 12; ++step) {
      seen.push_back(static_cast<float>(sched.get_last_lr()[0]));
      if (step == 11) break;
      opt.step();
      if constexpr (std::is_same_v<decltype(sched), optim::ReduceLROnPlateau>)
        sched.step(step < 3 ? 1.0 / (step + 1) : 0.5);   // stops improving after step 2
      else
        sched.step();
    }
    show("sched." + name, tensor(seen, {12}));
  };
  lrs("step", [](auto& o) { return optim::StepLR(o, 3, 0.5); });
  lrs("multistep", [](auto& o) { return optim::MultiStepLR(o, {2, 5, 9}, 0.3); });
  lrs("cosine", [](auto& o) { return optim::CosineAnnealingLR(o, 10, 0.01); });
  lrs("lambda",
      [](auto& o) { return optim::LambdaLR(o, [](int64_t s) { return 1.0 / (1 + s); }); });
  lrs("onecycle", [](auto& o) { return optim::OneCycleLR(o, 0.5, 12); });
  lrs("plateau", [](auto& o) { return optim::ReduceLROnPlateau(o, "min", 0.5, 2); });

  // --- data -----------------------------------------------------------------------------------
  auto dataset = std::make_shared<data::TensorDataset>(
      std::vector<Tensor>{wave({10, 3}), arange(10)}, std::vector<std::string>{"x", "y"});
  std::vector<float> batch_sums;
  data::DataLoader ordered(dataset, {.batch_size = 4});
  for (const data::Batch& batch : ordered)  // named or numbered fields
    batch_sums.push_back(batch["x"].sum().item<float>() + batch[1].sum().item<int64_t>());
  show("loader", tensor(batch_sums, {static_cast<int64_t>(batch_sums.size())}));
  data::DataLoader shuffled(dataset, {.batch_size = 3, .shuffle = true, .drop_last = true,
                                      .num_workers = 2, .seed = 7});
  std::vector<int64_t> seen;
  for (const data::Batch& batch : shuffled)
    for (int64_t id : batch["y"].to_vector_i64()) seen.push_back(id);
  show("shuffled_batches", static_cast<double>(shuffled.size() * 100 + seen.size()));
  // A custom collate (PyTorch's collate_fn): the x rows of the batch summed into one row.
  data::DataLoader summed(dataset, {.batch_size = 5, .collate = [](const auto& examples) {
                                      Tensor row = zeros({3});
                                      for (const data::Example& e : examples) row = row + e[0];
                                      return data::Batch{row};
                                    }});
  std::vector<Tensor> rows;
  for (const data::Batch& batch : summed) rows.push_back(batch[0]);
  show("collate", stack(rows, 0));
  auto parts = data::random_split(dataset, {7, 3}, 0);
  show("random_split", static_cast<double>(parts[0]->size() * 10 + parts[1]->size()));
  Tensor pixels = (wave({3, 6, 6}).abs() * 255).to(DType::Int64);
  T::Compose pipeline(
      {T::ToFloat(), T::Resize(4), T::Normalize({0.5f, 0.4f, 0.3f}, {0.2f, 0.3f, 0.4f})});
  show("transforms", pipeline(pixels));
  Tensor augmented = T::Compose({T::RandomCrop(6, 2), T::RandomHorizontalFlip(0.5)})(
      pixels.to(DType::Float32));
  show("augment_shape", static_cast<double>(augmented.numel()));
  return tour.finish();
}
