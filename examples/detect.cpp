// Runs a DETR checkpoint written by train_detr (the model is rebuilt from the config in its
// metadata) on held-out Fashion-MNIST scenes or on an image of your own, prints the boxes it
// finds and draws them.
//
//   detect --checkpoint out-detr/ckpt.safetensors              the first 4 held-out t10k scenes
//   detect --scenes 10 --threshold 0.7                         more scenes, fewer boxes
//   detect --image my_scene.png                                a 64x64 PNG or PGM
//
// Per scene it prints each detection scoring >= --threshold as
//   <class> <score> <x0> <y0> <x1> <y1>      (pixels of the 64x64 canvas, x right, y down)
// best first, and writes <out>/detect_<i>.png (or <out>/<image name>_boxes.png): the scene
// scaled 4x, predictions in orange, and for the held-out scenes the ground truth in green. For
// held-out scenes it also writes <out>/input_<i>.png, the 64x64 picture the model saw, which
// --image reads back.
//
// An --image must be 64x64 (the scenes' canvas; resize it first otherwise); gray is used as it
// is, colour is turned to gray (ITU-R BT.601 luma), alpha is ignored; pixel values are divided by
// 255 as the training scenes' (black background, bright items).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "detr_postprocess.h"
#include "loom.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string checkpoint = "out-detr/ckpt.safetensors";
  std::string data = data::kFashionMnistDir;
  int64_t scenes = 4;
  std::string image;
  float threshold = 0.5f;
  std::string out = "out-detect";
  std::string device = "cpu";
  int64_t threads = 0;
};

// The canvas side of the scenes the detector was trained on (data::SceneConfig's).
constexpr int64_t kSide = 64;

// An image file as the model's input [1, 64, 64] in [0, 1], as a Scene without ground truth. A
// file of another size is refused from its header, before a pixel is decoded.
data::Scene read_scene(const std::string& path) {
  const data::Image img = data::read_image(path, kSide, kSide);
  std::vector<float> pixels(static_cast<size_t>(kSide * kSide));
  for (int64_t y = 0; y < kSide; ++y)
    for (int64_t x = 0; x < kSide; ++x) {
      const uint8_t* p = img.at(x, y);
      const float v = img.channels >= 3 ? 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2] : p[0];
      pixels[static_cast<size_t>(y * kSide + x)] = v / 255.0f;
    }
  data::Scene scene;
  scene.image = tensor(std::move(pixels), {1, kSide, kSide});
  return scene;
}

// The detections scoring >= threshold, best first, one line each.
void print_detections(const detr_example::ImageDetections& d, float threshold) {
  const auto& names = data::fashion_mnist_classes();
  std::vector<int64_t> order(static_cast<size_t>(d.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return d.scores[static_cast<size_t>(a)] > d.scores[static_cast<size_t>(b)];
  });
  int64_t shown = 0;
  for (int64_t q : order) {
    if (d.scores[static_cast<size_t>(q)] < threshold) break;
    const metrics::Box b = d.pixel_box(q, 0, static_cast<float>(kSide));
    fmt::print("  {:<12} {:.3f}  {:5.1f} {:5.1f} {:5.1f} {:5.1f}\n",
               names[static_cast<size_t>(b.label)], b.score, b.x0, b.y0, b.x1, b.y1);
    ++shown;
  }
  if (shown == 0) fmt::print("  (no detection scores >= {})\n", threshold);
}

}  // namespace

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);
  Options o;
  CLI::App app{"detect: runs a train_detr checkpoint on Fashion-MNIST scenes or a 64x64 image"};
  cli::show_defaults(app);
  app.add_option("--checkpoint", o.checkpoint, "a train_detr checkpoint");
  app.add_option("--data", o.data, "directory of the Fashion-MNIST IDX files (.gz)");
  app.add_option("--scenes", o.scenes, "held-out t10k scenes to detect in (ignored with --image)")
      ->check(cli::range(int64_t{1}, int64_t{10000}));
  app.add_option("--image", o.image, "a 64x64 PNG or PGM (P5) image to detect in instead");
  app.add_option("--threshold", o.threshold, "smallest score printed and drawn")
      ->check(cli::range(0.0, 1.0));
  app.add_option("--out", o.out, "directory for the pictures")->check(cli::output_directory);
  cli::add_device(app, o.device);
  app.add_option("--threads", o.threads, "CPU threads (0 = OpenMP's default)")
      ->check(cli::range(int64_t{0}, cli::kMaxThreads));
  CLI11_PARSE(app, argc, argv);
  cli::print_config(app);
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const Device device = cli::device_of(o.device);

  // ---- the image given, first: a bad one is refused before the checkpoint is read
  std::vector<data::Scene> scenes;
  std::vector<std::string> pictures;
  if (!o.image.empty()) {
    scenes.push_back(read_scene(o.image));
    pictures.push_back(fmt::format("{}/{}_boxes.png", o.out, fs::path(o.image).stem().string()));
  }

  // ---- the model, from the checkpoint's own config, in eval mode
  LOOM_CHECK(fs::exists(o.checkpoint),
             "detect: there is no checkpoint '{}' (train_detr writes one)", o.checkpoint);
  const models::DETRConfig config =
      models::DETRConfig::from_metadata(nn::read_metadata(o.checkpoint), o.checkpoint);
  LOOM_CHECK(
      config.in_channels == 1 && config.num_classes == 10,
      "detect: '{}' holds a DETR for {} channels and {} classes, not train_detr's one-channel "
      "Fashion-MNIST scenes (10 classes)",
      o.checkpoint, config.in_channels, config.num_classes);
  models::DETR model(config);
  nn::load_checkpoint(o.checkpoint, {{"model", &model}});
  model.to(device);
  model.eval();
  fmt::print("detect: {} from {}\n", config.to_string(), o.checkpoint);

  // ---- without an image: held-out scenes with their ground truth
  std::optional<data::FashionMNIST> t10k;
  if (o.image.empty()) {
    t10k.emplace(o.data, "test", /*normalize=*/false);
    const auto held_out = data::FashionMnistScenes::pytorch_eval(*t10k, o.scenes);
    for (int64_t i = 0; i < o.scenes; ++i) {
      scenes.push_back(held_out.scene(i));
      pictures.push_back(fmt::format("{}/detect_{}.png", o.out, i));
    }
  }
  cli::create_directory(o.out, "--out");

  // ---- detect, print, draw
  NoGradGuard no_grad;
  std::vector<Tensor> images;
  for (const data::Scene& s : scenes) images.push_back(s.image);
  const models::DETROutput out = model.forward(stack(images, 0).to(device));  // (n, 1, 64, 64)
  const auto detections = detr_example::postprocess(out.logits, out.boxes);
  const auto& names = data::fashion_mnist_classes();
  for (size_t i = 0; i < scenes.size(); ++i) {
    const data::Scene& s = scenes[i];
    if (o.image.empty()) {
      fmt::print("scene {}: {} items in truth:", i, s.pixel_boxes.size());
      const std::vector<int64_t> labels = s.labels.to_vector_i64();
      for (size_t k = 0; k < labels.size(); ++k)
        fmt::print(" {} [{} {} {} {}]", names[static_cast<size_t>(labels[k])],
                   s.pixel_boxes[k][0], s.pixel_boxes[k][1], s.pixel_boxes[k][2],
                   s.pixel_boxes[k][3]);
      fmt::print("\n");
      data::write_png(data::to_image(s.image, 0.0f, 1.0f),
                      fmt::format("{}/input_{}.png", o.out, i));
    } else {
      fmt::print("{}:\n", o.image);
    }
    print_detections(detections[i], o.threshold);
    data::write_scene_png(pictures[i], s, detections[i].for_drawing(o.threshold));
  }
  fmt::print("drew {} picture(s) in {}/\n", pictures.size(), o.out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
