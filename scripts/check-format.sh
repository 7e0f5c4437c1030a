#!/usr/bin/env bash
# Fails when a tracked C++ file differs from .clang-format, naming each such file. The formatter
# is Debian 12's clang-format 14 (installed by install-deps.sh --format); its version is pinned
# because another major version formats some constructs differently, and a check that moves with
# the machine's formatter would fail on files nobody touched. To format the tree:
#   git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --format
want=14
format=$(command -v "clang-format-${want}" || command -v clang-format || true)
[[ -n "$format" ]] || { echo "check-format.sh: clang-format ${want} is not installed" >&2; exit 2; }
version=$("$format" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [[ "$version" != "$want" ]]; then
  echo "check-format.sh: $format is clang-format ${version:-of unknown version}, expected ${want}" >&2
  exit 2
fi
differ=()
while IFS= read -r f; do
  "$format" --dry-run --Werror "$f" >/dev/null 2>&1 || differ+=("$f")
done < <(git ls-files '*.cpp' '*.h')
if ((${#differ[@]})); then
  printf '%s differs from .clang-format\n' "${differ[@]}" >&2
  echo "check-format.sh: ${#differ[@]} file(s) differ; format them with: $format -i FILE..." >&2
  exit 1
fi
echo "check-format.sh: $(git ls-files '*.cpp' '*.h' | wc -l) files match .clang-format ($format, version $version)"
