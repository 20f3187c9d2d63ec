"""cnn-fmnist: examples/train_cnn in PyTorch. The same CNN (two conv 3x3 + batch norm + ReLU +
2x2 max-pool blocks, then Linear(3136, 128), ReLU, Linear(128, 10)), the same data (Fashion-MNIST
pixels in [0, 1]: pad 2 black pixels and crop 28x28 at random, flip with probability 1/2, then
normalise; the last partial batch of an epoch dropped), AdamW (weight decay 5e-4 on every
parameter) under OneCycleLR (cos, pct_start 0.3, the lr only: cycle_momentum off, as loom's),
test accuracy after every epoch. With --minutes the steps are planned once at step 20 from its
speed and the schedule is rebuilt over them, as train_cnn does."""
import time

import torch
import torch.nn.functional as F
from torch import nn

from data import FMNIST_MEAN, FMNIST_STD, fashion_mnist_raw


def make_cnn():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*block(1, 32), *block(32, 64), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def augment(x, gen):
    """RandomCrop(28, padding=2) then RandomHorizontalFlip(), each image its own draws."""
    B = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2), value=0.0)
    off = torch.randint(0, 5, (B, 2), generator=gen)
    x = torch.stack([padded[i, :, r:r + 28, c:c + 28] for i, (r, c) in enumerate(off.tolist())])
    flip = torch.rand(B, generator=gen) < 0.5
    x[flip] = x[flip].flip(-1)
    return x


def normalize(x):
    return (x - FMNIST_MEAN) / FMNIST_STD


@torch.no_grad()
def test_accuracy(model, images, labels, chunk=500):
    model.eval()
    correct = sum((model(normalize(x)).argmax(-1) == y).sum().item()
                  for x, y in zip(images.split(chunk), labels.split(chunk)))
    model.train()
    return correct / len(images)


def one_cycle(opt, lr, total):
    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total,
                                               cycle_momentum=False)


def train(args):
    torch.manual_seed(args.seed)                           # weights
    gen = torch.Generator().manual_seed(args.seed)         # batch order, augmentation
    train_x, train_y = fashion_mnist_raw("train")
    test_x, test_y = fashion_mnist_raw("t10k")
    train_x, test_x = train_x[:, None], test_x[:, None]   # (N, 1, 28, 28) in [0, 1]
    train_y, test_y = torch.from_numpy(train_y), torch.from_numpy(test_y)
    per_epoch = len(train_x) // args.batch
    model = make_cnn()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    total = args.steps if args.steps > 0 else args.epochs * per_epoch
    sched = one_cycle(opt, args.lr, total)
    print(f"cnn-fmnist | {sum(p.numel() for p in model.parameters())} parameters | "
          f"{torch.get_num_threads()} threads | {per_epoch} batches of {args.batch} an epoch",
          flush=True)

    start, eval_s, step, accuracy, window = time.perf_counter(), 0.0, 0, 0.0, []
    while step < total:
        order = torch.randperm(len(train_x), generator=gen)
        for b in range(per_epoch):
            idx = order[b * args.batch:(b + 1) * args.batch]
            x = normalize(augment(train_x[idx], gen))
            loss = F.cross_entropy(model(x), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            window.append(loss.item())
            if step == 20 and args.minutes > 0:          # plan the steps, rebuild the schedule
                total = int(args.minutes * 60 / (time.perf_counter() - start) * 20)
                sched = one_cycle(opt, args.lr, total)
                for _ in range(20):
                    sched.step()
            if step % args.log_every == 0 or step == total:
                print(f"step {step}/{total} | loss {sum(window) / len(window):.4f} | "
                      f"lr {sched.get_last_lr()[0]:.2e}", flush=True)
                window = []
            if step == total:
                break
        t = time.perf_counter()
        accuracy = test_accuracy(model, test_x, test_y)
        eval_s += time.perf_counter() - t
        print(f"epoch {step / per_epoch:.2f}: test accuracy {100 * accuracy:.2f}%", flush=True)
    train_s = time.perf_counter() - start - eval_s
    return {"steps": step, "epochs": round(step / per_epoch, 3), "batch": args.batch,
            "train_seconds": round(train_s, 1),
            "images_per_s": round(step * args.batch / train_s, 1),
            "test_accuracy": round(accuracy, 4), "test_images": len(test_x)}
