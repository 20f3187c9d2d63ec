#!/usr/bin/env bash
# The committed pictures of the learning path (docs/learn/images/*.png) are what the learn
# programs draw, byte for byte: a picture in the docs is the program's output, not a hand-edited
# or stale one.
#   pictures_identical.sh SOURCE_DIR LEARN_PROGRAMS_DIR SCRATCH_DIR [NUMERICS_PLATFORM]
# Each chapter's command that draws a committed picture
#   $ build/examples/learn/PROGRAM docs/learn/images/NAME.png
# runs in a folder of its own under SCRATCH_DIR (the pictures it draws beside NAME.png land there
# too), and every PNG it writes is compared with its committed twin by cmp. A picture that
# differs, or one that is drawn but not committed, fails the test, naming the file and the
# program. The programs run on one thread, so they sum in one order and draw the same bytes on
# every run; committed pictures that no learn program draws are listed, not compared.
# The bytes are those of one build, the one docs/learn/README.md's line "Printed on: " names.
# Given the numerics_platform program, a build that prints another line rounds differently:
# there each picture must still be drawn at its committed height, and the test then reports
# itself skipped (exit 77), since the bytes were not compared. Not its width: a heatmap's colour
# bar is labelled with the values' range as printed ({:.3g}, data/image.cpp), and "0.000123"
# is wider than "7.8e-05" (a Debug build with the sanitizers drew the reversal model's
# cross-attention 6 pixels narrower).
set -uo pipefail
source_dir=$1 programs=$2 scratch=$3 platform_program=${4:-}
images=$source_dir/docs/learn/images
rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
other_platform=
if [ -n "$platform_program" ]; then
  platform=$("$platform_program") || { echo "FAIL: $platform_program did not run"; exit 1; }
  printed_on=$(sed -n 's/^Printed on: //p' "$source_dir/docs/learn/README.md")
  if [ "$platform" != "$printed_on" ]; then
    other_platform=1
    echo "this build ($platform) is not the one the pictures were drawn on ($printed_on):"
    echo "comparing each picture's height, not its bytes"
  fi
fi
# The height of a PNG (its IHDR chunk's second field, bytes 20-23), as 8 hex digits.
png_height() { od -An -tx1 -j20 -N4 "$1" | tr -d ' \n'; }

commands=$(grep -h -o '^\$ build/examples/learn/[a-z0-9_]* docs/learn/images/[a-z0-9_]*\.png$' \
                "$source_dir"/docs/learn/*.md | sort -u)
if [ -z "$commands" ]; then
  echo "FAIL: no chapter of docs/learn draws a picture into docs/learn/images"
  exit 1
fi

failures=0 compared=0
declare -A drawn
while read -r _ program picture; do
  name=$(basename "$program")
  dir=$scratch/$name
  mkdir -p "$dir/docs/learn/images"
  if ! (cd "$dir" && OMP_NUM_THREADS=1 "$programs/$name" "$picture" >/dev/null); then
    echo "FAIL: $name $picture did not run (exit status non-zero)"
    failures=$((failures + 1))
    continue
  fi
  for png in "$dir"/docs/learn/images/*.png; do
    [ -e "$png" ] || continue
    file=$(basename "$png")
    drawn[$file]=$name
    compared=$((compared + 1))
    if [ ! -e "$images/$file" ]; then
      echo "FAIL: $name draws docs/learn/images/$file, which is not committed"
      failures=$((failures + 1))
    elif [ -n "$other_platform" ]; then
      if [ "$(png_height "$png")" != "$(png_height "$images/$file")" ]; then
        echo "FAIL: $name draws docs/learn/images/$file at another height than the committed one"
        failures=$((failures + 1))
      fi
    elif ! difference=$(cmp "$png" "$images/$file" 2>&1 | sed 's/.* differ: /first difference: /')
    then
      echo "FAIL: docs/learn/images/$file is not what $name draws ($difference)"
      echo "      regenerate it with: build/examples/learn/$name $picture"
      failures=$((failures + 1))
    fi
  done
done <<< "$commands"

for committed in "$images"/*.png; do
  file=$(basename "$committed")
  [ -n "${drawn[$file]:-}" ] ||
    echo "not compared: docs/learn/images/$file (no learn program draws it)"
done
echo "$compared pictures compared with docs/learn/images, $failures failures"
[ "$failures" -eq 0 ] || exit 1
if [ -n "$other_platform" ]; then
  echo "skipped: the bytes are compared only on the build the pictures were drawn on"
  exit 77
fi
