#!/usr/bin/python3
"""PyTorch golden values for the deterministic image transforms of data/transforms.h, written
to tests/golden/data_api.safetensors and checked by tests/data/test_transforms.cpp.

    /usr/bin/python3 tests/golden/gen_data_api.py

Debian's python3-torch comes without torchvision, so each case computes what torchvision 0.14
(the release beside PyTorch 1.13) does on a tensor, with the same torch calls:
    Normalize(mean, std)         (x - mean[:, None, None]) / std[:, None, None]
    Resize([h, w]) / Resize(s)   F.interpolate(mode="bilinear", align_corners=False,
                                 antialias=False), the int form sizing the shorter side to s
    RandomCrop(..., padding=p)   F.pad(x, [p, p, p, p], value=fill) then a crop; a crop the
                                 size of the padded image has one offset: the pad itself
    RandomHorizontalFlip(1.0)    x.flip(-1)
Each case stores "<case>.in" (the input image, float32) and "<case>.out".
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402

TENSORS = {}


def add(name, x, out):
    TENSORS[f"{name}.in"] = x.contiguous()
    TENSORS[f"{name}.out"] = out.contiguous()


def normalize(x, mean, std):
    mean = torch.tensor(mean).view(-1, 1, 1)
    std = torch.tensor(std).view(-1, 1, 1)
    return (x - mean) / std


def resize(x, size):
    """torchvision.transforms.functional.resize on a tensor (bilinear, no antialiasing)."""
    h, w = x.shape[-2:]
    if isinstance(size, int):  # _compute_resized_output_size: the shorter side becomes size
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size, int(size * long / short)
        size = [new_long, new_short] if w <= h else [new_short, new_long]
    batched = x.dim() == 4
    y = F.interpolate(x if batched else x[None], size=size, mode="bilinear",
                      align_corners=False)
    return y if batched else y[0]


def main():
    torch.manual_seed(0)
    image3 = torch.rand(3, 5, 7)                   # [C, H, W]
    batch = torch.rand(2, 3, 4, 6)                 # [N, C, H, W]
    add("normalize_rgb", image3, normalize(image3, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))
    add("normalize_batch", batch, normalize(batch, [0.5, 0.25, -0.1], [0.5, 2.0, 0.3]))
    grey = torch.rand(1, 6, 5)
    add("normalize_one_value", batch, normalize(batch, [0.2860], [0.3530]))

    add("resize_up_8x10", image3, resize(image3, [8, 10]))
    add("resize_down_3x4", image3, resize(image3, [3, 4]))
    add("resize_batch_7x5", batch, resize(batch, [7, 5]))
    add("resize_short_side_9", image3, resize(image3, 9))     # 5x7 -> 9x12
    add("resize_short_side_4", grey, resize(grey, 4))         # 6x5 -> 4x4 (int(4 * 6 / 5))
    add("resize_same_size", image3, resize(image3, [5, 7]))

    add("crop_pad_2", grey, F.pad(grey, [2, 2, 2, 2], value=0.0))
    add("crop_pad_1_fill", batch, F.pad(batch, [1, 1, 1, 1], value=-0.5))
    add("flip", image3, image3.flip(-1))
    add("flip_batch", batch, batch.flip(-1))

    safetensors_io.save(os.path.join(HERE, "data_api.safetensors"), TENSORS)


if __name__ == "__main__":
    main()
