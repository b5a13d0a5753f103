#!/usr/bin/env bash
# Packs what tests/gpu/run.sh needs on a device machine that cannot build the project (no Qt, no
# network): the GPU test and benchmark executables built here (release preset; CUDA 13, every arch
# of cmake/SightlineCuda.cmake including sm_90), the shared libraries they load that a bare CUDA
# image lacks, and the default model cut to its first SIGHTLINE_GPU_BLOCKS blocks (default 4: a call
# carries at most 64 MiB, the tracked tree's ~5 MB included; with 6 blocks .gpu/ is 63 MB and the
# call is refused). It prints what travels; over 64 MiB it fails. Writes .gpu/ (ignored); carry it and run
#   SIGHTLINE_GPU_PREBUILT=.gpu bash tests/gpu/run.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/env.sh"
cd "$root"
build="${SIGHTLINE_BUILD:-build/release}"
blocks="${SIGHTLINE_GPU_BLOCKS:-4}"
targets=(tst_cuda_device tst_cuda_ops tst_cuda_msa tst_cuda_model tst_cuda_session tst_backend bench_cuda_msa)
cmake --build "$build" -j "$SIGHTLINE_JOBS" --target "${targets[@]}"
rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib .gpu/cache/models
for t in "${targets[@]}"; do strip -o ".gpu/stage/bin/$t" "$build/tests/gpu/$t"; done
# Everything ldd resolves except the C runtime and the toolchain's own libraries.
for l in $(ldd "$build"/tests/gpu/{tst_cuda_msa,tst_cuda_model,bench_cuda_msa} | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$l")" in libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libdl.so*|libpthread*|librt.so*) continue ;; esac
  cp -L "$l" .gpu/stage/lib/
done
# xz -9e: a 64 MiB window sees the code the executables share (21.8 -> 14.6 MB; about a minute).
XZ_OPT=-9e tar -C .gpu/stage -cJf .gpu/prebuilt.tar.xz bin lib
rm -rf .gpu/stage
"$SIGHTLINE_VENV/bin/python" tests/gpu/truncate_gguf.py "$SIGHTLINE_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  .gpu/cache/models/SmolLM2-135M-Instruct.Q4_1.gguf "$blocks"
# The sample library's context (up to 1M tokens of its PDFs and deck) as token ids, for
# bench_cuda_msa's end-to-end rows (run.sh passes it): added to a scratch library, no prefill.
# Optional: without the samples (scripts/setup.sh fetches them) the rows use synthetic ids.
s="$SIGHTLINE_CACHE/samples"
samples=("$s/pdf/R-intro.pdf" "$s/pdf/R-exts.pdf" "$s/pdf/refman.pdf" "$s/pptx/pandoc-reference.pptx")
if ls "${samples[@]}" >/dev/null 2>&1; then
  cmake --build "$build" -j "$SIGHTLINE_JOBS" --target sightline-cli
  lib="$(mktemp -d)"
  trap 'rm -rf "$lib"' EXIT
  "$build/app/sightline-cli" add --library "$lib" --no-ocr "${samples[@]}" >/dev/null
  "$build/app/sightline-cli" prefill --library "$lib" --max-tokens 1048576 --ids-out "$lib/ids.bin" | tail -1
  xz -9 -c "$lib/ids.bin" >.gpu/cache/library_ids.bin.xz
else
  echo "the sample files are missing (scripts/setup.sh): the end-to-end rows will use synthetic ids"
fi
du -sh .gpu/*  .gpu/cache/models/*
travels=$(( $(du -sb .gpu | cut -f1) + $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) ))
echo "what travels: $(( travels >> 20 )).$(( (travels & 1048575) * 10 >> 20 )) MiB of 64"
if [ "$travels" -gt $(( 64 << 20 )) ]; then
  echo "over the 64 MiB a device call carries: pack fewer model blocks (SIGHTLINE_GPU_BLOCKS)" >&2
  exit 1
fi
