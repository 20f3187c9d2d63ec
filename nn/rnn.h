// Recurrent layers: LSTM (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al.
// 2000) and GRU (Cho et al. 2014), as torch.nn.LSTM and torch.nn.GRU compute them, with their
// parameter names, so a PyTorch state_dict loads as it is:
//
//   weight_ih_l{k}[_reverse]  [gates * hidden, input of layer k]   the input projection
//   weight_hh_l{k}[_reverse]  [gates * hidden, hidden]             the recurrent projection
//   bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse]  [gates * hidden]
//
// with the gates stacked in PyTorch's order (LSTM: i, f, g, o; GRU: r, z, n), each parameter
// initialised U(-1/sqrt(hidden), 1/sqrt(hidden)) as PyTorch does. One difference from PyTorch:
// batch_first defaults to TRUE here (x [B, T, input], as every other loom layer takes its
// batch first); pass false for PyTorch's time-major [T, B, input].
//
//   nn::LSTM lstm(/*input_size=*/32, /*hidden_size=*/64, /*num_layers=*/2);
//   auto [out, state] = lstm.forward(x);          // out [B, T, 64]
//   auto [h_n, c_n] = state;                      // [2, B, 64] each
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "nn/module.h"

namespace loom::nn {

// What LSTM and GRU share (PyTorch's RNNBase): the parameters of every layer and direction, the
// checks of the input and the initial state, and the walk over layers and directions. The cell
// (one time step) is the subclass's.
class RNNBase : public Module {
 public:
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  float dropout;  // on the outputs of every layer but the last, in training
  bool bidirectional;

  std::string extra_repr() const override;

 protected:
  // gates: 4 for the LSTM, 3 for the GRU; layer names the layer in error messages.
  RNNBase(const char* layer, int64_t gates, int64_t input_size, int64_t hidden_size,
          int64_t num_layers, bool bias, bool batch_first, float dropout, bool bidirectional);

  // One layer's parameters in one direction.
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;  // the biases undefined without bias
  };
  // One direction of one layer over the whole sequence: x [T, B, in] (time first) and the
  // initial state (h0 and, for the LSTM, c0: [B, hidden]) -> the outputs [T, B, hidden] and the
  // final state. `reverse` walks the sequence from its end.
  using State = std::vector<Tensor>;
  virtual std::pair<Tensor, State> run_direction(const Tensor& x, const Weights& w, State state,
                                                 bool reverse) const = 0;

  // The shared walk: x as the user gave it, the initial states ([layers * directions, B,
  // hidden] each, or undefined for zeros) -> output and the final states, PyTorch's layout.
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& x, std::vector<Tensor> initial) const;

  const char* layer_;
  int64_t gates_;
  std::vector<Weights> weights_;  // [layer * directions + direction]
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       bool batch_first = true, float dropout = 0.0f, bool bidirectional = false);

  // x [B, T, input_size] (batch_first), [T, B, input_size] (not), or unbatched [T, input_size];
  // hx = (h0, c0), each [num_layers * directions, B, hidden_size] ([.., hidden_size] unbatched),
  // zeros when absent -> (output [B, T, directions * hidden_size], (h_n, c_n)), h_n and c_n
  // shaped as h0, layer-major (layer 0 forward, layer 0 reverse, layer 1 forward, ...).
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& x, const std::optional<std::tuple<Tensor, Tensor>>& hx = std::nullopt) const;

 protected:
  std::pair<Tensor, State> run_direction(const Tensor& x, const Weights& w, State state,
                                         bool reverse) const override;
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
      bool batch_first = true, float dropout = 0.0f, bool bidirectional = false);

  // As LSTM::forward with the single state h0 (undefined: zeros) -> (output, h_n).
  std::tuple<Tensor, Tensor> forward(const Tensor& x, const Tensor& h0 = Tensor()) const;

 protected:
  std::pair<Tensor, State> run_direction(const Tensor& x, const Weights& w, State state,
                                         bool reverse) const override;
};

}  // namespace loom::nn
