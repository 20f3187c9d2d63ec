"""The real data sets of loom's trainers, read as loom reads them (bench/reference/train.py).

  fortune_splits(dir)        data/fortunes.cpp: every fortune file, entries split 95/5 by a
                             SplitMix64 permutation (data::split_train_val, seed 0), each part
                             joined with blank lines -> (train bytes, validation bytes)
  fashion_mnist(split)       data/fashion_mnist.h: (N, 1, 28, 28) normalised images, (N,) labels
  fashion_mnist_raw(split)   (N, 28, 28) pixels / 255 in [0, 1], (N,) labels (DETR's scenes)
"""
import gzip
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from splitmix import random_permutation  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530  # of the training pixels in [0, 1] (data/fashion_mnist.h)
BLANK = b" \t\r\n\v\f"


# ----------------------------------------------------------------------------- fortunes
def skipped_by_name(name):
    """data/fortunes.cpp: hidden files, .dat indexes, .u8 links, -o and offensive collections."""
    if not name or name.startswith(".") or name.endswith((".dat", ".u8", "-o")):
        return True
    return "offensive" in name or "off" in name.replace("-", ".").split(".")


def fortune_files(directory):
    """The plain fortune files of `directory` in name order, each file (or link target) once."""
    files, seen = [], set()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if skipped_by_name(name) or not os.path.isfile(path):
            continue
        target = os.path.realpath(path)
        if skipped_by_name(os.path.basename(target)) or \
                os.path.basename(os.path.dirname(target)) == "off" or target in seen:
            continue
        seen.add(target)
        files.append(path)
    return files


def trim_entry(entry):
    """The entry without its trailing whitespace and its leading blank lines."""
    entry = entry.rstrip(BLANK)
    start = 0
    for i, c in enumerate(entry):
        if c not in BLANK:
            break
        if c == ord("\n"):
            start = i + 1
    return entry[start:]


def parse_fortunes(text):
    """Entries of one file (bytes) separated by lines that are just "%"."""
    entries, entry = [], []
    for line in text.split(b"\n"):
        if line in (b"%", b"%\r"):
            entries.append(b"\n".join(entry))
            entry = []
        else:
            entry.append(line)
    entries.append(b"\n".join(entry))
    return [t for t in map(trim_entry, entries) if t]


def fortune_splits(directory=FORTUNES, val_fraction=0.05, seed=0):
    """data::split_train_val(read_fortunes(dir), 0.05, 0), each part joined with "\\n\\n"."""
    entries = []
    for path in fortune_files(directory):
        with open(path, "rb") as f:
            entries += parse_fortunes(f.read())
    n_val = int(np.floor(val_fraction * len(entries) + 0.5))  # llround of a positive number
    is_val = [False] * len(entries)
    for i in random_permutation(len(entries), seed)[:n_val]:
        is_val[i] = True
    train = [e for e, v in zip(entries, is_val) if not v]
    val = [e for e, v in zip(entries, is_val) if v]
    return b"\n\n".join(train), b"\n\n".join(val), len(entries)


# ----------------------------------------------------------------------------- Fashion-MNIST
def load_idx(path):
    """IDX file: magic (2 zero bytes, dtype 0x08 = uint8, ndim), ndim big-endian u32 dims."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist_raw(split, directory=FASHION_MNIST):
    """split "train" or "t10k" -> (N, 28, 28) float32 pixels / 255 in [0, 1], (N,) int64."""
    imgs = load_idx(f"{directory}/{split}-images-idx3-ubyte.gz")
    labels = load_idx(f"{directory}/{split}-labels-idx1-ubyte.gz")
    return torch.from_numpy(imgs.astype(np.float32) / 255.0), labels.astype(np.int64)


def fashion_mnist(split, directory=FASHION_MNIST):
    """-> (N, 1, 28, 28) images normalised by the training mean and std, (N,) int64 labels."""
    pixels, labels = fashion_mnist_raw(split, directory)
    return ((pixels - FMNIST_MEAN) / FMNIST_STD).unsqueeze(1), torch.from_numpy(labels)


BLACK = (0.0 - FMNIST_MEAN) / FMNIST_STD  # a black pixel, normalised (the crop's padding)
