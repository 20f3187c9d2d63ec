// The Vision Transformer (Dosovitskiy et al. 2020) in one file, in the order of timm's
// vision_transformer.py: configuration and presets, the blocks (patch embedding, attention,
// Block), the model.
#include "models/vit.h"

#include <type_traits>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::models {

// ============================================================================ configuration

ViTConfig ViTConfig::preset(const std::string& name) {
  // {image_size, patch_size, in_channels, num_classes, d_model, n_layer, n_head, d_ff}
  // vit-tiny-fmnist is bench/reference/train.py's default, vit-fmnist the benchmark's ViT.
  if (name == "vit-tiny-fmnist") return {28, 7, 1, 10, 64, 4, 4, 128};
  if (name == "vit-fmnist") return {28, 4, 1, 10, 128, 6, 4, 512};
  if (name == "vit-b16") return {224, 16, 3, 1000, 768, 12, 12, 3072};  // ViT-B/16, table 1
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  LOOM_FAIL("ViTConfig::preset: unknown preset '{}' (known: {})", name, known);
}

std::vector<std::string> ViTConfig::preset_names() {
  return {"vit-tiny-fmnist", "vit-fmnist", "vit-b16"};
}

int64_t ViTConfig::num_patches() const {
  const int64_t side = image_size / patch_size;
  return side * side;
}

namespace {

// num_parameters() in T: int64_t for the count, double for validate()'s budget check (a
// hostile config's count would overflow int64).
template <class T>
T count_parameters(const ViTConfig& c) {
  const auto d = static_cast<T>(c.d_model), f = static_cast<T>(c.d_ff),
             p = static_cast<T>(c.patch_size);
  const T tokens = 1 + (static_cast<T>(c.image_size) / p) * (static_cast<T>(c.image_size) / p);
  const T patch = static_cast<T>(c.in_channels) * p * p * d + d;  // patch_embed.proj
  // Per block: norm1 + norm2 (4d), qkv (3d^2 + 3d), proj (d^2 + d), fc1 (d f + f), fc2 (f d + d).
  const T block = 4 * d * d + 2 * d * f + 9 * d + f;
  return patch + d + tokens * d + static_cast<T>(c.n_layer) * block + 2 * d +
         (d + 1) * static_cast<T>(c.num_classes);
}

}  // namespace

void ViTConfig::validate() const {
  LOOM_CHECK(image_size > 0 && patch_size > 0 && in_channels > 0 && num_classes > 0 &&
                 d_model > 0 && n_layer > 0 && n_head > 0 && d_ff > 0,
             "ViTConfig: every size must be positive, got {}", to_string());
  LOOM_CHECK(image_size % patch_size == 0,
             "ViTConfig: image_size {} is not a multiple of patch_size {}", image_size,
             patch_size);
  LOOM_CHECK(d_model % n_head == 0, "ViTConfig: d_model {} is not a multiple of n_head {}",
             d_model, n_head);
  LOOM_CHECK(dropout >= 0.0f && dropout < 1.0f, "ViTConfig: dropout {} outside [0, 1)", dropout);
  check_model_size("ViTConfig", count_parameters<double>(*this), static_cast<double>(n_layer),
                   to_string());
}

int64_t ViTConfig::num_parameters() const { return count_parameters<int64_t>(*this); }

std::string ViTConfig::to_string() const {
  return fmt::format(
      "image_size={}, patch_size={}, in_channels={}, num_classes={}, d_model={}, n_layer={}, "
      "n_head={}, d_ff={}, dropout={}",
      image_size, patch_size, in_channels, num_classes, d_model, n_layer, n_head, d_ff, dropout);
}

// ---------------------------------------------------------------------------- as metadata

std::map<std::string, std::string> ViTConfig::to_metadata() const {
  return {{"model_type", "vit"},
          {"image_size", std::to_string(image_size)},
          {"patch_size", std::to_string(patch_size)},
          {"in_channels", std::to_string(in_channels)},
          {"num_classes", std::to_string(num_classes)},
          {"d_model", std::to_string(d_model)},
          {"n_layer", std::to_string(n_layer)},
          {"n_head", std::to_string(n_head)},
          {"d_ff", std::to_string(d_ff)},
          {"dropout", fmt::format("{}", dropout)}};  // shortest text that reads back exactly
}

ViTConfig ViTConfig::from_metadata(const std::map<std::string, std::string>& metadata,
                                   const std::string& source) {
  const std::string where = "ViTConfig::from_metadata: " + source;
  auto field = [&](const char* key, auto& value) {
    value = nn::metadata_number<std::remove_reference_t<decltype(value)>>(metadata, key, where);
  };
  const auto type = metadata.find("model_type");
  LOOM_CHECK(type == metadata.end() || type->second == "vit",
             "ViTConfig::from_metadata: {}: \"model_type\" is '{}', not 'vit'", source,
             type->second);
  ViTConfig c;
  field("image_size", c.image_size);
  field("patch_size", c.patch_size);
  field("in_channels", c.in_channels);
  field("num_classes", c.num_classes);
  field("d_model", c.d_model);
  field("n_layer", c.n_layer);
  field("n_head", c.n_head);
  field("d_ff", c.d_ff);
  field("dropout", c.dropout);
  try {
    c.validate();
  } catch (const Error& e) {
    LOOM_FAIL("ViTConfig::from_metadata: {}: {}", source, e.what());
  }
  return c;
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
  // qkv's weight stacks W_q, W_k and W_v ([3D, D]; timm's reshape(B, T, 3, nh, hd) splits its
  // output in that order). Applying the three row blocks one by one is the arithmetic of one
  // GEMM and a split, but the backward then needs no scatter of three slices into zero-filled
  // (B, T, 3D) gradients (the same choice as models/gpt.cpp's attention).
  auto project = [&](int64_t i) {  // i = 0, 1, 2: query, key, value
    const Tensor w = qkv->weight.narrow(0, i * D, D), b = qkv->bias.narrow(0, i * D, D);
    return nn::functional::linear(x, w, b)  // (B, T, D)
        .view({B, T, n_head, hd})           // (B, T, nh, hd)
        .transpose(1, 2);                   // (B, nh, T, hd), a view
  };
  const Tensor q = project(0), k = project(1), v = project(2);  // (B, nh, T, hd)
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

Tensor ViTBlock::forward(const Tensor& x, Tensor* probs) const {
  // x (B, T, D) -> (B, T, D); each sub-block adds to the residual stream.
  const Tensor h = x + attn->forward(norm1->forward(x), probs);  // eq. 2
  return h + mlp->forward(norm2->forward(h));                     // eq. 3
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
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    block_list_.push_back(std::make_shared<ViTBlock>(config));
    blocks->push_back(block_list_.back());
  }
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
  for (const auto& block : block_list_)
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
             "ViT: images of shape {} are not divisible into {}x{} patches", shape_str(images.shape()),
             c.patch_size, c.patch_size);
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
  Tensor x = cat({cls, patches}, 1);                       // (B, 1 + N, D)
  x = pos_drop->forward(x + pos_embed);                    // eq. 1, (B, 1 + N, D)
  if (attentions != nullptr) attentions->assign(block_list_.size(), Tensor());
  for (size_t i = 0; i < block_list_.size(); ++i)
    x = block_list_[i]->forward(x, attentions != nullptr ? &(*attentions)[i] : nullptr);
  return norm->forward(x);  // (B, 1 + N, D)
}

}  // namespace loom::models
