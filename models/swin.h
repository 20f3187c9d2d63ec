// Swin Transformer (Liu et al. 2021, "Swin Transformer: Hierarchical Vision Transformer using
// Shifted Windows"), with the parameter names and semantics of microsoft/Swin-Transformer's
// models/swin_transformer.py (patch_norm on, no absolute position embedding):
//
//   images (B, C_in, H, W)
//     -> patch_embed: Conv2d(C_in, D, k = stride = patch) -> (B, L, D), L = (H/patch)^2 tokens,
//                     then LayerNorm                                          (sec. 3.1)
//     -> stage i = 0 .. S-1 on an r_i x r_i map, r_i = H / patch / 2^i, width D_i = D * 2^i:
//          depths[i] Swin blocks (fig. 3b), each  x + DropPath(W-MSA(LN(x)))
//                                                 x + DropPath(MLP(LN(x)))
//            W-MSA = multi-head self-attention inside non-overlapping w x w windows, with a
//            learned relative position bias (sec. 3.2); odd blocks shift the windows by w/2
//            (SW-MSA: cyclic roll + shifted_window_mask). A stage whose r_i <= w uses one
//            window of size r_i and never shifts.
//          then, but after the last stage, PatchMerging: 2x2 neighbours concatenated
//          (B, r^2, D_i) -> (B, r^2/4, 4 D_i) -> LayerNorm -> Linear (no bias) -> (B, r^2/4, 2 D_i)
//     -> norm (LayerNorm) -> mean over tokens -> head: Linear -> logits (B, num_classes)
//
// LayerNorm eps 1e-5, exact (erf) GELU, MLP 4x wide (mlp_ratio), DropPath rates linspace(0,
// drop_path) over all blocks. Names: patch_embed.{proj, norm}, layers.I.blocks.J.{norm1,
// attn.relative_position_bias_table, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2},
// layers.I.downsample.{reduction, norm}, norm, head. The buffers relative_position_index and
// attn_mask of the official checkpoints are rebuilt from the config: a file may hold them (they
// are skipped on load, see Module::ignore_on_load) or not; loom's own files leave them out.
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
#include "nn/drop_path.h"
#include "nn/dropout.h"
#include "nn/feed_forward.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
// SwinConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_SWIN_CONFIG_FIELDS(F)                                                                \
  F(int64_t, image_size, 28, positive, "square images, image_size x image_size pixels")           \
  F(int64_t, patch_size, 2, positive, "square patches; image_size must be a multiple")            \
  F(int64_t, in_channels, 1, positive, "image channels")                                          \
  F(int64_t, num_classes, 10, positive, "outputs of the head")                                    \
  F(int64_t, embed_dim, 64, positive, "D: the width of stage 0; stage i is D * 2^i wide")         \
  F(std::vector<int64_t>, depths, (std::vector<int64_t>{2, 4}), positive, "blocks per stage")     \
  F(std::vector<int64_t>, num_heads, (std::vector<int64_t>{2, 4}), positive,                      \
    "attention heads per stage")                                                                  \
  F(int64_t, window_size, 7, positive, "w: attention windows are w x w patches")                  \
  F(float, mlp_ratio, 4.0f, positive, "MLP hidden width = int(D_i * mlp_ratio)")                  \
  F(float, dropout, 0.0f, probability, "after patch_embed, on attn.proj's and the MLP's outputs") \
  F(float, drop_path, 0.1f, probability, "stochastic depth of the last block (linspace from 0)")

struct SwinConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table swin.cpp defines as presets().
  LOOM_MODEL_CONFIG(SwinConfig, LOOM_SWIN_CONFIG_FIELDS, "swin")

  // Presets: "swin-fmnist" (the benchmark's Swin, bench/reference/models.py: 28x28x1, patch 2, 10
  // classes, D 64, depths (2, 4), heads (2, 4), window 7, drop_path 0.1; 931,710 parameters) and
  // "swin-t" (Swin-T of the paper: 224x224x3, patch 4, 1000 classes, D 96, depths (2, 2, 6, 2),
  // heads (3, 6, 12, 24), window 7, drop_path 0.2; 28,288,354 parameters). Throws for other names.
  // to_string() reads "image_size=28, patch_size=2, ..., depths=[2, 4], ..."
  // to_metadata() is the checkpoint metadata: {"model_type": "swin", "image_size": "28", ...,
  // "depths": "2,4", "num_heads": "2,4", ...}. from_metadata reads them back (other keys ignored;
  // "model_type" may be absent); a missing or garbled key, another model_type or an invalid config
  // is a loom::Error naming the key and `source`.

  // Throws loom::Error (naming Swin, the field and its values) for a config the model cannot be
  // built from: a field outside its check (a size or a stage's depth or heads not positive, a
  // rate outside [0, 1)), image_size not a multiple of patch_size, depths and num_heads of
  // different lengths, a stage width not a multiple of its heads, a stage resolution larger than
  // the window but not a multiple of it, or an odd resolution before a PatchMerging.
  void validate() const;
  // The side r_i of stage i's token map: image_size / patch_size / 2^i.
  int64_t resolution(int64_t stage) const;
  // The window side of stage i: window_size, or r_i when r_i <= window_size.
  int64_t stage_window(int64_t stage) const;
  // Parameters of a Swin built from this config (Swin-T's 28M take long to initialise in a
  // test; this formula stands in for building one):
  //   patch_embed C_in p^2 D + 3D; per block of width d, window w, h heads, hidden m:
  //   4d (norms) + (2w-1)^2 h + 4d^2 + 4d (attn) + 2dm + m + d (mlp); per PatchMerging 8d^2 + 8d;
  //   norm 2F + head F n + n, F = D 2^(S-1).
  int64_t num_parameters() const;
};

// ---------------------------------------------------------------------------- layers
// Window multi-head self-attention with relative position bias (sec. 3.2, eq. 4):
//   Attention(Q, K, V) = SoftMax(Q K^T / sqrt(d) + B) V   inside each w x w window,
// B[h, i, j] = relative_position_bias_table[relative_position_index[i, j], h], plus the
// shifted-window mask when given. One Linear qkv (C -> 3C) for all windows; heads are views.
class SwinWindowAttention : public nn::Module {
 public:
  SwinWindowAttention(int64_t dim, int64_t window, int64_t num_heads, float proj_dropout = 0.0f);
  std::string name() const override { return "WindowAttention"; }
  // x (B * nW, N, C), N = w*w; mask (nW, N, N) additive (0 / -100) or undefined -> (B * nW, N, C)
  Tensor forward(const Tensor& x, const Tensor& mask = Tensor()) const;
  // The bias B of eq. 4 gathered from the table: (heads, N, N).
  Tensor relative_position_bias() const;

  int64_t dim, window, num_heads;
  Tensor relative_position_bias_table;  // ((2w-1)^2, heads), trunc_normal(0.02)
  Tensor relative_position_index;       // (N, N) int64, a non-persistent buffer
  std::shared_ptr<nn::Linear> qkv, proj;
  std::shared_ptr<nn::Dropout> proj_drop;
};

// One Swin block (fig. 3b) on an r x r token map: x + DropPath(attn(LN(x))) over (shifted)
// windows, then x + DropPath(MLP(LN(x))). Built with the stage's window rule already applied.
class SwinBlock : public nn::Module {
 public:
  // window, shift: as used (shift 0 = W-MSA; 0 < shift < window = SW-MSA).
  SwinBlock(int64_t dim, int64_t resolution, int64_t num_heads, int64_t window, int64_t shift,
            float mlp_ratio, float dropout, float drop_path);
  // x (B, r*r, C) -> (B, r*r, C), the residual stream (nn::Residual: each sum is formed by the
  // LayerNorm that reads it next, in its own kernel).
  nn::Residual forward(nn::Residual x) const;
  // (S)W-MSA over the token map: x = LN(z) (B, r*r, C) cyclically shifted (SW-MSA), cut into
  // windows, attended, put back and shifted back -> (B, r*r, C).
  Tensor window_attention(const Tensor& x) const;

  int64_t dim, resolution, window, shift;
  Tensor attn_mask;  // (nW, N, N) 0 / -100 when shifted, else undefined; non-persistent buffer
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<SwinWindowAttention> attn;
  std::shared_ptr<nn::DropPath> drop_path;
  std::shared_ptr<nn::FeedForward> mlp;  // mlp.fc1, mlp.fc2, exact GELU
};

// Patch merging (sec. 3.1, "Stage 2"): each 2x2 group of neighbours is concatenated in the
// official order x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2] (row offset
// fastest), normalised and reduced: (B, r*r, C) -> (B, r*r/4, 2C).
class SwinPatchMerging : public nn::Module {
 public:
  SwinPatchMerging(int64_t resolution, int64_t dim);
  std::string name() const override { return "PatchMerging"; }
  Tensor forward(const Tensor& x) const;  // (B, r*r, C) -> (B, r*r/4, 2C)

  int64_t resolution, dim;
  std::shared_ptr<nn::Linear> reduction;  // 4C -> 2C, no bias
  std::shared_ptr<nn::LayerNorm> norm;    // over 4C
};

// One stage (the official BasicLayer): blocks, then an optional downsample.
class SwinStage : public nn::Module {
 public:
  std::string name() const override { return "BasicLayer"; }
  Tensor forward(const Tensor& x) const;  // (B, r*r, C) -> same, or (B, r*r/4, 2C) if merged

  std::shared_ptr<nn::ModuleList<SwinBlock>> blocks;
  std::shared_ptr<SwinPatchMerging> downsample;  // null in the last stage
};

// patch_embed: non-overlapping patches projected by a strided Conv2d, then LayerNorm.
class SwinPatchEmbed : public nn::Module {
 public:
  SwinPatchEmbed(int64_t patch_size, int64_t in_channels, int64_t embed_dim);
  std::string name() const override { return "PatchEmbed"; }
  Tensor forward(const Tensor& images) const;  // (B, C_in, H, W) -> (B, H/p * W/p, D)

  std::shared_ptr<nn::Conv2d> proj;
  std::shared_ptr<nn::LayerNorm> norm;
};

// ---------------------------------------------------------------------------- model
class Swin : public nn::Module {
 public:
  // Init as the official code: Linear weights trunc_normal(0.02) with zero biases, bias tables
  // trunc_normal(0.02), LayerNorm (1, 0), the patch Conv2d PyTorch's default.
  explicit Swin(const SwinConfig& config);

  // float images (B, in_channels, image_size, image_size) -> logits (B, num_classes)
  Tensor forward(const Tensor& images);
  // The pooled features before the head: mean over tokens of norm(x), (B, D * 2^(S-1)).
  Tensor forward_features(const Tensor& images);

  const SwinConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (see
  // train/weight_decay.h): every relative_position_bias_table, the official Swin's
  // no_weight_decay_keywords (its no_weight_decay, absolute_pos_embed, is off here).
  std::set<std::string> no_weight_decay() const;
  // The stages, layers.
  const nn::ModuleList<SwinStage>& stages() const { return *layers; }

  std::shared_ptr<SwinPatchEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  std::shared_ptr<nn::ModuleList<SwinStage>> layers;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  void init_weights();

  SwinConfig config_;
};

}  // namespace loom::models
