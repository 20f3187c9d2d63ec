// nn::save / nn::load: bit-exact round trips, PyTorch state_dicts loading directly, and
// all-or-nothing loading: every mismatch reported in one error, bad files rejected, and the
// model untouched whenever loading fails.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "nn_golden.h"

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
