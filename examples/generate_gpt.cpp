// Completes a prompt with a GPT trained by train_gpt, printing the text as it is generated:
//
//   generate_gpt --prompt "Studying Deep-Learning is"
//   generate_gpt --out out-gpt --prompt "A fool" --tokens 200 --temperature 0.8 --top-p 0.9
//
// The checkpoint (<out>/ckpt.safetensors, written by nn::save_checkpoint) carries the model's
// config in its metadata (GPTConfig::to_metadata) and the weights as "model.<name>"; the
// tokenizer is <out>/tokenizer.txt.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cli.h"
#include "loom.h"

using namespace loom;

namespace {

// The model of a train_gpt checkpoint, of the config its metadata holds (the optimizer state
// in the same file is not needed here).
std::unique_ptr<models::GPT> load_model(const std::string& path, const models::GPTConfig& config) {
  auto model = std::make_unique<models::GPT>(config);
  nn::load_checkpoint(path, {{"model", model.get()}});
  return model;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string out = "out-gpt", prompt_text = "Studying Deep-Learning is", device = "cpu";
  models::GenerateOptions options;
  options.max_new_tokens = 200;
  options.temperature = 0.8f;
  uint64_t seed = 0;
  int64_t samples = 1;
  bool no_cache = false;
  CLI::App app{"generate_gpt: completes a prompt with a GPT trained by train_gpt"};
  cli::show_defaults(app);
  app.add_option("--out", out, "directory of train_gpt's ckpt.safetensors and tokenizer.txt");
  app.add_option("--prompt", prompt_text, "text to complete");
  app.add_option("--tokens", options.max_new_tokens, "new tokens per sample")
      ->check(cli::non_negative_integer);
  app.add_option("--temperature", options.temperature, "0 = greedy")
      ->check(cli::finite_non_negative);
  app.add_option("--top-k", options.top_k, "sample among the K most likely tokens, 0 = all")
      ->check(cli::non_negative_integer);
  app.add_option("--top-p", options.top_p, "nucleus sampling, 1 = off")
      ->check(cli::range(0.0, 1.0, "(]"));
  app.add_option("--samples", samples, "completions to print")->check(cli::non_negative_integer);
  app.add_option("--seed", seed, "sampling seed")->check(cli::non_negative_integer);
  app.add_flag("--no-cache", no_cache,
               "re-run the whole context for every token (slower, same result)");
  cli::add_device(app, device);
  CLI11_PARSE(app, argc, argv);
  options.use_cache = !no_cache;
  models::check_generate_options(options, "generate_gpt");  // before anything is printed

  // The config (checked against the parameter budget) and the tokenizer first: both files must
  // agree before any weight is read or any text printed.
  const std::string ckpt = out + "/ckpt.safetensors", tok_path = out + "/tokenizer.txt";
  const auto config = models::GPTConfig::from_metadata(nn::read_metadata(ckpt), ckpt);
  std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(tok_path);
  data::check_vocab_sizes(tok->vocab_size(), tok_path, config.vocab_size, ckpt);
  std::unique_ptr<models::GPT> model = load_model(ckpt, config);
  model->to(cli::device_of(device));
  model->eval();
  const std::vector<int64_t> prompt = tok->encode(prompt_text);
  LOOM_CHECK(!prompt.empty(), "generate_gpt: the prompt is empty");
  options.on_token = [&](int64_t id) {  // stream the text as it comes
    fmt::print("{}", tok->decode({id}));
    std::fflush(stdout);
  };
  manual_seed(seed);
  for (int64_t s = 0; s < samples; ++s) {
    fmt::print("{}", prompt_text);
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
