// loom's public API contract (the names and meanings programs outside the project are written
// against), written the way such a program writes it: only "loom.h" and `using namespace loom;`,
// configs filled by designated initializers in the contract's order of the fields (which also
// pins that order), defaults left out, and the documented shapes, conventions and errors
// checked. The models' own suites test the numbers against PyTorch; this file fails when a name,
// a field, a default or a meaning of the contract drifts.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "loom.h"
#include "test_util.h"

using namespace loom;
using loom::testing::expect_error;

TEST_CASE("API contract: Transformer config, forward and translate as documented") {
  manual_seed(0);
  const models::TransformerConfig config{.src_vocab_size = 20, .tgt_vocab_size = 20,
                                         .d_model = 16, .n_head = 2, .n_encoder_layers = 1,
                                         .n_decoder_layers = 1, .d_ff = 32, .max_len = 32};
  CHECK(config.pad_id == 0);
  CHECK(config.dropout == doctest::Approx(0.1f));
  CHECK_FALSE(config.norm_first);
  CHECK(config.share_embeddings);
  CHECK(models::TransformerConfig::preset("seq2seq-mini").d_model == 256);
  CHECK(models::TransformerConfig::preset("transformer-base").d_model == 512);
  models::Transformer model(config);
  model.eval();
  const Tensor src = tensor_i64({5, 6, 7, 0, 8, 9, 3, 4}, {2, 4});   // a padded source
  const Tensor tgt = tensor_i64({1, 5, 6, 1, 7, 0}, {2, 3});
  CHECK(model.forward(src, tgt).shape() == Shape{2, 3, 20});   // [B, T, tgt_vocab]

  const std::vector<int64_t> greedy = model.translate({5, 6, 7}, /*bos_id=*/1, /*eos_id=*/2, 6);
  CHECK(greedy.size() <= 6);
  CHECK(model.translate({5, 6, 7}, 1, 2, 6, /*beam=*/1, /*length_penalty=*/0.0f) == greedy);
  const auto batch = model.translate_batch({{5, 6, 7}, {8, 9}}, 1, 2, 6);
  REQUIRE(batch.size() == 2);
  CHECK(batch[0] == greedy);
  CHECK(model.translate_batch({{5, 6, 7}}, 1, 2, 6, /*beam=*/3, 0.6f).size() == 1);
}

TEST_CASE("API contract: DETR config, outputs, loss and loader names as documented") {
  manual_seed(0);
  models::DETRConfig config{.num_classes = 3, .backbone = "small", .in_channels = 1,
                            .hidden = 16, .n_head = 2, .n_encoder_layers = 1,
                            .n_decoder_layers = 2, .d_ff = 32, .num_queries = 4,
                            .dropout = 0.0f};
  CHECK(models::DETRConfig::preset("detr-r50").num_classes == 91);
  CHECK(models::DETRConfig::preset("detr-fmnist").backbone == "small");
  models::DETR model(config);
  const models::DETROutput out = model.forward(rand({2, 1, 64, 64}));
  CHECK(out.logits.shape() == Shape{2, 4, 4});   // num_classes + 1 ("no object" last)
  CHECK(out.boxes.shape() == Shape{2, 4, 4});
  REQUIRE(out.aux_logits.size() == 1);           // one per decoder layer but the last
  CHECK(out.aux_boxes.size() == 1);
  for (float b : out.boxes.to_vector()) CHECK((b > 0.0f && b < 1.0f));   // sigmoid outputs

  const models::DETRLossConfig loss_config{.num_classes = 3};   // a default-constructible aggregate
  CHECK(loss_config.eos_coef == doctest::Approx(0.1f));
  const std::vector<models::DETRTarget> targets{
      {tensor_i64({1}, {1}), tensor({0.5f, 0.5f, 0.2f, 0.3f}, {1, 4})},
      {tensor_i64({}, {0}), zeros({0, 4})}};                    // an image with no targets
  const Tensor loss = models::detr_loss(out.logits, out.boxes, targets, loss_config);
  CHECK(loss.numel() == 1);
  CHECK(std::isfinite(loss.item()));
  loss.backward();
  expect_error([&] { models::load_detr(model, "/nonexistent/detr.safetensors"); },
               {"/nonexistent/detr.safetensors"});
}

TEST_CASE("API contract: linear_sum_assignment as scipy's") {
  const auto [rows, cols] = linear_sum_assignment(tensor({4, 1, 3, 2, 0, 5, 3, 2, 2}, {3, 3}));
  CHECK(rows == std::vector<int64_t>{0, 1, 2});
  CHECK(cols == std::vector<int64_t>{1, 0, 2});
  const auto [r2, c2] = linear_sum_assignment(zeros({3, 0}));   // n x 0: two empty vectors
  CHECK(r2.empty());
  CHECK(c2.empty());
  const float inf = std::numeric_limits<float>::infinity();
  expect_error([&] { linear_sum_assignment(tensor({inf, inf, 1, 2}, {2, 2})); },
               {"linear_sum_assignment"});   // no assignment avoids the forbidden pairs
  expect_error([&] { linear_sum_assignment(tensor({std::nanf(""), 1, 2, 3}, {2, 2})); },
               {"linear_sum_assignment"});
}

TEST_CASE("API contract: metrics as sacreBLEU and COCOeval compute them") {
  // sacreBLEU's README example with its first reference stream only (the two-stream score,
  // 48.530827, is in tests/metrics): 13a splits off the final periods, giving clipped 1-4-gram
  // matches 12/17, 6/14, 4/11, 3/8 and equal lengths, so BLEU = (12/17 6/14 4/11 3/8)^(1/4) = 45.0675.
  const std::vector<std::string> hyps{"The dog bit the man.", "It wasn't surprising.",
                                      "The man had just bitten him."};
  const std::vector<std::string> refs{"The dog bit the man.", "It was not unexpected.",
                                      "The man bit him first."};
  CHECK(metrics::corpus_bleu(hyps, refs) == doctest::Approx(45.067506321).epsilon(1e-9));
  CHECK(metrics::corpus_bleu(refs, refs) == doctest::Approx(100.0));
  const double chrf = metrics::corpus_chrf(hyps, refs);
  CHECK((chrf > 0.0 && chrf < 100.0));
  expect_error([&] { metrics::corpus_bleu(hyps, {"one"}); }, {"3", "1"});

  const std::vector<metrics::Box> truth{{.image = 0, .label = 1, .x0 = 0, .y0 = 0, .x1 = 10, .y1 = 10}};
  const metrics::APResult perfect = metrics::coco_average_precision(
      {{.image = 0, .label = 1, .x0 = 0, .y0 = 0, .x1 = 10, .y1 = 10, .score = 0.9f}}, truth);
  CHECK(perfect.ap == doctest::Approx(1.0));
  CHECK(perfect.ap50 == doctest::Approx(1.0));
  CHECK(perfect.ap75 == doctest::Approx(1.0));
  CHECK(metrics::coco_average_precision({}, {}).ap == doctest::Approx(-1.0));   // as COCOeval
}

TEST_CASE("API contract: Bert outputs, masks and the Hugging Face layout as documented") {
  manual_seed(0);
  const models::BertConfig config{.vocab_size = 30, .hidden = 16, .n_layer = 1, .n_head = 2,
                                  .intermediate = 32, .max_position = 16};
  CHECK(config.type_vocab_size == 2);
  CHECK(config.layer_norm_eps == doctest::Approx(1e-12f));
  CHECK(models::BertConfig::preset("bert-mini").hidden > 0);
  CHECK(models::BertConfig::preset("bert-base").hidden == 768);
  models::Bert model(config);
  model.eval();
  const Tensor ids = tensor_i64({2, 5, 6, 3, 7, 3, 2, 8, 3, 0, 0, 0}, {2, 6});
  const models::BertOutput out = model.forward(ids);   // types all 0, every position a token
  CHECK(out.hidden.shape() == Shape{2, 6, 16});
  CHECK(out.pooled.shape() == Shape{2, 16});
  CHECK(out.mlm_logits.shape() == Shape{2, 6, 30});
  CHECK(out.nsp_logits.shape() == Shape{2, 2});
  // attention_mask as int64 or float (1 = token, 0 = padding) means the same
  const Tensor types = tensor_i64({0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}, {2, 6});
  const Tensor mask_i = tensor_i64({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, {2, 6});
  const auto a = model.forward(ids, types, mask_i).pooled.to_vector();
  const auto b = model.forward(ids, types, mask_i.to(DType::Float32)).pooled.to_vector();   // float mask
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
  expect_error([&] { models::load_bert_hf(model, "/nonexistent/bert.safetensors"); },
               {"/nonexistent/bert.safetensors"});
}

TEST_CASE("API contract: WordPieceTokenizer as BERT's FullTokenizer, and load_tokenizer") {
  const std::string dir = std::filesystem::temp_directory_path() / "loom_api_wordpiece";
  std::filesystem::create_directories(dir);
  const std::string vocab = dir + "/vocab.txt";
  {
    std::ofstream f(vocab);
    f << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nun\n##aff\n##able\n,\n!\ncafe\n";
  }
  const auto tok = data::WordPieceTokenizer::from_vocab_file(vocab);   // lower_case by default
  // lower-cased, accents stripped (NFD, Mn dropped), punctuation split, ## continuations
  CHECK(tok.encode("The UNAFFABLE, Café!") == std::vector<int64_t>{5, 6, 7, 8, 9, 11, 10});
  CHECK(tok.encode("xyz") == std::vector<int64_t>{1});   // no match: [UNK]
  CHECK(tok.token_id("[MASK]") == 4);
  expect_error([&] { tok.token_id("[NOPE]"); }, {"[NOPE]"});
  tok.save(dir + "/tokenizer.txt");
  const std::unique_ptr<data::Tokenizer> loaded = data::load_tokenizer(dir + "/tokenizer.txt");
  CHECK(loaded->encode("the unaffable") == std::vector<int64_t>{5, 6, 7, 8});
  std::filesystem::remove_all(dir);
}
