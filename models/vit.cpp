// The Vision Transformer (Dosovitskiy et al. 2020) in one file, in the order of timm's
// vision_transformer.py: configuration and presets, the blocks (patch embedding, attention,
// Block), the model.
#include "models/vit.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::models {

// ============================================================================ configuration

// The presets, each written once: preset() and preset_names() read this table.
std::span<const fields::Preset<ViTConfig>> ViTConfig::presets() {
  // {image_size, patch_size, in_channels, num_classes, d_model, n_layer, n_head, d_ff}
  // vit-tiny-fmnist is bench/reference/train.py's default, vit-fmnist the benchmark's ViT.
  static const fields::Preset<ViTConfig> table[] = {
      {"vit-tiny-fmnist", {28, 7, 1, 10, 64, 4, 4, 128}},
      {"vit-fmnist", {28, 4, 1, 10, 128, 6, 4, 512}},
      {"vit-b16", {224, 16, 3, 1000, 768, 12, 12, 3072}},  // ViT-B/16, table 1
  };
  return table;
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const ViTConfig& c) {
  const double d = c.d_model, f = c.d_ff, p = c.patch_size;
  const double side = c.image_size / p, tokens = 1 + side * side;
  const double patch = c.in_channels * p * p * d + d;  // patch_embed.proj
  // Per block: norm1 + norm2 (4d), qkv (3d^2 + 3d), proj (d^2 + d), fc1 (d f + f), fc2 (f d + d).
  const double block = 4 * d * d + 2 * d * f + 9 * d + f;
  return patch + d + tokens * d + c.n_layer * block + 2 * d + (d + 1) * c.num_classes;
}

int64_t ViTConfig::num_parameters() const { return parameter_count(count_parameters(*this)); }

int64_t ViTConfig::num_patches() const {
  const int64_t side = image_size / patch_size;
  return side * side;
}

void ViTConfig::validate() const {
  fields::check_fields(*this, "ViTConfig");
  LOOM_CHECK(image_size % patch_size == 0,
             "ViTConfig: image_size {} is not a multiple of patch_size {}", image_size,
             patch_size);
  LOOM_CHECK(d_model % n_head == 0, "ViTConfig: d_model {} is not a multiple of n_head {}",
             d_model, n_head);
  check_model_size("ViTConfig", count_parameters(*this), n_layer, to_string());
}

// ============================================================================ blocks

PatchEmbed::PatchEmbed(const ViTConfig& config) {
  proj = register_module("proj", std::make_shared<nn::Conv2d>(config.in_channels, config.d_model,
                                                               config.patch_size,
                                                               /*stride=*/config.patch_size));
}

Tensor PatchEmbed::forward(const Tensor& images) const {
  // images (B, C, H, W) -> (B, D, H/p, W/p) -> (B, D, N) -> (B, N, D)
  const Tensor y = proj->forward(images);                              // (B, D, H/p, W/p)
  return y.reshape({y.size(0), y.size(1), -1}).transpose(1, 2);  // (B, N, D)
}

ViTAttention::ViTAttention(const ViTConfig& config)
    : n_head(config.n_head), d_model(config.d_model) {
  qkv = register_module("qkv", std::make_shared<nn::Linear>(d_model, 3 * d_model));
  attn_drop = register_module("attn_drop", std::make_shared<nn::Dropout>(config.dropout));
  proj = register_module("proj", std::make_shared<nn::Linear>(d_model, d_model));
  proj_drop = register_module("proj_drop", std::make_shared<nn::Dropout>(config.dropout));
}

Tensor ViTAttention::forward(const Tensor& x, Tensor* probs) const {
  // x (B, T, D) -> (B, T, D); nh heads of size hd = D / nh.
  const int64_t B = x.size(0), T = x.size(1), D = d_model, hd = D / n_head;
  // q, k and v from one projection, split in three: qkv's weight stacks W_q, W_k and W_v
  // ([3D, D]; timm's reshape(B, T, 3, nh, hd) splits its output in that order).
  auto heads = [&](const Tensor& t) {  // (B, T, D) -> (B, T, nh, hd) -> (B, nh, T, hd)
    return t.view({B, T, n_head, hd}).transpose(1, 2);
  };
  const std::vector<Tensor> parts = qkv->forward(x).split(D, 2);              // (B, T, D) each
  const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);  // (B, nh, T, hd)
  // Vaswani et al. 2017, eq. 1, every token attending to every token (no mask).
  const Tensor y = nn::functional::scaled_dot_product_attention(  // (B, nh, T, hd)
      q, k, v,
      {.dropout_p = attn_drop->p, .training = attn_drop->is_training(), .attn_weights = probs});
  // Heads side by side again: (B, T, nh, hd) -> (B, T, D).
  const Tensor merged = y.transpose(1, 2).reshape({B, T, D});  // (B, T, D)
  return proj_drop->forward(proj->forward(merged));            // (B, T, D)
}

ViTBlock::ViTBlock(const ViTConfig& config) {
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(config.d_model, 1e-6f));
  attn = register_module("attn", std::make_shared<ViTAttention>(config));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(config.d_model, 1e-6f));
  mlp = register_module("mlp", std::make_shared<nn::FeedForward>(
                                   config.d_model, config.d_ff,
                                   nn::FeedForwardOptions{.activation = nn::Activation::GELU,
                                                          .dropout = config.dropout,
                                                          .output_dropout = config.dropout,
                                                          .linear1_name = "fc1",
                                                          .linear2_name = "fc2"}));
}

nn::Residual ViTBlock::forward(nn::Residual x, Tensor* probs) const {
  // x (B, T, D) -> (B, T, D); each sub-block adds to the residual stream.
  x = x + attn->forward(norm1->forward(x), probs);  // eq. 2
  x = x + mlp->forward(norm2->forward(x));          // eq. 3
  return x;
}

// ============================================================================ model

ViT::ViT(const ViTConfig& config) : config_(config) {
  config.validate();
  const int64_t D = config.d_model;
  // Registered in timm's state_dict order: cls_token, pos_embed, patch_embed, blocks, norm, head.
  cls_token = register_parameter("cls_token", zeros({1, 1, D}));
  pos_embed = register_parameter("pos_embed", zeros({1, 1 + config.num_patches(), D}));
  patch_embed = register_module("patch_embed", std::make_shared<PatchEmbed>(config));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(config.dropout));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<ViTBlock>>());
  for (int64_t i = 0; i < config.n_layer; ++i)
    blocks->push_back(std::make_shared<ViTBlock>(config));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(D, 1e-6f));
  head = register_module("head", std::make_shared<nn::Linear>(D, config.num_classes));
  init_weights();
}

void ViT::init_weights() {
  // timm's VisionTransformer.init_weights (mode ''): trunc_normal_(pos_embed, std=.02),
  // normal_(cls_token, std=1e-6), then init_weights_vit_timm on every Linear:
  // trunc_normal_(weight, std=.02), zeros_(bias). timm's trunc_normal_ cuts at +-2 absolute.
  nn::init::trunc_normal_(pos_embed, 0.0, 0.02);
  nn::init::normal_(cls_token, 0.0, 1e-6);
  std::vector<std::shared_ptr<nn::Linear>> linears;
  for (const auto& block : *blocks)
    linears.insert(linears.end(), {block->attn->qkv, block->attn->proj, block->mlp->linear1,
                                   block->mlp->linear2});
  linears.push_back(head);
  for (const auto& linear : linears) {
    nn::init::trunc_normal_(linear->weight, 0.0, 0.02);
    nn::init::zeros_(linear->bias);
  }
}

void ViT::check_images(const Tensor& images) const {
  const ViTConfig& c = config_;
  LOOM_CHECK(images.defined() && images.dtype() == DType::Float32 && images.dim() == 4,
             "ViT: expected float32 images [B, C, H, W], got {} of shape {}",
             images.defined() ? dtype_name(images.dtype()) : "undefined",
             images.defined() ? shape_str(images.shape()) : "[]");
  LOOM_CHECK(images.size(1) == c.in_channels,
             "ViT: images of shape {} have {} channels, the model expects {} ([B, {}, {}, {}])",
             shape_str(images.shape()), images.size(1), c.in_channels, c.in_channels,
             c.image_size, c.image_size);
  LOOM_CHECK(images.size(2) % c.patch_size == 0 && images.size(3) % c.patch_size == 0,
             "ViT: images of shape {} are not divisible into {}x{} patches",
             shape_str(images.shape()), c.patch_size, c.patch_size);
  LOOM_CHECK(images.size(2) == c.image_size && images.size(3) == c.image_size,
             "ViT: images of shape {} are not {}x{} (the size pos_embed {} was built for)",
             shape_str(images.shape()), c.image_size, c.image_size, shape_str(pos_embed.shape()));
}

Tensor ViT::forward(const Tensor& images) { return forward(images, nullptr); }

Tensor ViT::forward(const Tensor& images, std::vector<Tensor>* attentions) {
  const Tensor x = forward_features(images, attentions);  // (B, 1 + N, D)
  return head->forward(x.select(1, 0));                   // eq. 4: the class token -> (B, classes)
}

Tensor ViT::forward_features(const Tensor& images, std::vector<Tensor>* attentions) {
  // images (B, C, H, W) -> norm(x) (B, 1 + N, D)
  check_images(images);
  const int64_t B = images.size(0), D = config_.d_model;
  const Tensor patches = patch_embed->forward(images);     // (B, N, D)
  const Tensor cls = cls_token.expand({B, 1, D});          // (B, 1, D), a view
  const Tensor tokens = cat({cls, patches}, 1);            // (B, 1 + N, D)
  // eq. 1, (B, 1 + N, D): the residual stream, whose sums the next LayerNorm forms
  nn::Residual x = pos_drop->forward(tokens + pos_embed);
  if (attentions != nullptr) attentions->assign(static_cast<size_t>(blocks->size()), Tensor());
  for (int64_t i = 0; i < blocks->size(); ++i)
    x = (*blocks)[i]->forward(x, attentions != nullptr ? &(*attentions)[i] : nullptr);
  return norm->forward(x);  // (B, 1 + N, D)
}

}  // namespace loom::models
