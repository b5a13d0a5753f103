#!/usr/bin/env bash
# libFuzzer runs of the targets in tests/fuzz (fuzz preset: clang, ASan + UBSan).
#
#   scripts/fuzz.sh TARGET [SECONDS] [extra libFuzzer flags]   one target (default 600 s)
#   scripts/fuzz.sh all [SECONDS] [extra libFuzzer flags]      every target, one after another
#
# `all` builds every target, runs each for SECONDS (default 300) and writes a table (target,
# executions, seconds, crashes, slow units) to build/fuzz/logs/campaign.txt; each run's output goes to
# build/fuzz/logs/TARGET.log. Environment:
#   SIGHTLINE_FUZZ_TARGETS="fuzz_pdf fuzz_image"    only these targets
#   SIGHTLINE_FUZZ_SECONDS="fuzz_pdf=600 fuzz_gguf=60"   per-target durations
#   SIGHTLINE_FUZZ_JOBS=N                          targets run N at a time (default 1)
# Every run uses -rss_limit_mb=2048 and, unless ASAN_OPTIONS is set (even empty), ASan's
# malloc_context_size=0: no stack is recorded for each allocation, which makes the targets that
# allocate a lot (Poppler, FFmpeg, SQLite under ASan) ~1.3x faster; a use-after-free report then
# lacks the allocation and free stacks, so rerun a crashing input for the full report with
# `ASAN_OPTIONS= build/fuzz/tests/fuzz/TARGET build/fuzz/artifacts/TARGET-crash-...`. The corpus grows in build/fuzz/corpus/TARGET (seeds:
# tests/fuzz/corpus/TARGET); crashes land in build/fuzz/artifacts/. `all` exits 1 when a target
# crashed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
target="${1:?usage: scripts/fuzz.sh TARGET|all [SECONDS] [libFuzzer flags]}"
shift
bin="$SIGHTLINE_ROOT/build/fuzz/tests/fuzz"
art="$SIGHTLINE_ROOT/build/fuzz/artifacts/"
logs="$SIGHTLINE_ROOT/build/fuzz/logs"

# run_one TARGET SECONDS [flags...]: one libFuzzer run; its output on stdout.
run_one() {
  local t="$1" secs="$2"
  shift 2
  local corpus="$SIGHTLINE_ROOT/build/fuzz/corpus/$t" seeds="$SIGHTLINE_ROOT/tests/fuzz/corpus/$t"
  mkdir -p "$corpus" "$art"
  local dirs=("$corpus")
  [ -d "$seeds" ] && dirs+=("$seeds")
  ASAN_OPTIONS="${ASAN_OPTIONS-malloc_context_size=0}" \
    "$bin/$t" -max_total_time="$secs" -artifact_prefix="$art$t-" -rss_limit_mb=2048 \
    -print_final_stats=1 "$@" "${dirs[@]}"
}

if [ "$target" != all ]; then
  secs="${1:-600}"
  shift || true
  "$here/build.sh" fuzz "$target"
  run_one "$target" "$secs" "$@"
  exit
fi

secs="${1:-300}"
shift || true
targets="${SIGHTLINE_FUZZ_TARGETS:-$(sed -n 's/^sightline_add_fuzz(\([a-z0-9_]*\) .*/\1/p' \
  "$SIGHTLINE_ROOT/tests/fuzz/CMakeLists.txt" | tr '\n' ' ')}"
# shellcheck disable=SC2086
"$here/build.sh" fuzz $targets
mkdir -p "$logs"

seconds_for() {
  local t="$1" kv
  for kv in ${SIGHTLINE_FUZZ_SECONDS:-}; do
    [ "${kv%%=*}" = "$t" ] && { echo "${kv#*=}"; return; }
  done
  echo "$secs"
}

# campaign_one TARGET: runs it, writes logs/TARGET.log and logs/TARGET.row.
campaign_one() {
  local t="$1" s start end rc execs crashes slow
  shift
  s="$(seconds_for "$t")"
  start=$(date +%s)
  rc=0
  run_one "$t" "$s" "$@" >"$logs/$t.log" 2>&1 || rc=$?
  end=$(date +%s)
  # Executions: the final stats, else libFuzzer's "Done N runs" line, else the last status line.
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)"
  [ -n "$execs" ] || execs="$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$logs/$t.log" | tail -1)"
  [ -n "$execs" ] || execs="$(sed -n 's/^#\([0-9]*\).*/\1/p' "$logs/$t.log" | tail -1)"
  # Crashes: inputs libFuzzer wrote out (crash-, leak-, timeout-, oom-); a failed run without one
  # counts as one. Slow units (slow-unit-: one input ran over -report_slow_units, 10 s) are counted
  # apart: not failures, but worth rerunning (a stopped or starved process also produces them).
  crashes="$(grep -cE 'Test unit written to .*/[a-z0-9_]+-(crash|leak|timeout|oom)-' "$logs/$t.log" || true)"
  slow="$(grep -cE 'Test unit written to .*/[a-z0-9_]+-slow-unit-' "$logs/$t.log" || true)"
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  printf '%-20s %12s %8s %8s %6s\n' "$t" "${execs:-0}" "$((end - start))" "$crashes" "$slow" >"$logs/$t.row"
  echo "$t: ${execs:-0} executions in $((end - start)) s, crashes: $crashes, slow units: $slow (log: $logs/$t.log)"
}

jobs="${SIGHTLINE_FUZZ_JOBS:-1}"
for t in $targets; do
  [ -x "$bin/$t" ] || { echo "no fuzz target $t in $bin" >&2; exit 2; }
  rm -f "$logs/$t.row"
  campaign_one "$t" "$@" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
done
wait

{
  printf '%-20s %12s %8s %8s %6s\n' target executions seconds crashes slow
  for t in $targets; do cat "$logs/$t.row"; done
} >"$logs/campaign.txt"
cat "$logs/campaign.txt"
! awk 'NR > 1 && $4 > 0 { bad = 1 } END { exit !bad }' "$logs/campaign.txt"
