// The files a BERT pre-training run leaves in its --out directory, shared by train_bert (which
// writes them), fill_mask and finetune_bert (which read them):
//   tokenizer.txt      the WordPiece vocabulary (data::WordPieceTokenizer::save)
//   ckpt.safetensors   the training checkpoint: "model." + Bert (Hugging Face names), the AdamW
//                      state under "optim.", and the BertConfig and run position as metadata
//   bert.safetensors   the final weights alone, in Hugging Face's BertForPreTraining layout
//                      (models::save_bert_hf)
#pragma once

#include <memory>
#include <string>

#include "loom.h"

namespace loom::examples {

inline std::string tokenizer_path(const std::string& dir) { return dir + "/tokenizer.txt"; }
inline std::string checkpoint_path(const std::string& dir) { return dir + "/ckpt.safetensors"; }

// The tokenizer and the model of a pre-training run in `dir` (the checkpoint's "model." part).
struct Pretrained {
  data::WordPieceTokenizer tokenizer;
  std::unique_ptr<models::Bert> model;
};

inline Pretrained load_pretrained(const std::string& dir) {
  const std::string ckpt = checkpoint_path(dir);
  Pretrained p{data::WordPieceTokenizer::load(tokenizer_path(dir)), nullptr};
  const models::BertConfig config =
      models::BertConfig::from_metadata(nn::read_metadata(ckpt), ckpt);
  data::check_vocab_sizes(p.tokenizer.vocab_size(), tokenizer_path(dir), config.vocab_size, ckpt);
  p.model = std::make_unique<models::Bert>(config);
  nn::load_checkpoint(ckpt, {{"model", p.model.get()}});
  return p;
}

}  // namespace loom::examples
