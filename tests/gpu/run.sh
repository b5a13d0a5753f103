#!/usr/bin/env bash
# GPU checks, for a machine with an NVIDIA device: builds the release-cuda preset, runs every test
# labelled `gpu` (each kernel against the CPU reference) and prints what the device is.
# The CUDA backend issue extends this with benchmarks and a table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/env.sh"
cd "$root"
cmake --preset release-cuda -DSIGHTLINE_BUILD_APP=OFF >/dev/null
cmake --build --preset release-cuda -j "$SIGHTLINE_JOBS"
ctest --preset release -L gpu --test-dir build/release-cuda --output-on-failure -V | grep -E "CUDA:|PASS|FAIL|SKIP|tests passed"
