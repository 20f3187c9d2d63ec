// Translates English into German with a model trained by train_translate: reads the checkpoint
// (model config in its metadata) and the tokenizer from --out, then each line of --text or of
// standard input, and prints one German line per English line.
//
//   echo "I'm sure we can come to some arrangement." | translate --out out-translate
//   translate --out out-translate --text "the exact time" --beam 1      greedy
//   translate --text "side slope of a dam" --attention att.png
//       also draws the last decoder layer's cross-attention (mean over heads) of the sentence:
//       German tokens (rows) x English tokens (columns), the figure of the seed lectures
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "loom.h"
#include "models/transformer.h"

using namespace loom;

int main(int argc, char** argv) try {
  std::string out = "out-translate", text, device = "cpu", attention;
  int64_t beam = 4, max_len = 64;
  float length_penalty = 0.6f;
  CLI::App app{"translate: English -> German with a train_translate checkpoint"};
  cli::show_defaults(app);
  app.add_option("--out", out, "train_translate's directory (ckpt.safetensors, tokenizer.txt)");
  app.add_option("--text", text, "translate this instead of the lines of standard input");
  app.add_option("--beam", beam, "beam width (1 = greedy)")
      ->check(cli::range(int64_t{1}, int64_t{1000}));
  app.add_option("--max-len", max_len, "most German tokens per sentence")
      ->check(cli::positive_integer);
  app.add_option("--length-penalty", length_penalty, "GNMT length penalty alpha (0 = off)")
      ->check(cli::finite_non_negative);
  app.add_option("--attention", attention,
                 "write the cross-attention map of the (first) sentence to this PNG");
  cli::add_device(app, device);
  CLI11_PARSE(app, argc, argv);

  const std::string ckpt = out + "/ckpt.safetensors";
  const std::string tok_path = out + "/tokenizer.txt";
  const auto config = models::TransformerConfig::from_metadata(nn::read_metadata(ckpt), ckpt);
  const data::BPETokenizer tok = data::BPETokenizer::load(tok_path);
  data::check_vocab_sizes(tok.vocab_size(), tok_path, config.src_vocab_size, ckpt);
  models::Transformer model(config);
  nn::load_checkpoint(ckpt, {{"model", &model}});
  model.to(cli::device_of(device));
  model.eval();
  const int64_t bos = tok.special_token_id("<bos>"), eos = tok.special_token_id("<eos>");
  max_len = std::min(max_len, config.max_len);

  // Each token as text, for the heat map's labels.
  auto pieces = [&](const std::vector<int64_t>& ids) {
    std::vector<std::string> out;
    for (int64_t id : ids) out.push_back(tok.decode({id}));
    return out;
  };
  auto translate = [&](const std::string& english) {
    std::vector<int64_t> src = tok.encode(english);
    if (static_cast<int64_t>(src.size()) >= config.max_len) src.resize(config.max_len - 1);
    src.push_back(eos);
    const std::vector<int64_t> german =
        model.translate(src, bos, eos, max_len, beam, length_penalty);
    fmt::print("{}\n", tok.decode(german));
    std::fflush(stdout);
    if (attention.empty()) return;
    // Re-run the decoder on bos + translation: row t is the attention that produced token t.
    std::vector<int64_t> tgt = {bos};
    tgt.insert(tgt.end(), german.begin(), german.end());
    std::vector<Tensor> cross;
    {
      NoGradGuard no_grad;
      model.forward(
          tensor_i64(src, {1, static_cast<int64_t>(src.size())}).to(model.emb->weight.device()),
          tensor_i64(tgt, {1, static_cast<int64_t>(tgt.size())}).to(model.emb->weight.device()),
          &cross);
    }
    const Tensor map = mean(cross.back(), 1).reshape({static_cast<int64_t>(tgt.size()), -1}).cpu();
    std::vector<int64_t> produced = german;
    produced.push_back(eos);
    data::write_png(data::labelled_heatmap(map, pieces(produced), pieces(src),
                                           "cross-attention, last decoder layer"),
                    attention);
    fmt::print(stderr, "wrote {}\n", attention);
    attention.clear();  // the first sentence only
  };
  PackedWeightsGuard packed;  // fixed weights for every line: each packed once for them all
  if (!text.empty()) {
    translate(text);
  } else {
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) translate(line);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
