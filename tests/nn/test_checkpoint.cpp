// nn::save / nn::load: bit-exact round trips, PyTorch state_dicts loading directly, and
// all-or-nothing loading: every mismatch reported in one error, bad files rejected, and the
// model untouched whenever loading fails.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "nn_golden.h"
#include "optim/optim.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

// A temporary file removed at the end of the test.
struct TempFile {
  explicit TempFile(const std::string& tag)
      : path((std::filesystem::temp_directory_path() /
              ("loom_nn_" + tag + "_" + std::to_string(::getpid()) + ".safetensors"))
                 .string()) {}
  ~TempFile() { std::filesystem::remove(path); }
  std::string path;
};

// Same model as Tiny in gen_nn.py.
struct Tiny : nn::Module {
  Tiny() {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(1, 2, 3, 1, 1));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
    proj = register_module("proj", std::make_shared<nn::Linear>(8, 4));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(4));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(4, 2));
  }
  Tensor forward(const Tensor& x) const {                              // x [2, 1, 4, 4]
    Tensor h = F::max_pool2d(relu(bn->forward(conv->forward(x))), 2);  // [2, 2, 2, 2]
    h = norm->forward(proj->forward(h.flatten(1)));                    // [2, 4]
    h = h.unsqueeze(0);                                                // [1, 2, 4]
    return attn->forward(h, h, h);                                     // [1, 2, 4]
  }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::MultiheadAttention> attn;
};

// Every state entry as raw values (int64 buffers included), for exact comparisons.
std::vector<std::vector<double>> snapshot(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, t] : m.state_dict()) {
    std::vector<double> v;
    if (t.dtype() == DType::Int64) {
      for (int64_t x : t.to_vector_i64()) v.push_back(static_cast<double>(x));
    } else {
      for (float x : t.to_vector()) v.push_back(x);
    }
    out.push_back(v);
  }
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("save then load round-trips every parameter and buffer bit for bit") {
  TempFile file("roundtrip");
  manual_seed(1);
  Tiny a;
  a.forward(randn({2, 1, 4, 4}));  // training step: running statistics and count move
  nn::save(a, file.path);
  manual_seed(2);
  Tiny b;
  CHECK(snapshot(b) != snapshot(a));
  nn::load(b, file.path);
  CHECK(snapshot(b) == snapshot(a));
  a.eval();
  b.eval();
  const Tensor x = randn({2, 1, 4, 4});
  check_close(b.forward(x), a.forward(x), 0.0f, 0.0f, "same function after loading");
  std::map<std::string, std::string> metadata;
  CHECK(nn::read_safetensors(file.path, &metadata).size() == a.state_dict().size());
  CHECK(metadata["format"] == "pt");
}

TEST_CASE("a PyTorch state_dict saved as safetensors loads directly") {
  Tiny model;
  nn::load(model, std::string(LOOM_TEST_DATA) + "/nn_state_dict.safetensors");
  model.eval();
  check_close(model.forward(fixture("state_dict.in0")), fixture("state_dict.out"), 1e-4f, 1e-5f,
              "PyTorch model output");
  CHECK(model.bn->num_batches_tracked.to_vector_i64() == std::vector<int64_t>{2});
}

TEST_CASE("tied weights are saved once and stay tied after loading") {
  struct TiedLM : nn::Module {
    TiedLM() {
      wte = register_module("wte", std::make_shared<nn::Embedding>(6, 3));
      lm_head = register_module("lm_head", std::make_shared<nn::Linear>(3, 6));
      lm_head->weight = lm_head->replace_parameter("weight", wte->weight);
    }
    std::shared_ptr<nn::Embedding> wte;
    std::shared_ptr<nn::Linear> lm_head;
  };
  TempFile file("tied");
  manual_seed(3);
  TiedLM a;
  nn::save(a, file.path);
  const auto stored = nn::read_safetensors(file.path);
  CHECK(stored.size() == 2);
  CHECK(stored.count("wte.weight") == 1);
  manual_seed(4);
  TiedLM b;
  nn::load(b, file.path);
  CHECK(snapshot(b) == snapshot(a));
  CHECK(b.lm_head->weight.impl() == b.wte->weight.impl());
}

TEST_CASE("loading reports every missing, unexpected and misshapen name at once") {
  struct Saved : nn::Module {
    Saved() {
      register_module("encoder", std::make_shared<nn::Linear>(3, 2));
      register_module("extra", std::make_shared<nn::LayerNorm>(2));
    }
  };
  struct Target : nn::Module {
    Target() {
      register_module("encoder", std::make_shared<nn::Linear>(3, 5));
      register_module("head", std::make_shared<nn::Linear>(2, 2));
    }
  };
  TempFile file("mismatch");
  Saved saved;
  nn::save(saved, file.path);
  Target target;
  const auto before = snapshot(target);
  check_error([&] { nn::load(target, file.path); },
              {file.path, "nothing was loaded", "missing (2): head.weight, head.bias",
               "unexpected (2): extra.bias, extra.weight",
               "wrong shape (2): encoder.weight (checkpoint [2,3], model [5,3])",
               "encoder.bias (checkpoint [2], model [5])"});
  CHECK(snapshot(target) == before);
}

TEST_CASE("truncated, corrupted or missing checkpoint files throw and leave the model untouched") {
  TempFile good("good"), bad("bad");
  manual_seed(5);
  Tiny source;
  nn::save(source, good.path);
  const std::string bytes = read_bytes(good.path);
  manual_seed(6);
  Tiny model;
  const auto before = snapshot(model);

  write_bytes(bad.path, bytes.substr(0, bytes.size() - 7));  // data cut short
  check_error([&] { nn::load(model, bad.path); }, {bad.path});
  CHECK(snapshot(model) == before);

  write_bytes(bad.path, bytes.substr(0, 5));  // not even a header length
  check_error([&] { nn::load(model, bad.path); }, {bad.path});
  CHECK(snapshot(model) == before);

  std::string corrupt = bytes;
  corrupt[10] = '\x01';  // inside the JSON header
  corrupt[11] = '}';
  write_bytes(bad.path, corrupt);
  check_error([&] { nn::load(model, bad.path); }, {bad.path});
  CHECK(snapshot(model) == before);

  check_error([&] { nn::load(model, good.path + ".does_not_exist"); }, {"does_not_exist"});
  CHECK(snapshot(model) == before);
}

TEST_CASE("saving into a missing directory throws") {
  nn::Linear lin(2, 2);
  check_error([&] { nn::save(lin, "/nonexistent_loom_dir/model.safetensors"); },
              {"/nonexistent_loom_dir/model.safetensors"});
}

// ------------------------------------------------------------------ metadata and training
// checkpoints

TEST_CASE("save writes metadata beside the weights and read_metadata reads it alone") {
  TempFile file("metadata");
  nn::Linear lin(3, 2);
  nn::save(lin, file.path, {{"step", "7"}, {"note", "quote \" and \u00e9"}});
  const nn::Metadata meta = nn::read_metadata(file.path);
  CHECK(meta == nn::Metadata{{"format", "pt"}, {"step", "7"}, {"note", "quote \" and \u00e9"}});
  nn::save(lin, file.path, {{"format", "mine"}});  // the caller may choose the format
  CHECK(nn::read_metadata(file.path).at("format") == "mine");
  nn::Linear back(3, 2);
  nn::load(back, file.path);  // metadata does not get in the way of load()
  CHECK(snapshot(back) == snapshot(lin));
  check_error([&] { nn::read_metadata(file.path + ".missing"); }, {".missing", "no such file"});
}

namespace {

// Two modules and an AdamW that has taken a few steps, so every kind of state is non-trivial.
struct TrainingSetup {
  explicit TrainingSetup(uint64_t seed) {
    manual_seed(seed);
    model = std::make_shared<Tiny>();
    head = std::make_shared<nn::Linear>(4, 3);
    std::vector<Tensor> params = model->parameters();
    for (const Tensor& p : head->parameters()) params.push_back(p);
    opt = std::make_unique<optim::AdamW>(params, 1e-2f);
    model->train();
  }
  void steps(int n) {
    for (int i = 0; i < n; ++i) {
      const Tensor y = model->forward(randn({2, 1, 4, 4}));  // [1, 2, 4]
      const Tensor loss = mean(head->forward(y) * head->forward(y));
      opt->zero_grad();
      loss.backward();
      opt->step();
    }
  }
  std::shared_ptr<Tiny> model;
  std::shared_ptr<nn::Linear> head;
  std::unique_ptr<optim::AdamW> opt;
};

// Every optimizer state entry as raw values.
std::map<std::string, std::vector<double>> optim_snapshot(const optim::Optimizer& opt) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [key, t] : opt.state_dict()) {
    std::vector<double> v;
    if (t.dtype() == DType::Int64)
      for (int64_t x : t.to_vector_i64()) v.push_back(static_cast<double>(x));
    else
      for (float x : t.to_vector()) v.push_back(x);
    out[key] = v;
  }
  return out;
}

}  // namespace

TEST_CASE("save_checkpoint then load_checkpoint restores modules, optimizer and metadata exactly") {
  TempFile file("training");
  TrainingSetup a(11);
  a.steps(3);
  nn::save_checkpoint(file.path, {{"model", a.model.get()}, {"head", a.head.get()}}, a.opt.get(),
                      {{"step", "3"}, {"tokenizer", "bpe"}});

  // One file: "<prefix>.<name>" for each module, "optim.<key>" for the optimizer.
  nn::Metadata stored_meta;
  const auto stored = nn::read_safetensors(file.path, &stored_meta);
  CHECK(stored.count("model.proj.weight") == 1);
  CHECK(stored.count("head.weight") == 1);
  CHECK(stored.count("optim.step_count") == 1);
  CHECK(stored.count("optim.state.0.0.exp_avg") == 1);
  CHECK(stored.size() ==
        a.model->state_dict().size() + a.head->state_dict().size() + a.opt->state_dict().size());
  CHECK(stored_meta ==
        nn::Metadata{
            {"format", "pt"}, {"optimizer", a.opt->name()}, {"step", "3"}, {"tokenizer", "bpe"}});
  CHECK(nn::read_metadata(file.path) == stored_meta);

  TrainingSetup b(12);
  CHECK(snapshot(*b.model) != snapshot(*a.model));
  const nn::Metadata meta = nn::load_checkpoint(
      file.path, {{"model", b.model.get()}, {"head", b.head.get()}}, b.opt.get());
  CHECK(meta == stored_meta);
  CHECK(snapshot(*b.model) == snapshot(*a.model));
  CHECK(snapshot(*b.head) == snapshot(*a.head));
  CHECK(optim_snapshot(*b.opt) == optim_snapshot(*a.opt));
  CHECK(b.opt->step_count() == 3);

  // Training on from the restored state is the uninterrupted run, bit for bit.
  manual_seed(99);
  a.steps(2);
  manual_seed(99);
  b.steps(2);
  CHECK(snapshot(*b.model) == snapshot(*a.model));
  CHECK(optim_snapshot(*b.opt) == optim_snapshot(*a.opt));
}

TEST_CASE("load_checkpoint loads only the prefixes asked for; within one the match is strict") {
  TempFile file("prefixes");
  TrainingSetup a(13);
  a.steps(1);
  nn::save_checkpoint(file.path, {{"model", a.model.get()}, {"head", a.head.get()}}, a.opt.get());

  // The weights alone, for inference: the head and the optimizer state are ignored.
  manual_seed(14);
  Tiny inference;
  nn::load_checkpoint(file.path, {{"model", &inference}});
  CHECK(snapshot(inference) == snapshot(*a.model));

  // A prefix the file does not have, or a module that does not match, is an error naming both.
  Tiny other;
  const auto before = snapshot(other);
  check_error(
      [&] {
        nn::load_checkpoint(file.path, {{"encoder", &other}});
      },
      {file.path, "no tensors under 'encoder.'", "head.", "model.", "optim."});
  check_error(
      [&] {
        nn::load_checkpoint(file.path, {{"head", &other}});
      },
      {file.path, "prefix 'head.'", "nothing was loaded", "missing"});
  CHECK(snapshot(other) == before);

  // Prefixes are names without dots, once each, and "optim" belongs to the optimizer.
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"a.b", a.head.get()}}, nullptr);
      },
      {"module prefix 'a.b'"});
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"optim", a.head.get()}}, nullptr);
      },
      {"reserved for the optimizer"});
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"m", a.head.get()}, {"m", a.head.get()}}, nullptr);
      },
      {"'m' appears twice"});
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"", a.head.get()}}, nullptr);
      },
      {"must be non-empty"});
  // A model-only checkpoint has no optimizer state to restore.
  TempFile weights("weights_only");
  nn::save_checkpoint(weights.path, {{"head", a.head.get()}}, nullptr, {{"k", "v"}});
  CHECK(nn::read_metadata(weights.path).count("optimizer") == 0);
  TrainingSetup c(15);
  check_error(
      [&] {
        nn::load_checkpoint(weights.path, {{"head", c.head.get()}}, c.opt.get());
      },
      {weights.path, "no optimizer state"});
}

TEST_CASE("load_checkpoint refuses another optimizer kind or shape, changing nothing") {
  TempFile file("optim_kind");
  TrainingSetup a(16);
  a.steps(1);
  nn::save_checkpoint(file.path, {{"model", a.model.get()}, {"head", a.head.get()}}, a.opt.get());

  TrainingSetup b(17);
  b.steps(1);
  std::vector<Tensor> params = b.model->parameters();
  for (const Tensor& p : b.head->parameters()) params.push_back(p);
  optim::SGD sgd(params, 0.1f, 0.9f);
  const auto model_before = snapshot(*b.model), head_before = snapshot(*b.head);
  check_error(
      [&] {
        nn::load_checkpoint(file.path, {{"model", b.model.get()}, {"head", b.head.get()}}, &sgd);
      },
      {file.path, "AdamW", "SGD"});
  CHECK(snapshot(*b.model) == model_before);

  // Same kind, other hyper-parameters: the optimizer's own check, with the file named; the
  // modules, checked first, are not copied either.
  optim::AdamW other(params, 1e-2f, 0.8f);
  const auto optim_before = optim_snapshot(other);
  check_error(
      [&] {
        nn::load_checkpoint(file.path, {{"model", b.model.get()}, {"head", b.head.get()}}, &other);
      },
      {file.path, "beta1"});
  CHECK(snapshot(*b.model) == model_before);
  CHECK(snapshot(*b.head) == head_before);
  CHECK(optim_snapshot(other) == optim_before);
}

TEST_CASE("a truncated or corrupted training checkpoint leaves modules and optimizer untouched") {
  TempFile good("train_good"), bad("train_bad");
  TrainingSetup a(18);
  a.steps(2);
  nn::save_checkpoint(good.path, {{"model", a.model.get()}, {"head", a.head.get()}}, a.opt.get(),
                      {{"step", "2"}});
  const std::string bytes = read_bytes(good.path);

  TrainingSetup b(19);
  b.steps(1);
  const auto model_before = snapshot(*b.model), head_before = snapshot(*b.head);
  const auto optim_before = optim_snapshot(*b.opt);
  auto check_untouched = [&](const std::string& what) {
    INFO(what);
    check_error(
        [&] {
          nn::load_checkpoint(bad.path, {{"model", b.model.get()}, {"head", b.head.get()}},
                              b.opt.get());
        },
        {bad.path});
    CHECK(snapshot(*b.model) == model_before);
    CHECK(snapshot(*b.head) == head_before);
    CHECK(optim_snapshot(*b.opt) == optim_before);
  };
  for (size_t cut : {size_t{1}, size_t{100}, bytes.size() / 2, bytes.size() - 9}) {
    write_bytes(bad.path, bytes.substr(0, bytes.size() - cut));
    check_untouched("cut " + std::to_string(cut) + " bytes");
  }
  std::string corrupt = bytes;
  corrupt[12] = '\xff';  // inside the JSON header: not UTF-8
  write_bytes(bad.path, corrupt);
  check_untouched("a corrupted header");
}

TEST_CASE("save_checkpoint is atomic: a failed write keeps the previous checkpoint") {
  TempFile file("atomic");
  TrainingSetup a(20);
  nn::save_checkpoint(file.path, {{"model", a.model.get()}}, a.opt.get(), {{"step", "0"}});
  const std::string before = read_bytes(file.path);
  // Metadata that is not UTF-8 cannot be written; the error comes before any byte is.
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"model", a.model.get()}}, a.opt.get(),
                            {{"step", std::string("\xff")}});
      },
      {file.path, "UTF-8"});
  CHECK(read_bytes(file.path) == before);
  // Metadata naming another optimizer than the one saved is refused.
  check_error(
      [&] {
        nn::save_checkpoint(file.path, {{"model", a.model.get()}}, a.opt.get(),
                            {{"optimizer", "SGD"}});
      },
      {"\"optimizer\" is 'SGD'"});
  CHECK(read_bytes(file.path) == before);
  // No temporary file is left beside the checkpoint.
  const auto dir = std::filesystem::path(file.path).parent_path();
  const std::string stem = std::filesystem::path(file.path).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(dir))
    CHECK(e.path().filename().string().rfind(stem + ".tmp.", 0) != 0);
}

TEST_CASE("TrainerState: round trip through metadata, and the global generator restored exactly") {
  manual_seed(17);
  (void)randn({5});  // move the generator off its seed
  const nn::TrainerState saved = nn::TrainerState::capture(120, 1600, 3, 41);
  const std::vector<float> next = randn({4}).to_vector();
  const nn::TrainerState back = nn::TrainerState::from_metadata(saved.to_metadata(), "f");
  CHECK(back.step == 120);
  CHECK(back.steps == 1600);
  CHECK(back.epoch == 3);
  CHECK(back.batch_index == 41);
  CHECK(back.rng_seed == saved.rng_seed);
  CHECK(back.rng_offset == saved.rng_offset);
  manual_seed(99);
  back.restore_rng();
  CHECK(randn({4}).to_vector() == next);
  // A missing, garbled or negative entry names the key and the source.
  for (const char* key : {"step", "steps", "epoch", "batch_index", "rng_seed", "rng_offset"}) {
    nn::Metadata missing = saved.to_metadata();
    missing.erase(key);
    check_error([&] { nn::TrainerState::from_metadata(missing, "ckpt.safetensors"); },
                {"ckpt.safetensors", std::string("no \"") + key + "\""});
    nn::Metadata garbled = saved.to_metadata();
    garbled[key] = "7x";
    check_error([&] { nn::TrainerState::from_metadata(garbled, "ckpt.safetensors"); },
                {"ckpt.safetensors", std::string("\"") + key + "\" is '7x'"});
  }
  nn::Metadata negative = saved.to_metadata();
  negative["epoch"] = "-2";
  check_error([&] { nn::TrainerState::from_metadata(negative, "f"); }, {"f", "epoch -2"});
}

TEST_CASE("TrainerState: the global batch round-trips and converts the data position") {
  const nn::TrainerState legacy = nn::TrainerState::capture(6, 12, 0, 6);
  CHECK(legacy.to_metadata().count("global_batch") == 0);  // unrecorded: the old layout
  CHECK(nn::TrainerState::from_metadata(legacy.to_metadata(), "f").global_batch == 0);
  const nn::TrainerState s = nn::TrainerState::capture(6, 12, 1, 6, 8);
  CHECK(s.to_metadata().at("global_batch") == "8");
  const nn::TrainerState back = nn::TrainerState::from_metadata(s.to_metadata(), "f");
  CHECK(back.global_batch == 8);
  // 6 batches of 8 = 48 examples into the epoch: 12 batches of 4, 6 of 8, 3 of 16, 2 of 24.
  CHECK(back.batch_index_for(4, 100, "f") == 12);
  CHECK(back.batch_index_for(8, 100, "f") == 6);
  CHECK(back.batch_index_for(16, 100, "f") == 3);
  CHECK(back.batch_index_for(24, 100, "f") == 2);
  CHECK(legacy.batch_index_for(5, 100, "f") == 6);  // unrecorded: the same global batch
  check_error([&] { back.batch_index_for(32, 100, "ckpt"); },
              {"ckpt", "48 examples into its epoch", "global batch of 32"});
  check_error([&] { back.batch_index_for(8, 40, "ckpt"); },
              {"ckpt", "batch_index 6, but an epoch has 5 batches"});
  // Batches planned for their size (length buckets): only the recorded size resumes.
  back.check_global_batch(8, "pairs", "f");
  legacy.check_global_batch(3, "pairs", "f");
  check_error([&] { back.check_global_batch(16, "tokens", "ckpt"); },
              {"ckpt", "global batch of 8 tokens", "this run's is 16"});
  nn::Metadata zero = s.to_metadata();
  zero["global_batch"] = "0";
  check_error([&] { nn::TrainerState::from_metadata(zero, "f"); }, {"f", "global_batch 0"});
}

TEST_CASE("metadata_number reads exactly one number of the asked type") {
  const nn::Metadata m{{"n", "42"}, {"x", "0.25"}, {"big", "18446744073709551615"}, {"neg", "-3"}};
  CHECK(nn::metadata_number<int64_t>(m, "n", "f") == 42);
  CHECK(nn::metadata_number<float>(m, "x", "f") == 0.25f);
  CHECK(nn::metadata_number<double>(m, "x", "f") == 0.25);
  CHECK(nn::metadata_number<uint64_t>(m, "big", "f") == UINT64_MAX);
  CHECK(nn::metadata_number<int64_t>(m, "neg", "f") == -3);
  check_error([&] { nn::metadata_number<uint64_t>(m, "neg", "f"); }, {"f", "\"neg\" is '-3'"});
  check_error([&] { nn::metadata_number<int64_t>(m, "x", "f"); }, {"f", "\"x\" is '0.25'"});
  check_error([&] { nn::metadata_number<int64_t>(m, "big", "f"); }, {"f", "not a number"});
}
