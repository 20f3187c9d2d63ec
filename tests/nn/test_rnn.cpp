// nn::LSTM and nn::GRU against torch.nn.LSTM / GRU (tests/golden/gen_rnn.py): a state_dict saved
// by PyTorch loads by its names and gives the same outputs, final states and every gradient;
// plus finite differences and the errors of bad input.
#include <doctest/doctest.h>

#include "nn/nn.h"
#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;

namespace {

struct RnnCase {
  const char* name;
  bool lstm;
  int64_t layers;
  bool bidirectional, batch_first, bias;
};

// The cases of gen_rnn.py (whether they pass an initial state and are unbatched is read from
// the fixture: the number and rank of its inputs).
const RnnCase kCases[] = {
    {"lstm_1layer", true, 1, false, true, true},
    {"lstm_2layer_h0", true, 2, false, true, true},
    {"lstm_bidirectional", true, 2, true, true, true},
    {"lstm_time_major_nobias", true, 1, true, false, false},
    {"lstm_unbatched", true, 1, false, true, true},
    {"gru_1layer", false, 1, false, true, true},
    {"gru_2layer_h0", false, 2, false, true, true},
    {"gru_bidirectional", false, 2, true, false, true},
    {"gru_unbatched_nobias", false, 1, true, true, false},
};

// The parameter of `module` called `name`.
Tensor param(const nn::Module& module, const std::string& name) {
  for (const auto& [n, p] : module.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return Tensor();
}

// The flattened output and final states joined, as gen_rnn.py records them.
Tensor joined(const std::vector<Tensor>& parts) {
  std::vector<Tensor> flat;
  for (const Tensor& p : parts) flat.push_back(p.flatten());
  return cat(flat, 0);
}

}  // namespace

TEST_CASE("LSTM and GRU match PyTorch: outputs, final states and every gradient") {
  for (const RnnCase& c : kCases) {
    CAPTURE(c.name);
    const std::vector<Tensor> in = case_inputs(c.name);
    Tensor out;
    if (c.lstm) {
      nn::LSTM lstm(5, 8, c.layers, c.bias, c.batch_first, 0.0f, c.bidirectional);
      load_case_state(lstm, c.name);
      auto [y, state] = in.size() == 3 ? lstm.forward(in[0], std::tuple{in[1], in[2]})
                                       : lstm.forward(in[0]);
      out = joined({y, std::get<0>(state), std::get<1>(state)});
      check_case(c.name, out, in, &lstm);
    } else {
      nn::GRU gru(5, 8, c.layers, c.bias, c.batch_first, 0.0f, c.bidirectional);
      load_case_state(gru, c.name);
      auto [y, h] = in.size() == 2 ? gru.forward(in[0], in[1]) : gru.forward(in[0]);
      out = joined({y, h});
      check_case(c.name, out, in, &gru);
    }
  }
}

TEST_CASE("LSTM and GRU: parameter names, shapes and initialisation as PyTorch") {
  manual_seed(3);
  nn::LSTM lstm(4, 6, 2, true, true, 0.0f, true);
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm.named_parameters()) names.push_back(name);
  const std::vector<std::string> expected = {
      "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
      "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse",
      "bias_hh_l1_reverse"};
  CHECK(names == expected);
  CHECK(param(lstm, "weight_ih_l1").shape() == Shape{24, 12});
  const float bound = 1.0f / std::sqrt(6.0f);
  for (const auto& [name, p] : lstm.named_parameters()) {
    CHECK(p.abs().max().item() <= bound);
    CHECK(p.abs().max().item() > 0.5f * bound);
  }
  nn::GRU gru(4, 6, 1, false);
  CHECK(gru.named_parameters().size() == 2);
  CHECK(param(gru, "weight_hh_l0").shape() == Shape{18, 6});
}

TEST_CASE("gradcheck: LSTM and GRU, bidirectional, through the input, state and weights") {
  manual_seed(5);
  nn::LSTM lstm(3, 4, 1, true, true, 0.0f, true);
  const Tensor x = randn({2, 3, 3}), h0 = randn({2, 2, 4}) * 0.5f, c0 = randn({2, 2, 4}) * 0.5f;
  gradcheck(
      [&](const std::vector<Tensor>& t) {
        auto [y, state] = lstm.forward(t[0], std::tuple{t[1], t[2]});
        return weighted_sum(y) + weighted_sum(std::get<1>(state), 8);
      },
      {x, h0, c0, param(lstm, "weight_hh_l0_reverse")}, 1e-2f, 2e-2f, 2e-3f,
      "LSTM");
  nn::GRU gru(3, 4, 2, true, false);
  gradcheck(
      [&](const std::vector<Tensor>& t) {
        auto [y, h] = gru.forward(t[0]);
        return weighted_sum(y) + weighted_sum(h, 9);
      },
      {x.detach().clone(), param(gru, "bias_hh_l1"),
       param(gru, "weight_ih_l1")},
      1e-2f, 2e-2f, 2e-3f, "GRU");
}

TEST_CASE("LSTM: dropout between layers only in training") {
  manual_seed(6);
  nn::LSTM lstm(3, 4, 2, true, true, 0.5f);
  const Tensor x = randn({2, 5, 3});
  lstm.eval();
  auto [a, sa] = lstm.forward(x);
  auto [b, sb] = lstm.forward(x);
  check_close(a, b, 0.0f, 0.0f, "evaluation is deterministic");
  lstm.train();
  auto [c, sc] = lstm.forward(x);
  CHECK((c - a).abs().max().item() > 1e-4f);
}

TEST_CASE("LSTM and GRU refuse bad input with the layer and the shapes") {
  expect_error([] { nn::LSTM(0, 4); }, {"LSTM", "input_size 0"});
  expect_error([] { nn::GRU(3, 4, 1, true, true, 1.5f); }, {"GRU", "dropout 1.5"});
  nn::LSTM lstm(3, 4, 2);
  expect_error([&] { lstm.forward(randn({2, 5, 7})); }, {"LSTM", "[2,5,7]", "[B, T, 3]"});
  expect_error([&] { lstm.forward(randn({5})); }, {"LSTM", "[5]"});
  expect_error([&] { lstm.forward(randn({2, 0, 3})); }, {"LSTM", "T > 0"});
  expect_error(
      [&] { lstm.forward(randn({2, 5, 3}), std::tuple{zeros({1, 2, 4}), zeros({2, 2, 4})}); },
      {"LSTM", "[2,2,4]", "[1,2,4]"});
  nn::GRU gru(3, 4, 1, true, false, 0.0f, true);
  expect_error([&] { gru.forward(randn({5, 2, 3}), zeros({1, 2, 4})); },
               {"GRU", "[2,2,4]", "[1,2,4]"});
}
