"""vit-fmnist and swin-fmnist: examples/train_vision in PyTorch (train.py's docstring has the
recipe): ViT or Swin classifying Fashion-MNIST, test accuracy every epoch and at the end."""
import torch
import torch.nn.functional as F

import models
from data import BLACK, fashion_mnist
from run import TrainingRun, set_lr, update, warmup_cosine_lr


class Batches:
    """Full batches of a fresh permutation each epoch (the last partial batch waits), augmented
    as loom's data::augment_images: pad by P black pixels and crop 28x28 at a random offset,
    then flip horizontally with probability 1/2."""

    def __init__(self, images, labels, batch, crop_padding, flip, gen):
        self.images, self.labels, self.batch = images, labels, batch
        self.padding, self.flip, self.gen = crop_padding, flip, gen
        self.per_epoch = len(images) // batch
        self.order, self.index = None, self.per_epoch

    def next(self):                                        # -> x (B, 1, 28, 28), y (B,)
        if self.index == self.per_epoch:
            self.order, self.index = torch.randperm(len(self.images), generator=self.gen), 0
        idx = self.order[self.index * self.batch:(self.index + 1) * self.batch]
        self.index += 1
        return self.augment(self.images[idx]), self.labels[idx]

    def augment(self, x):
        B, P = x.shape[0], self.padding
        if P > 0:
            padded = F.pad(x, (P, P, P, P), value=BLACK)
            off = torch.randint(0, 2 * P + 1, (B, 2), generator=self.gen)
            x = torch.stack([padded[i, :, r:r + 28, c:c + 28] for i, (r, c) in
                             enumerate(off.tolist())])
        if self.flip:
            flip = torch.rand(B, generator=self.gen) < 0.5
            x[flip] = x[flip].flip(-1)
        return x


def build_model(args):
    if args.task == "swin-fmnist":
        return models.build("swin-fmnist", drop_path=args.drop_path)
    return models.build(args.config)


def adamw(model, args):
    """Decay on matrices and kernels; not on biases, norms, the position embedding, the class
    token or Swin's relative position bias table (timm's no_weight_decay lists, as loom)."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        skip = p.dim() < 2 or name in ("pos", "cls") or \
            name.endswith("relative_position_bias_table")
        (rest if skip else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.999), eps=1e-8)


@torch.no_grad()
def test_accuracy(model, images, labels, chunk=500):
    model.eval()
    correct = sum((model(x).argmax(-1) == y).sum().item()
                  for x, y in zip(images.split(chunk), labels.split(chunk)))
    model.train()
    return correct / len(images)


def planned_steps(args, per_epoch):
    """--steps, else --epochs (loom's run.set_total); --minutes plans them instead."""
    return args.steps if args.steps > 0 else args.epochs * per_epoch


def train(args):
    torch.manual_seed(args.seed)                           # weights, drop-path
    gen = torch.Generator().manual_seed(args.seed)         # batches, augmentation
    train_x, train_y = fashion_mnist("train")
    test_x, test_y = fashion_mnist("t10k")
    if args.test_images > 0:
        test_x, test_y = test_x[:args.test_images], test_y[:args.test_images]
    batches = Batches(train_x, train_y, args.batch, args.crop_padding, args.flip, gen)
    model = build_model(args)
    opt = adamw(model, args)
    print(f"{args.task} | {models.n_params(model)} parameters | {torch.get_num_threads()} threads"
          f" | {len(train_x)} training images ({batches.per_epoch} batches of {args.batch} an "
          f"epoch), {len(test_x)} test images", flush=True)

    run = TrainingRun(planned_steps(args, batches.per_epoch), args.minutes, args.log_every,
                      args.batch, "img/s")
    epochs = lambda steps: steps / batches.per_epoch       # noqa: E731
    step = 0
    while step < run.total:
        lr = warmup_cosine_lr(step + 1, min(args.warmup, run.total), run.total, args.lr,
                              args.min_lr)
        set_lr(opt, lr)
        x, y = batches.next()
        loss = F.cross_entropy(model(x), y, label_smoothing=args.label_smoothing)
        update(opt, loss, model.parameters(), args.grad_clip)
        step += 1
        run.step_done(step, loss.item())
        run.log(step, lr, f" | epoch {epochs(step):.2f}")
        due = step % args.eval_every == 0 if args.eval_every > 0 else \
            step % batches.per_epoch == 0
        if due and step != run.total:
            accuracy, seconds = run.untimed(lambda: test_accuracy(model, test_x, test_y))
            print(f"eval step {step} (epoch {epochs(step):.2f}) | test accuracy "
                  f"{100 * accuracy:.2f}% ({seconds:.1f} s)", flush=True)
    train_s = run.training_seconds()

    accuracy = test_accuracy(model, test_x, test_y)
    print(f"final (step {step}, {epochs(step):.2f} epochs, {train_s:.0f} s training): test "
          f"accuracy {100 * accuracy:.2f}%", flush=True)
    return {"steps": step, "epochs": round(epochs(step), 3), "params": models.n_params(model),
            "batch": args.batch, "train_seconds": round(train_s, 1),
            "images_per_s": round(step * args.batch / train_s, 1),
            "test_accuracy": round(accuracy, 4), "test_images": len(test_x)}
