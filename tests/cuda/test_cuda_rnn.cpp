// nn::LSTM and nn::GRU on CUDA against the CPU: the same weights (a state_dict copied), the same
// input and initial state; the output, final states and the gradients of the input, the state
// and every weight must agree. Without a GPU the cases return at once (test_cuda.cpp's first case
// reports that once); tests/cuda/emulator/run_emulated.sh runs them on the CPU emulator.
#include "cuda_parity.h"
#include "nn/nn.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("cuda: LSTM and GRU match the CPU, bidirectional and stacked, values and gradients") {
  LOOM_REQUIRE_GPU();
  manual_seed(71);
  nn::LSTM lstm(5, 8, 2, true, true, 0.0f, true), lstm_gpu(5, 8, 2, true, true, 0.0f, true);
  // The inputs: x, then the initial state; every output joined into one tensor.
  compare_modules("LSTM", lstm, lstm_gpu, {randn({3, 4, 5}), randn({4, 3, 8}), randn({4, 3, 8})},
                  [](nn::LSTM& m, const std::vector<Tensor>& t) {
                    auto [y, state] = m.forward(t[0], std::tuple{t[1], t[2]});
                    const auto& [h, c] = state;
                    return cat({y.flatten(), h.flatten(), c.flatten()}, 0);
                  });
  nn::GRU gru(5, 8, 2, true, false), gru_gpu(5, 8, 2, true, false);
  compare_modules("GRU", gru, gru_gpu, {randn({4, 3, 5}), randn({2, 3, 8})},
                  [](nn::GRU& m, const std::vector<Tensor>& t) {
                    auto [y, h] = m.forward(t[0], t[1]);
                    return cat({y.flatten(), h.flatten()}, 0);
                  });
}
