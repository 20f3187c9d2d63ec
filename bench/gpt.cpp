// GPT benchmark, side by side with bench/reference/bench.py: the same models, the same
// data, timed the same way (median of N steps after 3 warm-ups), one JSON line with the same keys.
//
//   gpt gpt-mini            training step of the byte-level gpt-mini (batch 16 x 128 tokens):
//                           forward + cross-entropy + backward + AdamW step + zero_grad
//   gpt gpt-mini-generate   greedy decoding of 128 new tokens after a 16-token prompt, batch 1,
//                           with the KV cache (--no-cache: re-run the context every token, as
//                           the PyTorch reference does)
//   gpt gpt2-generate       the same decoding run on GPT-2 small (random weights; for a GPU)
//   gpt gpt2                training step of GPT-2 small (124M) on batch 8 x 1024 tokens
//                           (meant for a GPU: --device cuda)
//   mpirun -np 2 gpt gpt-mini --distributed --threads 1
//                           the gpt-mini step data-parallel: the same global batch of 16 split
//                           over the processes, gradients averaged by nn::DistributedDataParallel
//                           during backward; compare its tokens/s with `gpt gpt-mini --threads 2`
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda  --no-cache
//            --profile (a per-op table of the timed steps on stderr);
//            --tf32 (CUDA: TF32 tensor-core matrix products; off by default, as in PyTorch);
//            --fused-attention / --no-fused-attention (CUDA: force the fused FlashAttention
//            kernel on or off; by default bfloat16 attention is fused, float32 is not);
//            --bf16 (the forward pass under AutocastGuard: bfloat16 matrix products, as
//            bench/reference/bench.py --bf16); --host-sampling (generate cases on CUDA: the old
//            loop that copies each token's logits to the host and samples there, to compare
//            with the default device-side sampling); --no-cuda-graphs (generate cases on
//            CUDA: launch every kernel of a step instead of replaying the recorded step);
//            gpt --help lists them all
// Training cases also print "mfu": model FLOPs per second (6 x parameters + 12 x layers x
// d_model x seq per token, PaLM's count) over the H100/H200 bf16 dense peak of 989 TFLOP/s,
// the same figure bench/reference/bench.py prints. Every case but --distributed prints what its
// step achieves on this machine (bench_util.h's JsonLine::achieved): "flops_per_step" (the
// products' GFLOP, bench/flops.h), "gflops_per_s", and on the CPU "sgemm_gflops" and
// "sgemm_share". gpt-mini-generate counts loom's own decoding: the last block and the LM head
// run for the newest position only, so with --no-cache it does 54.5 GFLOP where the PyTorch
// twin, which runs every position, counts 68.5. --profile prints a per-op table on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>

#include "bench_cli.h"
#include "bench_util.h"
#include "examples/cli.h"
#include "flops.h"
#include "loom.h"
#ifdef LOOM_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

using namespace loom;
using loom::bench::time_steps;

namespace {

struct Args {
  std::string case_name;
  int steps = 10, threads = 2;
  Device device = Device::CPU;
  bool cache = true;
  bool tf32 = false;
  // CUDA: nn::functional::set_fused_attention forced on or off; neither: the default.
  bool fused_attention = false, no_fused_attention = false;
  bool bf16 = false;
  bool distributed = false;
  // generate cases: GenerateOptions::host_sampling and cuda_graphs
  bool host_sampling = false;
  bool cuda_graphs = true;
  double bucket_mb = 25.0;  // nn::DistributedDataParallelOptions::bucket_cap_mb
  bool profile = false;     // --profile: a per-op table of the timed steps on stderr
  int profile_shapes = bench::kProfileShapes;  // --profile-shapes (0: all)
  double sgemm_gflops = 0;  // the sgemm probe's GFLOP/s on the CPU (bench/flops.h)
};

// The JSON fields every case shares, after the case-specific ones: the common ones and the
// switches of the CUDA paths.
bench::JsonLine& add_common(bench::JsonLine& line, const bench::Timing& t, const Args& args,
                            int64_t params) {
  const bool fused = args.device == Device::CUDA &&
                     (args.fused_attention || (args.bf16 && !args.no_fused_attention));
  return line.common(t, args.steps, params, args.device)
      .flag("tf32", args.tf32)
      .flag("bf16", args.bf16)
      .flag("fused_attention", fused);
}

// bench.py's case_gpt(): the same batch every step, AdamW(lr 3e-4, betas (0.9, 0.95),
// weight decay 0.1 on every parameter), gradients zeroed in place (PyTorch 1.13's default).
void train_case(const Args& args, const std::string& preset, int64_t batch, int64_t seq) {
  manual_seed(0);
  models::GPTConfig config = models::GPTConfig::preset(preset);
  models::GPT model(config);
  model.to(args.device);
  const Tensor data = randint(0, config.vocab_size, {batch, seq + 1}).to(args.device);
  const Tensor x = data.narrow(1, 0, seq).contiguous(), y = data.narrow(1, 1, seq).contiguous();
  optim::AdamW opt(model.parameters(), 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
  std::vector<float> losses;
  auto step = [&] {
    Tensor loss;
    {
      AutocastGuard amp(args.bf16);  // torch.autocast("cuda", dtype=torch.bfloat16) with --bf16
      Tensor logits = model.forward(x);  // (B, T, V)
      loss = cross_entropy(logits.reshape({-1, config.vocab_size}), y.reshape({-1}));
    }
    bench::update(loss, opt, losses);
  };
  const bench::Timing t = bench::time_case(step, args, args.case_name);
  const double tokens_per_s = static_cast<double>(batch * seq) / t.median_s;
  const double flops_per_token = 6.0 * static_cast<double>(model.num_parameters()) +
                                 12.0 * config.n_layer * config.d_model * seq;
  bench::JsonLine line(args.case_name);
  line.add("batch", batch).add("seq", seq).add("tokens_per_s", tokens_per_s, 2);
  add_common(line, t, args, model.num_parameters())
      .add("mfu", flops_per_token * tokens_per_s / 989e12, 4)
      .achieved(bench::gpt_training_flops(config, batch, seq), t, args.sgemm_gflops)
      .losses(losses)
      .print();
}

// gpt-mini's training step under nn::DistributedDataParallel: the global batch of 16 x 128 is
// split over the processes (rank r trains rows [r*B, (r+1)*B), B = 16 / processes), so the
// tokens/s compare with one process at batch 16. Three timings tell how much of the gradient
// all-reduce backward hides (Li et al. 2020, section 5):
//   compute  the same step with gradient averaging off (no_sync): what each process computes;
//   step     the real data-parallel step;
//   reduce   a blocking all-reduce of all the gradients at once (one buffer of every element).
// exposed = step - compute is the communication backward did not hide, and
// overlap = 1 - exposed / reduce the share of it that was hidden (1: all, 0: none).
void distributed_case(const Args& args) {
  const int world = distributed::world_size();
  const int64_t global_batch = 16, seq = 128;
  LOOM_CHECK(global_batch % world == 0,
             "--distributed splits the batch of {} over the processes; {} processes do not "
             "divide it",
             global_batch, world);
  const int64_t rows = global_batch / world;
  manual_seed(0);  // the same weights and data on every rank
  const models::GPTConfig config = models::GPTConfig::preset("gpt-mini");
  const auto model = std::make_shared<models::GPT>(config);
  model->to(args.device);
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = args.bucket_mb});
  const Tensor data = randint(0, config.vocab_size, {global_batch, seq + 1});
  const Tensor mine = distributed::rank_chunk(data).to(args.device);  // (B, T + 1), this rank's
  const Tensor x = mine.narrow(1, 0, seq).contiguous(), y = mine.narrow(1, 1, seq).contiguous();
  optim::AdamW opt(model->parameters(), 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
  auto step = [&] {
    Tensor logits = model->forward(x);  // (B, T, V)
    Tensor loss = cross_entropy(logits.reshape({-1, config.vocab_size}), y.reshape({-1}));
    loss.backward();
    opt.step();
    opt.zero_grad(false);
  };
  bench::Timing compute;
  {
    const auto no_sync = ddp.no_sync();
    compute = time_steps(step, args.steps);
  }
  const bench::Timing t = time_steps(step, args.steps);
  Tensor flat = zeros({model->num_parameters()}).to(args.device);
  const bench::Timing reduce =
      time_steps([&] { distributed::all_reduce(flat, distributed::ReduceOp::Mean); }, args.steps);
  const double exposed = t.median_s - compute.median_s;
  const double overlap = world > 1 ? std::clamp(1.0 - exposed / reduce.median_s, 0.0, 1.0) : 1.0;
  if (!distributed::is_main_process()) return;
  bench::JsonLine line(args.case_name);
  line.flag("distributed", true)
      .add("processes", world)
      .add("batch", global_batch)
      .add("rows_per_process", rows)
      .add("seq", seq)
      .add("tokens_per_s", static_cast<double>(global_batch * seq) / t.median_s, 2)
      .add("ms_compute", compute.median_s * 1e3, 3)
      .add("ms_allreduce_blocking", reduce.median_s * 1e3, 3)
      .add("gradient_mb", static_cast<double>(model->num_parameters()) * 4 / 1e6, 2)
      .add("ms_exposed", exposed * 1e3, 3)
      .add("overlap", overlap, 3)
      .add("bucket_mb", args.bucket_mb)
      .add("buckets", ddp.bucket_assignment().size());
  add_common(line, t, args, model->num_parameters()).print();
}

// bench.py's gpt-mini-generate: greedy, batch 1, 16 random prompt tokens, 128 new tokens
// (gpt2-generate: the same run on the gpt2 preset).
void generate_case(const Args& args, const std::string& preset) {
  const int64_t prompt_len = 16, new_tokens = 128;
  manual_seed(0);
  models::GPTConfig config = models::GPTConfig::preset(preset);
  models::GPT model(config);
  model.to(args.device);
  model.eval();
  const std::vector<int64_t> prompt = randint(0, config.vocab_size, {prompt_len}).to_vector_i64();
  models::GenerateOptions options;
  options.max_new_tokens = new_tokens;
  options.use_cache = args.cache;
  options.host_sampling = args.host_sampling;
  options.cuda_graphs = args.cuda_graphs;
  size_t generated = 0;
  const bench::Timing t = bench::time_case(
      [&] { generated = model.generate(prompt, options).size() - prompt.size(); }, args,
      args.case_name);
  bench::JsonLine line(args.case_name);
  line.add("batch", 1)
      .add("prompt", prompt_len)
      .add("new_tokens", generated)
      .flag("kv_cache", args.cache)
      .add("new_tokens_per_s", static_cast<double>(generated) / t.median_s, 2)
      .flag("host_sampling", args.host_sampling)
      .flag("cuda_graphs", args.cuda_graphs && !args.host_sampling && args.device == Device::CUDA);
  add_common(line, t, args, model.num_parameters())
      .achieved(bench::gpt_generate_flops(config, prompt_len, new_tokens, args.cache), t,
                args.sgemm_gflops)
      .print();
}

}  // namespace

int main(int argc, char** argv) {
  cli::use_short_omp_spin(argv);
  Args args;
  std::string device = "cpu";
  CLI::App app{std::string("gpt: one GPT benchmark case; prints one JSON line comparable with "
                            "bench/reference/bench.py CASE (on a GPU: both with --device cuda)") +
               bench::kAchievedHelp};
  cli::show_defaults(app);
  app.add_option("case", args.case_name,
                 "gpt-mini: training step, gpt-mini (4 layers, d 256), batch 16 x 128 bytes\n"
                 "gpt-mini-generate: greedy decoding, 16-token prompt + 128 new tokens, KV cache\n"
                 "gpt2: training step, GPT-2 small (124M), batch 8 x 1024 tokens\n"
                 "gpt2-generate: gpt-mini-generate's run on GPT-2 small (random weights)")
      ->required()
      ->check(CLI::IsMember({"gpt-mini", "gpt-mini-generate", "gpt2", "gpt2-generate"}));
  app.add_option("--steps", args.steps, "timed steps (after 3 warm-ups)")
      ->check(cli::positive);
  app.add_option("--threads", args.threads, "CPU threads")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  cli::add_device(app, device);
  bool no_cache = false;
  app.add_flag("--no-cache", no_cache,
               "gpt-mini-generate: re-run the whole context for every token, as the PyTorch "
               "reference does");
  app.add_flag("--host-sampling", args.host_sampling,
               "generate cases on CUDA: copy each token's logits to the host and sample there "
               "(the old host-synchronised loop) instead of sampling on the device");
  bool no_cuda_graphs = false;
  app.add_flag("--no-cuda-graphs", no_cuda_graphs,
               "generate cases on CUDA: launch every kernel of each decoding step instead of "
               "replaying the step recorded as a CUDA graph");
  app.add_flag("--tf32", args.tf32, "CUDA only: TF32 tensor-core matrix products");
  app.add_flag("--bf16", args.bf16,
               "training cases: the forward pass under autocast (bfloat16 matrix products)");
  app.add_flag("--fused-attention", args.fused_attention,
               "CUDA only: attention by the fused FlashAttention kernel, also in float32 (by "
               "default only bfloat16 attention is fused)");
  app.add_flag("--no-fused-attention", args.no_fused_attention,
               "CUDA only: attention by the unfused composite (matmul, softmax, matmul)")
      ->excludes("--fused-attention");
  app.add_flag("--distributed", args.distributed,
               "gpt-mini: data-parallel over the processes mpirun started (batch 16 split "
               "between them); rank 0 prints");
  bench::add_profile_flags(app, args.profile, args.profile_shapes);
  app.add_option("--bucket-mb", args.bucket_mb,
                 "--distributed: gradient bucket size in MB (PyTorch DDP's bucket_cap_mb)")
      ->check(cli::positive);
  CLI11_PARSE(app, argc, argv);
  args.device = cli::device_of(device);
  args.cache = !no_cache;
  args.cuda_graphs = !no_cuda_graphs;
  try {
    LOOM_CHECK(!args.tf32 || args.device == Device::CUDA, "--tf32 needs --device cuda");
#ifdef LOOM_WITH_CUDA
    cuda_set_tf32(args.tf32);
#endif
    LOOM_CHECK((!args.fused_attention && !args.no_fused_attention) || args.device == Device::CUDA,
               "--fused-attention and --no-fused-attention need --device cuda");
    if (args.fused_attention || args.no_fused_attention)
      nn::functional::set_fused_attention(Device::CUDA, args.fused_attention);
    LOOM_CHECK(!args.distributed || args.case_name == "gpt-mini",
               "--distributed is for the gpt-mini case only");
    set_num_threads(args.threads);
    if (args.device == Device::CPU && !args.distributed) args.sgemm_gflops = bench::sgemm_gflops();
    if (args.distributed) {
      distributed::init();  // a job of one without mpirun
      distributed_case(args);
    } else if (args.case_name == "gpt-mini")
      train_case(args, "gpt-mini", 16, 128);
    else if (args.case_name == "gpt2")
      train_case(args, "gpt2", 8, 1024);
    else if (args.case_name == "gpt2-generate")
      generate_case(args, "gpt2");
    else
      generate_case(args, "gpt-mini");
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt: {}\n", e.what());
    return 1;
  }
  return 0;
}
