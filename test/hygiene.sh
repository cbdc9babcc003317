#!/usr/bin/env bash
# hygiene.sh fails when the repository tracks a compiled executable (an ELF, Mach-O
# or PE file, or a mode-755 file without a #! line) or any file over 1 MB: build
# outputs belong in caches outside the tree, and one committed binary stays in every
# clone's history for good. `make test` runs it first.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' entry; do
  mode=${entry%% *}
  path=${entry#*$'\t'}
  [ -f "$path" ] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s "$path")
  if [ "$size" -gt "$limit" ]; then
    echo "hygiene: $path is $size bytes, over the 1 MB limit for tracked files" >&2
    bad=1
  fi
  magic=$(head -c 4 "$path" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46) kind="an ELF executable" ;;
    cffaedfe|cefaedfe|feedfacf|feedface|cafebabe) kind="a Mach-O executable" ;;
    4d5a*) kind="a PE (Windows) executable" ;;
    *) kind="" ;;
  esac
  if [ -z "$kind" ] && [ "$mode" = 100755 ] && [ "$(head -c 2 "$path")" != '#!' ]; then
    kind="an executable file without a #! line"
  fi
  if [ -n "$kind" ]; then
    echo "hygiene: $path is $kind; build outputs stay out of the tree" >&2
    bad=1
  fi
done < <(git ls-files -s -z | sed -z 's/^\([0-9]*\) [0-9a-f]* [0-9]*\t/\1 \t/')
if [ "$bad" -ne 0 ]; then
  exit 1
fi
echo "hygiene: $(git ls-files | wc -l) tracked files, no executable, none over 1 MB"
