// save/load of module state, of an optimizer's state, and of training checkpoints (modules +
// optimizer + metadata) in safetensors files, with all-or-nothing loading: everything is read
// and checked, then copied.
#include "io/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace loom::nn {

namespace {

// One tensor of the module with all the names it is registered under (several when tied).
struct Slot {
  Tensor target;
  std::vector<std::string> names;
};

std::vector<Slot> slots_of(const Module& module) {
  std::vector<Slot> slots;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (const auto& [name, t] : module.state_dict()) {
    auto [it, fresh] = index.emplace(t.impl(), slots.size());
    if (fresh) slots.push_back({t, {}});
    slots[it->second].names.push_back(name);
  }
  return slots;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The module's tensors to write, a tied tensor once under its first name, each name prefixed.
void append_tensors(const Module& module, const std::string& prefix, NamedTensors& out) {
  for (const Slot& slot : slots_of(module))
    out.emplace_back(prefix + slot.names.front(), slot.target);
}

// (module tensor, checkpoint tensor) pairs to copy once every check has passed.
using Copies = std::vector<std::pair<Tensor, Tensor>>;

// What plan_copies found wrong, one list per kind: each entry a name and what is wrong with it.
struct Problems {
  std::vector<std::string> missing, unexpected, wrong_shape, wrong_dtype, not_finite;
  bool empty() const {
    return missing.empty() && unexpected.empty() && wrong_shape.empty() && wrong_dtype.empty() &&
           not_finite.empty();
  }
};

const char* kind_of(DType t) { return is_floating_point(t) ? "floating-point" : "integer"; }

// The NaN and infinite values of a tensor: x * 0 is 0 for a finite x and NaN otherwise, and NaN
// is the one value unequal to itself.
int64_t count_non_finite(const Tensor& t) {
  if (!is_floating_point(t.dtype()) || t.numel() == 0) return 0;
  NoGradGuard no_grad;
  const Tensor zeroed = t * 0.0f;
  return static_cast<int64_t>(sum(ne(zeroed, zeroed)).item());
}

// Checks checkpoint tensor `value` as the value of module tensor `target` named `name`, adding
// what is wrong to `problems`; true when it may be copied. The shape must match, and the kind of
// number: a safetensors file labels its bytes with a dtype, and copy_ would turn the integers
// read from a relabelled weight (I32 for F32, the same bytes) into plausible floats. Values
// must be finite: a NaN or an infinity would only show later, as a NaN loss or NaN outputs.
bool check_value(const std::string& name, const Tensor& value, const Tensor& target,
                 Problems& problems) {
  if (value.shape() != target.shape()) {
    problems.wrong_shape.push_back(fmt::format(
        "{} (checkpoint {}, model {})", name, shape_str(value.shape()), shape_str(target.shape())));
    return false;
  }
  if (is_floating_point(value.dtype()) != is_floating_point(target.dtype())) {
    problems.wrong_dtype.push_back(fmt::format(
        "{} (checkpoint {} {}, model {} {})", name, kind_of(value.dtype()),
        dtype_name(value.dtype()), kind_of(target.dtype()), dtype_name(target.dtype())));
    return false;
  }
  if (const int64_t bad = count_non_finite(value); bad > 0) {
    problems.not_finite.push_back(
        fmt::format("{} ({} of {} values NaN or infinite)", name, bad, value.numel()));
    return false;
  }
  return true;
}

// Matches `state` against the module's state_dict() names; throws one loom::Error listing every
// missing and unexpected name and every tensor of the wrong shape or dtype or with values that
// are not finite. Changes nothing. With `incompatible` (Module::load_state_dict's strict =
// false), missing and unexpected names are put there instead of being errors.
Copies plan_copies(const Module& module, const std::map<std::string, Tensor>& state,
                   const std::string& source, Module::LoadResult* incompatible = nullptr) {
  Problems problems;
  Copies copies;
  std::set<std::string> known;
  for (const Slot& slot : slots_of(module)) {
    bool found = false;
    for (const std::string& name : slot.names) {
      known.insert(name);
      auto it = state.find(name);
      if (it == state.end()) continue;
      if (check_value(name, it->second, slot.target, problems) && !found)
        copies.emplace_back(slot.target, it->second);
      found = true;
    }
    if (!found) {
      std::string name = slot.names.front();
      if (slot.names.size() > 1)
        name += " (tied with " + join({slot.names.begin() + 1, slot.names.end()}) + ")";
      problems.missing.push_back(name);
    }
  }
  // Names the module derives from its configuration (Module::ignore_on_load) are skipped.
  for (const std::string& name : module.ignored_on_load()) known.insert(name);
  for (const auto& [name, t] : state)
    if (!known.count(name)) problems.unexpected.push_back(name);
  if (incompatible != nullptr) {
    incompatible->missing = std::exchange(problems.missing, {});
    incompatible->unexpected = std::exchange(problems.unexpected, {});
  }

  if (!problems.empty()) {
    std::string message =
        fmt::format("load_state_dict: {} does not match the {} module; nothing was loaded.", source,
                    module.name());
    const std::pair<const char*, const std::vector<std::string>*> lists[] = {
        {"missing", &problems.missing},
        {"unexpected", &problems.unexpected},
        {"wrong shape", &problems.wrong_shape},
        {"wrong dtype", &problems.wrong_dtype},
        {"not finite", &problems.not_finite}};
    for (const auto& [label, names] : lists)
      if (!names->empty())
        message += fmt::format("\n  {} ({}): {}", label, names->size(), join(*names));
    throw Error(message);
  }
  return copies;
}

void apply(const Copies& copies) {
  NoGradGuard guard;
  for (const auto& [target, value] : copies) Tensor(target).copy_(value);
}

// "format": "pt" unless the caller chose a format.
Metadata with_format(Metadata metadata) {
  metadata.emplace("format", "pt");
  return metadata;
}

// The optimizer's tensors live under "optim."; modules use any other prefix without a dot.
constexpr const char* kOptimizerPrefix = "optim";
// A scheduler's name and state live in the metadata: "scheduler" and "scheduler.<key>".
constexpr const char* kSchedulerKey = "scheduler";

// A scheduler's numbers as text: comma-separated, 17 significant digits (enough for every double
// to read back as itself; "inf" for ReduceLROnPlateau's best before any metric).
std::string format_numbers(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += fmt::format("{}{:.17g}", out.empty() ? "" : ",", v);
  return out;
}

std::vector<double> parse_numbers(const std::string& text, const std::string& path,
                                  const std::string& key) {
  std::vector<double> values;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    double value = 0.0;
    const auto [stop, ec] = std::from_chars(text.data() + begin, text.data() + end, value);
    LOOM_CHECK(ec == std::errc() && stop == text.data() + end && end > begin,
               "load_checkpoint: '{}': metadata \"{}\" is '{}', not a list of numbers", path,
               key, text);
    values.push_back(value);
    begin = end + 1;
  }
  return values;
}

template <typename ModulePtr>
void check_prefixes(const std::vector<std::pair<std::string, ModulePtr>>& modules,
                    const std::string& op, const std::string& path) {
  std::set<std::string> seen;
  for (const auto& [prefix, module] : modules) {
    LOOM_CHECK(!prefix.empty() && prefix.find('.') == std::string::npos,
               "{}: '{}': module prefix '{}' must be non-empty and contain no '.'", op, path,
               prefix);
    LOOM_CHECK(prefix != kOptimizerPrefix,
               "{}: '{}': the prefix '{}' is reserved for the optimizer's state", op, path, prefix);
    LOOM_CHECK(seen.insert(prefix).second, "{}: '{}': module prefix '{}' appears twice", op, path,
               prefix);
    LOOM_CHECK(module != nullptr, "{}: '{}': the module of prefix '{}' is null", op, path, prefix);
  }
}

// The tensors named "<prefix>.<rest>", keyed by <rest>.
std::map<std::string, Tensor> under_prefix(const std::map<std::string, Tensor>& state,
                                           const std::string& prefix) {
  std::map<std::string, Tensor> out;
  const std::string head = prefix + ".";
  for (auto it = state.lower_bound(head); it != state.end() && it->first.rfind(head, 0) == 0; ++it)
    out.emplace(it->first.substr(head.size()), it->second);
  return out;
}

// The distinct "<prefix>." parts of the names in the file, for error messages.
std::string prefixes_of(const std::map<std::string, Tensor>& state) {
  std::set<std::string> prefixes;
  for (const auto& [name, t] : state)
    prefixes.insert(name.find('.') == std::string::npos ? "(none)"
                                                        : name.substr(0, name.find('.')) + ".");
  return prefixes.empty() ? "none" : join({prefixes.begin(), prefixes.end()});
}

}  // namespace

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  NamedTensors tensors;
  append_tensors(module, "", tensors);
  write_safetensors(path, tensors, with_format(metadata));
}

void load_state_dict(Module& module, const std::map<std::string, Tensor>& state,
                     const std::string& source) {
  apply(plan_copies(module, state, source));
}

// Module::load_state_dict: nn::apply is the copy above (Module::apply would hide it).
Module::LoadResult Module::load_state_dict(const std::map<std::string, Tensor>& state,
                                           bool strict) {
  LoadResult result;
  nn::apply(plan_copies(*this, state, "load_state_dict", strict ? nullptr : &result));
  return result;
}

Module::LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> named;
  for (const auto& [name, t] : state) named.emplace(name, t);
  return load_state_dict(named, strict);
}

Module::LoadResult Module::load_state_dict(const std::string& path, bool strict) {
  LoadResult result;
  nn::apply(plan_copies(*this, read_safetensors(path), "checkpoint '" + path + "'",
                    strict ? nullptr : &result));
  return result;
}

void load(Module& module, const std::string& path) {
  // read_safetensors validates the whole file (header, offsets, sizes) before we touch the model.
  const std::map<std::string, Tensor> state = read_safetensors(path);
  load_state_dict(module, state, "checkpoint '" + path + "'");
}

Metadata read_metadata(const std::string& path) { return read_safetensors_metadata(path); }

void save_checkpoint(const std::string& path, const SavedModules& modules,
                     const optim::Optimizer* optimizer, const Metadata& metadata) {
  save_checkpoint(path, modules, optimizer, nullptr, metadata);
}

void save_checkpoint(const std::string& path, const SavedModules& modules,
                     const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
                     const Metadata& metadata) {
  check_prefixes(modules, "save_checkpoint", path);
  NamedTensors tensors;
  for (const auto& [prefix, module] : modules) append_tensors(*module, prefix + ".", tensors);
  Metadata meta = with_format(metadata);
  if (optimizer) {
    for (const auto& [key, t] : optimizer->state_dict())
      tensors.emplace_back(std::string(kOptimizerPrefix) + "." + key, t);
    const auto [it, fresh] = meta.emplace("optimizer", optimizer->name());
    LOOM_CHECK(fresh || it->second == optimizer->name(),
               "save_checkpoint: '{}': metadata \"optimizer\" is '{}' but the optimizer is {}",
               path, it->second, optimizer->name());
  }
  if (scheduler) {
    // The metadata a program read from its last checkpoint may come back with the scheduler's
    // entries of then: the kind must agree, and the numbers are replaced by today's.
    const auto [it, fresh] = meta.emplace(kSchedulerKey, scheduler->name());
    LOOM_CHECK(fresh || it->second == scheduler->name(),
               "save_checkpoint: '{}': metadata \"{}\" is '{}' but the scheduler is {}", path,
               kSchedulerKey, it->second, scheduler->name());
    const std::string head = std::string(kSchedulerKey) + ".";
    std::erase_if(meta, [&](const auto& entry) { return entry.first.rfind(head, 0) == 0; });
    for (const auto& [key, values] : scheduler->state_dict())
      meta[head + key] = format_numbers(values);
  }
  write_safetensors(path, tensors, meta);
}

Metadata load_checkpoint(const std::string& path, const LoadedModules& modules,
                         optim::Optimizer* optimizer) {
  return load_checkpoint(path, modules, optimizer, nullptr);
}

Metadata load_checkpoint(const std::string& path, const LoadedModules& modules,
                         optim::Optimizer* optimizer, optim::LRScheduler* scheduler) {
  check_prefixes(modules, "load_checkpoint", path);
  Metadata meta;
  const std::map<std::string, Tensor> state = read_safetensors(path, &meta);  // validates it all

  // 1. Check everything, changing nothing.
  std::vector<Copies> copies;
  for (const auto& [prefix, module] : modules) {
    const std::map<std::string, Tensor> part = under_prefix(state, prefix);
    LOOM_CHECK(!part.empty(), "load_checkpoint: '{}' holds no tensors under '{}.' (it has: {})",
               path, prefix, prefixes_of(state));
    copies.push_back(
        plan_copies(*module, part, fmt::format("checkpoint '{}' (prefix '{}.')", path, prefix)));
  }
  // The scheduler's state, parsed (it is checked when loaded, after the optimizer).
  optim::SchedulerState scheduler_state;
  if (scheduler) {
    const auto kind = meta.find(kSchedulerKey);
    LOOM_CHECK(kind != meta.end(), "load_checkpoint: '{}' holds no learning-rate scheduler state",
               path);
    LOOM_CHECK(kind->second == scheduler->name(),
               "load_checkpoint: '{}' holds the state of a {} scheduler, not {}", path,
               kind->second, scheduler->name());
    const std::string head = std::string(kSchedulerKey) + ".";
    for (auto it = meta.lower_bound(head); it != meta.end() && it->first.rfind(head, 0) == 0;
         ++it)
      scheduler_state[it->first.substr(head.size())] = parse_numbers(it->second, path, it->first);
  }
  // 2. The optimizer and the scheduler each check their whole state before they change
  // anything, so they go last of the fallible steps; the module copies after them cannot fail.
  // The scheduler loads after the optimizer (it sets the optimizer's lrs), so when it fails the
  // optimizer goes back to a copy of its state from before.
  const optim::StateDict optimizer_before =
      (scheduler && optimizer) ? optimizer->state_dict() : optim::StateDict{};
  if (optimizer) {
    const auto kind = meta.find("optimizer");
    LOOM_CHECK(kind == meta.end() || kind->second == optimizer->name(),
               "load_checkpoint: '{}' holds the state of a {} optimizer, not {}", path,
               kind->second, optimizer->name());
    const std::map<std::string, Tensor> part = under_prefix(state, kOptimizerPrefix);
    LOOM_CHECK(!part.empty(), "load_checkpoint: '{}' holds no optimizer state (no '{}.' tensors)",
               path, kOptimizerPrefix);
    try {
      optimizer->load_state_dict(part);
    } catch (const Error& e) {
      throw Error(fmt::format("{} (loading {})", e.what(), path));
    }
  }
  if (scheduler) {
    try {
      scheduler->load_state_dict(scheduler_state);
    } catch (const Error& e) {
      if (optimizer) optimizer->load_state_dict(optimizer_before);
      throw Error(fmt::format("{} (loading {})", e.what(), path));
    }
  }
  // 3. Copy.
  for (const Copies& c : copies) apply(c);
  return meta;
}

// ---------------------------------------------------------------------------- metadata values

template <class T>
T metadata_number(const Metadata& metadata, const std::string& key, const std::string& source) {
  const auto it = metadata.find(key);
  LOOM_CHECK(it != metadata.end(), "{}: the metadata has no \"{}\"", source, key);
  const std::string& text = it->second;
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  LOOM_CHECK(!text.empty() && ec == std::errc() && end == text.data() + text.size(),
             "{}: \"{}\" is '{}', not a number", source, key, text);
  return value;
}
template int64_t metadata_number<int64_t>(const Metadata&, const std::string&, const std::string&);
template uint64_t metadata_number<uint64_t>(const Metadata&, const std::string&,
                                            const std::string&);
template float metadata_number<float>(const Metadata&, const std::string&, const std::string&);
template double metadata_number<double>(const Metadata&, const std::string&, const std::string&);

TrainerState TrainerState::capture(int64_t step, int64_t steps, int64_t epoch, int64_t batch_index,
                                   int64_t global_batch) {
  const Generator& g = default_generator();
  return {step, steps, epoch, batch_index, g.seed(), g.offset(), global_batch};
}

Metadata TrainerState::to_metadata() const {
  Metadata meta = fields::to_metadata(*this);
  if (global_batch == 0) meta.erase("global_batch");  // the layout before data parallelism
  return meta;
}

TrainerState TrainerState::from_metadata(const Metadata& metadata, const std::string& source) {
  const bool recorded = metadata.count("global_batch") > 0;
  Metadata complete = metadata;
  complete.insert({"global_batch", "0"});  // unrecorded: 0
  const TrainerState s = fields::from_metadata<TrainerState>(complete, source);
  LOOM_CHECK(s.global_batch > 0 || !recorded, "{}: global_batch {} is not a positive number",
             source, s.global_batch);
  return s;
}

void TrainerState::validate() const {
  LOOM_CHECK(step >= 0 && steps >= 0 && epoch >= 0 && batch_index >= 0 && global_batch >= 0,
             "negative step {}, steps {}, epoch {}, batch_index {} or global_batch {}", step, steps,
             epoch, batch_index, global_batch);
}

void TrainerState::restore_rng() const { default_generator().set_state(rng_seed, rng_offset); }

int64_t TrainerState::batch_index_for(int64_t new_global_batch, int64_t epoch_size,
                                      const std::string& source) const {
  LOOM_CHECK(new_global_batch > 0 && epoch_size >= 0,
             "{}: resuming needs a global batch > 0 and an epoch size >= 0, got {} and {}", source,
             new_global_batch, epoch_size);
  const int64_t saved = global_batch > 0 ? global_batch : new_global_batch;
  LOOM_CHECK(batch_index <= epoch_size / saved,
             "{}: batch_index {}, but an epoch has {} batches of {} examples", source, batch_index,
             epoch_size / saved, saved);
  const int64_t examples = batch_index * saved;  // no overflow: at most epoch_size
  LOOM_CHECK(examples % new_global_batch == 0,
             "{}: the run stopped {} examples into its epoch (batch_index {} x global batch {}), "
             "not a multiple of this run's global batch of {} (--batch x processes)",
             source, examples, batch_index, saved, new_global_batch);
  return examples / new_global_batch;
}

void TrainerState::check_global_batch(int64_t new_global_batch, const std::string& unit,
                                      const std::string& source) const {
  LOOM_CHECK(global_batch == 0 || global_batch == new_global_batch,
             "{}: the run's batches were planned for a global batch of {} {}, this run's is {} "
             "(its batch per process x processes): resume with the same global batch",
             source, global_batch, unit, new_global_batch);
}

}  // namespace loom::nn

// An optimizer's state alone in its own file (declared in optim/optimizer.h; defined here, in the
// io layer, because optim sits below io and does not know the file format).
namespace loom::optim {

void Optimizer::save(const std::string& path) const {
  nn::write_safetensors(path, entries(), {{"format", "loom.optim"}, {"optimizer", name_}});
}

void Optimizer::load(const std::string& path) {
  std::map<std::string, std::string> metadata;
  const StateDict dict = nn::read_safetensors(path, &metadata);
  auto kind = metadata.find("optimizer");
  LOOM_CHECK(kind == metadata.end() || kind->second == name_,
             "{}: load: {} holds the state of a {} optimizer, not {}", name_, path, kind->second,
             name_);
  try {
    load_state_dict(dict);
  } catch (const Error& e) {
    throw Error(fmt::format("{} (loading {})", e.what(), path));
  }
}

}  // namespace loom::optim
