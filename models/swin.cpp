// The Swin Transformer (Liu et al. 2021) in one file, in the order of the official
// models/swin_transformer.py: configuration and presets, window attention, the block, patch
// merging, the stage, patch embedding, the model. The window helpers are models/swin_window.h.
#include "models/swin.h"

#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "models/swin_window.h"

namespace loom::models {

// ============================================================================ configuration

// The presets, each written once: preset() and preset_names() read this table.
std::span<const fields::Preset<SwinConfig>> SwinConfig::presets() {
  static const fields::Preset<SwinConfig> table[] = {
      {"swin-fmnist", {}},  // the defaults: bench/reference/models.py's Swin()
      {"swin-t",            // Liu et al. 2021, sec. 3.3: Swin-T
       {.image_size = 224,
        .patch_size = 4,
        .in_channels = 3,
        .num_classes = 1000,
        .embed_dim = 96,
        .depths = {2, 2, 6, 2},
        .num_heads = {3, 6, 12, 24},
        .window_size = 7,
        .drop_path = 0.2f}},
  };
  return table;
}

namespace {

}  // namespace

int64_t SwinConfig::resolution(int64_t stage) const {
  return image_size / patch_size >> stage;  // r_i = H / patch / 2^i
}

int64_t SwinConfig::stage_window(int64_t stage) const {
  const int64_t r = resolution(stage);
  return r <= window_size ? r : window_size;  // one window covers the whole map
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const SwinConfig& c) {
  const double D = c.embed_dim, p = c.patch_size;
  const auto stages = static_cast<int64_t>(c.depths.size());
  double n = c.in_channels * p * p * D + D + 2 * D;  // proj (+ bias), norm
  // Stage i is D 2^i wide.
  double d = D;
  for (int64_t i = 0; i < stages; ++i, d = 2 * d) {
    const auto s = static_cast<size_t>(i);
    const double w = c.stage_window(i), h = c.num_heads[s];
    const double m = std::trunc(static_cast<float>(d) * c.mlp_ratio);  // int() in Python
    const double block =
        4 * d + (2 * w - 1) * (2 * w - 1) * h + 4 * d * d + 4 * d + 2 * d * m + m + d;
    n += c.depths[s] * block;
    if (i < stages - 1) n += 8 * d * d + 8 * d;  // reduction 4d -> 2d, norm over 4d
  }
  const double features = d / 2;  // the last stage's width, D 2^(S-1)
  return n + 2 * features + features * c.num_classes + c.num_classes;
}

int64_t SwinConfig::num_parameters() const { return parameter_count(count_parameters(*this)); }

void SwinConfig::validate() const {
  fields::check_fields(*this, "SwinConfig");
  LOOM_CHECK(image_size % patch_size == 0,
             "SwinConfig: image_size {} is not a multiple of patch_size {} (Swin needs whole "
             "patches)",
             image_size, patch_size);
  LOOM_CHECK(!depths.empty() && depths.size() == num_heads.size(),
             "SwinConfig: depths {} and num_heads {} must have one entry per stage",
             fields::to_text(depths), fields::to_text(num_heads));
  const int64_t stages = static_cast<int64_t>(depths.size());
  for (int64_t i = 0; i < stages; ++i) {
    const auto s = static_cast<size_t>(i);
    const int64_t r = resolution(i), dim = embed_dim << i;
    LOOM_CHECK(dim % num_heads[s] == 0,
               "SwinConfig: stage {} width {} (embed_dim {} * 2^{}) is not a multiple of its {} "
               "heads",
               i, dim, embed_dim, i, num_heads[s]);
    LOOM_CHECK(r > 0, "SwinConfig: stage {} has no tokens left (image_size {} / patch_size {} / "
               "2^{})", i, image_size, patch_size, i);
    LOOM_CHECK(r <= window_size || r % window_size == 0,
               "SwinConfig: stage {} resolution {} is larger than window_size {} but not a "
               "multiple of it (Swin needs whole windows)",
               i, r, window_size);
    LOOM_CHECK(i == stages - 1 || r % 2 == 0,
               "SwinConfig: stage {} resolution {} is odd; PatchMerging needs an even one", i, r);
  }
  // Each block's buffers: its attention mask, (r/w)^2 windows of (w^2, w^2), and its relative
  // position index (w^2, w^2), together at most 2 r^2 w^2 values.
  double buffers = 0, layers = 0;
  for (int64_t i = 0; i < stages; ++i) {
    const auto r = static_cast<double>(resolution(i)), w = static_cast<double>(stage_window(i)),
               depth = static_cast<double>(depths[static_cast<size_t>(i)]);
    buffers += depth * 2 * r * r * w * w;
    layers += depth;
  }
  check_model_size("SwinConfig", count_parameters(*this) + buffers, layers, to_string());
}

// ============================================================================ layers

SwinWindowAttention::SwinWindowAttention(int64_t dim_, int64_t window_, int64_t num_heads_,
                                         float proj_dropout)
    : dim(dim_), window(window_), num_heads(num_heads_) {
  LOOM_CHECK(dim > 0 && window > 0 && num_heads > 0 && dim % num_heads == 0,
             "WindowAttention: dim {} must be a positive multiple of num_heads {} (window {})",
             dim, num_heads, window);
  const int64_t table_rows = (2 * window - 1) * (2 * window - 1);  // one row per offset (dy, dx)
  relative_position_bias_table =
      register_parameter("relative_position_bias_table", zeros({table_rows, num_heads}));
  nn::init::trunc_normal_(relative_position_bias_table, 0.0, 0.02);
  // Derived from the window alone: kept out of state_dict, skipped when a file holds it.
  relative_position_index = register_buffer(
      "relative_position_index", models::relative_position_index(window), false);
  ignore_on_load("relative_position_index");
  qkv = register_module("qkv", std::make_shared<nn::Linear>(dim, 3 * dim));
  proj = register_module("proj", std::make_shared<nn::Linear>(dim, dim));
  proj_drop = register_module("proj_drop", std::make_shared<nn::Dropout>(proj_dropout));
}

Tensor SwinWindowAttention::relative_position_bias() const {
  // table ((2w-1)^2, h) gathered at index (N, N) -> (N*N, h) -> (h, N, N)
  const int64_t N = window * window;
  return index_select(relative_position_bias_table, 0, relative_position_index.view({N * N}))
      .view({N, N, num_heads})  // (N, N, h)
      .permute({2, 0, 1});      // (h, N, N)
}

Tensor SwinWindowAttention::forward(const Tensor& x, const Tensor& mask) const {
  // x (B * nW, N, C) -> (B * nW, N, C); the windows of one image are consecutive, so viewing
  // them as (B, nW, ...) lets the mask (nW, N, N) broadcast over the batch without a copy.
  const int64_t Bw = x.size(0), N = x.size(1), C = x.size(2), h = num_heads, hd = C / h;
  LOOM_CHECK(N == window * window && C == dim,
             "WindowAttention: expected windows (B * nW, {}, {}), got {}", window * window, dim,
             shape_str(x.shape()));
  const int64_t nW = mask.defined() ? mask.size(0) : 1, B = Bw / nW;
  LOOM_CHECK(Bw % nW == 0, "WindowAttention: {} windows are not a whole number of images of {}",
             Bw, nW);
  // One GEMM for q, k and v over every window, split in three; heads are split by views.
  auto heads = [&](const Tensor& t) {  // (Bw, N, C) -> (B, nW, N, h, hd) -> (B, nW, h, N, hd)
    return t.view({B, nW, N, h, hd}).transpose(2, 3);
  };
  const std::vector<Tensor> parts = qkv->forward(x).split(C, 2);               // (Bw, N, C) each
  const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);  // (B, nW, h, N, hd)
  // Eq. 4: the bias (h, N, N), plus the shifted-window mask (nW, 1, N, N) -> (nW, h, N, N),
  // added to the scores (B, nW, h, N, N) by broadcasting.
  Tensor additive = relative_position_bias();                        // (h, N, N)
  if (mask.defined()) additive = mask.unsqueeze(1) + additive;       // (nW, h, N, N)
  const Tensor y = nn::functional::scaled_dot_product_attention(    // (B, nW, h, N, hd)
      q, k, v, {.mask = additive});
  const Tensor merged = y.transpose(2, 3).reshape({Bw, N, C});  // (Bw, N, h*hd)
  return proj_drop->forward(proj->forward(merged));                 // (Bw, N, C)
}

SwinBlock::SwinBlock(int64_t dim_, int64_t resolution_, int64_t num_heads, int64_t window_,
                     int64_t shift_, float mlp_ratio, float dropout, float drop_path_rate)
    : dim(dim_), resolution(resolution_), window(window_), shift(shift_) {
  LOOM_CHECK(resolution % window == 0 && shift >= 0 && shift < window,
             "SwinBlock: resolution {} must be a multiple of window {} and shift {} in [0, {})",
             resolution, window, shift, window);
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim));
  attn = register_module("attn",
                         std::make_shared<SwinWindowAttention>(dim, window, num_heads, dropout));
  drop_path = register_module("drop_path", std::make_shared<nn::DropPath>(drop_path_rate));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim));
  const auto hidden = static_cast<int64_t>(static_cast<float>(dim) * mlp_ratio);  // int() in Python
  mlp = register_module("mlp", std::make_shared<nn::FeedForward>(
                                   dim, hidden,
                                   nn::FeedForwardOptions{.activation = nn::Activation::GELU,
                                                          .dropout = dropout,
                                                          .output_dropout = dropout,
                                                          .linear1_name = "fc1",
                                                          .linear2_name = "fc2"}));
  if (shift > 0) {  // derived from the geometry: kept out of state_dict, skipped on load
    attn_mask = register_buffer(
        "attn_mask", shifted_window_mask(resolution, resolution, window, shift), false);
    ignore_on_load("attn_mask");
  }
}

Tensor SwinBlock::window_attention(const Tensor& x) const {
  // x (B, L, C), L = r*r -> (B, L, C)
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2), r = resolution, s = shift;
  LOOM_CHECK(L == r * r && C == dim, "SwinBlock: expected x (B, {}, {}), got {}", r * r, dim,
             shape_str(x.shape()));
  Tensor y = x.view({B, r, r, C});               // (B, r, r, C)
  if (s > 0) y = y.roll({-s, -s}, {1, 2});       // cyclic shift toward the top left
  Tensor windows = window_partition(y, window);  // (B*nW, N, C)
  windows = attn->forward(windows, attn_mask);   // (B*nW, N, C)
  y = window_reverse(windows, window, r, r);     // (B, r, r, C)
  if (s > 0) y = y.roll({s, s}, {1, 2});         // undo the shift
  return y.view({B, L, C});
}

nn::Residual SwinBlock::forward(nn::Residual x) const {
  // Eq. 3: z^ = (S)W-MSA(LN(z)) + z, then z = MLP(LN(z^)) + z^; x (B, r*r, C) -> the same.
  x = x + drop_path->forward(window_attention(norm1->forward(x)));
  x = x + drop_path->forward(mlp->forward(norm2->forward(x)));
  return x;
}

SwinPatchMerging::SwinPatchMerging(int64_t resolution_, int64_t dim_)
    : resolution(resolution_), dim(dim_) {
  LOOM_CHECK(resolution % 2 == 0, "PatchMerging: resolution {} must be even", resolution);
  reduction = register_module("reduction", std::make_shared<nn::Linear>(4 * dim, 2 * dim, false));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(4 * dim));
}

Tensor SwinPatchMerging::forward(const Tensor& x) const {
  // x (B, r*r, C) -> (B, r*r/4, 2C). Pixel (2i + dy, 2j + dx) sits at [b, i, dy, j, dx, :] of
  // the (B, r/2, 2, r/2, 2, C) view; the official order x0..x3 = (dy, dx) = (0,0), (1,0),
  // (0,1), (1,1) puts dx outside dy: permute to (B, r/2, r/2, dx, dy, C).
  const int64_t B = x.size(0), C = x.size(2), r = resolution, r2 = r / 2;
  LOOM_CHECK(x.size(1) == r * r && C == dim, "PatchMerging: expected x (B, {}, {}), got {}",
             r * r, dim, shape_str(x.shape()));
  const Tensor merged = x.view({B, r2, 2, r2, 2, C})   // (B, i, dy, j, dx, C)
                            .permute({0, 1, 3, 4, 2, 5})  // (B, i, j, dx, dy, C)
                            .reshape({B, r2 * r2, 4 * C});  // (B, r*r/4, 4C): one copy
  return reduction->forward(norm->forward(merged));        // (B, r*r/4, 2C)
}

Tensor SwinStage::forward(const Tensor& x) const {
  nn::Residual y = x;  // (B, r*r, C)
  for (const auto& block : *blocks) y = block->forward(y);
  return downsample ? downsample->forward(y.tensor()) : y.tensor();  // (B, r*r/4, 2C) or same
}

SwinPatchEmbed::SwinPatchEmbed(int64_t patch_size, int64_t in_channels, int64_t embed_dim) {
  proj = register_module("proj", std::make_shared<nn::Conv2d>(in_channels, embed_dim, patch_size,
                                                              patch_size));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(embed_dim));
}

Tensor SwinPatchEmbed::forward(const Tensor& images) const {
  const Tensor maps = proj->forward(images);  // (B, D, H/p, W/p)
  return norm->forward(maps.flatten(2).transpose(1, 2));  // (B, L, D)
}

// ============================================================================ model

Swin::Swin(const SwinConfig& config) : config_(config) {
  config.validate();
  const SwinConfig& c = config_;
  patch_embed = register_module(
      "patch_embed", std::make_shared<SwinPatchEmbed>(c.patch_size, c.in_channels, c.embed_dim));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(c.dropout));
  layers = register_module("layers", std::make_shared<nn::ModuleList<SwinStage>>());
  // Stochastic depth grows linearly with depth: linspace(0, drop_path, total blocks).
  const int64_t total = std::accumulate(c.depths.begin(), c.depths.end(), int64_t{0});
  int64_t block_index = 0;
  const auto stages = static_cast<int64_t>(c.depths.size());
  for (int64_t i = 0; i < stages; ++i) {
    const int64_t dim = c.embed_dim << i, r = c.resolution(i), w = c.stage_window(i);
    auto stage = std::make_shared<SwinStage>();
    stage->blocks =
        stage->register_module("blocks", std::make_shared<nn::ModuleList<SwinBlock>>());
    for (int64_t j = 0; j < c.depths[static_cast<size_t>(i)]; ++j, ++block_index) {
      const float rate = total > 1 ? c.drop_path * static_cast<float>(block_index) /
                                         static_cast<float>(total - 1)
                                   : 0.0f;
      const int64_t shift = (j % 2 == 1 && r > c.window_size) ? c.window_size / 2 : 0;
      auto block = std::make_shared<SwinBlock>(dim, r, c.num_heads[static_cast<size_t>(i)], w,
                                               shift, c.mlp_ratio, c.dropout, rate);
      stage->blocks->push_back(block);
    }
    if (i < stages - 1)
      stage->downsample =
          stage->register_module("downsample", std::make_shared<SwinPatchMerging>(r, dim));
    layers->push_back(stage);
  }
  const int64_t features = c.embed_dim << (stages - 1);
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(features));
  head = register_module("head", std::make_shared<nn::Linear>(features, c.num_classes));
  init_weights();
}

void Swin::init_weights() {
  // The official _init_weights: trunc_normal(std 0.02) on every Linear weight, zero biases;
  // LayerNorm (1, 0) and the patch Conv2d's PyTorch default are already in place.
  apply([](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
      nn::init::trunc_normal_(linear->weight, 0.0, 0.02);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    }
  });
}

Tensor Swin::forward_features(const Tensor& images) {
  const SwinConfig& c = config_;
  LOOM_CHECK(images.defined() && images.dtype() == DType::Float32 && images.dim() == 4 &&
                 images.size(1) == c.in_channels && images.size(2) == c.image_size &&
                 images.size(3) == c.image_size,
             "Swin: expected float images [B, {}, {}, {}], got {} of shape {}", c.in_channels,
             c.image_size, c.image_size,
             images.defined() ? dtype_name(images.dtype()) : "undefined",
             images.defined() ? shape_str(images.shape()) : "[]");
  Tensor x = pos_drop->forward(patch_embed->forward(images));  // (B, L, D)
  for (const auto& stage : *layers) x = stage->forward(x);     // (B, L / 4^(S-1), D * 2^(S-1))
  return norm->forward(x).mean(1);                             // (B, D * 2^(S-1))
}

Tensor Swin::forward(const Tensor& images) {
  return head->forward(forward_features(images));  // (B, num_classes)
}

std::set<std::string> Swin::no_weight_decay() const {
  std::set<std::string> names;
  for (const auto& [name, p] : named_parameters())
    if (name.ends_with("relative_position_bias_table")) names.insert(name);
  return names;
}

}  // namespace loom::models
