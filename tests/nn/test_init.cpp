// Initialisers and PyTorch's default layer initialisation: bounds, moments against the
// distributions' formulas, repeatability with manual_seed, error paths.
#include <cmath>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace init = loom::nn::init;

namespace {

struct Moments {
  double mean = 0, std = 0, min = 1e30, max = -1e30;
};

Moments moments(const Tensor& t) {
  Moments m;
  const std::vector<float> v = t.to_vector();
  for (float x : v) {
    m.mean += x;
    m.min = std::min<double>(m.min, x);
    m.max = std::max<double>(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (float x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size() - 1));
  return m;
}

// The sample mean of n draws with standard deviation sd is within 5 standard errors.
void check_mean(const Moments& m, double mean, double sd, int64_t n, const char* what) {
  INFO(what);
  CHECK(std::fabs(m.mean - mean) < 5.0 * sd / std::sqrt(static_cast<double>(n)));
}

}  // namespace

TEST_CASE("uniform_ and normal_ have the requested moments") {
  manual_seed(1);
  const int64_t n = 200 * 100;
  const Moments u = moments(init::uniform_(Tensor::empty({200, 100}), -2.0, 4.0));
  CHECK(u.min >= -2.0);
  CHECK(u.max < 4.0);
  const double u_sd = 6.0 / std::sqrt(12.0);  // (b - a) / sqrt(12)
  check_mean(u, 1.0, u_sd, n, "uniform mean");
  CHECK(u.std == doctest::Approx(u_sd).epsilon(0.03));
  const Moments g = moments(init::normal_(Tensor::empty({200, 100}), 0.5, 2.0));
  check_mean(g, 0.5, 2.0, n, "normal mean");
  CHECK(g.std == doctest::Approx(2.0).epsilon(0.03));
}

TEST_CASE("trunc_normal_ stays in [a, b] with the truncated normal's moments") {
  manual_seed(2);
  const double mean = 0.0, sd = 1.0, a = -1.0, b = 2.0;
  const Moments m = moments(init::trunc_normal_(Tensor::empty({100, 200}), mean, sd, a, b));
  CHECK(m.min >= a);
  CHECK(m.max <= b);
  // Truncated normal: mean = mu + sd (phi(alpha) - phi(beta)) / Z,
  // var = sd^2 [1 + (alpha phi(alpha) - beta phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z)^2].
  auto phi = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); };
  auto cdf = [](double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); };
  const double alpha = (a - mean) / sd, beta = (b - mean) / sd, z = cdf(beta) - cdf(alpha);
  const double d = (phi(alpha) - phi(beta)) / z;
  const double expected_mean = mean + sd * d;
  const double expected_sd =
      sd * std::sqrt(1.0 + (alpha * phi(alpha) - beta * phi(beta)) / z - d * d);
  check_mean(m, expected_mean, expected_sd, 20000, "trunc_normal mean");
  CHECK(m.std == doctest::Approx(expected_sd).epsilon(0.03));
  // ViT's use: std 0.02, bounds +-2 (absolute), i.e. practically untruncated.
  const Moments vit = moments(init::trunc_normal_(Tensor::empty({100, 100}), 0.0, 0.02));
  CHECK(vit.std == doctest::Approx(0.02).epsilon(0.03));
}

TEST_CASE("xavier and kaiming initialisers use the fan formulas") {
  manual_seed(3);
  Tensor w = Tensor::empty({300, 100});
  const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(w);
  CHECK(fan_in == 100);
  CHECK(fan_out == 300);
  const auto conv_fans = init::calculate_fan_in_and_fan_out(Tensor::empty({8, 3, 5, 5}));
  CHECK(conv_fans.first == 3 * 25);
  CHECK(conv_fans.second == 8 * 25);

  const double xavier_bound = std::sqrt(6.0 / 400.0);
  const Moments xu = moments(init::xavier_uniform_(w));
  CHECK(xu.max <= xavier_bound);
  CHECK(xu.std == doctest::Approx(xavier_bound / std::sqrt(3.0)).epsilon(0.03));
  const Moments xn = moments(init::xavier_normal_(w, 2.0));
  CHECK(xn.std == doctest::Approx(2.0 * std::sqrt(2.0 / 400.0)).epsilon(0.03));
  const double kaiming_bound = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(100.0);
  const Moments ku = moments(init::kaiming_uniform_(w));
  CHECK(ku.max <= kaiming_bound);
  CHECK(ku.std == doctest::Approx(kaiming_bound / std::sqrt(3.0)).epsilon(0.03));
}

TEST_CASE("zeros_, ones_, constant_ and repeatability under manual_seed") {
  Tensor t = Tensor::empty({3, 2});
  CHECK(moments(init::zeros_(t)).max == 0.0);
  CHECK(moments(init::ones_(t)).min == 1.0);
  CHECK(moments(init::constant_(t, 2.5)).mean == doctest::Approx(2.5));
  manual_seed(9);
  const std::vector<float> first = init::normal_(Tensor::empty({5})).to_vector();
  manual_seed(9);
  CHECK(init::normal_(Tensor::empty({5})).to_vector() == first);
}

TEST_CASE("initialisers work on parameters (in place, not recorded)") {
  nn::Linear lin(4, 3);
  const Tensor held = lin.weight;
  init::zeros_(lin.weight);
  CHECK(moments(held).max == 0.0);
  CHECK(held.requires_grad());
  CHECK(held.is_leaf());
}

TEST_CASE("layers initialise as PyTorch's reset_parameters") {
  manual_seed(4);
  nn::Linear lin(64, 300);  // weight and bias U(-1/8, 1/8)
  const Moments w = moments(lin.weight), b = moments(lin.bias);
  CHECK(w.max <= 0.125);
  CHECK(w.min >= -0.125);
  CHECK(w.std == doctest::Approx(0.125 / std::sqrt(3.0)).epsilon(0.03));
  CHECK(b.max <= 0.125);
  nn::Conv2d conv(4, 64, 3);  // fan_in 36: U(-1/6, 1/6)
  CHECK(moments(conv.weight).max <= 1.0 / 6.0);
  CHECK(moments(conv.weight).std == doctest::Approx(1.0 / 6.0 / std::sqrt(3.0)).epsilon(0.05));
  nn::Embedding emb(100, 100);  // N(0, 1)
  CHECK(moments(emb.weight).std == doctest::Approx(1.0).epsilon(0.03));
  const Moments cb = moments(conv.bias);  // the bias uses the same bound
  CHECK(cb.max <= 1.0 / 6.0);
  CHECK(cb.min >= -1.0 / 6.0);
  CHECK(cb.max - cb.min > 0.1);  // spread over the range, not constant
  nn::LayerNorm ln(5);
  CHECK(moments(ln.weight).min == 1.0);
  CHECK(moments(ln.bias).max == 0.0);
  nn::BatchNorm2d bn(6);  // weight 1, bias 0, running mean 0, running var 1, no batches yet
  CHECK(bn.weight.to_vector() == std::vector<float>(6, 1.0f));
  CHECK(bn.bias.to_vector() == std::vector<float>(6, 0.0f));
  CHECK(bn.running_mean.to_vector() == std::vector<float>(6, 0.0f));
  CHECK(bn.running_var.to_vector() == std::vector<float>(6, 1.0f));
  CHECK(bn.num_batches_tracked.to_vector_i64() == std::vector<int64_t>{0});
  nn::MultiheadAttention mha(16, 4);  // in_proj xavier_uniform_ over [3E, E], biases 0
  CHECK(moments(mha.in_proj_weight).max <= std::sqrt(6.0 / (48 + 16)));
  CHECK(moments(mha.in_proj_bias).max == 0.0);
  CHECK(moments(mha.in_proj_bias).min == 0.0);
}

TEST_CASE("initialisers reject impossible requests") {
  check_error([] { init::xavier_uniform_(Tensor::empty({5})); }, {"fan", "[5]"});
  check_error([] { init::normal_(Tensor::empty({2}), 0.0, -1.0); }, {"normal_", "-1"});
  check_error([] { init::uniform_(tensor_i64({1}, {1})); }, {"uniform_", "int64"});
  check_error([] { init::trunc_normal_(Tensor::empty({2}), 0.0, 1.0, 1.0, -1.0); },
              {"trunc_normal_"});
  check_error([] { init::trunc_normal_(Tensor::empty({2}), 0.0, 1.0, 50.0, 60.0); },
              {"trunc_normal_", "mass"});
}
