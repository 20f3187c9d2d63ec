// nn::weight_decay_groups: the one rule of which parameters AdamW decays (every 1-D parameter and
// the model's no_weight_decay() undecayed), checked against the three rules the trainers wrote
// before it: nanoGPT's (train_gpt), timm's and the official Swin's lists (train_vision) and Hugging
// Face's no_decay names (train_bert). The groups, their order and their members are the same.
#include <functional>

#include "test_util.h"

using namespace loom;

namespace {

// The parameters a rule leaves undecayed, as {decayed, undecayed} groups in the order of
// named_parameters(), as the trainers built them.
std::vector<optim::ParamGroup> groups_by_rule(
    const nn::Module& model, const std::function<bool(const std::string&, const Tensor&)>& skip) {
  optim::ParamGroup decay{{}, 1e-3f, 0.1f};
  optim::ParamGroup no_decay{{}, 1e-3f, 0.0f};
  for (const auto& [name, p] : model.named_parameters())
    (skip(name, p) ? no_decay : decay).params.push_back(p);
  return {decay, no_decay};
}

void check_same_groups(const std::vector<optim::ParamGroup>& got,
                       const std::vector<optim::ParamGroup>& expected) {
  REQUIRE(got.size() == 2);
  REQUIRE(expected.size() == 2);
  for (size_t g = 0; g < 2; ++g) {
    CHECK(got[g].lr == expected[g].lr);
    CHECK(got[g].weight_decay == expected[g].weight_decay);
    REQUIRE(got[g].params.size() == expected[g].params.size());
    for (size_t i = 0; i < got[g].params.size(); ++i)
      CHECK(got[g].params[i].impl() == expected[g].params[i].impl());
  }
  CHECK(!got[0].params.empty());
  CHECK(!got[1].params.empty());
}

}  // namespace

TEST_CASE("weight_decay_groups: GPT's are nanoGPT's (decay what has 2+ dimensions)") {
  const models::GPT model(models::GPTConfig::preset("gpt-mini"));
  CHECK(model.no_weight_decay().empty());
  std::vector<optim::ParamGroup> nanogpt =
      optim::weight_decay_groups(model.parameters(), 1e-3f, 0.1f);
  check_same_groups(nn::weight_decay_groups(model, 1e-3f, 0.1f), nanogpt);
}

TEST_CASE("weight_decay_groups: ViT's and Swin's are timm's and the official Swin's") {
  // train_vision's rule: 1-D parameters, the position embedding, the class token and every
  // relative position bias table are not decayed.
  const auto vision_rule = [](const std::string& name, const Tensor& p) {
    return p.dim() < 2 || name == "pos_embed" || name == "cls_token" ||
           name.ends_with("relative_position_bias_table");
  };
  const models::ViT vit(models::ViTConfig::preset("vit-tiny-fmnist"));
  CHECK(vit.no_weight_decay() == std::set<std::string>{"cls_token", "pos_embed"});
  check_same_groups(nn::weight_decay_groups(vit, 1e-3f, 0.1f), groups_by_rule(vit, vision_rule));
  const models::Swin swin(models::SwinConfig::preset("swin-fmnist"));
  CHECK(swin.no_weight_decay().size() == 6);  // one table per block: 2 + 4 blocks
  check_same_groups(nn::weight_decay_groups(swin, 1e-3f, 0.1f), groups_by_rule(swin, vision_rule));
}

TEST_CASE("weight_decay_groups: BERT's are Hugging Face's no_decay = bias, LayerNorm.weight") {
  models::BertConfig config = models::BertConfig::preset("bert-mini");
  config.vocab_size = 300;
  config.n_layer = 2;
  const models::Bert bert(config);
  const auto hugging_face = [](const std::string& name, const Tensor&) {
    return name.find("LayerNorm") != std::string::npos || name.ends_with("bias");
  };
  check_same_groups(nn::weight_decay_groups(bert, 1e-3f, 0.1f), groups_by_rule(bert, hugging_face));
}

TEST_CASE("weight_decay_groups: a name in no_weight_decay that is no parameter is an error") {
  const nn::Linear layer(2, 3);
  const auto groups = nn::weight_decay_groups(layer, {"weight"}, 1e-3f, 0.1f);
  CHECK(groups[0].params.empty());  // the weight listed, the bias 1-D: nothing decayed
  CHECK(groups[1].params.size() == 2);
  CHECK_THROWS_WITH_AS(nn::weight_decay_groups(layer, {"wieght"}, 1e-3f, 0.1f),
                       doctest::Contains("no_weight_decay names 'wieght'"), Error);
}
