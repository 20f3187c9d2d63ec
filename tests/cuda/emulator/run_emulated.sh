#!/bin/bash
# Builds the CUDA side of loom (every kernel family's backends/<family>/*.cu and the device's
# backends/cuda/*.cpp) against the CUDA emulator (emu.h) and runs the CUDA test suite on it, so
# the kernels are exercised on a machine without a GPU:
#   tests/cuda/emulator/run_emulated.sh [path/to/libloom.a built with -DLOOM_CUDA=ON] [doctest args]
# The .cu and .cuh files are copied with their <<<grid, block>>> launches rewritten as
# emu::launch calls and the grid cap of grid-stride kernels lowered to 4 blocks (so every thread
# loops). At most one compiler per core runs at a time. LOOM_EMU_OUT names the folder it builds
# in (default build-cuda-emulated in the source tree), so two checkouts' runs do not collide.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
EMU=$ROOT/tests/cuda/emulator
LIB=${1:-$ROOT/build-cuda/libloom.a}
shift || true
OUT=${LOOM_EMU_OUT:-$ROOT/build-cuda-emulated}
rm -rf "$OUT/src"
mkdir -p "$OUT/src" "$OUT/obj"

python3 - "$ROOT" "$OUT" <<'PY'
import pathlib, sys
root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])

def matching(s, i, open_c, close_c, step):
    depth = 0
    while True:
        if s[i] == open_c: depth += 1
        elif s[i] == close_c:
            depth -= 1
            if depth == 0: return i
        i += step

def split_top(s):
    parts, depth, cur = [], 0, ''
    for c in s:
        if c in '([{': depth += 1
        if c in ')]}': depth -= 1
        if c == ',' and depth == 0: parts.append(cur); cur = ''
        else: cur += c
    return parts + [cur]

def rewrite(src):
    while '<<<' in src:
        at = src.index('<<<')
        j = at - 1
        while src[j].isspace(): j -= 1
        if src[j] == '>': j = matching(src, j, '>', '<', -1) - 1
        while src[j].isalnum() or src[j] in '_:': j -= 1
        name = src[j + 1:at].strip()
        end_cfg = src.index('>>>', at)
        cfg = [p.strip() for p in split_top(src[at + 3:end_cfg])]
        grid, block = cfg[:2]
        # Dynamic shared memory (a third argument other than 0) goes to the emulator with the
        # kernel's address, for its cudaFuncSetAttribute check.
        shared = cfg[2] if len(cfg) > 2 and cfg[2] != '0' else None
        k = end_cfg + 3
        while src[k].isspace(): k += 1
        close = matching(src, k, '(', ')', 1)
        args = src[k + 1:close]
        extra = f'{shared}, reinterpret_cast<const void*>(&{name}), ' if shared else ''
        call = f'::emu::launch(dim3({grid}), dim3({block}), {extra}[=]() {{ {name}({args}); }})'
        src = src[:j + 1] + call + src[close + 1:]
    return src

for f in sorted(root.glob('backends/*/*.cu')) + sorted(root.glob('backends/*/*.cuh')):
    copy = out / 'src' / f.relative_to(root)
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(rewrite(f.read_text()))
utils = out / 'src/backends/cuda/device_utils.cuh'
assert 'int64_t{1} << 20' in utils.read_text()
utils.write_text(utils.read_text().replace('int64_t{1} << 20', 'int64_t{4}'))
PY

CXX="g++ -std=c++20 -O2 -fopenmp -I$EMU -I$OUT/src -I$ROOT -I$ROOT/tests -DLOOM_WITH_CUDA=1 -DLOOM_CUDA_EMULATED=1"
# Every object is rebuilt (a stale one from an older layout of a struct would link and misbehave),
# and a failed compile stops the script.
rm -f "$OUT"/obj/*.o
pids=()
objs=()
cores=$(nproc)
wait_for_a_core() { while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do sleep 1; done; }
for f in "$OUT"/src/backends/*/*.cu; do
  o=$OUT/obj/$(basename "$f").o; wait_for_a_core
  $CXX -x c++ -c "$f" -o "$o" & pids+=($!); objs+=("$o")
done
for f in "$ROOT"/backends/cuda/*.cpp "$EMU/emu.cpp"; do
  # cublas_library.cpp opens the real cuBLAS; emu.cpp defines the emulator's functions instead.
  [ "$(basename "$f")" = cublas_library.cpp ] && continue
  o=$OUT/obj/$(basename "$f").o; wait_for_a_core
  $CXX -c "$f" -o "$o" & pids+=($!); objs+=("$o")
done
tests=()
for f in "$ROOT"/tests/cuda/*.cpp; do
  o=$OUT/obj/$(basename "$f").o; tests+=("$o"); wait_for_a_core
  $CXX -DLOOM_TEST_DATA="\"$ROOT/tests/golden\"" -DLOOM_SOURCE_DIR="\"$ROOT\"" -c "$f" -o "$o" &
  pids+=($!)
done
wait_for_a_core
$CXX -c "$ROOT/tests/main.cpp" -o "$OUT/obj/main.o" & pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed compile ends the script
# The families' public methods in libloom.a call the emulated cuda:: functions, which call back
# into libloom.a: one group, searched until nothing is left unresolved.
$CXX "${tests[@]}" "$OUT/obj/main.o" -Wl,--start-group "$LIB" "${objs[@]}" -Wl,--end-group \
  -lfmt -lopenblas -o "$OUT/test_cuda_emulated"
"$OUT/test_cuda_emulated" "$@"
