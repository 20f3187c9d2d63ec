// LSTM and GRU: the recurrences written as their equations, one time step at a time. The speed
// comes from the input projection: W_ih x_t for every time step (and every gate) is one GEMM
// over the whole sequence before the loop, so the loop itself multiplies only the [B, hidden]
// state by W_hh once per step.
#include "nn/rnn.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

RNNBase::RNNBase(const char* layer, int64_t gates, int64_t input_size, int64_t hidden_size,
                 int64_t num_layers, bool bias, bool batch_first, float dropout,
                 bool bidirectional)
    : input_size(input_size),
      hidden_size(hidden_size),
      num_layers(num_layers),
      bias(bias),
      batch_first(batch_first),
      dropout(dropout),
      bidirectional(bidirectional),
      layer_(layer),
      gates_(gates) {
  LOOM_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0,
             "{}: input_size {}, hidden_size {} and num_layers {} must be positive", layer,
             input_size, hidden_size, num_layers);
  LOOM_CHECK(dropout >= 0.0f && dropout <= 1.0f,
             "{}: dropout {} must be a probability in [0, 1]", layer, dropout);
  // PyTorch's initialisation: every weight and bias U(-1/sqrt(hidden), 1/sqrt(hidden)).
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  const int64_t directions = bidirectional ? 2 : 1;
  for (int64_t l = 0; l < num_layers; ++l) {
    for (int64_t d = 0; d < directions; ++d) {
      // Layer 0 reads the input; every later layer the outputs of all directions below it.
      const int64_t in = l == 0 ? input_size : hidden_size * directions;
      const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      auto parameter = [&](const std::string& name, Shape shape) {
        Tensor p = register_parameter(name + suffix, Tensor::empty(shape));
        init::uniform_(p, -bound, bound);
        return p;
      };
      Weights w;
      w.w_ih = parameter("weight_ih", {gates * hidden_size, in});
      w.w_hh = parameter("weight_hh", {gates * hidden_size, hidden_size});
      if (bias) {
        w.b_ih = parameter("bias_ih", {gates * hidden_size});
        w.b_hh = parameter("bias_hh", {gates * hidden_size});
      }
      weights_.push_back(w);
    }
  }
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::run(const Tensor& input,
                                                    std::vector<Tensor> initial) const {
  LOOM_CHECK(input.defined() && (input.dim() == 2 || input.dim() == 3) &&
                 input.size(-1) == input_size && input.size(-2) > 0,
             "{}: expected input [B, T, {}] (batch_first), [T, B, {}] or unbatched [T, {}] with "
             "T > 0, got {}",
             layer_, input_size, input_size, input_size,
             input.defined() ? shape_str(input.shape()) : "undefined");
  const bool batched = input.dim() == 3;
  // Inside, time comes first: x [T, B, in], so x.split(1, 0) gives the time steps.
  Tensor x = !batched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;
  const int64_t directions = bidirectional ? 2 : 1, batch = x.size(1);
  const Shape state_shape = batched ? Shape{num_layers * directions, batch, hidden_size}
                                    : Shape{num_layers * directions, hidden_size};
  for (Tensor& state : initial) {
    if (!state.defined()) state = zeros(state_shape, x.device());
    LOOM_CHECK(state.shape() == state_shape,
               "{}: expected an initial state of shape {} for input {}, got {}", layer_,
               shape_str(state_shape), shape_str(input.shape()), shape_str(state.shape()));
    if (!batched) state = state.unsqueeze(1);
  }

  std::vector<std::vector<Tensor>> finals(initial.size());  // per kind of state, per layer/dir
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < directions; ++d) {
      const int64_t index = l * directions + d;
      State state;
      for (const Tensor& s : initial) state.push_back(s.select(0, index));
      auto [output, final] = run_direction(x, weights_[index], state, /*reverse=*/d == 1);
      outputs.push_back(output);
      for (size_t k = 0; k < final.size(); ++k) finals[k].push_back(final[k]);
    }
    // Both directions' outputs side by side: [T, B, 2 hidden].
    x = directions == 2 ? cat(outputs, 2) : outputs[0];
    if (dropout > 0.0f && is_training() && l + 1 < num_layers) x = loom::dropout(x, dropout, true);
  }
  Tensor output = !batched ? x.squeeze(1) : batch_first ? x.transpose(0, 1) : x;
  std::vector<Tensor> states;
  for (const std::vector<Tensor>& kind : finals) {
    Tensor s = stack(kind, 0);  // [layers * directions, B, hidden], layer-major
    states.push_back(batched ? s : s.squeeze(1));
  }
  return {output, states};
}

std::string RNNBase::extra_repr() const {
  return fmt::format("{}, {}, num_layers={}, bias={}, batch_first={}, dropout={}, "
                     "bidirectional={}",
                     input_size, hidden_size, num_layers, py_repr(bias), py_repr(batch_first),
                     dropout, py_repr(bidirectional));
}

// ---------------------------------------------------------------------------- LSTM
LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
           bool batch_first, float dropout, bool bidirectional)
    : RNNBase("LSTM", 4, input_size, hidden_size, num_layers, bias, batch_first, dropout,
              bidirectional) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(
    const Tensor& x, const std::optional<std::tuple<Tensor, Tensor>>& hx) const {
  std::vector<Tensor> initial(2);
  if (hx) std::tie(initial[0], initial[1]) = *hx;
  auto [output, states] = run(x, initial);
  return {output, {states[0], states[1]}};
}

std::pair<Tensor, RNNBase::State> LSTM::run_direction(const Tensor& x, const Weights& w,
                                                      State state, bool reverse) const {
  // W_ih x_t + b_ih + b_hh for every t at once: [T, B, 4 hidden] (both biases are added to the
  // same pre-activations, so they can be added here, once).
  const Tensor bias = w.b_ih.defined() ? w.b_ih + w.b_hh : Tensor();
  const std::vector<Tensor> projected = functional::linear(x, w.w_ih, bias).split(1, 0);
  const int64_t steps = x.size(0);
  Tensor h = state[0], c = state[1];
  std::vector<Tensor> outputs(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    // The four gates' pre-activations, W_ih x_t + W_hh h_{t-1} + b, in PyTorch's order.
    const Tensor gates = projected[static_cast<size_t>(t)].squeeze(0) + matmul(h, w.w_hh.t());
    const std::vector<Tensor> g = gates.chunk(4, 1);
    const Tensor i = sigmoid(g[0]);     // input gate
    const Tensor f = sigmoid(g[1]);     // forget gate (Gers et al. 2000)
    const Tensor cell = tanh(g[2]);     // candidate cell g_t
    const Tensor o = sigmoid(g[3]);     // output gate
    c = f * c + i * cell;               // c_t = f_t * c_{t-1} + i_t * g_t
    h = o * tanh(c);                    // h_t = o_t * tanh(c_t)
    outputs[static_cast<size_t>(t)] = h;
  }
  return {stack(outputs, 0), {h, c}};
}

// ---------------------------------------------------------------------------- GRU
GRU::GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
         float dropout, bool bidirectional)
    : RNNBase("GRU", 3, input_size, hidden_size, num_layers, bias, batch_first, dropout,
              bidirectional) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& x, const Tensor& h0) const {
  auto [output, states] = run(x, {h0});
  return {output, states[0]};
}

std::pair<Tensor, RNNBase::State> GRU::run_direction(const Tensor& x, const Weights& w,
                                                     State state, bool reverse) const {
  // W_ih x_t + b_ih for every t at once: [T, B, 3 hidden] (b_hh stays in the loop: its third
  // part is multiplied by the reset gate).
  const std::vector<Tensor> projected = functional::linear(x, w.w_ih, w.b_ih).split(1, 0);
  const int64_t steps = x.size(0);
  Tensor h = state[0];
  std::vector<Tensor> outputs(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const std::vector<Tensor> xg = projected[static_cast<size_t>(t)].squeeze(0).chunk(3, 1);
    const std::vector<Tensor> hg = functional::linear(h, w.w_hh, w.b_hh).chunk(3, 1);
    const Tensor r = sigmoid(xg[0] + hg[0]);  // reset gate
    const Tensor z = sigmoid(xg[1] + hg[1]);  // update gate
    // candidate n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
    const Tensor n = tanh(xg[2] + r * hg[2]);
    h = (1.0f - z) * n + z * h;  // h_t = (1 - z_t) * n_t + z_t * h_{t-1}
    outputs[static_cast<size_t>(t)] = h;
  }
  return {stack(outputs, 0), {h}};
}

}  // namespace loom::nn
