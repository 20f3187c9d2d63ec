#!/usr/bin/env bash
# Every program refuses hostile flags, model sizes and files at startup, with exit status 1 or
# CLI11's usage error and a message naming the flag or the file --
# never std::bad_alloc, a filesystem_error, a signal, a hang or a late error after the data.
# The data directories given do not exist, so a check that came after loading the data would
# fail with another message than the one expected.
#   hostile_flags.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
none=$work/no-such-dir

source "$(dirname "$0")/expect_lib.sh"  # expect NAME PATTERN COMMAND...; $failures

gpt=("$bin/train_gpt" --fortunes "$none" --out "$work/o")
bert=("$bin/train_bert" --fortunes "$none" --out "$work/o")
detr=("$bin/train_detr" --data "$none" --out "$work/o")
vision=("$bin/train_vision" --data "$none" --out "$work/o")

# 7. NaN, infinities, out-of-range and oversized numbers, refused by the shared validators.
expect "detect --threshold nan" "--threshold: must be a number in \[0, 1\], got 'nan'" \
  "$bin/detect" --threshold nan --checkpoint "$none/ckpt.safetensors"
expect "train_detr --draw-threshold nan" "--draw-threshold: must be a number in \[0, 1\]" \
  "${detr[@]}" --draw-threshold nan
expect "train_vision --grad-clip nan" "--grad-clip: must be a finite number >= 0, got 'nan'" \
  "${vision[@]}" --grad-clip nan
expect "train_vision --drop-path nan" "--drop-path: must be a number in \[-1, 0.99\]" \
  "${vision[@]}" --drop-path nan
expect "generate_gpt --top-p 0" "--top-p: must be a number in \(0, 1\], got '0'" \
  "$bin/generate_gpt" --top-p 0 --out "$none"
expect "generate_gpt --top-p nan" "--top-p: must be a number in \(0, 1\], got 'nan'" \
  "$bin/generate_gpt" --top-p nan --out "$none"
expect "train_gpt --steps 99999999999999999999" "--steps: must be an integer > 0" \
  "${gpt[@]}" --steps 99999999999999999999
expect "train_gpt --lr inf" "--lr: must be a number > 0, got 'inf'" "${gpt[@]}" --lr inf
expect "train_gpt --lr 0" "--lr: must be a number > 0, got '0'" "${gpt[@]}" --lr 0
expect "train_gpt --weight-decay nan" "--weight-decay: must be a finite number >= 0" \
  "${gpt[@]}" --weight-decay nan
expect "train_gpt --beta2 1" "--beta2: must be a number in \[0, 1\)" "${gpt[@]}" --beta2 1
expect "train_gpt --min-lr above --lr" "--min-lr 0.1 is above --lr 0.01" \
  "${gpt[@]}" --lr 0.01 --min-lr 0.1
expect "train_gpt --threads 4294967297" "--threads: must be an integer in \[0, 4096\]" \
  "${gpt[@]}" --threads 4294967297
expect "train_vision --crop-padding 1000000" "--crop-padding: must be an integer in \[0, 27\]" \
  "${vision[@]}" --crop-padding 1000000
expect "train_vision --epochs 1e30" "--epochs: must be an integer in \[0, 1000000\]" \
  "${vision[@]}" --epochs 1e30
expect "train_translate --dropout nan" "--dropout: must be a number in \[0, 0.9\]" \
  "$bin/train_translate" --dict "$none/x" --out "$work/o" --dropout nan
expect "finetune_bert --warmup nan" "--warmup: must be an integer >= 0, got 'nan'" \
  "$bin/finetune_bert" --pretrained "$none" --warmup nan
expect "fill_mask --top nan" "--top: must be an integer in \[1, 100\]" \
  "$bin/fill_mask" --pretrained "$none" --top nan
expect "translate --beam 1000000000" "--beam: must be an integer in \[1, 1000\]" \
  "$bin/translate" --out "$none" --beam 1000000000 --text x

# 6. Model sizes and --out, before any data is read.
expect "train_gpt --n-layer 100000000" \
  "model flags --n-layer 100000000: GPTConfig: .* over loom's budget" \
  "${gpt[@]}" --n-layer 100000000
expect "train_bert --layers 99999999999999999999" "--layers: must be an integer >= 0" \
  "${bert[@]}" --layers 99999999999999999999
expect "train_bert --layers 100000000" "model flags --layers 100000000: BertConfig: .* budget" \
  "${bert[@]}" --layers 100000000
expect "train_detr --batch 1000000000" "--batch: must be an integer in \[1, 4096\]" \
  "${detr[@]}" --batch 1000000000
touch "$work/a-file"
expect "train_gpt --out a file" "--out: '.*a-file' is not a directory" \
  "$bin/train_gpt" --fortunes "$none" --out "$work/a-file"
expect "detect --out under a file" "--out: '.*a-file' is not a directory" \
  "$bin/detect" --checkpoint "$none/ckpt.safetensors" --out "$work/a-file/pictures"

# A checkpoint whose metadata alone is hostile (no tensor is needed: it is refused first).
write_metadata() {  # PATH KEY=VALUE...: a safetensors file holding no tensor, only metadata
  python3 - "$@" <<'PY'
import json, struct, sys
meta = dict(kv.split("=", 1) for kv in sys.argv[2:])
text = json.dumps({"__metadata__": meta}, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text)
PY
}
mkdir -p "$work/gpt"
gpt_meta=(model_type=gpt vocab_size=256 context=128 n_head=4 d_model=256 dropout=0)
write_metadata "$work/gpt/ckpt.safetensors" "${gpt_meta[@]}" n_layer=100000000
printf 'loom-byte-tokenizer 1\n' >"$work/gpt/tokenizer.txt"
expect "generate_gpt: \"n_layer\":\"100000000\"" \
  "gpt/ckpt.safetensors.*GPTConfig: .* over loom's budget" "$bin/generate_gpt" --out "$work/gpt"

# 8. A tokenizer that does not fit the model, refused before anything is printed.
write_metadata "$work/gpt/ckpt.safetensors" "${gpt_meta[@]/vocab_size=256/vocab_size=300}" \
  n_layer=1
both_files="tokenizer '.*gpt/tokenizer.txt' has 256 tokens but the model "
both_files+="'.*gpt/ckpt.safetensors' has a vocabulary of 300"
expect "generate_gpt: byte tokenizer, 300-token model" "$both_files" \
  "$bin/generate_gpt" --out "$work/gpt"
if grep -q "Studying" "$work/out.txt"; then
  echo "FAIL: generate_gpt printed the prompt before refusing the tokenizer"
  failures=$((failures + 1))
fi

# 9. An image of the wrong size is refused from its header, before the checkpoint is read.
python3 - "$work/big.png" <<'PY'
import struct, sys
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + b"\0\0\0\0"
ihdr = struct.pack(">II", 16384, 16384) + b"\x08\x00\x00\x00\x00"
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"x" * 1000)
open(sys.argv[1], "wb").write(png + chunk(b"IEND", b""))
PY
expect "detect --image 16384x16384" "big.png' is 16384 x 16384, not the 64 x 64 expected" \
  "$bin/detect" --image "$work/big.png" --checkpoint "$none/ckpt.safetensors" --out "$work/o"

if [ -e "$work/o" ]; then
  echo "FAIL: a refused run still created --out"
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "hostile flags, sizes and files: every case refused at startup, naming the flag or file"
