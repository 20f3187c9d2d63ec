#!/usr/bin/python3
"""Golden DETR values from PyTorch for tests/models/test_detr*.cpp.

facebookresearch/detr and torchvision are not installed on the build machines, so the modules
below re-implement them with exactly their module names (hence state_dict keys) and semantics:
  * models/backbone.py: FrozenBatchNorm2d, Backbone (an IntermediateLayerGetter over a
    torchvision-named ResNet: conv1, bn1, layer1..layer4 of Bottlenecks with downsample.{0,1}),
    Joiner -> backbone.0.body.*, and the mask resized by F.interpolate (nearest);
  * models/position_encoding.py: PositionEmbeddingSine(normalize=True) from the padding mask;
  * models/transformer.py: post-norm encoder/decoder layers (positions added to queries and
    keys only), return_intermediate with the shared decoder norm;
  * models/detr.py: input_proj, query_embed, class_embed, bbox_embed (MLP), aux outputs;
  * models/matcher.py + SetCriterion (labels + boxes) and util/box_ops.py for the loss golden.
The "small" backbone is bench/reference/models.py's CNN (backbone.{3k} conv, {3k+1} BN).

Writes next to this script (float32; computed in float64 where noted):
  detr.safetensors
    r.<name> / s.<name>    the state_dicts of a tiny ResNet-backbone DETR and a tiny small-CNN
                           DETR (CONFIG_R, CONFIG_S)
    r.input.images, r.input.mask (int64, 1 = padding), s.input.images, s.input.mask
    r.out.logits / r.out.boxes   [L, B, Q, *]: every decoder layer (the last = the outputs)
    r.out.pos                    [B, d, h, w] the position encoding of the resized mask
    r.grad.<name>, s.grad.<name> d (sum(logits * r.input.wl) + sum(boxes * r.input.wb)) / d param
    count.<preset>               parameter counts of the PyTorch models of loom's presets
  detr_loss.safetensors  (float64 computation)
    <case>.logits [B, Q, C+1], <case>.boxes [B, Q, 4], <case>.t<i>.labels, <case>.t<i>.boxes
    <case>.config  [num_classes, cost_class, cost_bbox, cost_giou, loss_ce, loss_bbox,
                    loss_giou, eos_coef]
    <case>.loss, <case>.loss_ce, <case>.loss_bbox, <case>.loss_giou   []
    <case>.grad.logits, <case>.grad.boxes    d loss / d inputs
    <case>.match.<i>   int64 [2, n_i]  scipy's (query, target) pairs of image i

Run: /usr/bin/python3 tests/golden/gen_detr.py   (from anywhere)
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

# num_classes, hidden, heads, enc, dec, ff, queries (+ the backbone's own sizes)
CONFIG_R = dict(num_classes=4, hidden=16, n_head=2, n_enc=2, n_dec=3, d_ff=32, queries=5,
                layers=(1, 1, 1, 1), width=2, in_channels=3)
CONFIG_S = dict(num_classes=3, hidden=8, n_head=2, n_enc=1, n_dec=2, d_ff=16, queries=4,
                chans=(1, 4, 8, 8))


# ----------------------------------------------------------------------------- backbone
class FrozenBatchNorm2d(nn.Module):  # models/backbone.py
    def __init__(self, n):
        super().__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))

    def forward(self, x):
        w, b = self.weight.reshape(1, -1, 1, 1), self.bias.reshape(1, -1, 1, 1)
        rv, rm = self.running_var.reshape(1, -1, 1, 1), self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + 1e-5).rsqrt()
        return x * scale + (b - rm * scale)


class Bottleneck(nn.Module):  # torchvision.models.resnet.Bottleneck (stride on conv2)
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = FrozenBatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = FrozenBatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, 4 * planes, 1, bias=False)
        self.bn3 = FrozenBatchNorm2d(4 * planes)
        self.downsample = None
        if stride != 1 or cin != 4 * planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, 4 * planes, 1, stride, bias=False),
                                            FrozenBatchNorm2d(4 * planes))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNetBody(nn.Module):  # IntermediateLayerGetter(resnet, {"layer4": "0"}): no avgpool/fc
    def __init__(self, in_channels, layers, width):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = FrozenBatchNorm2d(width)
        cin = width
        for s, n in enumerate(layers):
            planes, blocks = width << s, []
            for b in range(n):
                blocks.append(Bottleneck(cin, planes, (1 if s == 0 else 2) if b == 0 else 1))
                cin = 4 * planes
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        for s in range(4):
            x = getattr(self, "layer%d" % (s + 1))(x)
        return x


class Backbone(nn.Module):  # models/backbone.py BackboneBase: the trunk as `body`
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x)


def small_cnn(chans):  # bench/reference/models.py's DETR backbone
    return nn.Sequential(*(m for cin, cout in zip(chans, chans[1:]) for m in (
        nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU())))


def position_embedding_sine(mask, num_pos_feats, temperature=10000):
    """models/position_encoding.py PositionEmbeddingSine(normalize=True), mask True = padding."""
    not_mask = ~mask
    y_embed = not_mask.cumsum(1, dtype=torch.float32)
    x_embed = not_mask.cumsum(2, dtype=torch.float32)
    eps, scale = 1e-6, 2 * math.pi
    y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
    x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
    dim_t = torch.arange(num_pos_feats, dtype=torch.float32)
    dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
    pos_x = x_embed[:, :, :, None] / dim_t
    pos_y = y_embed[:, :, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


# ----------------------------------------------------------------------------- transformer
class Container(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        for k, v in kw.items():
            setattr(self, k, v)


class EncoderLayer(nn.Module):  # TransformerEncoderLayer.forward_post
    def __init__(self, d, h, ff, p):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, src, pos, key_padding_mask):
        q = k = src + pos
        src = self.norm1(src + self.self_attn(q, k, value=src,
                                              key_padding_mask=key_padding_mask)[0])
        return self.norm2(src + self.linear2(F.relu(self.linear1(src))))


class DecoderLayer(nn.Module):  # TransformerDecoderLayer.forward_post
    def __init__(self, d, h, ff, p):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.multihead_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, tgt, memory, pos, query_pos, memory_key_padding_mask):
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + self.self_attn(q, k, value=tgt)[0])
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory,
                                   key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + tgt2)
        return self.norm3(tgt + self.linear2(F.relu(self.linear1(tgt))))


class DETR(nn.Module):  # models/detr.py DETR (aux_loss=True), in eval mode (no dropout)
    def __init__(self, num_classes, hidden, n_head, n_enc, n_dec, d_ff, queries, backbone,
                 backbone_channels, p=0.1):
        super().__init__()
        self.transformer = Container(
            encoder=Container(layers=nn.ModuleList(EncoderLayer(hidden, n_head, d_ff, p)
                                                   for _ in range(n_enc))),
            decoder=Container(layers=nn.ModuleList(DecoderLayer(hidden, n_head, d_ff, p)
                                                   for _ in range(n_dec)),
                              norm=nn.LayerNorm(hidden)))
        for prm in self.transformer.parameters():
            if prm.dim() > 1:
                nn.init.xavier_uniform_(prm)
        self.class_embed = nn.Linear(hidden, num_classes + 1)
        self.bbox_embed = Container(layers=nn.ModuleList(
            [nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 4)]))
        self.query_embed = nn.Embedding(queries, hidden)
        self.input_proj = nn.Conv2d(backbone_channels, hidden, kernel_size=1)
        self.backbone = backbone

    def features(self, images):
        if isinstance(self.backbone, nn.Sequential) and isinstance(self.backbone[0], Backbone):
            return self.backbone[0](images)
        return self.backbone(images)

    def forward(self, images, mask):
        x = self.features(images)
        mask = F.interpolate(mask[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
        pos = position_embedding_sine(mask, self.query_embed.weight.shape[1] // 2)
        src = self.input_proj(x)
        bs, c, h, w = src.shape
        src = src.flatten(2).permute(2, 0, 1)                 # (S, B, d)
        pos_s = pos.flatten(2).permute(2, 0, 1)
        query_pos = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
        key_mask = mask.flatten(1)
        memory = src
        for layer in self.transformer.encoder.layers:
            memory = layer(memory, pos_s, key_mask)
        tgt, hs = torch.zeros_like(query_pos), []
        for layer in self.transformer.decoder.layers:
            tgt = layer(tgt, memory, pos_s, query_pos, key_mask)
            hs.append(self.transformer.decoder.norm(tgt))
        hs = torch.stack(hs).transpose(1, 2)                  # (L, B, Q, d)
        y = hs
        for i, lin in enumerate(self.bbox_embed.layers):
            y = lin(y) if i == 2 else F.relu(lin(y))
        return self.class_embed(hs), y.sigmoid(), pos


def resnet_detr(c):
    body = ResNetBody(c["in_channels"], c["layers"], c["width"])
    return DETR(c["num_classes"], c["hidden"], c["n_head"], c["n_enc"], c["n_dec"], c["d_ff"],
                c["queries"], nn.Sequential(Backbone(body)), 32 * c["width"])


def small_detr(c):
    return DETR(c["num_classes"], c["hidden"], c["n_head"], c["n_enc"], c["n_dec"], c["d_ff"],
                c["queries"], small_cnn(c["chans"]), c["chans"][-1])


def randomize(model, g):
    """(Frozen) BN statistics, norm gains and every bias away from their initial values."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            elif t.dim() == 1 and name.endswith("weight"):
                t.copy_(1 + torch.randn(t.shape, generator=g) * 0.1)
            elif t.dim() == 1:
                t.copy_(torch.randn(t.shape, generator=g) * 0.1)


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def model_golden(out, prefix, model, images, mask, g):
    model.eval()
    logits, boxes, pos = model(images, mask)
    wl, wb = torch.randn(logits.shape, generator=g), torch.randn(boxes.shape, generator=g)
    ((logits * wl).sum() + (boxes * wb).sum()).backward()
    for name, t in model.state_dict().items():
        out[prefix + name] = t.detach().clone()
    for name, p in model.named_parameters():
        out[prefix + "grad." + name] = p.grad.detach().clone()
    out[prefix + "input.images"] = images
    out[prefix + "input.mask"] = mask.long()
    out[prefix + "input.wl"], out[prefix + "input.wb"] = wl, wb
    out[prefix + "out.logits"], out[prefix + "out.boxes"] = logits.detach(), boxes.detach()
    out[prefix + "out.pos"] = pos


# ----------------------------------------------------------------------------- loss
def box_cxcywh_to_xyxy(x):
    cx, cy, w, h = x.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def generalized_box_iou(a, b):  # util/box_ops.py
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt, rb = torch.max(a[:, None, :2], b[:, :2]), torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area_a[:, None] + area_b - inter
    iou = inter / union
    lt, rb = torch.min(a[:, None, :2], b[:, :2]), torch.max(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


@torch.no_grad()
def hungarian_matcher(logits, boxes, targets, cost_class, cost_bbox, cost_giou):
    bs, nq = logits.shape[:2]
    out_prob, out_bbox = logits.flatten(0, 1).softmax(-1), boxes.flatten(0, 1)
    tgt_ids = torch.cat([t["labels"] for t in targets])
    tgt_bbox = torch.cat([t["boxes"] for t in targets])
    c_class = -out_prob[:, tgt_ids]
    c_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
    c_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
    C = (cost_bbox * c_bbox + cost_class * c_class + cost_giou * c_giou).view(bs, nq, -1)
    sizes = [len(t["boxes"]) for t in targets]
    return [tuple(torch.as_tensor(a, dtype=torch.int64) for a in linear_sum_assignment(c[i]))
            for i, c in enumerate(C.split(sizes, -1))]


def set_criterion(logits, boxes, targets, cfg):
    num_classes, w_cls, w_box, w_giou, l_ce, l_box, l_giou, eos = cfg
    indices = hungarian_matcher(logits, boxes, targets, w_cls, w_box, w_giou)
    b = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
    q = torch.cat([src for src, _ in indices])
    target_classes = torch.full(logits.shape[:2], int(num_classes), dtype=torch.int64)
    target_classes[b, q] = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
    empty_weight = torch.ones(int(num_classes) + 1, dtype=logits.dtype)
    empty_weight[-1] = eos
    loss_ce = F.cross_entropy(logits.transpose(1, 2), target_classes, empty_weight)
    num_boxes = max(sum(len(t["labels"]) for t in targets), 1)
    src_b = boxes[b, q]
    tgt_b = torch.cat([t["boxes"][j] for t, (_, j) in zip(targets, indices)])
    loss_bbox = F.l1_loss(src_b, tgt_b, reduction="none").sum() / num_boxes
    giou = generalized_box_iou(box_cxcywh_to_xyxy(src_b), box_cxcywh_to_xyxy(tgt_b))
    loss_giou = (1 - torch.diag(giou)).sum() / num_boxes
    return l_ce * loss_ce + l_box * loss_bbox + l_giou * loss_giou, loss_ce, loss_bbox, \
        loss_giou, indices


def random_boxes(n, g):
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * 0.4 + 0.05
    c = wh / 2 + torch.rand(n, 2, generator=g, dtype=torch.float64) * (1 - wh)
    return torch.cat([c, wh], 1)


def loss_golden(out, name, B, Q, C, sizes, cfg, g):
    logits = (torch.randn(B, Q, C + 1, generator=g, dtype=torch.float64) * 2).requires_grad_()
    boxes = torch.sigmoid(torch.randn(B, Q, 4, generator=g, dtype=torch.float64))
    boxes[..., 2:] = boxes[..., 2:] * 0.5 + 0.02  # w, h in (0.02, 0.52)
    boxes = boxes.detach().requires_grad_()
    targets = [{"labels": torch.randint(0, C, (n,), generator=g),
                "boxes": random_boxes(n, g)} for n in sizes]
    loss, ce, bbox, giou, indices = set_criterion(logits, boxes, targets, cfg)
    loss.backward()
    out[name + ".logits"], out[name + ".boxes"] = logits.detach(), boxes.detach()
    for i, t in enumerate(targets):
        out["%s.t%d.labels" % (name, i)] = t["labels"]
        out["%s.t%d.boxes" % (name, i)] = t["boxes"]
        out["%s.match.%d" % (name, i)] = torch.stack(indices[i]) if len(indices[i][0]) else \
            torch.zeros(2, 0, dtype=torch.int64)
    out[name + ".config"] = torch.tensor(cfg, dtype=torch.float64)
    for k, v in (("loss", loss), ("loss_ce", ce), ("loss_bbox", bbox), ("loss_giou", giou)):
        out[name + "." + k] = v.detach()
    out[name + ".grad.logits"], out[name + ".grad.boxes"] = logits.grad, boxes.grad


def main():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    out = {}
    # A ResNet-backbone DETR on 2 RGB images 96x64, the second padded (valid: 60 rows, 30 cols).
    model = resnet_detr(CONFIG_R)
    randomize(model, g)
    images = torch.randn(2, 3, 96, 64, generator=g)
    mask = torch.zeros(2, 96, 64, dtype=torch.bool)
    mask[1, 60:, :] = True
    mask[1, :, 30:] = True
    images[1][:, mask[1]] = 0
    model_golden(out, "r.", model, images, mask, g)
    # The small-CNN DETR on 2 grey images 32x24, the first padded (valid: 32 rows, 13 cols).
    model = small_detr(CONFIG_S)
    randomize(model, g)
    images = torch.randn(2, 1, 32, 24, generator=g)
    mask = torch.zeros(2, 32, 24, dtype=torch.bool)
    mask[0, :, 13:] = True
    model_golden(out, "s.", model, images, mask, g)
    # Parameter counts of loom's presets as PyTorch models.
    out["count.detr-fmnist"] = torch.tensor(n_params(small_detr(dict(
        num_classes=10, hidden=128, n_head=4, n_enc=3, n_dec=3, d_ff=512, queries=10,
        chans=(1, 32, 64, 128, 128)))), dtype=torch.int64)
    out["count.detr-r50"] = torch.tensor(n_params(resnet_detr(dict(
        num_classes=91, hidden=256, n_head=8, n_enc=6, n_dec=6, d_ff=2048, queries=100,
        layers=(3, 4, 6, 3), width=64, in_channels=3))), dtype=torch.int64)
    save(os.path.join(HERE, "detr.safetensors"),
         {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in out.items()})

    out = {}
    default = (4, 1.0, 5.0, 2.0, 1.0, 5.0, 2.0, 0.1)
    loss_golden(out, "default", 3, 6, 4, [2, 0, 4], default, g)
    loss_golden(out, "weights", 2, 7, 3, [3, 5], (3, 2.0, 1.0, 3.0, 0.5, 2.0, 4.0, 0.3), g)
    loss_golden(out, "empty", 2, 4, 4, [0, 0], default, g)
    loss_golden(out, "full", 2, 3, 2, [3, 1], (2,) + default[1:], g)  # targets = queries
    save(os.path.join(HERE, "detr_loss.safetensors"),
         {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in out.items()})


if __name__ == "__main__":
    main()
