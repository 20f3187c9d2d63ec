// Checkpoints: a module's parameters and persistent buffers in a safetensors file, under their
// state_dict() names ("blocks.0.attn.in_proj_weight"). Because loom's names and layouts are
// PyTorch's, a PyTorch state_dict saved with safetensors.torch.save_file loads directly, and
// a loom checkpoint loads into the same PyTorch module.
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"
#include "nn/module.h"

namespace loom::nn {

// Writes every parameter and persistent buffer (a tied tensor once, under its first name) with
// metadata {"format": "pt"}. Atomic: written to a temporary file, then renamed over `path`.
void save(const Module& module, const std::string& path);

// Loads a checkpoint written by save() or by PyTorch. Every state_dict() name of the module
// must be in the file with the same shape (a tied tensor needs only one of its names) and every
// name in the file must belong to the module. Otherwise one loom::Error lists every missing,
// unexpected and wrongly shaped name, and the module is left untouched; an unreadable,
// truncated or corrupted file also throws before anything is copied.
void load(Module& module, const std::string& path);

// The same check and copy from tensors already in memory (e.g. renamed from another layout).
// `source` names the origin in error messages.
void load_state_dict(Module& module, const std::map<std::string, Tensor>& state,
                     const std::string& source = "state dict");

}  // namespace loom::nn
