// Completes a prompt with a GPT trained by train_gpt, printing the text as it is generated:
//
//   generate_gpt --prompt "Studying Deep-Learning is"
//   generate_gpt --out out-gpt --prompt "A fool" --tokens 200 --temperature 0.8 --top-p 0.9
//
// The checkpoint (<out>/ckpt.safetensors) carries the model's config in its metadata and the
// weights as "model.<name>"; the tokenizer is <out>/tokenizer.txt.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "loom.h"

using namespace loom;

namespace {

struct Options {
  std::string out = "out-gpt";
  std::string prompt = "Studying Deep-Learning is";
  int64_t tokens = 200;
  float temperature = 0.8f;
  int64_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int64_t samples = 1;
  bool cache = true;
  std::string device = "cpu";
};

void usage(const Options& d) {
  fmt::print(
      "usage: generate_gpt [--flag value]...\n"
      "  --out DIR          directory of train_gpt's ckpt.safetensors and tokenizer.txt ({})\n"
      "  --prompt TEXT      text to complete (\"{}\")\n"
      "  --tokens N         new tokens per sample ({})\n"
      "  --temperature T    0 = greedy ({})\n"
      "  --top-k K          sample among the K most likely tokens, 0 = all ({})\n"
      "  --top-p P          nucleus sampling, 1 = off ({})\n"
      "  --samples N        completions to print ({})\n"
      "  --seed S           sampling seed ({})\n"
      "  --no-cache         re-run the whole context for every token (slower, same result)\n"
      "  --device D         cpu | cuda ({})\n",
      d.out, d.prompt, d.tokens, d.temperature, d.top_k, d.top_p, d.samples, d.seed, d.device);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      LOOM_CHECK(i + 1 < argc, "generate_gpt: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--help" || a == "-h")
      usage(o), std::exit(0);
    else if (a == "--out")
      o.out = value();
    else if (a == "--prompt")
      o.prompt = value();
    else if (a == "--tokens")
      o.tokens = std::stoll(value());
    else if (a == "--temperature")
      o.temperature = std::stof(value());
    else if (a == "--top-k")
      o.top_k = std::stoll(value());
    else if (a == "--top-p")
      o.top_p = std::stof(value());
    else if (a == "--samples")
      o.samples = std::stoll(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--no-cache")
      o.cache = false;
    else if (a == "--device")
      o.device = value();
    else
      LOOM_FAIL("generate_gpt: unknown argument '{}' (see --help)", a);
  }
  return o;
}

// The model of a train_gpt checkpoint: config from the metadata, then the weights.
std::unique_ptr<models::GPT> load_model(const std::string& path) {
  std::map<std::string, std::string> meta;
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : nn::read_safetensors(path, &meta))
    if (name.rfind("model.", 0) == 0) state[name.substr(6)] = t;
  auto field = [&](const char* key) {
    LOOM_CHECK(meta.count(key), "generate_gpt: '{}' is not a train_gpt checkpoint (no '{}')", path,
               key);
    return std::stoll(meta[key]);
  };
  models::GPTConfig config;
  config.vocab_size = field("vocab_size");
  config.context = field("context");
  config.n_layer = field("n_layer");
  config.n_head = field("n_head");
  config.d_model = field("d_model");
  auto model = std::make_unique<models::GPT>(config);
  nn::load_state_dict(*model, state, path);
  return model;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::unique_ptr<models::GPT> model = load_model(o.out + "/ckpt.safetensors");
  std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(o.out + "/tokenizer.txt");
  model->to(o.device == "cuda" ? Device::CUDA : Device::CPU);
  model->eval();
  const std::vector<int64_t> prompt = tok->encode(o.prompt);
  LOOM_CHECK(!prompt.empty(), "generate_gpt: the prompt is empty");

  models::GenerateOptions options;
  options.max_new_tokens = o.tokens;
  options.temperature = o.temperature;
  options.top_k = o.top_k;
  options.top_p = o.top_p;
  options.use_cache = o.cache;
  options.on_token = [&](int64_t id) {  // stream the text as it comes
    fmt::print("{}", tok->decode({id}));
    std::fflush(stdout);
  };
  manual_seed(o.seed);
  for (int64_t s = 0; s < o.samples; ++s) {
    fmt::print("{}", o.prompt);
    const auto t0 = std::chrono::steady_clock::now();
    const size_t n = model->generate(prompt, options).size() - prompt.size();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("\n--- {} tokens in {:.2f} s ({:.0f} tokens/s)\n", n, secs, n / secs);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
