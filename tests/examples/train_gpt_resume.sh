#!/usr/bin/env bash
# train_gpt end to end on the fortunes database, in seconds: a tiny model trained for 12 steps
# in one go, and the same run stopped after step 6 (--stop-at) and continued (--resume), must
# print the same losses for steps 8-12, the same final validation loss and the same greedy
# sample; generate_gpt then completes a prompt from the checkpoint, with and without the KV
# cache, identically.
#   train_gpt_resume.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
flags=(--n-layer 1 --n-head 2 --d-model 32 --context 32 --tokenizer bpe --bpe-vocab 300
       --steps 12 --batch 4 --warmup 2 --log-every 2 --eval-every 6 --eval-windows 8
       --checkpoint-every 0 --dropout 0.1 --sample-tokens 24 --threads 2)

"$bin/train_gpt" "${flags[@]}" --out "$work/whole" >"$work/whole.log"
"$bin/train_gpt" "${flags[@]}" --out "$work/split" --stop-at 6 >"$work/first.log"
"$bin/train_gpt" "${flags[@]}" --out "$work/split" --resume >"$work/second.log"

grep -q "stopped at step 6" "$work/first.log" || { echo "FAIL: --stop-at 6 did not stop"; exit 1; }
grep -q "resumed from" "$work/second.log" || { echo "FAIL: --resume did not resume"; exit 1; }
# Step lines after the resume point: "step     8/12 | loss 5.1234 | ..." (loss only: the
# throughput and ETA differ).
steps() { grep -oE 'step +(8|10|12)/12 \| loss [0-9.]+' "$1"; }
# The final report without its wall time, and everything after it (the samples).
final() { sed -n '/^final/,$p' "$1" | sed -E 's/\(step ([0-9]+), [^)]*\)/(step \1)/; /^saved /d'; }
diff <(steps "$work/whole.log") <(steps "$work/second.log") ||
  { echo "FAIL: losses after the resume differ from the uninterrupted run"; exit 1; }
[ "$(steps "$work/whole.log" | wc -l)" -eq 3 ] || { echo "FAIL: expected 3 step lines"; exit 1; }
diff <(final "$work/whole.log") <(final "$work/second.log") ||
  { echo "FAIL: final validation or samples differ after the resume"; exit 1; }

# The completion without generate_gpt's timing line ("--- 16 tokens in 0.01 s ...").
complete() {
  "$bin/generate_gpt" --out "$work/split" --prompt "The meaning" --tokens 16 --temperature 0 "$@" |
    grep -v '^--- .* tokens in '
}
with_cache=$(complete)
no_cache=$(complete --no-cache)
[ -n "$with_cache" ] && [ "$with_cache" = "$no_cache" ] ||
  { echo "FAIL: generate_gpt with and without the KV cache differ"; exit 1; }
echo "train_gpt resume and generate_gpt: ok"
echo "$with_cache"
