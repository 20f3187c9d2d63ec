// DETR (Carion et al. 2020) in one file, in the order of facebookresearch/detr: configuration
// and presets, position encoding, transformer layers, the model, the checkpoint loader.
#include "models/detr.h"

#include <cmath>
#include <map>
#include <numbers>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "io/checkpoint.h"
#include "nn/feed_forward.h"
#include "nn/init.h"
#include "io/safetensors.h"

namespace loom::models {

// ============================================================================ configuration

// The presets, each written once: preset() and preset_names() read this table.
std::span<const fields::Preset<DETRConfig>> DETRConfig::presets() {
  static const fields::Preset<DETRConfig> table[] = {
      // the defaults are the paper's (sec. 4, "Technical details")
      {"detr-r50", {}},
      {"detr-fmnist",  // bench/reference/models.py's DETR
       {.num_classes = 10,
        .backbone = "small",
        .in_channels = 1,
        .hidden = 128,
        .n_head = 4,
        .n_encoder_layers = 3,
        .n_decoder_layers = 3,
        .d_ff = 512,
        .num_queries = 10}},
  };
  return table;
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const DETRConfig& c) {
  const double d = c.hidden, f = c.d_ff;
  double backbone_params = 0, channels = c.in_channels;
  if (c.backbone == "small") {
    for (const double w : c.small_channels) {  // conv 3x3 without bias + BatchNorm2d weight, bias
      backbone_params += channels * w * 9 + 2 * w;
      channels = w;
    }
  } else {  // conv1 7x7, then per Bottleneck 1x1 + 3x3 + 1x1 (+ the 1x1 projection); BN frozen
    const double width = c.resnet_width;
    backbone_params = channels * width * 49;
    channels = width;
    // Counted per stage, not looped per block: a hostile 10^18 blocks must not hang the check
    // that refuses them.
    for (size_t s = 0; s < c.resnet_layers.size(); ++s) {
      const double planes = width * static_cast<double>(int64_t{1} << s);
      auto block = [&] { return channels * planes + planes * planes * 9 + planes * 4 * planes; };
      backbone_params += block() + channels * 4 * planes;  // the first projects: 64 -> 256
      channels = 4 * planes;
      backbone_params += (c.resnet_layers[s] - 1.0) * block();
    }
  }
  const double attention = 4 * d * d + 4 * d, ffn = 2 * d * f + f + d;
  const double encoder = c.n_encoder_layers * (attention + ffn + 4 * d);
  const double decoder = c.n_decoder_layers * (2 * attention + ffn + 6 * d) + 2 * d;
  const double heads = (d + 1) * (c.num_classes + 1) + 2 * (d * d + d) + 4 * d + 4;
  return backbone_params + (channels * d + d) + encoder + decoder + c.num_queries * d + heads;
}

int64_t DETRConfig::num_parameters() const { return parameter_count(count_parameters(*this)); }

void DETRConfig::validate() const {
  fields::check_fields(*this, "DETRConfig");
  LOOM_CHECK(backbone == "resnet50" || backbone == "small",
             "DETRConfig: backbone '{}' is neither 'resnet50' nor 'small'", backbone);
  LOOM_CHECK(hidden % n_head == 0 && hidden % 2 == 0,
             "DETRConfig: hidden {} must be even and a multiple of n_head {}", hidden, n_head);
  if (backbone == "small") {
    LOOM_CHECK(!small_channels.empty(), "DETRConfig: small_channels is empty");
    for (int64_t c : small_channels)
      LOOM_CHECK(c > 0, "DETRConfig: small_channels has a width {}", c);
  } else {
    LOOM_CHECK(resnet_layers.size() == 4 && resnet_width > 0,
               "DETRConfig: resnet_layers needs 4 stages and resnet_width > 0, got {} stages and "
               "width {}",
               resnet_layers.size(), resnet_width);
    for (int64_t n : resnet_layers)
      LOOM_CHECK(n > 0, "DETRConfig: a ResNet stage has {} blocks", n);
  }
  double layers = static_cast<double>(n_encoder_layers) + static_cast<double>(n_decoder_layers);
  if (backbone == "small")
    layers += static_cast<double>(small_channels.size());
  else
    for (int64_t n : resnet_layers) layers += static_cast<double>(n);
  check_model_size("DETRConfig", count_parameters(*this), layers, to_string());
}

// ============================================================================ position encoding

Tensor sine_position_embedding(const Tensor& mask, int64_t num_pos_feats, float temperature) {
  // mask (B, h, w), 1 = padding -> (B, h, w, 2 npf)
  LOOM_CHECK(mask.defined() && mask.dtype() == DType::Float32 && mask.dim() == 3 &&
                 num_pos_feats > 0 && num_pos_feats % 2 == 0,
             "sine_position_embedding: expected a float32 mask [B, h, w] and an even "
             "num_pos_feats, got {} and {}",
             mask.defined() ? shape_str(mask.shape()) : "undefined", num_pos_feats);
  const int64_t h = mask.size(1), w = mask.size(2);
  const Device dev = mask.device();
  const Tensor not_mask = 1.0f - mask;  // (B, h, w)
  // The official cumsum along rows and columns, as products with triangular matrices of ones.
  const Tensor y_embed = matmul(tril(ones({h, h}, dev)), not_mask);  // (h,h) @ (B,h,w): (B,h,w)
  const Tensor x_embed = matmul(not_mask, triu(ones({w, w}, dev)));  // (B,h,w) @ (w,w): (B,h,w)
  // normalize=True: the last row / column becomes 2 pi (eps 1e-6 as the official code).
  constexpr float eps = 1e-6f, scale = 2.0f * std::numbers::pi_v<float>;
  const Tensor y = y_embed / (y_embed.narrow(1, h - 1, 1) + eps) * scale;  // (B, h, w)
  const Tensor x = x_embed / (x_embed.narrow(2, w - 1, 1) + eps) * scale;  // (B, h, w)
  // dim_t[k] = T^(2 floor(k/2) / npf): features 2i and 2i+1 share a frequency; the even ones
  // take the sine, the odd ones the cosine (the official stack + flatten interleaves them).
  std::vector<float> dim_t(num_pos_feats), odd(num_pos_feats);
  for (int64_t k = 0; k < num_pos_feats; ++k) {
    dim_t[k] =
        std::pow(temperature, static_cast<float>(2 * (k / 2)) / static_cast<float>(num_pos_feats));
    odd[k] = static_cast<float>(k % 2);
  }
  const Tensor freq = tensor(dim_t, {num_pos_feats}).to(dev),
               is_odd = tensor(odd, {num_pos_feats}).to(dev);
  auto encode = [&](const Tensor& v) {
    const Tensor arg = v.unsqueeze(-1) / freq;  // (B, h, w, 1) / (npf): (B, h, w, npf)
    return where(is_odd, cos(arg), sin(arg));   // (B, h, w, npf)
  };
  return cat({encode(y), encode(x)}, -1);  // (B, h, w, 2 npf), y first
}

// ============================================================================ transformer

namespace {

// Layers of the post-norm residual form x = norm(x + dropout(sublayer(x))) (Vaswani et al.
// 2017, sec. 5.4), as DETR's forward_post.
Tensor add_norm(const nn::LayerNorm& norm, const nn::Dropout& dropout, const Tensor& x,
                const Tensor& y) {
  return norm.forward(nn::Residual(x) + dropout.forward(y));  // the sum formed in norm's kernel
}

}  // namespace

Tensor DETREncoderLayer::forward(const Tensor& src, const Tensor& pos,
                                 const Tensor& key_padding_mask) const {
  // src, pos (B, S, d) -> (B, S, d). Positions go into queries and keys, not values (sec. 3.2).
  const Tensor q = src + pos;  // (B, S, d)
  Tensor x = add_norm(*norm1, *dropout1, src,
                      self_attn->forward(q, q, src, Tensor(), key_padding_mask));  // (B, S, d)
  const Tensor y = nn::feed_forward(x, *linear1, *linear2, nn::Activation::ReLU, *dropout);
  return add_norm(*norm2, *dropout2, x, y);  // (B, S, d)
}

Tensor DETRDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const Tensor& pos,
                                 const Tensor& query_pos,
                                 const Tensor& memory_key_padding_mask) const {
  // tgt (B, Q, d), memory (B, S, d) -> (B, Q, d)
  // Self-attention among the object queries: the query embeddings are their positions.
  const Tensor q = tgt + query_pos;                                            // (B, Q, d)
  Tensor x = add_norm(*norm1, *dropout1, tgt, self_attn->forward(q, q, tgt));  // (B, Q, d)
  // Cross-attention: queries (+ query_pos) look at the image features (+ pos).
  const Tensor cross = multihead_attn->forward(x + query_pos, memory + pos, memory, Tensor(),
                                               memory_key_padding_mask);  // (B, Q, d)
  x = add_norm(*norm2, *dropout2, x, cross);
  const Tensor y = nn::feed_forward(x, *linear1, *linear2, nn::Activation::ReLU, *dropout);
  return add_norm(*norm3, *dropout3, x, y);  // (B, Q, d)
}

DETRTransformer::DETRTransformer(const DETRConfig& c) {
  encoder_layers =
      register_module("encoder.layers", std::make_shared<nn::ModuleList<DETREncoderLayer>>());
  for (int64_t i = 0; i < c.n_encoder_layers; ++i)
    encoder_layers->push_back(
        std::make_shared<DETREncoderLayer>(c.hidden, c.n_head, c.d_ff, c.dropout));
  decoder_layers =
      register_module("decoder.layers", std::make_shared<nn::ModuleList<DETRDecoderLayer>>());
  for (int64_t i = 0; i < c.n_decoder_layers; ++i)
    decoder_layers->push_back(
        std::make_shared<DETRDecoderLayer>(c.hidden, c.n_head, c.d_ff, c.dropout));
  decoder_norm = register_module("decoder.norm", std::make_shared<nn::LayerNorm>(c.hidden));
  // DETR's Transformer._reset_parameters.
  for (Tensor& p : parameters())
    if (p.dim() > 1) nn::init::xavier_uniform_(p);
}

Tensor DETRTransformer::forward(const Tensor& src, const Tensor& key_padding_mask,
                                const Tensor& query_embed, const Tensor& pos) const {
  // src, pos (B, S, d); query_embed (Q, d) -> hs (L, B, Q, d)
  const int64_t B = src.size(0), Q = query_embed.size(0), d = query_embed.size(1);
  Tensor memory = src;
  for (const auto& layer : *encoder_layers) memory = layer->forward(memory, pos, key_padding_mask);
  const Tensor query_pos = query_embed.unsqueeze(0).expand({B, Q, d});  // (B, Q, d), a view
  Tensor tgt = zeros({B, Q, d}, src.device());                          // sec. 3.2: starts at 0
  std::vector<Tensor> hs;
  for (const auto& layer : *decoder_layers) {
    tgt = layer->forward(tgt, memory, pos, query_pos, key_padding_mask);
    hs.push_back(decoder_norm->forward(tgt));  // the next layer gets the un-normed tgt
  }
  return stack(hs, 0);  // (L, B, Q, d)
}

DETRMLP::DETRMLP(int64_t in, int64_t hidden, int64_t out, int64_t num_layers) {
  layers = register_module("layers", std::make_shared<nn::ModuleList<nn::Linear>>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back(
        std::make_shared<nn::Linear>(i == 0 ? in : hidden, i == num_layers - 1 ? out : hidden));
}

Tensor DETRMLP::forward(const Tensor& x) const {
  Tensor y = x;
  for (int64_t i = 0; i < layers->size(); ++i) {  // relu(layer(y)) as one op, but the last
    const nn::Linear& layer = *(*layers)[i];
    const bool last = i + 1 == layers->size();
    y = last ? layer.forward(y) : layer.forward_activation(y, nn::Activation::ReLU);
  }
  return y;
}

// ============================================================================ model

namespace {

// Rows of a nearest-neighbour resize from `in` to `out` samples, as F.interpolate(mode=
// 'nearest'): source floor(dst * in / out), the scale in float32.
Tensor nearest_indices(int64_t in, int64_t out, Device device) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<int64_t> index(out);
  for (int64_t i = 0; i < out; ++i)
    index[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * scale)), in - 1);
  return tensor_i64(index, {out}).to(device);
}

}  // namespace

ResNetConfig DETR::resnet_config() const {
  return {config_.in_channels, config_.resnet_layers, config_.resnet_width};
}

DETR::DETR(const DETRConfig& config) : config_(config) {
  config.validate();
  const int64_t d = config.hidden;
  // Registered in the official DETR.__init__ order.
  transformer = register_module("transformer", std::make_shared<DETRTransformer>(config));
  class_embed =
      register_module("class_embed", std::make_shared<nn::Linear>(d, config.num_classes + 1));
  bbox_embed = register_module("bbox_embed", std::make_shared<DETRMLP>(d, d, 4, 3));
  query_embed =
      register_module("query_embed", std::make_shared<nn::Embedding>(config.num_queries, d));
  int64_t channels = config.in_channels;
  if (config.backbone == "small") {
    // bench/reference/models.py: 4 x [Conv3x3 stride 2 pad 1 (no bias), BatchNorm2d, ReLU].
    small_backbone = std::make_shared<nn::Sequential>();
    for (int64_t c : config.small_channels) {
      small_backbone->push_back(std::make_shared<nn::Conv2d>(channels, c, 3, 2, 1, false));
      small_backbone->push_back(std::make_shared<nn::BatchNorm2d>(c));
      small_backbone->push_back(std::make_shared<nn::ReLU>());
      channels = c;
    }
  } else {
    resnet = std::make_shared<ResNet>(resnet_config());
    channels = resnet_config().out_channels();
  }
  input_proj = register_module("input_proj", std::make_shared<nn::Conv2d>(channels, d, 1));
  if (small_backbone) {
    backbone = register_module("backbone", small_backbone);
  } else {
    // facebookresearch/detr's Joiner (a Sequential of the Backbone and the position encoding)
    // holds the Backbone, which registers its ResNet trunk as `body`: backbone.0.body.
    register_module("backbone.0.body", resnet);
    backbone = get_submodule("backbone");
  }
}

void DETR::check_inputs(const Tensor& images, const Tensor& pixel_mask) const {
  LOOM_CHECK(images.defined() && images.dtype() == DType::Float32 && images.dim() == 4 &&
                 images.size(1) == config_.in_channels,
             "DETR: expected float32 images [B, {}, H, W], got {} of shape {}", config_.in_channels,
             images.defined() ? dtype_name(images.dtype()) : "undefined",
             images.defined() ? shape_str(images.shape()) : "[]");
  LOOM_CHECK(images.size(0) > 0 && images.size(2) > 0 && images.size(3) > 0,
             "DETR: images of shape {} are empty", shape_str(images.shape()));
  if (!pixel_mask.defined()) return;
  const Shape expected = {images.size(0), images.size(2), images.size(3)};
  LOOM_CHECK(pixel_mask.shape() == expected,
             "DETR: pixel_mask of shape {} does not fit images {} (expected {})",
             shape_str(pixel_mask.shape()), shape_str(images.shape()), shape_str(expected));
}

DETROutput DETR::forward(const Tensor& images, const Tensor& pixel_mask) {
  // images (B, C, H, W), pixel_mask (B, H, W) nonzero = padding -> DETROutput
  check_inputs(images, pixel_mask);
  const Tensor features =
      small_backbone ? small_backbone->forward(images) : resnet->forward(images);  // (B, Cb, h, w)
  const int64_t B = images.size(0), h = features.size(2), w = features.size(3);
  const int64_t d = config_.hidden;
  const Device dev = images.device();
  // The padding mask at feature resolution (backbone.py: F.interpolate, nearest), 1 = padding.
  Tensor mask = zeros({B, h, w}, dev), key_padding;
  if (pixel_mask.defined()) {
    const Tensor m = ne(pixel_mask, 0).to(DType::Float32);  // (B, H, W) 0/1
    mask = index_select(index_select(m, 1, nearest_indices(images.size(2), h, dev)), 2,
                        nearest_indices(images.size(3), w, dev));  // (B, h, w)
    key_padding = mask.reshape({B, h * w}).to(DType::Int64);       // (B, S), S = h w
    // An image without one unpadded feature position would attend to nothing (NaN outputs).
    LOOM_CHECK(max(mean(mask.reshape({B, h * w}), 1)).item() < 1.0f,
               "DETR: an image of pixel_mask {} is all padding at the feature resolution {}x{}",
               shape_str(pixel_mask.shape()), h, w);
  }
  const Tensor pos = sine_position_embedding(mask, d / 2).reshape({B, h * w, d});  // (B, S, d)
  const Tensor projected = input_proj->forward(features);                          // (B, d, h, w)
  const Tensor src = projected.flatten(2).transpose(1, 2);  // (B, d, S) -> (B, S, d)
  const Tensor hs = transformer->forward(src, key_padding, query_embed->weight, pos);  // (L,B,Q,d)
  // Both heads on every decoder layer at once: the auxiliary outputs (sec. 3.2).
  const Tensor logits = class_embed->forward(hs);         // (L, B, Q, classes + 1)
  const Tensor boxes = sigmoid(bbox_embed->forward(hs));  // (L, B, Q, 4)
  const int64_t L = hs.size(0);
  DETROutput out{logits.select(0, L - 1), boxes.select(0, L - 1), {}, {}};
  for (int64_t i = 0; i + 1 < L; ++i) {
    out.aux_logits.push_back(logits.select(0, i));
    out.aux_boxes.push_back(boxes.select(0, i));
  }
  return out;
}

// ============================================================================ checkpoint

void load_detr(DETR& model, const std::string& path) {
  std::map<std::string, Tensor> state = nn::read_safetensors(path);
  // The official checkpoint is {"model": state_dict, ...}; flattened, names carry "model.".
  bool prefixed = !state.empty();
  for (const auto& [name, t] : state) prefixed = prefixed && name.rfind("model.", 0) == 0;
  if (prefixed) {
    std::map<std::string, Tensor> stripped;
    for (auto& [name, t] : state) stripped.emplace(name.substr(6), t);
    state = std::move(stripped);
  }
  nn::load_state_dict(model, state, "load_detr: " + path);
}

}  // namespace loom::models
