#!/usr/bin/env bash
# Issue 16, cases 1, 6 and 7 end to end: train_gpt and generate_gpt misused as a careless or
# hostile user would. Every case must end at once with exit status 1 or CLI11's usage error
# (never a signal, a hang, or a late error after training), with a message naming the flag,
# the key or the file.
#   train_gpt_misuse.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
tiny=(--n-layer 1 --n-head 2 --d-model 32 --context 32 --warmup 1
      --eval-windows 4 --sample-tokens 0 --checkpoint-every 0 --threads 2)

source "$(dirname "$0")/expect_lib.sh"  # expect NAME PATTERN COMMAND...; $failures

# 1. A batch larger than the data set (was SIGSEGV): 60 copies of a 115-byte line.
mkdir -p "$work/small"
for i in $(seq 60); do printf '%0114d\n' 0; done >"$work/small/fortunes"
expect "--batch beyond the data" "--batch 100000 is larger than the [0-9]+ training windows" \
  "$bin/train_gpt" "${tiny[@]}" --tokenizer byte --fortunes "$work/small" --batch 100000 --steps 5 --out "$work/b"

# 7. Flags validated before any work.
expect "--threads -4" "--threads: must be an integer in \[0, 4096\]" "$bin/train_gpt" --threads -4 --out "$work/f"
expect "--seed -1" "--seed: must be an integer >= 0" "$bin/train_gpt" --seed -1 --out "$work/f"
expect "--top-k -3" "--top-k: must be an integer >= 0" "$bin/train_gpt" --top-k -3 --out "$work/f"
expect "--temperature -1" "--temperature.*must be a finite number >= 0" \
  "$bin/train_gpt" --temperature -1 --out "$work/f"
expect "--temperature nan" "--temperature.*must be a finite number >= 0" \
  "$bin/train_gpt" --temperature nan --out "$work/f"
expect "--eval-windows 100000000" "--eval-windows: must be an integer in \[1, 100000\], got '100000000'" "$bin/train_gpt" --eval-windows 100000000 --out "$work/f"
expect "generate --temperature nan" "--temperature.*must be a finite number >= 0" \
  "$bin/generate_gpt" --temperature nan --out "$work/f"
expect "generate --top-k -3" "--top-k: must be an integer >= 0" "$bin/generate_gpt" --top-k -3 --out "$work/f"
[ ! -e "$work/f" ] || { echo "FAIL: a rejected flag still created --out"; failures=$((failures + 1)); }

# 6. Resuming from a checkpoint whose metadata does not fit the run.
"$bin/train_gpt" "${tiny[@]}" --tokenizer byte --batch 2 --steps 3 --out "$work/run" >"$work/run.log"
ckpt=$work/run/ckpt.safetensors
expect "--tokenizer bpe --resume on a byte run" "trained with --tokenizer byte, not bpe" \
  "$bin/train_gpt" "${tiny[@]}" --tokenizer bpe --batch 2 --steps 6 --out "$work/run" --resume
expect "--resume beyond --steps" "is at step 3, beyond --steps 2" \
  "$bin/train_gpt" "${tiny[@]}" --tokenizer byte --batch 2 --steps 2 --out "$work/run" --resume

# Rewrites one metadata value of the checkpoint (the header is re-padded; data unchanged).
set_meta() {
  python3 - "$ckpt" "$1" "$2" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1:]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header["__metadata__"][key] = value
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
}
cp "$ckpt" "$work/good.safetensors"
set_meta step abc
expect "\"step\":\"abc\"" "\"step\" is 'abc', not a number" \
  "$bin/train_gpt" "${tiny[@]}" --tokenizer byte --batch 2 --steps 6 --out "$work/run" --resume
cp "$work/good.safetensors" "$ckpt"
set_meta batch_index 99999999999
expect "\"batch_index\":\"99999999999\"" "batch_index 99999999999, but an epoch has [0-9]+ batches" \
  "$bin/train_gpt" "${tiny[@]}" --tokenizer byte --batch 2 --steps 6 --out "$work/run" --resume
cmp -s "$ckpt" "$work/good.safetensors" && { echo "FAIL: set_meta changed nothing"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "train_gpt / generate_gpt misuse: every case rejected cleanly"
