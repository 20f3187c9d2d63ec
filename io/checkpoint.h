// Checkpoints: a module's parameters and persistent buffers in a safetensors file, under their
// state_dict() names ("blocks.0.attn.in_proj_weight"). Because loom's names and layouts are
// PyTorch's, a PyTorch state_dict saved with safetensors.torch.save_file loads directly, and
// a loom checkpoint loads into the same PyTorch module.
//
// Two kinds of file, both plain safetensors:
//
//   nn::save(model, "model.safetensors", {{"step", "100"}});   // weights (+ metadata)
//   nn::load(model, "model.safetensors");
//
//   A training checkpoint: model(s), optimizer and trainer state in one atomic file, the C++
//   form of torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": s}):
//
//   nn::Metadata meta = model.config().to_metadata();      // {"n_layer": "4", ...}
//   meta["step"] = std::to_string(step);
//   nn::save_checkpoint("ckpt.safetensors", {{"model", &model}}, &opt, meta);
//   nn::save_checkpoint("ckpt.safetensors", {{"model", &model}}, &opt, &sched, meta);  // + LR
//
//   models::GPT model(GPTConfig::from_metadata(nn::read_metadata("ckpt.safetensors")));
//   nn::Metadata meta = nn::load_checkpoint("ckpt.safetensors", {{"model", &model}}, &opt);
//   int64_t step = std::stoll(meta.at("step"));
//
//   Layout: module `prefix`'s tensors are "<prefix>.<state_dict name>" ("model.wte.weight"),
//   the optimizer's state dict (optim::StateDict) is "optim.<key>" ("optim.state.0.3.exp_avg"),
//   and everything else -- model config, tokenizer, step, RNG state, data position -- is
//   string -> string metadata in the safetensors "__metadata__" (read it alone with
//   read_metadata). Saving adds "format" = "pt" (as safetensors.torch does; so PyTorch can read
//   the file) and, with an optimizer, "optimizer" = its name ("AdamW"). A model config converts
//   to and from metadata (models::GPTConfig::to_metadata / from_metadata), so a program can
//   rebuild the model from the file alone.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/fields.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace loom::optim {
class Optimizer;
class LRScheduler;
}

namespace loom::nn {

// String -> string, as the safetensors format allows.
using Metadata = std::map<std::string, std::string>;

// Writes every parameter and persistent buffer (a tied tensor once, under its first name) with
// `metadata` plus {"format": "pt"} unless it sets "format" itself. Atomic: written to a
// temporary file, then renamed over `path`.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});

// Loads a checkpoint written by save() or by PyTorch. Every state_dict() name of the module
// must be in the file with the same shape and kind of number (floating-point or integer: a
// weight relabelled I32 is refused, not converted) and only finite values (a tied tensor needs
// only one of its names), and every name in the file must belong to the module (or be one it
// derives and skips, declared with Module::ignore_on_load). Otherwise one loom::Error names
// the file and lists every missing, unexpected, wrongly shaped, wrongly typed and non-finite
// tensor, and the module is left untouched; an unreadable, truncated or corrupted file also
// throws before anything is copied.
void load(Module& module, const std::string& path);

// The metadata of any safetensors file (a save() or save_checkpoint() file, or PyTorch's),
// without reading the tensors; the header is validated all the same.
Metadata read_metadata(const std::string& path);

// The same check and copy from tensors already in memory (e.g. renamed from another layout).
// `source` names the origin in error messages.
void load_state_dict(Module& module, const std::map<std::string, Tensor>& state,
                     const std::string& source = "state dict");

// ---------------------------------------------------------------------- training checkpoints

// The modules of a checkpoint, each under its own prefix (e.g. {"model", &gpt}, or
// {"generator", &g}, {"discriminator", &d}). A prefix is non-empty, contains no '.', is not
// "optim" and appears once.
using SavedModules = std::vector<std::pair<std::string, const Module*>>;
using LoadedModules = std::vector<std::pair<std::string, Module*>>;

// Writes the modules (as save() does, each under "<prefix>."), the optimizer's state dict under
// "optim." (when `optimizer` is not null) and `metadata`, in one file written atomically:
// a crash or an error leaves the previous checkpoint as it was, and the temporaries that killed
// writers left ("<path>.tmp.<pid>" of a process that is gone) are removed once the new file is
// in place (docs/failure_contract.md).
void save_checkpoint(const std::string& path, const SavedModules& modules,
                     const optim::Optimizer* optimizer, const Metadata& metadata = {});

// Restores the modules and the optimizer (when not null) from a save_checkpoint() file and
// returns its metadata, for the caller's own state (step, RNG, data position). All or nothing:
// the whole file is read and every module and the optimizer state checked (names, shapes,
// dtypes, finite values, optimizer kind and hyper-parameters) before anything changes, so an
// unreadable, truncated, corrupted or mismatching file throws a loom::Error naming the file
// (and the tensor at fault) and leaves every module and the optimizer untouched. Tensors under
// prefixes that were not asked for are ignored (e.g. {"model", &m} and no optimizer loads the
// weights of a training checkpoint for inference); within a requested prefix the match is
// strict, as load().
Metadata load_checkpoint(const std::string& path, const LoadedModules& modules,
                         optim::Optimizer* optimizer = nullptr);

// The same with a learning-rate scheduler (optim/lr_scheduler.h) beside the optimizer (either
// may be null). Its state_dict() goes into the metadata, which holds only strings: "scheduler"
// = its name ("CosineAnnealingLR") and "scheduler.<key>" = its numbers, comma-separated, each
// written with 17 significant digits so that every double reads back exactly. Files without a
// scheduler keep the layout above; loading a scheduler from one is a loom::Error naming the
// file. Loading checks the scheduler's state with everything else, before anything changes.
void save_checkpoint(const std::string& path, const SavedModules& modules,
                     const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
                     const Metadata& metadata = {});
Metadata load_checkpoint(const std::string& path, const LoadedModules& modules,
                         optim::Optimizer* optimizer, optim::LRScheduler* scheduler);

// ---------------------------------------------------------------------------- metadata values

// The number stored as text under `key` (int64_t, uint64_t, float or double). A missing key
// or text that is not exactly one such number is a loom::Error naming `source` and the key.
template <class T>
T metadata_number(const Metadata& metadata, const std::string& key, const std::string& source);

// Where a training run is, beside the weights and the optimizer state: what a trainer needs
// to continue exactly as the uninterrupted run would have (the step and planned total, the
// position in the data, and loom's global random-number state, which dropout and sampling
// draw from).
//
//   nn::Metadata meta = model.config().to_metadata();
//   meta.merge(nn::TrainerState::capture(step, total, batches.epoch(), batches.index(),
//                                        global_batch).to_metadata());
//   ...
//   const nn::TrainerState state = nn::TrainerState::from_metadata(meta, path);
//   state.restore_rng();
//   batches.seek(state.epoch, state.batch_index_for(global_batch, dataset->size(), path));
//
// Its fields are a field list (core/fields.h): each is recorded under its own name. The
// checks (none negative, a recorded global_batch positive) are validate()'s, whose message
// names them all.
#define LOOM_TRAINER_STATE_FIELDS(F)                                                       \
  F(int64_t, step, 0, any, "steps done")                                                   \
  F(int64_t, steps, 0, any, "steps planned")                                               \
  F(int64_t, epoch, 0, any, "the next batch's epoch (data::BatchStream's position)")       \
  F(int64_t, batch_index, 0, any, "the next batch's index in its epoch")                   \
  F(uint64_t, rng_seed, 0, any, "loom's global generator: its seed")                       \
  F(uint64_t, rng_offset, 0, any, "and its offset")                                        \
  F(int64_t, global_batch, 0, any,                                                         \
    "examples a step over every process of a data-parallel job (0: not recorded, as in "   \
    "checkpoints written before data parallelism), so that a run can resume with another " \
    "number of processes")

struct TrainerState {
  LOOM_FIELDS_DECLARE(LOOM_TRAINER_STATE_FIELDS)
  LOOM_FIELDS_VISIT(LOOM_TRAINER_STATE_FIELDS)

  // The state now, with the global generator's seed and offset.
  static TrainerState capture(int64_t step, int64_t steps, int64_t epoch, int64_t batch_index,
                              int64_t global_batch = 0);
  // Every field under its name, but "global_batch" when it is not recorded (0).
  Metadata to_metadata() const;
  // Every field must be there but "global_batch" (older files: 0), each exactly one number.
  static TrainerState from_metadata(const Metadata& metadata, const std::string& source);
  void validate() const;     // a loom::Error unless every count is >= 0
  void restore_rng() const;  // the global generator continues where it was captured

  // The batch index at which a run of `global_batch` examples a step continues: the position in
  // examples (batch_index x the recorded global_batch; unrecorded: the new one) in batches of
  // the new size, for data whose epoch order does not depend on the batch size (a DataLoader's
  // shuffle). Throws loom::Error naming `source` when the position is beyond an epoch of
  // `epoch_size` examples or is not a multiple of the new global batch.
  int64_t batch_index_for(int64_t global_batch, int64_t epoch_size,
                          const std::string& source) const;
  // For data whose batches are planned for their size (length buckets, length-sorted groups): a
  // position means nothing for another global batch, so one other than the recorded one is
  // refused (naming `source`; `unit` says what the batch counts, "pairs" or "tokens").
  void check_global_batch(int64_t global_batch, const std::string& unit,
                          const std::string& source) const;
};

}  // namespace loom::nn
