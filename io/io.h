// The io layer: files of tensors and of training state. safetensors (Hugging Face's format, the
// one PyTorch's state_dicts are exchanged in) and loom's checkpoints built on it: a module, an
// optimizer and the trainer's position in one atomic file (included by loom.h).
#pragma once

#include "io/checkpoint.h"
#include "io/safetensors.h"
