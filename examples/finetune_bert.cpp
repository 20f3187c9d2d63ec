// Fine-tunes BERT to tell which fortune file a fortune comes from (8 categories), and shows what
// pre-training is worth (Devlin et al. 2018, sec. 4: fine-tuning "all of the parameters end to
// end" with one new output layer on [CLS]). Three test accuracies, on the same split and tokens:
//   (a) bag of words: multinomial naive Bayes on the WordPiece tokens (add-one smoothing),
//   (b) BERT fine-tuned from random weights,
//   (c) BERT fine-tuned from train_bert's pre-trained weights.
//
//   finetune_bert                          reads out-bert/ (train_bert's --out)
//   finetune_bert --pretrained run1 --steps 300 --methods bow,pretrained
//   finetune_bert --seeds 3                 each BERT from 3 seeds, the mean reported
//   finetune_bert --help
//
// Data: the fortunes of the 8 largest categories (people, definitions, cookie, computers,
// songs-poems, politics, miscellaneous, work); a fortune found in two files (or twice) is
// dropped. The test set is the category fortunes that train_bert held out of pre-training (its
// split is read from the checkpoint), so no method has seen a test fortune, even unlabelled.
// A --val-fraction of the other fortunes is held out of fine-tuning as a validation set: each
// BERT is evaluated every --eval-every steps and reports its test accuracy at the step of its
// best validation accuracy (early stopping; the test set chooses nothing). Pre-training did see
// the validation fortunes (as text), so the pre-trained model's validation accuracy flatters it:
// only the test accuracies compare the methods. --seeds N fine-tunes each BERT N times.
// Input: [CLS] fortune [SEP], cut to --max-seq-len tokens. Results go to <pretrained>/finetune.csv.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bert_files.h"
#include "cli.h"
#include "data/text_file.h"
#include "loom.h"

using namespace loom;

namespace {

struct Options {
  std::string pretrained = "out-bert", fortunes;  // fortunes: "" = the pre-training run's
  std::vector<std::string> categories = {"people",      "definitions", "cookie",        "computers",
                                         "songs-poems", "politics",    "miscellaneous", "work"};
  std::vector<std::string> methods = {"bow", "random", "pretrained"};
  int64_t steps = 1000, batch = 32, warmup = 100, max_seq_len = 128, eval_every = 250;
  float lr = 1e-4f, weight_decay = 0.01f;
  double val_fraction = 0.1;
  int64_t threads = 0;
  uint64_t seed = 0;
  int64_t seeds = 1;  // BERT fine-tuned from seeds seed, seed + 1, ...
  std::string device = "cpu";
  bool detect_anomaly = false;
};

struct Example {
  std::vector<int64_t> ids;  // [CLS] ... [SEP]
  int64_t label;
};

struct Split {
  std::vector<Example> train, val, test;
};

// What one run reached: the test accuracy at the evaluation with the best validation accuracy
// (the earliest of equals), that step, and the test accuracy after the last step.
struct Result {
  double val = 0, test = 0, last_test = 0;
  int64_t step = 0;
  uint64_t seed = 0;
};

// The category fortunes, tokenized: test = train_bert's held-out ones, validation = a
// --val-fraction of the others (split by the pre-training seed: the same for every method and
// --seed), training = the rest.
Split load_split(const Options& o, const data::WordPieceTokenizer& tok, const nn::Metadata& meta,
                 const std::string& ckpt) {
  const std::string dir = o.fortunes.empty() ? meta.at("fortunes") : o.fortunes;
  const auto split_seed = nn::metadata_number<uint64_t>(meta, "split_seed", ckpt);
  const data::TrainValSplit pretraining =
      data::split_train_val(data::read_fortunes(dir),
                            nn::metadata_number<double>(meta, "val_fraction", ckpt), split_seed);
  const std::set<std::string> held_out(pretraining.val.begin(), pretraining.val.end());
  std::map<std::string, std::vector<int64_t>> labels_of;  // fortune -> categories holding it
  for (size_t c = 0; c < o.categories.size(); ++c)
    for (const std::string& f :
         data::parse_fortunes(data::read_file_bytes(dir + "/" + o.categories[c], "finetune_bert")))
      labels_of[f].push_back(static_cast<int64_t>(c));
  std::vector<std::string> labelled;  // training + validation
  for (const auto& [fortune, labels] : labels_of)
    if (labels.size() == 1 && !held_out.count(fortune)) labelled.push_back(fortune);
  const data::TrainValSplit fit =
      data::split_train_val(labelled, o.val_fraction, data::mix_seeds(split_seed, 1));
  const std::set<std::string> val(fit.val.begin(), fit.val.end());
  Split split;
  for (const auto& [fortune, labels] : labels_of) {
    if (labels.size() != 1) continue;  // a duplicate: no single right answer
    std::vector<int64_t> ids{tok.token_id("[CLS]")};
    const std::vector<int64_t> body = tok.encode(fortune);
    ids.insert(
        ids.end(), body.begin(),
        body.begin() + std::min<int64_t>(static_cast<int64_t>(body.size()), o.max_seq_len - 2));
    ids.push_back(tok.token_id("[SEP]"));
    std::vector<Example>& part = held_out.count(fortune) ? split.test
                                 : val.count(fortune)    ? split.val
                                                         : split.train;
    part.push_back({ids, labels[0]});
  }
  LOOM_CHECK(!split.train.empty() && !split.val.empty() && !split.test.empty(),
             "finetune_bert: {} training, {} validation and {} test fortunes (--val-fraction {}); "
             "all must be non-empty",
             split.train.size(), split.val.size(), split.test.size(), o.val_fraction);
  return split;
}

// (a) Multinomial naive Bayes with add-one smoothing on token counts ([CLS]/[SEP] included,
// they are in every fortune and cancel out).
Result naive_bayes(const Split& s, int64_t classes, int64_t vocab) {
  std::vector<double> prior(classes, 0), total(classes, 0);
  std::vector<double> counts(static_cast<size_t>(classes * vocab), 0);
  for (const Example& e : s.train) {
    prior[e.label] += 1;
    for (const int64_t id : e.ids) counts[e.label * vocab + id] += 1, total[e.label] += 1;
  }
  const auto accuracy = [&](const std::vector<Example>& examples) {
    int64_t right = 0;
    for (const Example& e : examples) {
      int64_t best = 0;
      double best_score = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) {
        double score = std::log(prior[c] / static_cast<double>(s.train.size()));
        for (const int64_t id : e.ids)
          score += std::log((counts[c * vocab + id] + 1) / (total[c] + static_cast<double>(vocab)));
        if (score > best_score) best_score = score, best = c;
      }
      right += best == e.label;
    }
    return static_cast<double>(right) / static_cast<double>(examples.size());
  };
  const double test = accuracy(s.test);
  return {.val = accuracy(s.val), .test = test, .last_test = test};
}

// Examples [begin, end) of `order` padded into one batch: ids, attention mask, labels.
std::vector<Tensor> make_batch(const std::vector<Example>& examples,
                               const std::vector<int64_t>& order, int64_t pad, Device device) {
  size_t T = 0;
  for (const int64_t i : order) T = std::max(T, examples[i].ids.size());
  const auto B = static_cast<int64_t>(order.size());
  std::vector<int64_t> ids(B * T, pad), mask(B * T, 0), labels;
  for (size_t b = 0; b < order.size(); ++b) {
    const Example& e = examples[order[b]];
    std::copy(e.ids.begin(), e.ids.end(), ids.begin() + b * T);
    std::fill_n(mask.begin() + b * T, e.ids.size(), 1);
    labels.push_back(e.label);
  }
  const Shape shape{B, static_cast<int64_t>(T)};
  return {tensor_i64(ids, shape).to(device), tensor_i64(mask, shape).to(device),
          tensor_i64(labels, {B}).to(device)};
}

double accuracy(models::BertForSequenceClassification& model, const std::vector<Example>& examples,
                int64_t batch, int64_t pad, Device device) {
  NoGradGuard no_grad;
  model.eval();
  int64_t right = 0;
  for (size_t s = 0; s < examples.size(); s += static_cast<size_t>(batch)) {
    std::vector<int64_t> order;
    for (size_t i = s; i < std::min(examples.size(), s + static_cast<size_t>(batch)); ++i)
      order.push_back(static_cast<int64_t>(i));
    const std::vector<Tensor> b = make_batch(examples, order, pad, device);
    const std::vector<int64_t> predicted =
        argmax(model.forward(b[0], Tensor(), b[1]), 1).to_vector_i64();
    const std::vector<int64_t> labels = b[2].to_vector_i64();
    for (size_t i = 0; i < labels.size(); ++i) right += predicted[i] == labels[i];
  }
  model.train();
  return static_cast<double>(right) / static_cast<double>(examples.size());
}

// (b) and (c): fine-tuning with AdamW (no decay on LayerNorm and biases), linear warm-up and
// decay, clipping at 1, dropout 0.1; `pretrained` null = random initialisation.
Result finetune(const Options& o, uint64_t seed, const models::BertConfig& config,
                const models::Bert* pretrained, const Split& s, int64_t classes, int64_t pad,
                Device device, const std::string& name) {
  manual_seed(seed);
  models::BertForSequenceClassification model(config, classes);
  if (pretrained != nullptr) {
    const nn::NamedTensors state = pretrained->bert->state_dict();
    nn::load_state_dict(*model.bert, {state.begin(), state.end()}, "the pre-trained encoder");
  }
  model.to(device);
  optim::ParamGroup decay{{}, o.lr, o.weight_decay}, no_decay{{}, o.lr, 0.0f};
  for (auto& [n, p] : model.named_parameters())
    (n.find("LayerNorm") != std::string::npos || n.ends_with("bias") ? no_decay : decay)
        .params.push_back(p);
  optim::AdamW opt({decay, no_decay}, 0.9f, 0.999f, 1e-6f);
  optim::ProgressMeter progress(o.batch, "seq/s");
  const auto n = static_cast<int64_t>(s.train.size());
  std::vector<int64_t> order;
  Result result{.val = -1, .seed = seed};
  for (int64_t step = 0; step < o.steps; ++step) {
    const float lr = optim::warmup_linear_lr(step + 1, std::min(o.warmup, o.steps), o.steps, o.lr);
    opt.set_lr(lr);
    std::vector<int64_t> indices;
    for (int64_t j = 0; j < o.batch; ++j) {
      const int64_t g = step * o.batch + j;
      if (g % n == 0) order = data::random_permutation(n, data::mix_seeds(seed, g / n));
      indices.push_back(order[g % n]);
    }
    const std::vector<Tensor> b = make_batch(s.train, indices, pad, device);
    const Tensor loss = cross_entropy(model.forward(b[0], Tensor(), b[1]), b[2]);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0f);
    opt.step();
    const int64_t done = step + 1;
    const double loss_value = loss.item();
    nn::check_loss_finite("finetune_bert (" + name + ")", loss_value, done);  // no result if not
    progress.add(loss_value);
    if (done % 50 == 0 || done == o.steps)
      fmt::print("{} {}\n", name, progress.line(done, o.steps, lr));
    if ((o.eval_every > 0 && done % o.eval_every == 0) || done == o.steps) {
      const double t0 = progress.elapsed();
      const double val = accuracy(model, s.val, o.batch, pad, device);
      const double test = accuracy(model, s.test, o.batch, pad, device);
      fmt::print("{} step {}: validation accuracy {:.2f}%, test accuracy {:.2f}%\n", name, done,
                 100 * val, 100 * test);
      if (val > result.val) result.val = val, result.test = test, result.step = done;
      result.last_test = test;
      progress.exclude(progress.elapsed() - t0);
    }
    std::fflush(stdout);
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);
  Options o;
  CLI::App app{
      "finetune_bert: classify fortunes into 8 files; bag of words vs BERT from random "
      "weights vs pre-trained BERT"};
  cli::show_defaults(app);
  app.add_option("--pretrained", o.pretrained, "train_bert's --out directory");
  app.add_option("--fortunes", o.fortunes, "fortune directory (default: the pre-training run's)");
  app.add_option("--categories", o.categories, "fortune files, one class each");
  app.add_option("--methods", o.methods, "which of bow, random, pretrained to run")
      ->check(CLI::IsMember({"bow", "random", "pretrained"}))
      ->delimiter(',');
  app.add_option("--steps", o.steps, "fine-tuning steps per BERT")->check(cli::positive_integer);
  app.add_option("--batch", o.batch, "fortunes per batch")->check(cli::positive_integer);
  app.add_option("--lr", o.lr, "peak learning rate")->check(cli::positive);
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->check(cli::non_negative_integer);
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay")
      ->check(cli::finite_non_negative);
  app.add_option("--max-seq-len", o.max_seq_len, "tokens per fortune, [CLS] and [SEP] included")
      ->check(cli::range(int64_t{3}, int64_t{4096}));
  app.add_option("--val-fraction", o.val_fraction,
                 "training fortunes held out to choose each BERT's step (early stopping)")
      ->check(cli::range(0.01, 0.5));
  app.add_option("--eval-every", o.eval_every,
                 "steps between validation and test evaluations (0 = at the end only)")
      ->check(cli::non_negative_integer);
  cli::add_device(app, o.device);
  app.add_option("--threads", o.threads, "CPU threads (0 = OpenMP's default)")
      ->check(cli::range(int64_t{0}, cli::kMaxThreads));
  app.add_option("--seeds", o.seeds,
                 "fine-tune each BERT this many times (--seed, --seed + 1, ...); the mean is "
                 "reported")
      ->check(cli::range(int64_t{1}, int64_t{1000}));
  app.add_option("--seed", o.seed, "seed of the classifier weights, batches and dropout")
      ->check(cli::non_negative_integer);
  cli::add_detect_anomaly(app, o.detect_anomaly);
  CLI11_PARSE(app, argc, argv);
  cli::print_config(app);
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  autograd::set_detect_anomaly(o.detect_anomaly);
  const Device device = cli::device_of(o.device);

  const examples::Pretrained pre = examples::load_pretrained(o.pretrained);
  const std::string ckpt = examples::checkpoint_path(o.pretrained);
  const nn::Metadata meta = nn::read_metadata(ckpt);
  models::BertConfig config = pre.model->config();
  LOOM_CHECK(o.max_seq_len <= config.max_position,
             "finetune_bert: --max-seq-len {} is longer than the model's {} positions",
             o.max_seq_len, config.max_position);
  const Split split = load_split(o, pre.tokenizer, meta, ckpt);
  const auto classes = static_cast<int64_t>(o.categories.size());
  const int64_t pad = pre.tokenizer.token_id("[PAD]");
  fmt::print(
      "finetune_bert: {} classes, {} training, {} validation and {} test fortunes (the test "
      "ones held out of pre-training)\n",
      classes, split.train.size(), split.val.size(), split.test.size());

  std::vector<std::pair<std::string, std::vector<Result>>> results;  // method -> its runs
  for (const std::string& method : o.methods) {
    std::vector<Result>& runs = results.emplace_back(method, std::vector<Result>{}).second;
    if (method == "bow") runs.push_back(naive_bayes(split, classes, pre.tokenizer.vocab_size()));
    for (int64_t k = 0; method != "bow" && k < o.seeds; ++k) {
      const uint64_t seed = o.seed + static_cast<uint64_t>(k);
      const std::string name = o.seeds == 1 ? method : fmt::format("{} (seed {})", method, seed);
      runs.push_back(finetune(o, seed, config, method == "pretrained" ? pre.model.get() : nullptr,
                              split, classes, pad, device, name));
      fmt::print("== {}: test accuracy {:.2f}%\n", name, 100 * runs.back().test);
    }
  }
  std::string csv = "method,seed,step,val_accuracy,test_accuracy,last_test_accuracy\n";
  fmt::print(
      "\ntest accuracy over {} fortunes ({} classes, chance {:.1f}%), BERT at its best "
      "validation step{}:\n",
      split.test.size(), classes, 100.0 / static_cast<double>(classes),
      o.seeds > 1 ? fmt::format(", the mean of {} seeds", o.seeds) : "");
  for (const auto& [method, runs] : results) {
    const bool bow = method == "bow";  // one run, no seed, no steps
    double mean = 0;
    for (const Result& r : runs) mean += r.test / static_cast<double>(runs.size());
    fmt::print("  {:<12} {:6.2f}%\n", method, 100 * mean);
    for (const Result& r : runs) {
      csv += fmt::format("{},{},{},{},{},{}\n", method, bow ? "" : std::to_string(r.seed),
                         bow ? "" : std::to_string(r.step), r.val, r.test, r.last_test);
      if (!bow)
        fmt::print(
            "      seed {}: {:.2f}% at step {} (validation {:.2f}%; {:.2f}% after the "
            "last step)\n",
            r.seed, 100 * r.test, r.step, 100 * r.val, 100 * r.last_test);
    }
  }
  data::write_file_atomic(o.pretrained + "/finetune.csv", csv, "finetune_bert");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
