// ViT: the Vision Transformer (Dosovitskiy et al. 2020, "An Image is Worth 16x16 Words:
// Transformers for Image Recognition at Scale"), in the layout of timm's VisionTransformer.
//
//   images (B, C, H, W) -> patch_embed: a Conv2d with kernel = stride = patch, one D-vector per
//                          patch, flattened row-major into N = (H / patch) * (W / patch) tokens
//                       -> [cls_token, patches] + pos_embed             (B, 1 + N, D)  (eq. 1)
//                       -> n_layer pre-norm blocks: x + attn(norm1(x)), x + mlp(norm2(x)) (eq. 2-3)
//                       -> norm -> the class token's row -> head         (B, num_classes) (eq. 4)
//
//   attn = multi-head self-attention (no mask) through
//          nn::functional::scaled_dot_product_attention, q, k and v split from one Linear
//          qkv: D -> 3D;
//   mlp  = nn::FeedForward (fc1, exact GELU, fc2), timm's Mlp.
//   Dropout (config.dropout) sits where timm's does: after adding pos_embed (pos_drop), on the
//   attention probabilities (attn_drop), after attn.proj (proj_drop), after fc1's GELU and after
//   fc2 (mlp.drop1, mlp.drop2).
//
// Parameter names are timm's (cls_token [1, 1, D], pos_embed [1, 1 + N, D], patch_embed.proj,
// blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}, norm, head), so nn::load reads
// a timm state_dict saved as safetensors directly. LayerNorm eps is 1e-6, as timm's. ViT holds no
// persistent buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/tensor.h"
#include "nn/container.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/feed_forward.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
// ViTConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_VIT_CONFIG_FIELDS(F)                                                            \
  F(int64_t, image_size, 28, positive, "square images, image_size x image_size pixels")      \
  F(int64_t, patch_size, 7, positive, "square patches; image_size must be a multiple of it") \
  F(int64_t, in_channels, 1, positive, "image channels")                                     \
  F(int64_t, num_classes, 10, positive, "outputs of the head")                               \
  F(int64_t, d_model, 64, positive, "token width D; a multiple of n_head")                   \
  F(int64_t, n_layer, 4, positive, "transformer blocks")                                     \
  F(int64_t, n_head, 4, positive, "attention heads")                                         \
  F(int64_t, d_ff, 128, positive, "hidden width of each block's MLP")                        \
  F(float, dropout, 0.0f, probability, "timm's drop_rate = attn_drop_rate = proj_drop_rate")

struct ViTConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table vit.cpp defines as presets().
  LOOM_MODEL_CONFIG(ViTConfig, LOOM_VIT_CONFIG_FIELDS, "vit")

  // Presets: "vit-tiny-fmnist" (28x28x1, patch 7, D 64, 4 layers, 4 heads, MLP 128, 10 classes:
  // 139,018 parameters), "vit-fmnist" (28x28x1, patch 4, D 128, 6 layers, 4 heads, MLP 512, 10
  // classes: 1,199,882 parameters, the ViT of bench/reference/models.py), "vit-b16" (ViT-B/16 of
  // Dosovitskiy et al. 2020, table 1, on 224x224x3 ImageNet with 1000 classes: 86,567,656). Throws
  // for other names.
  // to_string() reads "image_size=28, patch_size=7, in_channels=1, num_classes=10, d_model=64,
  // n_layer=4, n_head=4, d_ff=128, dropout=0"
  // to_metadata() is the checkpoint metadata (nn::save_checkpoint), so a program rebuilds the model
  // from the file: {"model_type": "vit", "image_size": "28", ..., "dropout": "0"}. from_metadata
  // reads them back (other keys are ignored; "model_type" may be absent); a missing or garbled key,
  // another model_type or an invalid config is a loom::Error naming the key and `source` (the
  // file).

  // Tokens per image besides the class token: (image_size / patch_size)^2.
  int64_t num_patches() const;
  // Throws loom::Error naming the first invalid field (each field's check, then image_size a
  // multiple of patch_size and d_model of n_head, then loom's size budget).
  void validate() const;
  // Parameters of a ViT built from this config (P = C * patch^2, T = 1 + num_patches):
  //   patch_embed (P D + D) + cls_token D + pos_embed T D
  //   + n_layer * (4 D^2 + 2 D d_ff + 9 D + d_ff) + norm 2 D + head (D + 1) num_classes
  int64_t num_parameters() const;
};

// ---------------------------------------------------------------------------- blocks
// Patch embedding (Dosovitskiy et al. 2020, sec. 3.1): each patch x patch square of the image is
// flattened and projected to D; a Conv2d whose kernel and stride are both the patch size does
// exactly that. timm's PatchEmbed (no norm): its one child is named proj.
class PatchEmbed : public nn::Module {
 public:
  explicit PatchEmbed(const ViTConfig& config);
  // images (B, C, H, W) -> tokens (B, N, D), patches in row-major order.
  Tensor forward(const Tensor& images) const;

  std::shared_ptr<nn::Conv2d> proj;
};

// Multi-head self-attention over every token (Vaswani et al. 2017, sec. 3.2.2), q, k and v from
// one Linear qkv: D -> 3D whose output splits as (3, heads, head_dim), as timm's Attention.
class ViTAttention : public nn::Module {
 public:
  explicit ViTAttention(const ViTConfig& config);
  // x (B, T, D) -> (B, T, D); `probs`, when given, receives the attention probabilities
  // (B, heads, T, T) (after dropout, as timm's attn_drop).
  Tensor forward(const Tensor& x, Tensor* probs = nullptr) const;

  int64_t n_head, d_model;
  std::shared_ptr<nn::Linear> qkv, proj;
  std::shared_ptr<nn::Dropout> attn_drop, proj_drop;
};

// timm's Block without LayerScale or drop-path: pre-norm (Dosovitskiy et al. 2020, eq. 2-3),
//   x = x + attn(norm1(x));  x = x + mlp(norm2(x)).
class ViTBlock : public nn::Module {
 public:
  explicit ViTBlock(const ViTConfig& config);
  // x (B, T, D) -> (B, T, D), the residual stream (nn::Residual: each sum is formed by the
  // LayerNorm that reads it next); `probs` as ViTAttention::forward.
  nn::Residual forward(nn::Residual x, Tensor* probs = nullptr) const;

  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<ViTAttention> attn;
  std::shared_ptr<nn::FeedForward> mlp;  // fc1 -> GELU -> drop1 -> fc2 -> drop2
};

// ---------------------------------------------------------------------------- model
class ViT : public nn::Module {
 public:
  // timm's initialisation (VisionTransformer.init_weights, mode ''): Linear weights and pos_embed
  // trunc_normal_(std 0.02) with timm's bounds +-2 (absolute, so in effect N(0, 0.02)),
  // cls_token N(0, 1e-6), Linear biases 0, LayerNorm (1, 0); the patch projection keeps
  // Conv2d's default (PyTorch's U(+-1/sqrt(fan_in)), as timm does).
  explicit ViT(const ViTConfig& config);

  // float images (B, C, H, W), C = in_channels, H = W = image_size -> logits (B, num_classes)
  Tensor forward(const Tensor& images);
  // The same, and the attention probabilities of every block, in order, for attention maps:
  // attentions->at(i) is block i's (B, heads, 1 + N, 1 + N) (the class token is row/column 0).
  Tensor forward(const Tensor& images, std::vector<Tensor>* attentions);
  // The final normalised tokens norm(x) (B, 1 + N, D), before the head.
  Tensor forward_features(const Tensor& images, std::vector<Tensor>* attentions = nullptr);

  const ViTConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (timm's
  // VisionTransformer.no_weight_decay; see train/weight_decay.h).
  std::set<std::string> no_weight_decay() const { return {"pos_embed", "cls_token"}; }
  // The blocks.
  const nn::ModuleList<ViTBlock>& block_list() const { return *blocks; }

  Tensor cls_token;  // (1, 1, D)
  Tensor pos_embed;  // (1, 1 + N, D)
  std::shared_ptr<PatchEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  std::shared_ptr<nn::ModuleList<ViTBlock>> blocks;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  void init_weights();
  void check_images(const Tensor& images) const;

  ViTConfig config_;
};

}  // namespace loom::models
