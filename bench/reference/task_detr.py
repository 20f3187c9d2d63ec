"""detr-fmnist: examples/train_detr in PyTorch (train.py's docstring has the recipe): DETR on
multi-object Fashion-MNIST scenes, COCO AP on held-out scenes."""
import torch

import models
from coco_ap import check_coco_ap, coco_ap
from data import fashion_mnist_raw
from run import TrainingRun, update, warmup_cosine_lr
from scenes import SCENE, eval_scenes, ground_truth, overfit_scene, scene_batch, training_scene

CLASSES = 10


def resolve(args):
    """train_detr's rules: 10 minutes when neither --steps nor --minutes; --overfit-one trains
    batch 1 at a constant lr (1e-4 unless --lr) with no warm-up."""
    if args.steps == 0 and args.minutes == 0:
        args.minutes = 10.0
    if args.overfit_one:
        args.batch, args.warmup = 1, 0
        args.lr = 1e-4 if args.lr is None else args.lr
        args.backbone_lr = args.min_lr = args.lr
    elif args.lr is None:
        args.lr = 5e-4


def adamw(model, args):
    """Two groups: the CNN backbone at --backbone-lr, the rest at --lr; decay on everything."""
    backbone = [p for n, p in model.named_parameters() if n.startswith("backbone.")]
    rest = [p for n, p in model.named_parameters() if not n.startswith("backbone.")]
    return torch.optim.AdamW([{"params": rest}, {"params": backbone}], lr=args.lr,
                             betas=(0.9, 0.999), eps=1e-8, weight_decay=args.weight_decay)


def set_loss(model, criterion, imgs, targets):
    """DETR's set loss on every decoder layer, summed (auxiliary losses) -> (loss, the last
    layer's unweighted terms ce, L1, GIoU)."""
    logits, boxes = model(imgs)                            # (L, B, Q, C + 1), (L, B, Q, 4)
    num_boxes = float(max(sum(len(t["labels"]) for t in targets), 1))
    loss, last = 0.0, None
    for i in range(logits.shape[0]):
        last = criterion(logits[i], boxes[i], targets, num_boxes)
        loss = loss + criterion.total(last)
    return loss, [last[k].item() for k in ("loss_ce", "loss_bbox", "loss_giou")]


@torch.no_grad()
def detect(model, imgs, chunk=200):
    """DETR's PostProcess on the last decoder layer: softmax, no-object dropped, score = the
    best class probability, boxes in pixels; every query a detection. -> per image
    (x0y0x1y1 (Q, 4) float64, scores (Q,), labels (Q,))."""
    model.eval()
    logits, boxes = zip(*(model(x) for x in imgs.split(chunk)))
    model.train()
    prob = torch.cat([lg[-1] for lg in logits]).softmax(-1)            # (N, Q, C + 1)
    scores, labels = prob[..., :-1].max(-1)
    xyxy = models.box_cxcywh_to_xyxy(torch.cat([b[-1] for b in boxes])) * SCENE
    return [(xyxy[i].double().numpy(), scores[i].double().numpy(), labels[i].numpy())
            for i in range(len(imgs))]


def format_ap(ap):
    return f"AP {ap['ap']:.4f} | AP50 {ap['ap50']:.4f} | AP75 {ap['ap75']:.4f}"


def train(args):
    resolve(args)
    check_coco_ap()
    train_x, train_y = fashion_mnist_raw("train")
    if args.overfit_one:
        held_out = [overfit_scene(train_x, train_y, args.seed)]    # evaluated on what it learns
        args.eval_scenes = args.curve_scenes = 1
        next_scenes = lambda first, count: held_out               # noqa: E731
    else:
        held_out = eval_scenes(*fashion_mnist_raw("t10k"), count=args.eval_scenes)
        next_scenes = lambda first, count: [                      # noqa: E731
            training_scene(train_x, train_y, args.seed, i) for i in range(first, first + count)]
    eval_imgs, eval_gts = scene_batch(held_out)[0], ground_truth(held_out)
    torch.manual_seed(args.seed)                           # weights, dropout
    model = models.build("detr-fmnist", p=args.dropout)    # BatchNorm batch statistics
    criterion = models.SetCriterion(CLASSES)
    opt = adamw(model, args)
    print(f"detr-fmnist | {models.n_params(model)} parameters | {torch.get_num_threads()} threads"
          f" | batch {args.batch} | {len(held_out)} held-out scenes", flush=True)

    def average_precision(count):
        return coco_ap(detect(model, eval_imgs[:count]), eval_gts[:count])

    run = TrainingRun(args.steps, args.minutes, args.log_every, args.batch, "img/s")
    step, window = 0, []
    while step < run.total:
        warmup = min(args.warmup, run.total)
        lr = warmup_cosine_lr(step + 1, warmup, run.total, args.lr, args.min_lr)
        opt.param_groups[0]["lr"] = lr
        opt.param_groups[1]["lr"] = warmup_cosine_lr(step + 1, warmup, run.total,
                                                     args.backbone_lr, args.min_lr)
        imgs, targets = scene_batch(next_scenes(step * args.batch, args.batch))
        loss, terms = set_loss(model, criterion, imgs, targets)
        update(opt, loss, model.parameters(), args.grad_clip)
        step += 1
        window.append(terms)
        run.step_done(step, loss.item())
        if step % args.log_every == 0 or step == run.total:
            ce, l1, giou = (sum(t[k] for t in window) / len(window) for k in range(3))
            run.log(step, lr, f" | ce {ce:.4f} L1 {l1:.4f} GIoU {giou:.4f}")
            window = []
        if args.eval_every > 0 and step % args.eval_every == 0 and step != run.total:
            ap, seconds = run.untimed(lambda: average_precision(args.curve_scenes))
            print(f"eval step {step} | {args.curve_scenes} held-out scenes | {format_ap(ap)} "
                  f"({seconds:.1f} s)", flush=True)
    train_s = run.training_seconds()

    ap = average_precision(args.eval_scenes)
    what = "training scene" if args.overfit_one else "held-out scenes"
    print(f"final (step {step}, {train_s:.0f} s training) on {args.eval_scenes} {what}: "
          f"{format_ap(ap)}", flush=True)
    result = {"steps": step, "params": models.n_params(model), "batch": args.batch,
              "lr": args.lr, "backbone_lr": args.backbone_lr, "warmup": args.warmup,
              "train_seconds": round(train_s, 1), "images_per_s": round(step * args.batch /
                                                                        train_s, 1),
              "eval_scenes": args.eval_scenes, "minutes": args.minutes}
    result.update({k: round(v, 4) for k, v in ap.items()})
    return result
