// state_dict / load_state_dict / save / load: an optimizer restored halfway (together with the
// parameters) continues bit-exactly like an uninterrupted run; a state dict that does not fit
// the optimizer is rejected with a loom::Error before anything changes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "optim_fixture.h"

using namespace loom;
using namespace loom::testing;
namespace fs = std::filesystem;

namespace {

enum class Kind { SGD, Nesterov, Adam, AdamW };

// Every optimizer kind on the MLP, AdamW with decay/no-decay groups.
std::unique_ptr<optim::Optimizer> make(Kind kind, const Mlp& mlp) {
  switch (kind) {
    case Kind::SGD:
      return std::make_unique<optim::SGD>(mlp.params(), 0.1f, 0.9f, 0.1f, 0.01f);
    case Kind::Nesterov:
      return std::make_unique<optim::SGD>(mlp.params(), 0.05f, 0.9f, 0.0f, 0.0f, true);
    case Kind::Adam:
      return std::make_unique<optim::Adam>(mlp.params(), 0.01f, 0.8f, 0.99f, 1e-8f, 0.1f);
    case Kind::AdamW:
      return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{
          {mlp.weights(), 0.01f, 0.1f}, {mlp.biases(), 0.02f, 0.0f}});
  }
  return nullptr;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::SGD:
      return "SGD";
    case Kind::Nesterov:
      return "SGD nesterov";
    case Kind::Adam:
      return "Adam";
    case Kind::AdamW:
      return "AdamW";
  }
  return "";
}

float schedule(int64_t k) { return optim::warmup_cosine_lr(k, 2, 8, 0.02f); }

void copy_params(const Mlp& from, Mlp& to) {
  NoGradGuard no_grad;
  for (size_t i = 0; i < from.params().size(); ++i) to.params()[i].copy_(from.params()[i]);
}

void check_identical(const Mlp& a, const Mlp& b, const std::string& what) {
  for (size_t i = 0; i < a.params().size(); ++i)
    CHECK_MESSAGE(a.params()[i].to_vector() == b.params()[i].to_vector(),
                  what << ": " << Mlp::names()[i] << " differs");
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("loom_test_optim_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("resuming from state_dict continues bit-exactly like an uninterrupted run") {
  for (Kind kind : {Kind::SGD, Kind::Nesterov, Kind::Adam, Kind::AdamW}) {
    for (bool through_file : {false, true}) {
      CAPTURE(kind_name(kind));
      CAPTURE(through_file);
      Mlp full;
      auto full_opt = make(kind, full);
      for (int64_t k = 0; k < kGoldenSteps; ++k) train_step(full, *full_opt, k, schedule);

      Mlp first;
      auto first_opt = make(kind, first);
      for (int64_t k = 0; k < 5; ++k) train_step(first, *first_opt, k, schedule);
      // A fresh process would rebuild model and optimizer, then load both checkpoints.
      Mlp resumed;
      copy_params(first, resumed);
      auto resumed_opt = make(kind, resumed);
      const std::string path = temp_path("resume.safetensors");
      if (through_file) {
        first_opt->save(path);
        resumed_opt->load(path);
        fs::remove(path);
      } else {
        resumed_opt->load_state_dict(first_opt->state_dict());
      }
      CHECK(resumed_opt->step_count() == 5);
      CHECK(resumed_opt->lr() == first_opt->lr());
      for (int64_t k = 5; k < kGoldenSteps; ++k) train_step(resumed, *resumed_opt, k, schedule);
      check_identical(resumed, full, kind_name(kind));
      CHECK(resumed_opt->step_count() == kGoldenSteps);
    }
  }
}

TEST_CASE("state_dict names the step count, hyper-parameters, groups and per-parameter state") {
  Mlp mlp;
  optim::AdamW opt({{mlp.weights(), 0.01f, 0.1f}, {mlp.biases(), 0.02f, 0.0f}}, 0.8f);
  for (int64_t k = 0; k < 3; ++k) train_step(mlp, opt, k);
  const optim::StateDict state = opt.state_dict();
  CHECK(state.at("step_count").to_vector_i64()[0] == 3);
  CHECK(state.at("hparams.beta1").item() == 0.8f);
  CHECK(state.at("hparams.decoupled_weight_decay").item() == 1.0f);
  CHECK(state.at("param_groups.1.lr").item() == 0.02f);
  CHECK(state.at("param_groups.0.weight_decay").item() == 0.1f);
  CHECK(state.at("param_groups.1.num_params").to_vector_i64()[0] == 2);
  CHECK(state.at("state.0.1.step").to_vector_i64()[0] == 3);
  CHECK(state.at("state.0.1.exp_avg").shape() == Shape{2, 4});  // w2
  CHECK(state.at("state.1.0.exp_avg_sq").shape() == Shape{4});  // b1
  CHECK(state.size() == 1 + 4 + 2 * 3 + 4 * 3);
  // A copy: later steps do not change it.
  const std::vector<float> before = state.at("state.0.0.exp_avg").to_vector();
  train_step(mlp, opt, 3);
  CHECK(state.at("state.0.0.exp_avg").to_vector() == before);
}

TEST_CASE("load_state_dict restores group learning rates and weight decays") {
  Mlp mlp;
  optim::SGD saved({{mlp.weights(), 0.1f, 0.01f}, {mlp.biases(), 0.05f, 0.0f}});
  saved.set_lr(1, 0.025f);
  optim::SGD loaded({{mlp.weights(), 0.3f, 0.0f}, {mlp.biases(), 0.3f, 0.0f}});
  loaded.load_state_dict(saved.state_dict());
  CHECK(loaded.param_groups()[0].lr == 0.1f);
  CHECK(loaded.param_groups()[0].weight_decay == 0.01f);
  CHECK(loaded.param_groups()[1].lr == 0.025f);
}

TEST_CASE("load_state_dict rejects a state dict that does not fit, changing nothing") {
  Mlp mlp;
  optim::Adam opt(mlp.params(), 0.01f);
  for (int64_t k = 0; k < 2; ++k) train_step(mlp, opt, k);
  const optim::StateDict good = opt.state_dict();

  Mlp other;
  optim::Adam target(other.params(), 0.03f);
  auto rejects = [&](optim::StateDict bad, const char* message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(target.load_state_dict(bad), doctest::Contains(message), Error);
    CHECK(target.step_count() == 0);
    CHECK(target.lr() == 0.03f);
    CHECK(target.state_dict().count("state.0.0.exp_avg") == 0);
  };

  optim::StateDict wrong_shape = good;
  wrong_shape["state.0.2.exp_avg"] = zeros({4, 2});
  rejects(wrong_shape,
          "Adam: load_state_dict: state.0.2.exp_avg is float32 [4,2], but parameter 2 of group 0 "
          "is float32 [2,4]");

  optim::StateDict missing = good;
  missing.erase("state.0.3.exp_avg_sq");
  rejects(missing, "Adam: load_state_dict: the state dict has no entry \"state.0.3.exp_avg_sq\"");

  optim::StateDict extra = good;
  extra["state.0.4.exp_avg"] = zeros({3});
  rejects(extra, "Adam: load_state_dict: unexpected state dict entry \"state.0.4.exp_avg\"");

  optim::StateDict extra_group = good;
  extra_group["param_groups.1.lr"] = scalar_tensor(0.1f);
  rejects(extra_group, "unexpected state dict entry \"param_groups.1.lr\"");

  optim::StateDict other_betas = good;
  other_betas["hparams.beta2"] = scalar_tensor(0.98f);
  rejects(other_betas,
          "Adam: load_state_dict: beta2 is 0.98 in the state dict but 0.999 in this optimizer");

  optim::StateDict bad_lr = good;
  bad_lr["param_groups.0.lr"] = scalar_tensor(-1.0f);
  rejects(bad_lr, "learning rate -1 of param group 0 must be non-negative");

  optim::StateDict bad_step = good;
  bad_step["step_count"] = scalar_tensor(2.0f);
  rejects(bad_step, "\"step_count\" should be one int64, got float32 []");

  // Fewer parameters than the optimizer has.
  Mlp three;
  optim::Adam smaller({three.w1, three.b1, three.w2}, 0.01f);
  rejects(smaller.state_dict(),
          "param group 0 has 3 parameters in the state dict but 4 in this optimizer");

  // Another kind of optimizer.
  optim::SGD sgd(Mlp().params(), 0.1f, 0.9f);
  rejects(sgd.state_dict(), "the state dict has no entry \"hparams.beta1\"");
  optim::AdamW adamw(Mlp().params(), 0.01f);
  rejects(adamw.state_dict(),
          "decoupled_weight_decay is 1 in the state dict but 0 in this optimizer");
}

TEST_CASE("load refuses a file written by another kind of optimizer, naming the file") {
  Mlp mlp;
  optim::SGD sgd(mlp.params(), 0.1f, 0.9f);
  train_step(mlp, sgd, 0);
  const std::string path = temp_path("sgd.safetensors");
  sgd.save(path);
  optim::Adam adam(mlp.params(), 0.01f);
  CHECK_THROWS_WITH_AS(adam.load(path),
                       doctest::Contains("holds the state of a SGD optimizer, not Adam"), Error);
  CHECK_THROWS_WITH_AS(adam.load(path), doctest::Contains(path.c_str()), Error);
  optim::SGD no_momentum(mlp.params(), 0.1f);
  CHECK_THROWS_WITH_AS(
      no_momentum.load(path),
      doctest::Contains(
          ("momentum is 0.9 in the state dict but 0 in this optimizer (loading " + path + ")")
              .c_str()),
      Error);
  fs::remove(path);
  CHECK_THROWS_AS(adam.load(path), Error);  // missing file
}

TEST_CASE("load of a truncated or corrupted optimizer file names the file and changes nothing") {
  Mlp mlp;
  optim::Adam adam(mlp.params(), 0.01f);
  for (int64_t k = 0; k < 3; ++k) train_step(mlp, adam, k);
  const std::string path = temp_path("adam.safetensors");
  adam.save(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(bytes.size() > 64);
  Mlp other;
  optim::Adam fresh(other.params(), 0.01f);
  // A copy of every value (state_dict may share storage with the live state).
  std::map<std::string, std::vector<float>> before;
  for (const auto& [name, t] : fresh.state_dict()) before[name] = t.to_vector();
  auto write = [&](const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  };
  write(bytes.substr(0, bytes.size() - 10));  // the last tensor's data cut short
  CHECK_THROWS_WITH_AS(fresh.load(path), doctest::Contains(path.c_str()), Error);
  std::string corrupt = bytes;
  corrupt[8] = '#';  // the JSON header no longer parses
  write(corrupt);
  CHECK_THROWS_WITH_AS(fresh.load(path), doctest::Contains(path.c_str()), Error);
  write(bytes.substr(0, 4));  // not even the header length
  CHECK_THROWS_WITH_AS(fresh.load(path), doctest::Contains(path.c_str()), Error);
  CHECK(fresh.step_count() == 0);
  const auto after = fresh.state_dict();
  REQUIRE(after.size() == before.size());
  for (const auto& [name, t] : after) CHECK_MESSAGE(t.to_vector() == before.at(name), name);
  fs::remove(path);
}
