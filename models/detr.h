// DETR: DEtection TRansformer (Carion et al. 2020, "End-to-End Object Detection with
// Transformers"), in the layout of facebookresearch/detr (models/detr.py, transformer.py,
// backbone.py, position_encoding.py), so its state_dicts load name-for-name.
//
//   images (B, C, H, W), pixel_mask (B, H, W) (1 = padding)
//     -> backbone: ResNet-50 with frozen BN (C5, 2048 channels, H/32 x W/32), or the small CNN
//        of bench/reference/models.py (4 x [conv 3x3 stride 2, BatchNorm, ReLU])
//     -> input_proj (1x1 conv to d)                                  src (B, h*w, d)
//     -> 2-D sine positions from the mask, resized to h x w          pos (B, h*w, d)
//     -> encoder: n_encoder_layers post-norm layers, pos added to queries and keys (never values)
//                                                                    memory (B, h*w, d)
//     -> decoder: num_queries learned query positions (query_embed), targets starting at 0;
//        self-attention among the queries, cross-attention to memory + pos; the shared final
//        LayerNorm (transformer.decoder.norm) applied to every layer's output
//                                                                    hs (L, B, num_queries, d)
//     -> class_embed: Linear(d, num_classes + 1) ("no object" is the last class)
//        bbox_embed:  3-layer MLP (ReLU) + sigmoid -> normalised (cx, cy, w, h)
//     -> the last layer's outputs; the other layers' are the auxiliary outputs (sec. 3.2)
//
// Parameter names: backbone.0.body.* (torchvision ResNet; FrozenBatchNorm2d buffers weight,
// bias, running_mean, running_var) or backbone.{3k} / backbone.{3k+1} (the small CNN's conv and
// BatchNorm2d), input_proj, query_embed, transformer.encoder.layers.N.{self_attn, linear1,
// linear2, norm1, norm2}, transformer.decoder.layers.N.{self_attn, multihead_attn, linear1,
// linear2, norm1, norm2, norm3}, transformer.decoder.norm, class_embed, bbox_embed.layers.{0,1,2}.
// The attention layers are nn::MultiheadAttention (PyTorch's in_proj_weight / out_proj names).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/tensor.h"
#include "models/resnet.h"
#include "nn/container.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"
#include "nn/transformer_layer.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
// DETRConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_DETR_CONFIG_FIELDS(F)                                                               \
  F(int64_t, num_classes, 91, positive, "the \"no object\" class is index num_classes")          \
  F(std::string, backbone, "resnet50", any,                                                      \
    "\"resnet50\" (torchvision layout) or \"small\" (a CNN)")                                    \
  F(int64_t, in_channels, 3, positive, "image channels")                                         \
  F(int64_t, hidden, 256, positive, "d, the transformer's width: even, a multiple of n_head")    \
  F(int64_t, n_head, 8, positive, "attention heads")                                             \
  F(int64_t, n_encoder_layers, 6, non_negative, "encoder layers (0: the decoder alone)")         \
  F(int64_t, n_decoder_layers, 6, positive, "decoder layers; all but the last give aux outputs") \
  F(int64_t, d_ff, 2048, positive, "hidden width of each layer's feed-forward")                  \
  F(int64_t, num_queries, 100, positive, "object queries: the most boxes an image gets")         \
  F(float, dropout, 0.1f, probability, "in the encoder and decoder layers")                      \
  /* Beyond the paper's configuration, for small models and tests (checked by validate() */      \
  /* for the backbone in use): */                                                                \
  F(std::vector<int64_t>, small_channels, (std::vector<int64_t>{32, 64, 128, 128}), any,         \
    "the small CNN's conv widths")                                                               \
  F(std::vector<int64_t>, resnet_layers, (std::vector<int64_t>{3, 4, 6, 3}), any,                \
    "Bottlenecks per ResNet stage")                                                              \
  F(int64_t, resnet_width, 64, any, "ResNet's layer1 planes")

struct DETRConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table detr.cpp defines as presets().
  LOOM_MODEL_CONFIG(DETRConfig, LOOM_DETR_CONFIG_FIELDS, "detr")

  // Presets: "detr-r50": the paper's DETR (91 COCO classes, ResNet-50, d 256, 8 heads, 6 + 6
  // layers, FF 2048, 100 queries): 41,524,768 parameters, the frozen BN statistics being buffers
  // (the official main.py prints 41,302,368: it freezes conv1 and layer1 and counts the rest).
  // "detr-fmnist": bench/reference/models.py's DETR for 1x64x64 scenes (10 classes, the small CNN
  // 1-32-64-128-128, d 128, 4 heads, 3 + 3 layers, FF 512, 10 queries; 1,682,159 parameters).
  // to_metadata() is the checkpoint metadata (nn::save_checkpoint), so a program rebuilds the model
  // from the file: {"model_type": "detr", "num_classes": "10", "backbone": "small", ...,
  // "small_channels": "32,64,128,128", ...}. from_metadata reads them back (other keys are ignored;
  // "model_type" may be absent); a missing or garbled key, another model_type or an invalid config
  // is a loom::Error naming the key and `source` (the file).

  // Throws loom::Error naming the first invalid field (each field's check, then the backbone's
  // name and its sizes, hidden even and a multiple of n_head, loom's size budget).
  void validate() const;
  // Parameters of a DETR built from this config (FrozenBatchNorm2d statistics not counted).
  int64_t num_parameters() const;
};

// ---------------------------------------------------------------------------- blocks
// The 2-D sine position encoding (Carion et al. 2020, sec. 3.2 and appendix A.4; DETR's
// PositionEmbeddingSine with normalize=True, scale 2 pi, temperature 10000): each position's y
// and x, counted over the non-padding pixels and normalised to (0, 2 pi], are encoded by
// num_pos_feats sines and cosines each (interleaved), y features first.
//   mask (B, h, w) float, 1 = padding  ->  (B, h, w, 2 num_pos_feats)
Tensor sine_position_embedding(const Tensor& mask, int64_t num_pos_feats,
                               float temperature = 10000.0f);

// DETR's TransformerEncoderLayer, post-norm (normalize_before=False, the official default): the
// modules of PyTorch's nn.TransformerEncoderLayer (ReLU, LayerNorm eps 1e-5), names and order
// included, with DETR's forward, which adds the positions to queries and keys. (This forward
// hides the base class's, which has no positions.)
class DETREncoderLayer : public nn::TransformerEncoderLayer {
 public:
  DETREncoderLayer(int64_t d, int64_t n_head, int64_t d_ff, float dropout)
      : nn::TransformerEncoderLayer(d, n_head, d_ff, dropout) {}
  // src, pos (B, S, d); key_padding_mask (B, S) int64 nonzero = padding, or undefined
  // -> (B, S, d)
  Tensor forward(const Tensor& src, const Tensor& pos, const Tensor& key_padding_mask) const;
};

// DETR's TransformerDecoderLayer, post-norm: nn.TransformerDecoderLayer's modules, with the
// object queries' positions added to the queries and the image's to the keys.
class DETRDecoderLayer : public nn::TransformerDecoderLayer {
 public:
  DETRDecoderLayer(int64_t d, int64_t n_head, int64_t d_ff, float dropout)
      : nn::TransformerDecoderLayer(d, n_head, d_ff, dropout) {}
  // tgt, query_pos (B, Q, d); memory, pos (B, S, d); memory_key_padding_mask (B, S) or
  // undefined -> (B, Q, d)
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& pos,
                 const Tensor& query_pos, const Tensor& memory_key_padding_mask) const;
};

// Holds the layers as transformer.encoder.layers.N and transformer.decoder.{layers.N, norm}.
class DETRTransformer : public nn::Module {
 public:
  explicit DETRTransformer(const DETRConfig& config);
  // src, pos (B, S, d); key_padding_mask (B, S) or undefined; query_embed (Q, d)
  // -> hs (L, B, Q, d): every decoder layer's output through the shared decoder norm
  Tensor forward(const Tensor& src, const Tensor& key_padding_mask, const Tensor& query_embed,
                 const Tensor& pos) const;

  std::shared_ptr<nn::ModuleList<DETREncoderLayer>> encoder_layers;  // encoder.layers
  std::shared_ptr<nn::ModuleList<DETRDecoderLayer>> decoder_layers;  // decoder.layers
  std::shared_ptr<nn::LayerNorm> decoder_norm;                       // decoder.norm
};

// DETR's MLP: Linear layers named layers.0 .. layers.{n-1}, ReLU between them.
class DETRMLP : public nn::Module {
 public:
  DETRMLP(int64_t in, int64_t hidden, int64_t out, int64_t num_layers);
  Tensor forward(const Tensor& x) const;  // (..., in) -> (..., out)

  std::shared_ptr<nn::ModuleList<nn::Linear>> layers;
};

// ---------------------------------------------------------------------------- model
struct DETROutput {
  Tensor logits;  // [B, num_queries, num_classes + 1]
  Tensor boxes;   // [B, num_queries, 4], sigmoid outputs, normalised (cx, cy, w, h)
  std::vector<Tensor> aux_logits, aux_boxes;  // one per decoder layer but the last
};

class DETR : public nn::Module {
 public:
  // Initialisation as the reference: every transformer weight with more than one dimension
  // Xavier-uniform (DETR's Transformer._reset_parameters), the rest PyTorch's defaults.
  explicit DETR(const DETRConfig& config);

  // images float [B, C, H, W]; pixel_mask [B, H, W] float or int64, nonzero = padding
  // (undefined = none), resized to the feature map by nearest neighbour as the official code;
  // an image left with no unpadded feature position is a loom::Error (it would give NaN).
  DETROutput forward(const Tensor& images, const Tensor& pixel_mask = Tensor());

  const DETRConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (timm's name; see
  // train/weight_decay.h): none. DETR's own recipe decays every parameter, 1-D ones too.
  std::set<std::string> no_weight_decay() const { return {}; }

  std::shared_ptr<DETRTransformer> transformer;
  std::shared_ptr<nn::Linear> class_embed;
  std::shared_ptr<DETRMLP> bbox_embed;
  std::shared_ptr<nn::Embedding> query_embed;
  std::shared_ptr<nn::Conv2d> input_proj;
  std::shared_ptr<nn::Module> backbone;  // a Sequential (small), or holds 0.body (ResNet)
  std::shared_ptr<nn::Sequential> small_backbone;  // set for "small"
  std::shared_ptr<ResNet> resnet;                  // set for "resnet50"

 private:
  void check_inputs(const Tensor& images, const Tensor& pixel_mask) const;
  ResNetConfig resnet_config() const;

  DETRConfig config_;
};

// Loads a facebookresearch/detr state_dict saved as safetensors (the names above; a "model."
// prefix, as in the official checkpoint's {"model": state_dict}, is accepted), strictly: every
// name of the model must be present with its shape, and no other name. FrozenBatchNorm2d eps
// is 1e-5; aux outputs also pass through transformer.decoder.norm.
void load_detr(DETR& model, const std::string& path);

}  // namespace loom::models
