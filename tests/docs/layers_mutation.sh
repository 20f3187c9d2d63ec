#!/usr/bin/env bash
# The layer check must catch what it is for: in a copy of the layer folders and README.md, a
# header of core/ that includes nn/ (an upward include) makes tests/docs/layers.cmake fail and
# name the file; the unchanged copy passes.
#   tests/docs/layers_mutation.sh SOURCE_DIR LAYERS_TXT
set -euo pipefail
src=$1 layers=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while IFS=: read -r name _; do cp -r "$src/$name" "$tmp/$name"; done <"$layers"
cp "$src/README.md" "$tmp/README.md"
check() { cmake -DSOURCE_DIR="$tmp" -DLAYERS="$layers" -P "$src/tests/docs/layers.cmake" 2>&1; }
check >/dev/null || { echo "FAIL: the unchanged copy does not pass"; check; exit 1; }
printf '#pragma once\n#include "nn/module.h"\n' >"$tmp/core/upward.h"
if out=$(check); then echo "FAIL: core/upward.h includes nn/ and the check passed"; exit 1; fi
grep -q 'core/upward.h (layer core) includes #include "nn/module.h"' <<<"$out" ||
  { echo "FAIL: the message does not name the file and include:"; echo "$out"; exit 1; }
rm "$tmp/core/upward.h"
sed -i 's/^nn           uses autograd$/nn           uses core/' "$tmp/README.md"
if check >/dev/null; then echo "FAIL: a README drawing that differs passed"; exit 1; fi
echo "ok: an upward include and a stale README drawing both fail the layer check"
