#!/usr/bin/env bash
# A clone of loom is the whole of loom. Copies the repository's files (those git tracks, and new
# ones it does not ignore: what a clone of this work tree would hold, no build) into a temporary
# folder with nothing beside it, and there
#   1. finds no file that points at the folder beside the repository where loom's lecture decks
#      and measuring scripts once lived (by a relative path or an absolute one), and
#   2. runs the docs check, whose every link and path must resolve inside the copy. Its C++
#      blocks are the tree's, compiled by the docs check there against the same headers, so here
#      they are counted, not compiled again (check_docs --references-only).
#
#   standalone.sh SOURCE_DIR CHECK_DOCS
set -euo pipefail
src=$(cd "$1" && pwd) check_docs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clone=$work/loom  # $work holds nothing else: no sibling folder to lean on
mkdir "$clone"
cd "$src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"  # a tracked file deleted in the work tree is not copied
  done | xargs -0 cp --parents -t "$clone"

cd "$clone"
if grep -rnI -e '\.\./shared' -e '/work/[s]hared' . >"$work/outside.txt"; then
  echo "standalone: these lines point at a folder beside the repository (a user has only it):"
  cat "$work/outside.txt"
  exit 1
fi
echo "standalone: $(find . -type f | wc -l) files copied to $clone; none points outside it"
"$check_docs" "$clone" --references-only
