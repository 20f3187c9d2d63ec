// nn::Module: hierarchical names, printing, parameter counts, tying, train/eval, devices,
// containers. Names, reprs and counts are compared with PyTorch's for the same trees
// (tests/golden/gen_nn.py, gen_reprs).
#include <sstream>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;

namespace {

// Same tree as Net in gen_nn.py.
struct Net : nn::Module {
  Net() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(10, 4));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList<>>());
    blocks->push_back(std::make_shared<nn::Linear>(4, 4));
    blocks->push_back(std::make_shared<nn::Linear>(4, 4, false));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(4, 1e-6f));
  }
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::ModuleList<>> blocks;
  std::shared_ptr<nn::LayerNorm> norm;
};

std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::LayerNorm>(8), std::make_shared<nn::Dropout>(0.1f),
      std::make_shared<nn::Linear>(8, 2, false), std::make_shared<nn::GELU>());
}

std::shared_ptr<nn::Sequential> make_cnn() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(3, 8, 3, 1, 1), std::make_shared<nn::BatchNorm2d>(8),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(8, 4, 3, 2, 0, false));
}

std::string joined_names(const nn::Module& m) {
  std::string out;
  for (const auto& [name, p] : m.named_parameters()) out += (out.empty() ? "" : ",") + name;
  return out;
}

// A language-model head sharing the embedding matrix (Press & Wolf 2017).
struct TiedLM : nn::Module {
  TiedLM() {
    wte = register_module("wte", std::make_shared<nn::Embedding>(10, 4));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(4, 10));
    lm_head->weight = lm_head->replace_parameter("weight", wte->weight);
  }
  std::shared_ptr<nn::Embedding> wte;
  std::shared_ptr<nn::Linear> lm_head;
};

}  // namespace

TEST_CASE("named_parameters gives PyTorch's hierarchical names in registration order") {
  CHECK(joined_names(Net()) == fixture_metadata("names.net"));
  CHECK(joined_names(*make_mlp()) == fixture_metadata("names.mlp"));
  CHECK(joined_names(*make_cnn()) == fixture_metadata("names.cnn"));
}

TEST_CASE("printing a module tree matches PyTorch's repr") {
  std::ostringstream net, mlp, cnn;
  net << Net();
  mlp << *make_mlp();
  cnn << *make_cnn();
  CHECK(net.str() == fixture_metadata("repr.net"));
  CHECK(mlp.str() == fixture_metadata("repr.mlp"));
  CHECK(cnn.str() == fixture_metadata("repr.cnn"));
}

TEST_CASE("num_parameters matches PyTorch's count") {
  CHECK(Net().num_parameters() == std::stoll(fixture_metadata("num_parameters.net")));
  CHECK(make_mlp()->num_parameters() == std::stoll(fixture_metadata("num_parameters.mlp")));
  CHECK(make_cnn()->num_parameters() == std::stoll(fixture_metadata("num_parameters.cnn")));
}

TEST_CASE("parameters are leaves that require grad and buffers are not") {
  nn::BatchNorm2d bn(3);
  for (const Tensor& p : bn.parameters()) {
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  const auto buffers = bn.named_buffers();
  REQUIRE(buffers.size() == 3);
  CHECK(buffers[0].first == "running_mean");
  CHECK(buffers[2].first == "num_batches_tracked");
  CHECK(buffers[2].second.dtype() == DType::Int64);
  for (const auto& [name, b] : buffers) CHECK_FALSE(b.requires_grad());
}

TEST_CASE("tied weights are listed once, counted once and share storage") {
  TiedLM lm;
  const auto named = lm.named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "wte.weight");
  CHECK(named[1].first == "lm_head.bias");
  CHECK(lm.num_parameters() == lm.wte->weight.numel() + lm.lm_head->bias.numel());
  // state_dict, like PyTorch's, lists the tied tensor under both names.
  CHECK(lm.state_dict().size() == 3);
  CHECK(lm.lm_head->weight.impl() == lm.wte->weight.impl());
  // A gradient from either use accumulates into the one tensor.
  const Tensor ids = tensor_i64({1, 2}, {2});
  sum(lm.lm_head->forward(lm.wte->forward(ids))).backward();
  CHECK(lm.wte->weight.grad().defined());
}

TEST_CASE("train() and eval() propagate to every descendant") {
  nn::TransformerEncoderLayer layer(8, 2, 16);
  auto all_modes = [&](bool expected) {
    int visited = 0;
    layer.apply([&](nn::Module& m) {
      CHECK(m.is_training() == expected);
      ++visited;
    });
    return visited;
  };
  CHECK(all_modes(true) == 10);  // the layer, self_attn + out_proj, 2 linears, 2 norms, 3 dropouts
  layer.eval();
  all_modes(false);
  layer.train();
  all_modes(true);
}

TEST_CASE("apply visits children before their parent") {
  Net net;
  std::vector<std::string> order;
  net.apply([&](nn::Module& m) { order.push_back(m.name()); });
  const std::vector<std::string> expected = {"Embedding",  "Linear",    "Linear",
                                             "ModuleList", "LayerNorm", "Net"};
  CHECK(order == expected);
}

TEST_CASE("registration rejects empty, dotted and duplicate names and null modules") {
  nn::Module m;
  m.register_parameter("w", zeros({2}));
  check_error([&] { m.register_parameter("w", zeros({2})); }, {"register_parameter", "'w'"});
  check_error([&] { m.register_buffer("w", zeros({2})); }, {"register_buffer", "'w'"});
  check_error([&] { m.register_parameter("a.b", zeros({2})); }, {"a.b"});
  check_error([&] { m.register_parameter("", zeros({2})); }, {"invalid name"});
  check_error([&] { m.register_parameter("ids", tensor_i64({1}, {1})); }, {"float32", "ids"});
  check_error([&] { m.register_module("child", std::shared_ptr<nn::Linear>()); }, {"null"});
  check_error([&] { m.replace_parameter("missing", zeros({2})); }, {"missing"});
  check_error([&] { m.replace_parameter("w", zeros({3})); }, {"[2]", "[3]"});
}

TEST_CASE("non-persistent buffers stay out of state_dict") {
  nn::SinusoidalPositionalEncoding pe(8, 16);
  CHECK(pe.named_buffers().size() == 1);
  CHECK(pe.state_dict().empty());
  nn::BatchNorm2d bn(2);
  CHECK(bn.state_dict().size() == 5);  // weight, bias, running_mean, running_var, count
}

TEST_CASE("zero_grad clears every gradient, or with set_to_none = false zeroes it in place") {
  nn::Linear lin(3, 2);
  sum(lin.forward(ones({4, 3}))).backward();
  REQUIRE(lin.weight.grad().defined());
  const Tensor held = lin.weight.grad();
  const uint64_t version = held.version();
  lin.zero_grad(/*set_to_none=*/false);  // LibTorch's Module::zero_grad(bool set_to_none)
  CHECK(lin.weight.grad().data_ptr<float>() == held.data_ptr<float>());  // the same tensor
  check_close(lin.weight.grad(), zeros({2, 3}), 0.0f, 0.0f, "weight's gradient");
  check_close(lin.bias.grad(), zeros({2}), 0.0f, 0.0f, "bias's gradient");
  CHECK(held.version() > version);
  lin.zero_grad();
  CHECK_FALSE(lin.weight.grad().defined());
  CHECK_FALSE(lin.bias.grad().defined());
}

TEST_CASE("to(device) moves parameters in place so existing handles follow") {
  nn::Linear lin(3, 2);
  const Tensor held = lin.parameters()[0];  // e.g. an optimizer's handle
  const std::vector<float> before = held.to_vector();
  lin.to(Device::CPU);  // same device: nothing moves
  CHECK(held.impl() == lin.weight.impl());
  CHECK(held.to_vector() == before);
  if (cuda_available()) {
    lin.to(Device::CUDA);
    CHECK(held.device() == Device::CUDA);
    CHECK(lin.bias.device() == Device::CUDA);
    CHECK(held.to_vector() == before);
    CHECK(lin.forward(ones({1, 3}, Device::CUDA)).device() == Device::CUDA);
    lin.to(Device::CPU);
    CHECK(held.device() == Device::CPU);
    CHECK(held.to_vector() == before);
  }
}

TEST_CASE("Sequential feeds modules in order and containers index with checks") {
  manual_seed(3);
  auto lin1 = std::make_shared<nn::Linear>(3, 4);
  auto lin2 = std::make_shared<nn::Linear>(4, 2);
  nn::Sequential seq(lin1, std::make_shared<nn::ReLU>(), lin2);
  const Tensor x = randn({5, 3});
  check_close(seq.forward(x), lin2->forward(relu(lin1->forward(x))), 0.0f, 0.0f, "sequential");
  CHECK(seq.size() == 3);
  CHECK(seq.at<nn::Linear>(-1) == lin2);
  check_error([&] { seq.at<nn::ReLU>(0); }, {"Sequential", "Linear"});
  check_error([&] { seq[3]; }, {"Sequential", "3"});

  nn::ModuleList list;
  list.push_back(lin1);
  list.push_back(lin2);
  CHECK(list.size() == 2);
  int count = 0;
  for (const auto& m : list) count += m->name() == "Linear";
  CHECK(count == 2);
  check_error([&] { list[-3]; }, {"ModuleList", "-3"});
}

TEST_CASE("ModuleList<T> holds its modules typed: iterating and indexing give shared_ptr<T>") {
  nn::ModuleList<nn::Linear> list;
  list.push_back(std::make_shared<nn::Linear>(3, 4));
  list.push_back(std::make_shared<nn::Linear>(4, 2, false));
  CHECK(list.name() == "ModuleList");
  CHECK(list.size() == 2);
  int64_t outputs = 0;
  for (const std::shared_ptr<nn::Linear>& linear : list) outputs += linear->weight.size(0);
  CHECK(outputs == 6);
  CHECK(list[-1]->weight.shape() == Shape{2, 4});
  CHECK(list.front() == list[0]);
  CHECK(list.back() == list[1]);
  CHECK(joined_names(list) == "0.weight,0.bias,1.weight");
  check_error([&] { list[2]; }, {"ModuleList", "2", "2 modules"});
  // The untyped list holds anything, and at<T> casts back.
  nn::ModuleList<> any;
  any.push_back(std::make_shared<nn::ReLU>());
  any.push_back(std::make_shared<nn::Linear>(2, 2));
  CHECK(any.at<nn::Linear>(1)->weight.shape() == Shape{2, 2});
  check_error([&] { any.at<nn::Linear>(0); }, {"ModuleList", "ReLU"});
}

// BERT's nesting by dotted names: no member (nor class) for the levels between.
struct Dotted : nn::Module {
  Dotted() {
    embed = register_module("embeddings.word", std::make_shared<nn::Embedding>(5, 2));
    layers = register_module("encoder.layer", std::make_shared<nn::ModuleList<nn::Linear>>());
    layers->push_back(std::make_shared<nn::Linear>(2, 2));
    get_submodule("encoder")->register_parameter("scale", ones({2}));
    dense = register_module("encoder.pooler.dense", std::make_shared<nn::Linear>(2, 1, false));
  }
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::ModuleList<nn::Linear>> layers;
  std::shared_ptr<nn::Linear> dense;
};

TEST_CASE("register_module takes dotted names: PyTorch's nesting, the levels made as needed") {
  Dotted m;
  CHECK(joined_names(m) ==
        "embeddings.word.weight,encoder.scale,encoder.layer.0.weight,encoder.layer.0.bias,"
        "encoder.pooler.dense.weight");
  CHECK(m.named_children().size() == 2);  // embeddings, encoder
  CHECK(m.get_submodule("encoder.layer").get() == m.layers.get());
  CHECK(m.get_submodule("encoder.pooler.dense").get() == m.dense.get());
  m.eval();
  CHECK_FALSE(m.get_submodule("encoder.pooler")->is_training());
  check_error([&] { m.get_submodule("encoder.missing"); }, {"get_submodule", "encoder.missing"});
  check_error([&] { m.register_module("encoder.layer", std::make_shared<nn::ReLU>()); },
              {"register_module", "'layer'"});
  check_error([&] { m.register_module("a..b", std::make_shared<nn::ReLU>()); }, {"a..b"});
  check_error([&] { m.register_module("encoder.", std::make_shared<nn::ReLU>()); }, {"encoder."});
  check_error([&] { m.register_module("encoder.scale.x", std::make_shared<nn::ReLU>()); },
              {"register_module", "'scale'"});
}

TEST_CASE("py_repr formats numbers and bools as Python does") {
  CHECK(nn::py_repr(true) == "True");
  CHECK(nn::py_repr(1e-5) == "1e-05");
  CHECK(nn::py_repr(0.1) == "0.1");
  CHECK(nn::py_repr(1.0) == "1.0");
}
