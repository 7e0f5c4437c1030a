#!/usr/bin/env bash
# Builds the libFuzzer targets (clang from Debian, ASan + UBSan, CMake preset "fuzz", directory
# build-fuzz) and fuzzes each for SECONDS, starting from the seed corpora (tests/hostile,
# configs/, fuzz/seeds). New inputs accumulate in build-fuzz/fuzz-corpus/<target>; a finding
# is saved as build-fuzz/fuzz-artifacts/<target>-crash-* (or leak-, timeout-, oom-) and makes
# this script fail. Reproduce one with `build-fuzz/fuzz/fuzz_<target> <file>`, or with the
# replay build of any compiler: `build/fuzz/fuzz_<target>_replay <file>`.
#   bash scripts/fuzz.sh                    60 s per target, all targets
#   bash scripts/fuzz.sh 3600 safetensors   an hour on one target
# Prints each target's executions ("Done N runs in S second(s)") and corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(config safetensors checkpoint conllu)

supp="$PWD/scripts/sanitize"
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

declare -A seeds=(
  [config]="tests/hostile/config configs fuzz/seeds/config"
  [safetensors]="tests/hostile/safetensors fuzz/seeds/safetensors"
  [checkpoint]="fuzz/seeds/checkpoint"
  [conllu]="tests/hostile/conllu examples/data"
)
declare -A max_len=([config]=16384 [safetensors]=8192 [checkpoint]=8192 [conllu]=16384)
status=0
for t in "${targets[@]}"; do
  [[ -n "${seeds[$t]:-}" ]] || { echo "fuzz.sh: unknown target '$t'" >&2; exit 2; }
  corpus="build-fuzz/fuzz-corpus/$t"
  log="build-fuzz/fuzz-$t.log"
  mkdir -p "$corpus" build-fuzz/fuzz-artifacts
  # shellcheck disable=SC2086
  if build-fuzz/fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="${max_len[$t]}" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/fuzz-artifacts/$t-" "$corpus" ${seeds[$t]} >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log)"
    status=1
  fi
  runs=$(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1 || true)
  units=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  files=$(find "$corpus" -type f | wc -l)
  echo "fuzz_$t: $result; ${runs:-no summary}; executions ${units:-?}; corpus $files files"
  if [[ $result != ok ]]; then
    grep -E 'ERROR|SUMMARY|==[0-9]+==|artifact' "$log" | head -20 || true
  fi
done
exit $status
