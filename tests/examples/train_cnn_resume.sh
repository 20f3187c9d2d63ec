#!/usr/bin/env bash
# train_cnn end to end on a slice of Fashion-MNIST, in seconds: two epochs in one go (no loader
# workers), and the same run stopped after the first epoch (--stop-after 1) and continued
# (--resume) with two workers, must print the same test accuracy after every epoch: the
# checkpoint holds the model, the optimizer and the schedule, and the DataLoader gives the same
# augmented batches for any number of workers.
#   train_cnn_resume.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "SKIP: dataset-fashion-mnist is not installed"; exit 0
fi
flags=(--epochs 2 --limit 640 --batch 64 --threads 2 --seed 3)
"$bin/train_cnn" --help | grep -q -- "--resume" || { echo "FAIL: --help lacks --resume"; exit 1; }
"$bin/train_cnn" "${flags[@]}" --workers 0 --out "$work/whole" >"$work/whole.log"
"$bin/train_cnn" "${flags[@]}" --workers 2 --out "$work/split" --stop-after 1 >"$work/first.log"
"$bin/train_cnn" "${flags[@]}" --workers 2 --out "$work/split" --resume >"$work/second.log"
grep -q "stopped at step 10 of 20" "$work/first.log" || { echo "FAIL: no stop"; exit 1; }
grep -q "resumed from .* at step 10 (epoch 1)" "$work/second.log" ||
  { echo "FAIL: no resume"; exit 1; }
grep -qE "^final \(step 20, 2.00 epochs, .* training\): test accuracy" "$work/second.log" ||
  { echo "FAIL: no final line"; exit 1; }
accuracies() { grep -E '^epoch [0-9]+: test accuracy' "$@" | sed 's/^[^:]*log://'; }
[ "$(accuracies "$work/whole.log")" = "$(accuracies "$work/first.log" "$work/second.log")" ] ||
  { echo "FAIL: the test accuracies of the resumed run differ"; cat "$work"/*.log; exit 1; }
echo "train_cnn: resume exact; $(accuracies "$work/whole.log" | tail -1)"
