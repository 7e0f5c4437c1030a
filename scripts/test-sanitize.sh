#!/usr/bin/env bash
# Builds headlab with AddressSanitizer + UndefinedBehaviorSanitizer (GCC, CMake preset "asan",
# directory build-asan) and runs the whole test suite under it. Any sanitizer report fails the
# test it happens in: UBSan does not recover, ASan and LeakSanitizer exit non-zero, and the CLI
# children of the tests inherit the same options. Extra arguments go to ctest, e.g.
#   bash scripts/test-sanitize.sh -R '^train'
# Needs `bash scripts/install-deps.sh --sanitize` (llvm-symbolizer for readable stacks).
set -euo pipefail
cd "$(dirname "$0")/.."
supp="$PWD/scripts/sanitize"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_invalid_pointer_pairs=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer)"
fi
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j 2 "$@"
