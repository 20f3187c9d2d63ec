#!/usr/bin/env bash
# The printed-output check must catch what it is for. In a folder that holds only chapter 01's
# printed output (its ```text block, as docs/learn/output.md), the docs check passes on the
# block as committed and on the block with lines elided (a line `...`, a line ending in `...`);
# it fails, naming the line, when one line is changed, added or dropped. With --platform, a
# changed line fails on the build the docs name and is only noted on another.
#   tests/docs/output_mutation.sh SOURCE_DIR CHECK_DOCS LEARN_PROGRAMS_DIR
set -euo pipefail
src=$1 check_docs=$2 programs=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs/learn"
doc=$tmp/docs/learn/output.md
awk '/^```text$/ { block = $0; inside = 1; next }
     inside { block = block "\n" $0 }
     inside && /^```$/ {
       inside = 0
       if (block ~ /^```text\n\$ build\/examples\/learn\//) print block
     }' "$src/docs/learn/01-tensors.md" >"$doc"
cp "$doc" "$tmp/committed.md"
check() { "$check_docs" "$tmp" --learn-programs "$programs" c++ 2>&1; }
out=$(check) || { echo "FAIL: the block as committed does not pass:"; echo "$out"; exit 1; }
grep -q "1 printed outputs (1 run); 0 problems" <<<"$out" ||
  { echo "FAIL: the block was not run:"; echo "$out"; exit 1; }

# edit SED_SCRIPT: the committed block, edited.
edit() {
  cp "$tmp/committed.md" "$doc"
  sed -i "$1" "$doc"
  if cmp -s "$doc" "$tmp/committed.md"; then echo "FAIL: '$1' changed nothing"; exit 1; fi
}
# accept SED_SCRIPT WHAT: the edited block still passes.
accept() {
  edit "$1"
  out=$(check) || { echo "FAIL: $2 and the check failed:"; echo "$out"; exit 1; }
  echo "ok: $2 passes"
}
# reject SED_SCRIPT WHAT PATTERN: the check fails on the edited block, its message matching
# PATTERN (the line it names).
reject() {
  edit "$1"
  if out=$(check); then echo "FAIL: $2 and the check passed"; exit 1; fi
  grep -qE "$3" <<<"$out" ||
    { echo "FAIL: $2; the message does not match /$3/:"; echo "$out"; exit 1; }
  echo "ok: $2 fails: $(head -1 <<<"$out")"
}
accept '/^tensor(\[\[0/,/shape=\[3,4\])$/c ...' "the first tensor elided by a line ..."
accept 's/^\(x.select(0, 2) *shape\).*/\1.../' "a line cut short by a trailing ..."
accept '/^after y.narrow/,$c ...' "the end elided by a last line ..."
reject 's/offset 8  contiguous yes/offset 9  contiguous yes/' "an offset changed" \
  "output.md:[0-9]+: .*'x.select\(0, 2\) .*offset 9 .*' is not what the program prints there"
reject '/^x.unsqueeze(0)/a a line the program does not print' "a line added" \
  "output.md:[0-9]+: .*'a line the program does not print' is not"
reject '/^x.narrow(1, 1, 2)/d' "a line dropped" \
  "output.md:[0-9]+: .*'x.select\(0, 2\) .*' is not what the program prints there"
reject '/-1.0000]], shape=\[3,4\])$/d' "the last line dropped" \
  "output.md:[0-9]+: .*the program prints more after"

# --platform: the digits are compared exactly on the build docs/learn/README.md names ("Printed
# on: "), and a line that differs is only noted on another build.
printf 'Printed on: the reference build\n' >"$tmp/docs/learn/README.md"
printf '#!/bin/sh\necho "the reference build"\n' >"$tmp/same.sh"
printf '#!/bin/sh\necho "another build"\n' >"$tmp/other.sh"
chmod +x "$tmp/same.sh" "$tmp/other.sh"
edit 's/offset 8  contiguous yes/offset 9  contiguous yes/'
if out=$("$check_docs" "$tmp" --learn-programs "$programs" --platform "$tmp/same.sh" c++ 2>&1)
then
  echo "FAIL: on the printed-on build a changed line passed:"; echo "$out"; exit 1
fi
echo "ok: on the printed-on build a changed line fails"
out=$("$check_docs" "$tmp" --learn-programs "$programs" --platform "$tmp/other.sh" c++ 2>&1) ||
  { echo "FAIL: on another build a changed line failed:"; echo "$out"; exit 1; }
grep -q "note: docs/learn/output.md:[0-9]*: .*offset 9 .* on this build" <<<"$out" &&
  grep -q "1 printed outputs (1 run, 1 rounded differently here); 0 problems" <<<"$out" ||
  { echo "FAIL: on another build the changed line was not noted:"; echo "$out"; exit 1; }
echo "ok: on another build a changed line is noted, not failed"
