// GPT: presets and parameter counts, logits and every parameter gradient against PyTorch,
// loading Hugging Face GPT-2 checkpoints, and the errors of bad inputs.
#include <unistd.h>

#include <filesystem>

#include "gpt_fixture.h"
#include "nn/functional.h"
#include "nn/multihead_attention.h"

using namespace loom;
using namespace loom::testing;
using models::GPT;
using models::GPTConfig;
namespace fs = std::filesystem;

namespace {

// A scratch file name unique to this process.
std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("loom_test_gpt_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// The expected message fragment is part of the thrown loom::Error.
void check_throws_with(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL_CHECK("expected a loom::Error containing '" << fragment << "'");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos,
                  "message '" << e.what() << "' lacks '" << fragment << "'");
  }
}

// A scalar that depends on every element of `out` with distinct weights, for gradcheck.
Tensor weighted_sum(const Tensor& out) {
  manual_seed(7);
  return sum(out * randn(out.shape(), out.device()));
}

}  // namespace

TEST_CASE("GPT presets have the sizes of the benchmark's gpt-mini and of OpenAI's GPT-2") {
  const GPTConfig mini = GPTConfig::preset("gpt-mini");
  CHECK(mini.vocab_size == 256);
  CHECK(mini.context == 128);
  CHECK(mini.n_layer == 4);
  CHECK(mini.n_head == 4);
  CHECK(mini.d_model == 256);
  const GPTConfig small = GPTConfig::preset("gpt2");
  CHECK(small.vocab_size == 50257);
  CHECK(small.context == 1024);
  CHECK(small.n_layer == 12);
  CHECK(small.n_head == 12);
  CHECK(small.d_model == 768);
  const GPTConfig medium = GPTConfig::preset("gpt2-medium");
  CHECK(medium.n_layer == 24);
  CHECK(medium.n_head == 16);
  CHECK(medium.d_model == 1024);
  for (const auto& name : GPTConfig::preset_names())
    CHECK_NOTHROW(GPTConfig::preset(name).validate());
  check_throws_with([] { GPTConfig::preset("gpt5"); }, "gpt5");
}

TEST_CASE("GPT parameter counts equal PyTorch's, the tied LM head counted once") {
  // count.<preset>: sum of numel over a PyTorch GPT of that size (gen_gpt.py).
  for (const char* name : {"gpt-mini", "gpt2", "gpt2-medium"}) {
    const int64_t expected = static_cast<int64_t>(gpt_golden(std::string("count.") + name).item());
    CHECK_MESSAGE(GPTConfig::preset(name).num_parameters() == expected, name);
  }
  // The models built agree with the formula (GPT-2's 124M parameters take too long to
  // initialise for a unit test; the formula stands in for it).
  CHECK(GPT(GPTConfig::preset("gpt-mini")).num_parameters() ==
        static_cast<int64_t>(gpt_golden("count.gpt-mini").item()));
  CHECK(GPT(tiny_gpt_config()).num_parameters() == tiny_gpt_config().num_parameters());
}

TEST_CASE("GPT parameter names follow Hugging Face's GPT-2, in nanoGPT's order") {
  GPT model(tiny_gpt_config());
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  std::vector<std::string> expected = {"wte.weight", "wpe.weight"};
  for (int i = 0; i < 2; ++i)
    for (const char* s :
         {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      expected.push_back("h." + std::to_string(i) + "." + s);
  expected.push_back("ln_f.weight");
  expected.push_back("ln_f.bias");
  CHECK(names == expected);
  // Every name has a golden tensor written by PyTorch under the same name.
  for (const auto& name : names) CHECK(gpt_golden().count("param." + name) == 1);
}

TEST_CASE("GPT initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)") {
  GPTConfig config = GPTConfig::preset("gpt-mini");
  manual_seed(7);
  GPT model(config);
  auto stddev = [](const Tensor& t) { return std::sqrt(mean(pow(t, 2.0f)).item()); };
  const float resid = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  CHECK(stddev(model.wte->weight) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(stddev(model.blocks().front()->attn->c_attn->weight) ==
        doctest::Approx(0.02).epsilon(0.02));
  CHECK(stddev(model.blocks().front()->mlp->c_fc->weight) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(stddev(model.blocks().back()->attn->c_proj->weight) ==
        doctest::Approx(resid).epsilon(0.02));
  CHECK(stddev(model.blocks().back()->mlp->c_proj->weight) == doctest::Approx(resid).epsilon(0.02));
  CHECK(max(abs(model.blocks().front()->attn->c_attn->bias)).item() == 0.0f);
  CHECK(mean(model.ln_f->weight).item() == 1.0f);
}

TEST_CASE("GPT logits, loss and every parameter gradient match PyTorch") {
  auto model = golden_gpt();
  const Tensor ids = gpt_golden("ids"), targets = gpt_golden("targets");
  const Tensor logits = model->forward(ids);  // (B, T, vocab)
  check_close(logits, gpt_golden("logits"), 1e-4f, 1e-5f, "logits");
  const Tensor loss = cross_entropy(logits.reshape({-1, 13}), targets.reshape({-1}));
  check_close(loss, gpt_golden("loss"), 1e-5f, 1e-6f, "loss");
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name << " got no gradient");
    check_close(p.grad(), gpt_golden("grad." + name), 1e-3f, 1e-5f, "grad " + name);
  }
}

TEST_CASE("GPT is causal: changing a later token leaves earlier logits unchanged") {
  auto model = golden_gpt();
  NoGradGuard no_grad;
  std::vector<int64_t> a = {1, 2, 3, 4, 5, 6}, b = a;
  b[4] = 11;
  const Tensor la = model->forward(tensor_i64(a, {1, 6})),
               lb = model->forward(tensor_i64(b, {1, 6}));
  check_close(la.narrow(1, 0, 4), lb.narrow(1, 0, 4), 0.0f, 0.0f, "positions before the change");
  CHECK(max(abs(la.narrow(1, 4, 2) - lb.narrow(1, 4, 2))).item() > 1e-3f);
}

TEST_CASE("load_gpt2_hf reads Hugging Face's GPT2LMHeadModel layout and matches PyTorch") {
  const std::string path = std::string(LOOM_TEST_DATA) + "/gpt_hf.safetensors";
  manual_seed(1);
  GPT model(tiny_gpt_config());
  models::load_gpt2_hf(model, path);
  NoGradGuard no_grad;
  check_close(model.forward(gpt_golden("ids")), gpt_golden("logits"), 1e-4f, 1e-5f, "HF logits");
  // Conv1D weights [in, out] arrive transposed into Linear's [out, in].
  check_close(model.blocks()[1]->mlp->c_fc->weight, gpt_golden("param.h.1.mlp.c_fc.weight"), 0, 0,
              "c_fc");

  SUBCASE("GPT2Model layout: no 'transformer.' prefix, no lm_head, no buffers") {
    std::map<std::string, Tensor> file = nn::read_safetensors(path);
    std::vector<std::pair<std::string, Tensor>> bare;
    for (auto& [name, t] : file)
      if (name.rfind("transformer.", 0) == 0 && name.find(".attn.bias") == std::string::npos &&
          name.find("masked_bias") == std::string::npos)
        bare.emplace_back(name.substr(12), t);
    const std::string bare_path = temp_path("bare.safetensors");
    nn::write_safetensors(bare_path, bare);
    GPT other(tiny_gpt_config());
    models::load_gpt2_hf(other, bare_path);
    check_close(other.forward(gpt_golden("ids")), gpt_golden("logits"), 1e-4f, 1e-5f, "bare");
    fs::remove(bare_path);
  }
}

TEST_CASE("load_gpt2_hf rejects files that do not fit the model, naming file and tensor") {
  const std::string path = std::string(LOOM_TEST_DATA) + "/gpt_hf.safetensors";
  std::map<std::string, Tensor> file = nn::read_safetensors(path);
  auto write_variant = [&](const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    std::map<std::string, Tensor> copy = file;
    edit(copy);
    const std::string out = temp_path("variant.safetensors");
    nn::write_safetensors(out, {copy.begin(), copy.end()});
    return out;
  };
  GPT model(tiny_gpt_config());

  SUBCASE("missing tensor") {
    const std::string p = write_variant([](auto& m) { m.erase("transformer.h.1.ln_2.bias"); });
    check_throws_with([&] { models::load_gpt2_hf(model, p); }, "h.1.ln_2.bias");
    fs::remove(p);
  }
  SUBCASE("a deeper model than the config") {
    const std::string p =
        write_variant([](auto& m) { m["transformer.h.2.ln_1.weight"] = ones({12}); });
    check_throws_with([&] { models::load_gpt2_hf(model, p); }, "h.2.ln_1.weight");
    fs::remove(p);
  }
  SUBCASE("wrong width") {
    const std::string p = write_variant([](auto& m) {
      m["transformer.wpe.weight"] = zeros({9, 10});
    });
    check_throws_with([&] { models::load_gpt2_hf(model, p); }, "wpe.weight");
    fs::remove(p);
  }
  SUBCASE("untied LM head") {
    const std::string p = write_variant([](auto& m) { m["lm_head.weight"] = zeros({13, 12}); });
    check_throws_with([&] { models::load_gpt2_hf(model, p); }, "lm_head.weight");
    fs::remove(p);
  }
  SUBCASE("missing file") {
    check_throws_with([&] { models::load_gpt2_hf(model, "/nonexistent/gpt2.safetensors"); },
                      "/nonexistent/gpt2.safetensors");
  }
}

TEST_CASE("GPT rejects bad configs and inputs with messages naming the problem") {
  GPTConfig bad = tiny_gpt_config();
  bad.n_head = 5;  // 12 is not a multiple of 5
  check_throws_with([&] { GPT m(bad); }, "n_head 5");
  bad = tiny_gpt_config();
  bad.dropout = 1.0f;
  check_throws_with([&] { GPT m(bad); }, "dropout");
  bad = tiny_gpt_config();
  bad.context = 0;
  check_throws_with([&] { GPT m(bad); }, "positive");

  GPT model(tiny_gpt_config());
  check_throws_with([&] { model.forward(zeros({2, 3})); }, "int64");
  check_throws_with([&] { model.forward(tensor_i64({1, 2, 3}, {3})); }, "[3]");
  check_throws_with(
      [&] {
        model.forward(tensor_i64(std::vector<int64_t>(10, 1), {1, 10}));
      },
      "context length 9");
  check_throws_with([&] { model.forward(tensor_i64({1, 13}, {1, 2})); }, "13");
}

TEST_CASE("GPT's attention equals MultiheadAttention with a causal mask, weights shared") {
  // Both attend through nn::functional::scaled_dot_product_attention: GPT with causal = true,
  // MultiheadAttention with the explicit additive mask. c_attn [3C, C] stacks W_q, W_k, W_v as
  // in_proj_weight does.
  auto model = golden_gpt();
  const auto& attn = *model->blocks()[0]->attn;
  nn::MultiheadAttention mha(12, 2);
  {
    NoGradGuard no_grad;
    mha.in_proj_weight.copy_(attn.c_attn->weight);
    mha.in_proj_bias.copy_(attn.c_attn->bias);
    mha.out_proj->weight.copy_(attn.c_proj->weight);
    mha.out_proj->bias.copy_(attn.c_proj->bias);
  }
  manual_seed(13);
  const Tensor x = randn({2, 6, 12});
  check_close(attn.forward(x), mha.forward(x, x, x, nn::functional::causal_mask(6)), 1e-5f, 1e-6f,
              "GPT attention vs MultiheadAttention");
}

TEST_CASE("gradcheck: GPT's causal self-attention and MLP") {
  manual_seed(14);
  GPT model(tiny_gpt_config());
  const auto& block = *model.blocks()[0];
  {
    NoGradGuard no_grad;  // larger weights than the init, so the softmax is far from uniform
    block.attn->c_attn->weight.mul_(20.0f);
  }
  gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(block.attn->forward(t[0])); },
            {randn({1, 4, 12}), block.attn->c_attn->weight, block.attn->c_proj->bias}, 1e-2f, 2e-2f,
            2e-3f, "attention");
  gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(block.mlp->forward(t[0])); },
            {randn({1, 3, 12}), block.mlp->c_fc->weight, block.mlp->c_proj->weight}, 1e-2f, 2e-2f,
            2e-3f, "mlp");
}
