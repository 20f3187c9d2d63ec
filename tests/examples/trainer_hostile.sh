#!/usr/bin/env bash
# Issue 40 ("hostile input, round 2") end to end, in seconds, on data written here: what
# nn::TrainingRun and the trainers' checks promise (docs/failure_contract.md, "Training runs").
#   - a finished --minutes run resumed with --steps 0 says "nothing to do" and leaves its
#     checkpoint as it was (it ran for ever, saving an earlier model over the finished one);
#   - a resume that changes the data (--data) or the length (--epochs) is refused, naming the
#     flag; another trainer's checkpoint is refused naming the model it holds;
#   - a loss that diverges (--lr 1e30) ends the run with an error naming the step whose loss is
#     not finite (no "final" result); --detect-anomaly names the op;
#   - a test split of 32x32 images beside 28x28 training images, and a dictionary with a byte
#     that is not UTF-8, are refused before the first step, naming the file (and the offset).
#   trainer_hostile.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# run NAME COMMAND...: runs it (at most 60 s), its output in $work/NAME.log; $status its exit.
run() {
  local name=$1
  shift
  status=0
  timeout 60 "$@" >"$work/$name.log" 2>&1 || status=$?
  [ "$status" -ne 124 ] || fail "$name ran for 60 s"
}

# ---- Fashion-MNIST-shaped data: 64 training and 16 test images of 28x28, and a test split of
# 32x32 images beside the same training split.
python3 - "$work" <<'PY'
import gzip, os, struct, sys
def split(directory, prefix, n, side):
    os.makedirs(directory, exist_ok=True)
    pixels = bytes((7 * i + k) % 256 for i in range(n) for k in range(side * side))
    with gzip.open(f"{directory}/{prefix}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, side, side) + pixels)
    with gzip.open(f"{directory}/{prefix}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 10 for i in range(n)))
work = sys.argv[1]
for d in ("fmnist", "fmnist2", "fmnist32"):
    split(f"{work}/{d}", "train", 64, 28)
split(f"{work}/fmnist", "t10k", 16, 28)
split(f"{work}/fmnist2", "t10k", 16, 28)
split(f"{work}/fmnist32", "t10k", 16, 32)
PY
vision=(--model vit-tiny-fmnist --batch 4 --warmup 0 --test-images 8 --attention-images 0
        --log-every 1 --threads 1)

# ---- 1. a finished --minutes run, resumed with --steps 0: nothing to do, checkpoint untouched
run planned "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --steps 0 --minutes 0.002 \
  --checkpoint-every 10 --out "$work/planned"
[ "$status" -eq 0 ] || { cat "$work/planned.log"; fail "the --minutes run failed"; }
grep -q "^planned steps: " "$work/planned.log" || fail "the --minutes run planned nothing"
cp "$work/planned/ckpt.safetensors" "$work/finished.safetensors"
run again "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --steps 0 --minutes 0.002 \
  --checkpoint-every 10 --out "$work/planned" --resume
[ "$status" -eq 1 ] || fail "a resume of a finished run exited $status, not 1"
grep -q "of its [0-9]* steps: nothing to do" "$work/again.log" || fail "no 'nothing to do'"
cmp -s "$work/planned/ckpt.safetensors" "$work/finished.safetensors" ||
  fail "the resume changed the finished run's checkpoint"
echo "ok: $(grep -o "train_vision: .*nothing to do" "$work/again.log")"

# ---- 10. a resume with other data or another length is refused; so is another trainer's file
run stopped "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --epochs 1 --stop-at 3 \
  --out "$work/stopped"
[ "$status" -eq 0 ] || { cat "$work/stopped.log"; fail "the --stop-at run failed"; }
run otherdata "$bin/train_vision" "${vision[@]}" --data "$work/fmnist2" --epochs 1 \
  --out "$work/stopped" --resume
[ "$status" -eq 1 ] && grep -q "was trained with --data $work/fmnist, this run has --data" \
  "$work/otherdata.log" || fail "a resume with another --data was not refused by name"
run otherlength "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --epochs 2 \
  --out "$work/stopped" --resume
[ "$status" -eq 1 ] && grep -q "was trained with --epochs 1, this run has --epochs 2" \
  "$work/otherlength.log" || fail "a resume with another --epochs was not refused by name"
mkdir -p "$work/gpt"
cp "$work/stopped/ckpt.safetensors" "$work/gpt/ckpt.safetensors"
run gpt "$bin/train_gpt" --out "$work/gpt" --resume
[ "$status" -eq 1 ] && grep -q "was written by train_vision and holds a vit model" \
  "$work/gpt.log" || fail "train_gpt did not name the model of train_vision's checkpoint"
echo "ok: $(grep -o "train_gpt: .*" "$work/gpt.log")"

# ---- 2. a diverging loss ends the run at the step whose loss is not finite
run diverged "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --steps 6 --lr 1e30 \
  --out "$work/diverged"
[ "$status" -eq 1 ] || fail "a diverging run exited $status, not 1"
bad=$(grep -oE "the loss of step [0-9]+ is (nan|inf|-inf)" "$work/diverged.log" |
      grep -oE "[0-9]+" | head -1) || fail "no error naming the step of the non-finite loss"
! grep -qE "^step +$bad/6 " "$work/diverged.log" || fail "step $bad's progress line was printed"
[ "$bad" -eq 1 ] || grep -qE "^step +$((bad - 1))/6 \| loss [0-9]" "$work/diverged.log" ||
  fail "the step before $bad had no finite progress line"
! grep -q "^final" "$work/diverged.log" || fail "a diverged run reported a final result"
run anomaly "$bin/train_vision" "${vision[@]}" --data "$work/fmnist" --steps 6 --lr 1e30 \
  --detect-anomaly --out "$work/anomaly"
[ "$status" -eq 1 ] && grep -q "anomaly detected: the backward of '" "$work/anomaly.log" ||
  fail "--detect-anomaly did not name the op"
echo "ok: $(grep -oE "the loss of step .* is [a-z-]+" "$work/diverged.log"); with" \
  "--detect-anomaly: $(grep -oE "the backward of '[^']*'" "$work/anomaly.log")"

# ---- 5. bad data is refused before the first step
run size "$bin/train_vision" "${vision[@]}" --data "$work/fmnist32" --steps 4 --out "$work/size"
[ "$status" -eq 1 ] || fail "32x32 test images beside 28x28 training images: exit $status"
grep -q "fmnist32/t10k-images-idx3-ubyte.gz' holds 32x32 images, not the 28x28" \
  "$work/size.log" || fail "the size error does not name the t10k file and the sizes"
! grep -qE "^step " "$work/size.log" || fail "the run trained before refusing its test split"

# A dictd dictionary (headword TAB offset TAB length, in dictd's base-64) whose body has 0xFF.
bad_offset=$(python3 - "$work/dict" <<'PY'
import sys
digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def b64(n):
    s = digits[n % 64]
    while n >= 64:
        n //= 64
        s = digits[n % 64] + s
    return s
entries = [("house", b'house /x/\nHaus <neut>\n      "the house"  - das Haus\n\n'),
           ("tree", b'tree /x/\nBaum\n      "the tree"  - der Baum\xff\n\n')]
body, index = b"", ""
for word, text in entries:
    index += f"{word}\t{b64(len(body))}\t{b64(len(text))}\n"
    body += text
open(sys.argv[1] + ".dict", "wb").write(body)
open(sys.argv[1] + ".index", "w").write(index)
print(body.index(b"\xff"))
PY
)
run utf8 "$bin/train_translate" --dict "$work/dict" --steps 4 --threads 1 --out "$work/translate"
[ "$status" -eq 1 ] || fail "a dictionary with byte 0xFF: exit $status"
grep -q "dict.dict' byte $bad_offset (decompressed), in the definition of 'tree': 0xff is not" \
  "$work/utf8.log" || fail "the UTF-8 error does not name the file, the offset and the entry"
! grep -qE "^step " "$work/utf8.log" || fail "the run trained before refusing its dictionary"
echo "ok: $(grep -oE "train_translate: .*UTF-8" "$work/utf8.log")"
echo "trainer_hostile: ok"
