// Fills in the blanks with a BERT pre-trained by train_bert: every [MASK] of --text gets the
// model's five most probable tokens, with their probabilities (the masked-LM head of Devlin et
// al. 2018, sec. 3.1), and --attention draws what every head of one layer looks at for that
// sentence (the "what does BERT look at" figure of the seed lectures; Clark et al. 2019).
//
//   fill_mask --text "The meaning of [MASK] is"               reads out-bert/ (train_bert's --out)
//   fill_mask --pretrained run1 --text "A [MASK] a day keeps the doctor away." --attention att.png
//   fill_mask --help
//
// The input is [CLS] text [SEP]; "[MASK]" in the text is the mask token (the tokenizer itself
// never reads special-token strings: the text is cut at each "[MASK]" and the pieces tokenized).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "bert_files.h"
#include "cli.h"
#include "loom.h"

using namespace loom;

namespace {

// [CLS] pieces-with-[MASK] [SEP]
std::vector<int64_t> encode_with_masks(const data::WordPieceTokenizer& tok,
                                       const std::string& text) {
  const std::string mask = "[MASK]";
  std::vector<int64_t> ids{tok.token_id("[CLS]")};
  for (size_t start = 0;;) {
    const size_t at = text.find(mask, start);
    const std::vector<int64_t> piece = tok.encode(std::string_view(text).substr(
        start, at == std::string::npos ? std::string::npos : at - start));
    ids.insert(ids.end(), piece.begin(), piece.end());
    if (at == std::string::npos) break;
    ids.push_back(tok.token_id("[MASK]"));
    start = at + mask.size();
  }
  ids.push_back(tok.token_id("[SEP]"));
  return ids;
}

}  // namespace

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);
  std::string dir = "out-bert", text = "The meaning of [MASK] is", attention;
  int64_t top = 5, layer = -1;
  CLI::App app{"fill_mask: a pre-trained BERT's top tokens for every [MASK] of a text"};
  cli::show_defaults(app);
  app.add_option(
      "--pretrained,--dir", dir,
      "train_bert's --out directory (tokenizer.txt, ckpt.safetensors), as finetune_bert");
  app.add_option("--text", text, "the text, with one or more [MASK]");
  app.add_option("--top", top, "tokens shown per mask")->check(cli::range(1, 100));
  app.add_option("--attention", attention, "write every head's attention of --layer to this PNG");
  app.add_option("--layer", layer, "the layer of --attention (-1 = the last)")
      ->check(cli::range(int64_t{-10000}, int64_t{10000}));  // models::kMaxLayers either way
  CLI11_PARSE(app, argc, argv);
  cli::print_config(app);

  examples::Pretrained pretrained = examples::load_pretrained(dir);
  const data::WordPieceTokenizer& tok = pretrained.tokenizer;
  models::Bert& model = *pretrained.model;
  model.eval();
  const std::vector<int64_t> ids = encode_with_masks(tok, text);
  const auto T = static_cast<int64_t>(ids.size());
  LOOM_CHECK(T <= model.config().max_position,
             "fill_mask: the text is {} tokens long, the model reads at most {}", T,
             model.config().max_position);
  const int64_t mask_id = tok.token_id("[MASK]");
  LOOM_CHECK(std::count(ids.begin(), ids.end(), mask_id) > 0, "fill_mask: --text has no [MASK]");

  NoGradGuard no_grad;
  std::vector<Tensor> attentions;
  const models::BertOutput out =
      model.forward(tensor_i64(ids, {1, T}), Tensor(), Tensor(), &attentions);
  const Tensor probs = softmax(out.mlm_logits.select(0, 0), -1);  // (T, V)
  fmt::print("{}\n", tok.decode(ids));
  for (int64_t t = 0; t < T; ++t) {
    if (ids[static_cast<size_t>(t)] != mask_id) continue;
    const std::vector<float> p = probs.select(0, t).to_vector();
    std::vector<int64_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    fmt::print("[MASK] at position {}:\n", t);
    for (int64_t k = 0; k < top; ++k)
      fmt::print("  {:>2}. {:<16} {:6.2f}%\n", k + 1, tok.token(order[k]), 100 * p[order[k]]);
  }

  if (!attention.empty()) {  // one heat map (query rows x key columns) per head, side by side
    const int64_t L = static_cast<int64_t>(attentions.size()), l = layer < 0 ? L + layer : layer;
    LOOM_CHECK(l >= 0 && l < L, "fill_mask: --layer {} outside the model's {} layers", layer, L);
    std::vector<std::string> labels;
    for (const int64_t id : ids) labels.push_back(tok.token(id));
    const Tensor a = attentions[static_cast<size_t>(l)].select(0, 0);  // (heads, T, T)
    std::vector<data::Image> panels;
    for (int64_t h = 0; h < a.size(0); ++h)
      panels.push_back(data::labelled_heatmap(a.select(0, h).contiguous(), labels, labels,
                                              fmt::format("layer {} head {}", l, h), 16));
    data::write_png(data::tile(panels, std::min<int64_t>(4, a.size(0))), attention);
    fmt::print("wrote {} (layer {}, {} heads)\n", attention, l, a.size(0));
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
