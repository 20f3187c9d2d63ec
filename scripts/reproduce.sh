#!/usr/bin/env bash
# Quality in fixed time, loom beside PyTorch: runs loom's trainer for TASK and its PyTorch twin
# (bench/reference/train.py) on the same model, data and recipe for the same minutes, and prints
# both results in one table.
#
#   bash scripts/reproduce.sh TASK --minutes M [--side-by-side] [--threads T] [--seed S]
#                             [-- recipe flags for both sides]
#
# TASK: gpt-fortunes | vit-tiny | vit-fmnist | swin-fmnist | cnn-fmnist | detr-fmnist |
#       translation | bert
# By default the two runs go one after the other, each with T threads (default: every core). With
# --side-by-side they run at the same time with one thread each, the fair form on a noisy
# machine of 2 cores. Flags after `--` go to both trainers unchanged (the recipe flags have the
# same names and defaults on both sides: --batch, --lr, --warmup, --label-smoothing,
# --crop-padding, ...; for translation and bert also to build/bench/dump_data, which writes the
# data the twin trains on from the flags that shape it). gpt-fortunes is byte-level on both
# sides. Each run's output goes to out-reproduce/TASK-{loom,pytorch}.log, loom's checkpoint and
# curves to out-reproduce/TASK-loom/. On a CPU that OpenBLAS does not know (it then falls back to
# its SSE3 kernels, and PyTorch's products with it), OPENBLAS_CORETYPE is set for both sides to
# the family the CPU can run (scripts/openblas_core.py); where the environment holds OpenBLAS to
# its AVX2 kernels on a CPU with AVX-512, the script says so (PyTorch's side is then slower than
# the machine allows; set OPENBLAS_CORETYPE to the wider family it names).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit "${1:-0}"; }
[ $# -ge 1 ] || usage 2
case $1 in -h|--help) usage 0 ;; esac
task=$1
shift
minutes="" side=0 threads=$(nproc) seed=0 recipe=()
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --side-by-side) side=1; shift ;;
    --threads) threads=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --) shift; recipe=("$@"); break ;;
    *) echo "reproduce.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$minutes" ] || { echo "reproduce.sh: --minutes M is required" >&2; exit 2; }

# TASK -> loom's trainer with its model flag, and the PyTorch twin's task with its own. The
# translation and BERT twins read their data from build/bench/dump_data TASK (tokenized pairs,
# batches, masking; the initial weights for translation), which computes it as loom's trainer
# does from the same flags and seed; the twin refuses data flags that differ from the dump's.
dump=""
case $task in
  gpt-fortunes) loom=(train_gpt --tokenizer byte) twin=(gpt-fortunes) ;;
  vit-tiny)     loom=(train_vision --model vit-tiny-fmnist) twin=(vit-fmnist --config vit-tiny) ;;
  vit-fmnist)   loom=(train_vision --model vit-fmnist) twin=(vit-fmnist --config vit-fmnist) ;;
  swin-fmnist)  loom=(train_vision --model swin-fmnist) twin=(swin-fmnist) ;;
  # train_cnn augments in the training loop here (no DataLoader workers), as its twin does.
  cnn-fmnist)   loom=(train_cnn --workers 0) twin=(cnn-fmnist) ;;
  detr-fmnist)  loom=(train_detr) twin=(detr-fmnist) ;;
  translation)  loom=(train_translate) twin=(translation) dump=translation ;;
  bert)         loom=(train_bert) twin=(bert) dump=bert ;;
  *) echo "reproduce.sh: unknown task '$task' (see --help)" >&2; exit 2 ;;
esac

bash scripts/install_deps.sh --bench
LOOM_TARGETS="${loom[0]}${dump:+ dump_data}" bash scripts/build.sh
out=out-reproduce
mkdir -p "$out"
rm -rf "${out:?}/$task-loom"
[ $side = 1 ] && threads=1
coretype=$(/usr/bin/python3 scripts/openblas_core.py)
if [ -n "$coretype" ]; then
  export OPENBLAS_CORETYPE=$coretype
  echo "reproduce: OpenBLAS does not know this CPU: OPENBLAS_CORETYPE=$coretype for both sides"
fi
wider=$(/usr/bin/python3 scripts/openblas_core.py --narrower)
if [ -n "$wider" ]; then
  echo "reproduce: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE holds PyTorch's products to AVX2; this" \
    "CPU runs OpenBLAS's $wider kernels (OPENBLAS_CORETYPE=$wider bash scripts/reproduce.sh ...)"
fi
common=(--minutes "$minutes" --threads "$threads" --seed "$seed")
loom_cmd=(build/examples/"${loom[@]}" "${common[@]}" --out "$out/$task-loom" "${recipe[@]}")
twin_cmd=(/usr/bin/python3 bench/reference/train.py "${twin[@]}" "${common[@]}" "${recipe[@]}")
if [ -n "$dump" ]; then
  rm -rf "${out:?}/$task-data"
  build/bench/dump_data "$dump" --seed "$seed" --out "$out/$task-data" "${recipe[@]}" \
    >"$out/$task-dump.log"
  twin_cmd+=(--data-dir "$out/$task-data")
fi

echo "reproduce: $task, $minutes minutes, $threads thread(s) each, $(
  [ $side = 1 ] && echo side by side || echo one after the other)"
echo "  loom:    ${loom_cmd[*]}"
echo "  PyTorch: ${twin_cmd[*]}"
start=$(date +%s)
if [ $side = 1 ]; then
  "${loom_cmd[@]}" >"$out/$task-loom.log" 2>&1 & loom_pid=$!
  "${twin_cmd[@]}" >"$out/$task-pytorch.log" 2>&1 & twin_pid=$!
  loom_rc=0 twin_rc=0
  wait $loom_pid || loom_rc=$?
  wait $twin_pid || twin_rc=$?
else
  loom_rc=0 twin_rc=0
  "${loom_cmd[@]}" >"$out/$task-loom.log" 2>&1 || loom_rc=$?
  "${twin_cmd[@]}" >"$out/$task-pytorch.log" 2>&1 || twin_rc=$?
fi
echo "reproduce: both done in $(( ($(date +%s) - start) / 60 )) min (logs in $out/)"
/usr/bin/python3 scripts/reproduce_table.py "$task" "$out/$task-loom.log" $loom_rc \
  "$out/$task-pytorch.log" $twin_rc
