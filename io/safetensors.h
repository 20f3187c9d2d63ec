// Reading and writing safetensors files, the checkpoint format of Hugging Face and PyTorch users
// (https://github.com/huggingface/safetensors). A file is
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  a JSON object: {"<name>": {"dtype": "F32", "shape": [2, 3],
//                                         "data_offsets": [begin, end]}, ...,
//                              "__metadata__": {"<key>": "<value>", ...}}   (optional)
//              padded with spaces so that the data buffer starts 8-byte aligned
//   [rest]     the data buffer: each tensor's elements, row-major, little-endian, at
//              [begin, end) relative to the start of the buffer
//
// loom computes on values in float32 and keeps indices in int64, so reading converts F16/BF16/F64
// to float32 and BOOL/U8/I8/I16/I32 to int64 (real checkpoints contain them); BF16 can instead be
// kept as bfloat16 tensors, bit for bit (keep_bfloat16). Writing produces F32, I64 or, for
// bfloat16 tensors, BF16.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loom::nn {

// Every tensor of the file, by name, as contiguous CPU tensors. If `metadata` is given it
// receives the "__metadata__" entries (cleared first). Throws loom::Error naming the file and
// what is wrong: missing or unreadable file, bad header length, malformed JSON, unknown dtype,
// data offsets that are out of range, overlap or disagree with shape and dtype, a data buffer
// the tensors do not cover exactly (a gap, or bytes left over: the format forbids both, and a
// header length off by a few bytes shows as such), truncated data, a key twice in one JSON
// object, metadata values that are not strings. Values are not checked (a NaN is read as a
// NaN: nn::load and nn::load_checkpoint refuse non-finite weights). BF16 entries are read
// as float32 (exactly), or as bfloat16 tensors when keep_bfloat16 is set.
std::map<std::string, Tensor> read_safetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr,
    bool keep_bfloat16 = false);

// Only the "__metadata__" entries, without reading any tensor data; the header is validated as
// read_safetensors does (a file it accepts is one read_safetensors accepts, short of truncated
// data), and the same errors are thrown.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// Writes `tensors` (any device or layout; copied to contiguous CPU first) and `metadata`.
// Names must be unique, non-empty and not "__metadata__". The write is atomic: the file is
// written to "<path>.tmp.<pid>", flushed to disk and renamed over `path`, so a crash or an
// error never leaves a partial checkpoint and an existing file survives a failed write.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace loom::nn
