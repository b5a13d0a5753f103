#!/usr/bin/env bash
# GPU checks, for a machine with an NVIDIA device (finishes within 8 minutes):
#   1. builds the release-cuda preset into $SIGHTLINE_GPU_BUILD (default build/release-cuda), only
#      the GPU targets, for CUDA arch `native` unless SIGHTLINE_CUDA_ARCHS says otherwise (every
#      arch is built and linked by CI already);
#   2. runs every test labelled `gpu` (each kernel against the CPU reference; a whole Session on the
#      device against the CPU, with contexts saved on one engine and restored on the other);
#   3. runs compute-sanitizer memcheck on the kernel suites when the toolkit has it;
#   4. measures dense PyTorch SDPA (flash) on the benchmark's shapes when torch imports;
#   5. runs bench_cuda_msa, which prints the table last.
# Exits non-zero when the build or a test failed (the benchmark still runs after a test failure).
# SIGHTLINE_GPU_PREBUILT=DIR skips 1 and runs the executables tests/gpu/pack.sh packed into DIR
# (for a device machine without the project's build dependencies); logs go to $OUT when it is set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/env.sh"
cd "$root"
t0=$(date +%s)
left() { echo $(( 470 - ($(date +%s) - t0) )); }  # seconds of the 8-minute budget left (10 s margin)
build="${SIGHTLINE_GPU_BUILD:-build/release-cuda}"
archs="${SIGHTLINE_CUDA_ARCHS:-native}"
if [ "$archs" = native ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "nvidia-smi sees no device: building every architecture, the tests will skip"
  archs="86-real;89-real;90-real;120-real;120-virtual"
fi
sizes="${SIGHTLINE_BENCH_SIZES:-32768,131072,1048576}"

tests_rc=0
prebuilt="${SIGHTLINE_GPU_PREBUILT:-}"
if [ -n "$prebuilt" ]; then
  echo "== prebuilt executables ($prebuilt)"
  logs="${OUT:-$prebuilt}"
  unpacked="$(mktemp -d)"
  tar -C "$unpacked" -xJf "$prebuilt/prebuilt.tar.xz"
  bin="$unpacked/bin"
  export LD_LIBRARY_PATH="$unpacked/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export SIGHTLINE_CACHE="$(cd "$prebuilt" && pwd)/cache"
  nvidia-smi -L || true
  echo "== gpu tests"
  : >"$logs/gpu-tests.log"
  for t in tst_cuda_device tst_cuda_ops tst_cuda_msa tst_cuda_model tst_cuda_session tst_backend; do
    rc=0
    timeout 150 "$bin/$t" >>"$logs/gpu-tests.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { tests_rc=$rc; echo "$t FAILED (rc $rc)"; }
  done
  grep -E "CUDA:|MSA n_q|hybrid n_q|window [0-9]|remap|step [0-9]|logit error|greedy:|token mass|decode on the device|tiers:|lazy restore|PASS|FAIL|SKIP|Totals" "$logs/gpu-tests.log" || true
  build="$logs"
else
  echo "== configure + build ($build)"
  timeout 120 cmake --preset release-cuda -B "$build" -DSIGHTLINE_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
  timeout "$(( $(left) > 200 ? $(left) - 150 : 50 ))" cmake --build "$build" -j "$SIGHTLINE_JOBS" \
    --target tst_cuda_device tst_cuda_ops tst_cuda_msa tst_cuda_model tst_cuda_session tst_backend bench_cuda_msa
  bin="$build/tests/gpu"

  echo "== gpu tests"
  timeout 150 ctest --test-dir "$build" -L gpu --output-on-failure -V >"$build/gpu-tests.log" 2>&1 || tests_rc=$?
  grep -E "CUDA:|MSA n_q|hybrid n_q|window [0-9]|remap|step [0-9]|logit error|greedy:|token mass|decode on the device|tiers:|lazy restore|PASS|FAIL|SKIP|tests passed|tests failed" "$build/gpu-tests.log" || true
fi
[ "$tests_rc" -eq 0 ] || echo "GPU TESTS FAILED (rc $tests_rc): see $build/gpu-tests.log"

# Memory checking of the new kernels on the device (out-of-bounds, misaligned, shared races are
# what a CPU-only review cannot see); optional: needs compute-sanitizer from the CUDA toolkit.
san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
if [ -x "$san" ] && [ "$(left)" -gt 300 ]; then
  # The MSA suite by its functions, the newest kernels first (the whole suite with its CPU
  # references runs past a minute under memcheck, which would check none of the later ones).
  echo "== compute-sanitizer memcheck (tst_cuda_msa by function, tst_cuda_ops)"
  for spec in "tst_cuda_msa remappedPositions windowAndGrowth tokenMassMatchesReference" \
              "tst_cuda_msa hybridSelection pagedCacheRoundTrip" "tst_cuda_ops"; do
    read -r t fns <<<"$spec"
    log="$build/$t${fns:+.${fns%% *}}.memcheck.log"
    rc=0
    # shellcheck disable=SC2086  # the function names split on purpose
    timeout 30 "$san" --tool memcheck --error-exitcode 9 "$bin/$t" $fns >"$log" 2>&1 || rc=$?
    t="$t${fns:+ ($fns)}"
    if [ "$rc" -eq 124 ]; then  # out of time: incomplete, not a finding (the tests ran above)
      echo "memcheck incomplete (30 s): $t; $(grep -c '^PASS' "$log") functions passed under it"
    elif [ "$rc" -ne 0 ]; then
      tests_rc=9
      echo "MEMCHECK FAILED: $t (rc $rc, see $log)"; tail -20 "$log"
    else
      echo "memcheck clean: $t"
    fi
  done
fi

echo "== dense baseline (PyTorch SDPA, flash)"
sdpa="$build/sdpa.tsv"
rm -f "$sdpa"
py=""
for cand in python3 "$SIGHTLINE_VENV/bin/python"; do
  if command -v "$cand" >/dev/null 2>&1 && timeout 60 "$cand" -c "import torch" >/dev/null 2>&1; then py="$cand"; break; fi
done
if [ -n "$py" ]; then
  timeout "$(( $(left) / 2 ))" "$py" tests/gpu/sdpa_bench.py "$sdpa" "$sizes" || echo "unavailable sdpa_bench.py failed or timed out" >>"$sdpa"
  grep -v '^#' "$sdpa" || true
else
  echo "PyTorch not available"
  echo "unavailable python3 -c 'import torch' failed" >"$sdpa"
fi

echo "== MSA benchmark"
budget=$(( $(left) - 20 ))
if [ "$budget" -lt 30 ]; then
  echo "no time left for the benchmark (8-minute budget)"
else
  # The end-to-end rows read the sample library's context when pack.sh packed it.
  lib_ids=()
  if [ -f "${SIGHTLINE_CACHE:-}/library_ids.bin.xz" ]; then
    ids_file="$(mktemp)"
    trap 'rm -f "$ids_file"' EXIT
    xz -dc "$SIGHTLINE_CACHE/library_ids.bin.xz" >"$ids_file" && lib_ids=(--library-ids "$ids_file")
  fi
  timeout "$budget" "$bin/bench_cuda_msa" --sdpa "$sdpa" --sizes "$sizes" \
    --budget-s "$(( budget * 2 / 3 ))" ${lib_ids[@]+"${lib_ids[@]}"} || echo "bench_cuda_msa failed or timed out (rc $?)"
fi
echo "run.sh: $(( $(date +%s) - t0 )) s"
exit "$tests_rc"
