// The modules and functional ops a PyTorch user reaches for (activations, Flatten/Unflatten,
// Conv1d, Conv2d with rectangular sizes, dilation and groups, ConvTranspose2d, the pooling
// layers, BatchNorm1d, GroupNorm, RMSNorm, Sequential, pad, interpolate and the losses of
// tests/golden/gen_modules.py) against PyTorch, values and every gradient, with the modules'
// weights loaded from PyTorch's state_dict; then gradient checks and invariants.
#include <numeric>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

// Runs golden case `prefix` through `module` (its state loaded from PyTorch's state_dict).
template <typename ModuleType>
void check_module_case(const std::string& prefix, ModuleType& module, float rtol = 1e-4f,
                       float atol = 1e-5f) {
  load_case_state(module, prefix);
  auto in = case_inputs(prefix);
  check_case(prefix, module.forward(in[0]), in, &module, rtol, atol);
}

// Runs golden case `prefix` through a function of its inputs.
void check_function_case(const std::string& prefix,
                         const std::function<Tensor(const std::vector<Tensor>&)>& f,
                         float rtol = 1e-4f, float atol = 1e-5f) {
  auto in = case_inputs(prefix);
  check_case(prefix, f(in), in, nullptr, rtol, atol);
}

}  // namespace

TEST_CASE("activation and reshape modules match PyTorch") {
  nn::SiLU silu;
  nn::Sigmoid sigmoid;
  nn::Tanh tanh_layer;
  nn::Softmax softmax_layer(1);
  nn::LeakyReLU leaky(0.2f);
  nn::Flatten flatten;
  nn::Flatten flatten_mid(1, 2);
  nn::Unflatten unflatten(1, {3, 4});
  check_module_case("act_silu", silu);
  check_module_case("act_sigmoid", sigmoid);
  check_module_case("act_tanh", tanh_layer);
  check_module_case("act_softmax", softmax_layer);
  check_module_case("act_leaky_relu", leaky);
  check_module_case("flatten", flatten);
  check_module_case("flatten_mid", flatten_mid);
  check_module_case("unflatten", unflatten);
  CHECK(nn::Identity().forward(fixture("flatten.in0")).impl() ==
        fixture("flatten.in0").impl());
}

TEST_CASE("Conv1d and Conv2d with stride, padding, dilation and groups match PyTorch") {
  nn::Conv1d conv1(4, 6, 3, 2, 1, 2, 2);
  check_module_case("conv1d", conv1);
  nn::Conv2d conv(4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2);
  check_module_case("conv2d_rect", conv);
  nn::Conv2d depthwise(3, 6, 3, 1, 1, 1, 3, false);
  check_module_case("conv2d_depthwise", depthwise);
}

TEST_CASE("ConvTranspose2d matches PyTorch: stride, output_padding, groups, dilation") {
  nn::ConvTranspose2d up(4, 6, 3, 2, 1, 1, 2);
  check_module_case("conv_transpose2d", up);  // [2,4,4,5] -> [2,6,8,10]
  nn::ConvTranspose2d dilated(3, 2, {2, 3}, {1, 2}, {0, 1}, 0, 1, false, 2);
  check_module_case("conv_transpose2d_dilated", dilated);
}

TEST_CASE("pooling layers match PyTorch, including adaptive sizes that do not divide") {
  nn::MaxPool2d max_rect({3, 2}, {2, 1}, {1, 0});
  nn::AvgPool2d avg(3, 2, 1);
  nn::AvgPool2d avg_rect({2, 3});
  nn::AdaptiveAvgPool2d adaptive({3, 4});  // 7x10 -> 3x4: overlapping windows
  nn::AdaptiveAvgPool1d adaptive1(4);       // 10 -> 4
  check_module_case("max_pool_rect", max_rect);
  check_module_case("avg_pool", avg);
  check_module_case("avg_pool_rect", avg_rect);
  check_module_case("adaptive_avg_pool2d", adaptive);
  check_module_case("adaptive_avg_pool1d", adaptive1);
}

TEST_CASE("BatchNorm1d on [N, C] and [N, C, L] matches PyTorch, running statistics included") {
  for (const std::string prefix : {"batch_norm1d_2d", "batch_norm1d_3d"}) {
    nn::BatchNorm1d bn(4);
    check_module_case(prefix, bn);
    const auto after = fixture_group(prefix, "state_after");
    check_close(bn.running_mean, after.at("running_mean"), 1e-5f, 1e-6f, prefix + " mean");
    check_close(bn.running_var, after.at("running_var"), 1e-5f, 1e-6f, prefix + " var");
    CHECK(bn.num_batches_tracked.to_vector_i64() ==
          after.at("num_batches_tracked").to_vector_i64());
  }
  nn::BatchNorm1d bn(4);
  bn.eval();
  check_module_case("batch_norm1d_eval", bn);
}

TEST_CASE("GroupNorm and RMSNorm match PyTorch") {
  nn::GroupNorm gn(2, 6);
  check_module_case("group_norm", gn);
  nn::GroupNorm gn3(3, 3, 1e-3f, false);
  check_module_case("group_norm_3d", gn3);
  nn::RMSNorm rms(5);
  check_module_case("rms_norm", rms);
}

TEST_CASE("a Sequential of the new modules matches PyTorch's, parameter names included") {
  nn::Sequential net(
      std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1), std::make_shared<nn::GroupNorm>(2, 4),
      std::make_shared<nn::SiLU>(), std::make_shared<nn::AvgPool2d>(2),
      std::make_shared<nn::Conv2d>(4, 4, nn::ExpandingArray<2>{1, 3}, 1,
                                   nn::ExpandingArray<2>{0, 1}, 1, 2),
      std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::AdaptiveAvgPool2d>(nn::ExpandingArray<2>{2, 1}),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8, 6),
      std::make_shared<nn::LeakyReLU>(0.1f), std::make_shared<nn::Unflatten>(1, Shape{2, 3}),
      std::make_shared<nn::Softmax>(-1), std::make_shared<nn::Identity>());
  // load_case_state is strict: loom's names are exactly PyTorch's ("0.weight", "5.running_var").
  check_module_case("sequential", net);
}

TEST_CASE("pad matches PyTorch in its four modes, cropping included") {
  check_function_case("pad_constant", [](auto& t) { return F::pad(t[0], {1, 2, 2, 1}, "constant",
                                                                  0.5f); });
  check_function_case("pad_constant_crop", [](auto& t) { return F::pad(t[0], {-1, 3, 1, -2}); });
  check_function_case("pad_reflect", [](auto& t) { return F::pad(t[0], {1, 3, 2, 1}, "reflect"); });
  check_function_case("pad_replicate",
                      [](auto& t) { return F::pad(t[0], {2, 3, 3, 1}, "replicate"); });
  check_function_case("pad_circular",
                      [](auto& t) { return F::pad(t[0], {1, 4, 2, 1}, "circular"); });
  check_function_case("pad_reflect_1d", [](auto& t) { return F::pad(t[0], {2, 2}, "reflect"); });
}

TEST_CASE("interpolate matches PyTorch: nearest, linear and bilinear, sizes and scale factors") {
  check_function_case("interp_nearest", [](auto& t) { return F::interpolate(t[0], {7, 5}); });
  check_function_case("interp_nearest_scale", [](auto& t) {
    return F::interpolate(t[0], {.scale_factor = {2.0, 1.5}, .mode = "nearest"});
  });
  check_function_case("interp_bilinear",
                      [](auto& t) { return F::interpolate(t[0], {7, 9}, "bilinear"); });
  check_function_case("interp_bilinear_corners",
                      [](auto& t) { return F::interpolate(t[0], {7, 9}, "bilinear", true); });
  check_function_case("interp_bilinear_down",
                      [](auto& t) { return F::interpolate(t[0], {3, 4}, "bilinear"); });
  check_function_case("interp_bilinear_scale", [](auto& t) {
    return F::interpolate(t[0], {.scale_factor = {1.5, 2.0}, .mode = "bilinear"});
  });
  check_function_case("interp_linear", [](auto& t) { return F::interpolate(t[0], {8}, "linear"); });
}

TEST_CASE("weighted BCE, nll_loss, kl_div, cosine_similarity and normalize match PyTorch") {
  using R = F::Reduction;
  check_function_case("bce_weighted", [](auto& t) {
    return F::binary_cross_entropy_with_logits(t[0], t[1], fixture("bce_weighted.weight"),
                                               fixture("bce_weighted.pos_weight"));
  });
  check_function_case("bce_pos_weight_sum", [](auto& t) {
    return F::binary_cross_entropy_with_logits(t[0], t[1], Tensor(),
                                               fixture("bce_pos_weight_sum.pos_weight"), R::Sum);
  });
  check_function_case("nll", [](auto& t) { return F::nll_loss(t[0], t[1]); });
  check_function_case("nll_weighted", [](auto& t) {
    return F::nll_loss(t[0], t[1], fixture("nll_weighted.weight"));
  });
  check_function_case("nll_ignore_sum",
                      [](auto& t) { return F::nll_loss(t[0], t[1], Tensor(), 2, R::Sum); });
  check_function_case("nll_3d_none", [](auto& t) {
    return F::nll_loss(t[0], t[1], fixture("nll_3d_none.weight"), -100, R::None);
  });
  check_function_case("kl_div_batchmean",
                      [](auto& t) { return F::kl_div(t[0], t[1], R::BatchMean); });
  check_function_case("kl_div_mean", [](auto& t) { return F::kl_div(t[0], t[1]); });
  check_function_case("kl_div_log_target",
                      [](auto& t) { return F::kl_div(t[0], t[1], R::Sum, true); });
  check_function_case("cosine_similarity",
                      [](auto& t) { return F::cosine_similarity(t[0], t[1]); });
  check_function_case("cosine_similarity_broadcast",
                      [](auto& t) { return F::cosine_similarity(t[0], t[1], -2); });
  check_function_case("normalize", [](auto& t) { return F::normalize(t[0]); });
  check_function_case("normalize_p1", [](auto& t) { return F::normalize(t[0], 1.0f, -1); });
}

TEST_CASE("gradcheck: the convolutions, pools, norms, pad and interpolate") {
  manual_seed(41);
  auto check_module = [](auto& module, const Tensor& x, const std::string& what) {
    std::vector<Tensor> inputs{x};
    for (const Tensor& p : module.parameters()) inputs.push_back(p);
    gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(module.forward(t[0])); },
              inputs, 1e-2f, 2e-2f, 2e-3f, what);
  };
  nn::Conv1d conv1(4, 2, 3, 2, 2, 2, 2);
  check_module(conv1, randn({1, 4, 9}), "conv1d");
  nn::Conv2d conv(2, 4, {2, 3}, {1, 2}, {1, 1}, {2, 1}, 2);
  check_module(conv, randn({1, 2, 5, 6}), "conv2d groups dilation");
  nn::ConvTranspose2d up(2, 4, {3, 2}, {2, 3}, {1, 0}, {1, 2}, 2);
  check_module(up, randn({1, 2, 3, 2}), "conv_transpose2d");
  nn::AvgPool2d avg({3, 2}, {2, 1}, {1, 1});
  check_module(avg, randn({1, 2, 5, 4}), "avg_pool2d");
  nn::AdaptiveAvgPool2d adaptive({3, 2});
  check_module(adaptive, randn({1, 2, 5, 3}), "adaptive_avg_pool2d");
  nn::GroupNorm gn(2, 4);
  {
    NoGradGuard guard;
    gn.weight.copy_(randn({4}));
    gn.bias.copy_(randn({4}));
  }
  check_module(gn, randn({2, 4, 3}), "group_norm");
  nn::RMSNorm rms(4);
  {
    NoGradGuard guard;
    rms.weight.copy_(randn({4}));
  }
  check_module(rms, randn({3, 4}), "rms_norm");
  nn::BatchNorm1d bn(3);
  check_module(bn, randn({4, 3}), "batch_norm1d");
  for (const char* mode : {"constant", "reflect", "replicate", "circular"})
    gradcheck([&](const auto& t) { return weighted_sum(F::pad(t[0], {2, 1, 1, 2}, mode)); },
              {randn({1, 2, 3, 3})}, 1e-2f, 2e-2f, 2e-3f, std::string("pad ") + mode);
  gradcheck([](const auto& t) { return weighted_sum(F::interpolate(t[0], {5, 3}, "bilinear")); },
            {randn({1, 2, 3, 4})}, 1e-2f, 2e-2f, 2e-3f, "interpolate bilinear");
  gradcheck([](const auto& t) { return weighted_sum(F::interpolate(t[0], {5, 7})); },
            {randn({1, 1, 3, 4})}, 1e-2f, 2e-2f, 2e-3f, "interpolate nearest");
}

TEST_CASE("gradcheck: nll_loss, weighted BCE, kl_div, cosine_similarity, normalize") {
  manual_seed(43);
  const Tensor labels = tensor_i64({2, 0, -100, 1}, {4});
  const Tensor class_weight = rand({3}) + 0.5f;
  gradcheck([&](const auto& t) { return F::nll_loss(log_softmax(t[0], 1), labels, class_weight); },
            {randn({4, 3})}, 1e-2f, 2e-2f, 2e-3f, "nll_loss");
  const Tensor weight = rand({2, 3}) + 0.5f, pos_weight = rand({3}) + 0.5f;
  gradcheck(
      [&](const auto& t) {
        return F::binary_cross_entropy_with_logits(t[0], t[1], weight, pos_weight);
      },
      {randn({2, 3}), rand({2, 3})}, 1e-2f, 2e-2f, 2e-3f, "bce weighted");
  gradcheck(
      [](const auto& t) {
        return F::kl_div(log_softmax(t[0], 1), softmax(t[1], 1), F::Reduction::BatchMean);
      },
      {randn({2, 4}), randn({2, 4})}, 1e-2f, 2e-2f, 2e-3f, "kl_div");
  gradcheck([](const auto& t) { return weighted_sum(F::cosine_similarity(t[0], t[1], 0)); },
            {randn({3, 2}), randn({3, 2})}, 1e-2f, 2e-2f, 2e-3f, "cosine_similarity");
  gradcheck([](const auto& t) { return weighted_sum(F::normalize(t[0])); }, {randn({2, 3})},
            1e-2f, 2e-2f, 2e-3f, "normalize");
}

TEST_CASE("ConvTranspose2d is the adjoint of Conv2d: <conv(x), y> = <x, conv_t(y)>") {
  manual_seed(47);
  const Tensor w = randn({4, 2, 3, 2});  // conv: 4 out, 2 in/group; conv_t reads it as [in, out/g]
  const Tensor x = randn({1, 4, 7, 6}), y = randn({1, 4, 4, 4});
  const Tensor conv_x = F::conv2d(x, w, Tensor(), {2, 1}, {1, 0}, {1, 2}, 2);  // [1, 4, 4, 4]
  const Tensor conv_t_y = F::conv_transpose2d(y, w, Tensor(), {2, 1}, {1, 0}, 0, 2, {1, 2});
  REQUIRE(conv_t_y.shape() == x.shape());
  CHECK(sum(conv_x * y).item() == doctest::Approx(sum(x * conv_t_y).item()).epsilon(1e-4));
}

TEST_CASE("named_parameters of the new modules are PyTorch's names") {
  auto names = [](const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, t] : m.state_dict()) out.push_back(name);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(names(nn::Conv1d(2, 4, 3)) == V{"weight", "bias"});
  CHECK(names(nn::ConvTranspose2d(2, 4, 3, 1, 0, 0, 1, false)) == V{"weight"});
  CHECK(nn::ConvTranspose2d(2, 4, 3, 1, 0, 0, 2).weight.shape() == Shape{2, 2, 3, 3});
  CHECK(nn::Conv2d(4, 6, {3, 1}, 1, 0, 1, 2).weight.shape() == Shape{6, 2, 3, 1});
  CHECK(names(nn::BatchNorm1d(3)) ==
        V{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(names(nn::GroupNorm(2, 4)) == V{"weight", "bias"});
  CHECK(names(nn::GroupNorm(2, 4, 1e-5f, false)).empty());
  CHECK(names(nn::RMSNorm(4)) == V{"weight"});
  CHECK(names(nn::AvgPool2d(2)).empty());
}

TEST_CASE("the new modules print as PyTorch prints them") {
  CHECK(nn::Conv2d(4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2).repr() ==
        "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), "
        "groups=2)");
  CHECK(nn::Conv1d(4, 6, 3, 2, 1, 2, 2).repr() ==
        "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), groups=2)");
  CHECK(nn::ConvTranspose2d(4, 6, 3, 2, 1, 1, 2).repr() ==
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
        "output_padding=(1, 1), groups=2)");
  CHECK(nn::AvgPool2d(3, 2, 1).repr() == "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(nn::AdaptiveAvgPool2d({3, 4}).repr() == "AdaptiveAvgPool2d(output_size=(3, 4))");
  CHECK(nn::GroupNorm(2, 6).repr() == "GroupNorm(2, 6, eps=1e-05, affine=True)");
  CHECK(nn::BatchNorm1d(4).repr() ==
        "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  CHECK(nn::Flatten().repr() == "Flatten(start_dim=1, end_dim=-1)");
  CHECK(nn::Unflatten(1, {3, 4}).repr() == "Unflatten(dim=1, unflattened_size=(3, 4))");
  CHECK(nn::Softmax(1).repr() == "Softmax(dim=1)");
  CHECK(nn::LeakyReLU(0.2f).repr() == "LeakyReLU(negative_slope=0.2)");
  CHECK(nn::SiLU().repr() == "SiLU()");
}

TEST_CASE("Conv2d's older int form: a bool sixth argument is the bias flag") {
  nn::Conv2d no_bias(2, 3, 3, 1, 0, false);
  CHECK_FALSE(no_bias.bias.defined());
  CHECK(no_bias.dilation == nn::ExpandingArray<2>(1));
  nn::Conv2d dilated(2, 3, 3, 1, 0, 2);  // PyTorch's order: the sixth number is the dilation
  CHECK(dilated.bias.defined());
  CHECK(dilated.dilation == nn::ExpandingArray<2>(2));
}

TEST_CASE("Module::load_state_dict: strict by default, and non-strict reports what it skipped") {
  manual_seed(53);
  nn::Sequential source(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4));
  nn::Sequential target(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4));
  // From another module's state_dict(), as model.load_state_dict(other.state_dict()).
  auto [missing, unexpected] = target.load_state_dict(source.state_dict());
  CHECK(missing.empty());
  CHECK(unexpected.empty());
  CHECK(target.at<nn::Linear>(0)->weight.to_vector() ==
        source.at<nn::Linear>(0)->weight.to_vector());

  std::map<std::string, Tensor> partial;
  for (const auto& [name, t] : source.state_dict())
    partial.emplace(name, t.dtype() == DType::Float32 ? t.detach() + 1.0f : t);
  partial.erase("1.running_var");
  partial.emplace("2.weight", zeros({2}));
  expect_error([&] { target.load_state_dict(partial); },
               {"load_state_dict", "missing (1): 1.running_var", "unexpected (1): 2.weight"});
  CHECK(target.at<nn::Linear>(0)->weight.to_vector() ==
        source.at<nn::Linear>(0)->weight.to_vector());  // nothing was loaded

  const auto result = target.load_state_dict(partial, /*strict=*/false);
  CHECK(result.missing == std::vector<std::string>{"1.running_var"});
  CHECK(result.unexpected == std::vector<std::string>{"2.weight"});
  check_close(target.at<nn::Linear>(0)->weight, source.at<nn::Linear>(0)->weight + 1.0f, 0, 0,
              "loaded weight");

  // A wrong shape stays an error without strict, and nothing is copied.
  partial["0.bias"] = zeros({5});
  expect_error([&] { target.load_state_dict(partial, false); }, {"wrong shape", "0.bias"});

  // From a file.
  TempDir dir;
  const std::string path = dir.file("seq.safetensors");
  nn::save(source, path);
  nn::Sequential linear_only(std::make_shared<nn::Linear>(3, 4));
  const auto from_file = linear_only.load_state_dict(path, false);
  CHECK(from_file.missing.empty());
  CHECK(from_file.unexpected.size() == 5);  // 1.weight, 1.bias and BatchNorm1d's three buffers
  expect_error([&] { linear_only.load_state_dict(path); }, {"seq.safetensors", "unexpected"});
}

TEST_CASE("ModuleDict: ordered, named registration, contains, at<T>, operator[], pop") {
  nn::ModuleDict dict({{"conv", std::make_shared<nn::Conv2d>(1, 2, 3)},
                       {"act", std::make_shared<nn::ReLU>()}});
  dict.insert("head", std::make_shared<nn::Linear>(2, 3));
  CHECK(dict.size() == 3);
  CHECK(dict.keys() == std::vector<std::string>{"conv", "act", "head"});
  CHECK(dict.contains("head"));
  CHECK_FALSE(dict.contains("missing"));
  CHECK(dict.at<nn::Linear>("head")->out_features == 3);
  CHECK(dict["act"]->name() == "ReLU");
  std::vector<std::string> names;
  for (const auto& [name, t] : dict.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"conv.weight", "conv.bias", "head.weight", "head.bias"});
  // Replacing a key keeps its place, as PyTorch's dict[key] = module.
  dict.insert("conv", std::make_shared<nn::Conv2d>(1, 4, 1, 1, 0, false));
  CHECK(dict.keys() == std::vector<std::string>{"conv", "act", "head"});
  CHECK(dict.at<nn::Conv2d>("conv")->out_channels == 4);
  CHECK(dict.named_parameters().size() == 3);
  CHECK(dict.pop("act")->name() == "ReLU");
  CHECK(dict.keys() == std::vector<std::string>{"conv", "head"});
  CHECK(dict.children().size() == 2);
  expect_error([&] { dict["act"]; }, {"ModuleDict", "'act'", "'conv', 'head'"});
  expect_error([&] { dict.at<nn::ReLU>("head"); }, {"ModuleDict", "'head'", "Linear"});
}

TEST_CASE("Sequential refuses a module whose forward is not Tensor -> Tensor at compile time") {
  static_assert(nn::TensorToTensor<nn::Conv2d>);
  static_assert(nn::TensorToTensor<nn::Softmax>);
  static_assert(nn::TensorToTensor<nn::Sequential>);
  static_assert(!nn::TensorToTensor<nn::MultiheadAttention>);  // forward(q, k, v, mask)
  static_assert(!nn::TensorToTensor<nn::ModuleDict>);
}
