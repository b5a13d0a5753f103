#!/usr/bin/env bash
# Fetches the documents of the evaluation set (tests/eval/) that scripts/setup.sh does not already
# fetch, into $SIGHTLINE_CACHE/eval/, checking each against its pinned sha256 in
# tests/eval/assets.sha256, and builds the derived "talk" video (tests/eval/make_talk_video.sh).
# Files come out of Debian bookworm packages with `apt-get download` + `dpkg-deb -x`: no package
# is installed. Idempotent: a second run only checks the pins (about a second).
#
#   scripts/setup.sh && scripts/eval_assets.sh
#   SIGHTLINE_CACHE=DIR ...     cache somewhere else (default: ~/.cache/sightline)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/env.sh
source "$here/env.sh"

log() { printf '[eval-assets] %s\n' "$*"; }
die() { printf '[eval-assets] error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@";
  else die "need root for: $*"; fi
}

for tool in apt-get dpkg-deb gunzip sha256sum awk ffmpeg ffprobe; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/setup.sh installs ffmpeg; the rest is Debian's base)"
done

pins="$SIGHTLINE_ROOT/tests/eval/assets.sha256"
setup_pins="$SIGHTLINE_ROOT/scripts/assets.sha256"
[ -f "$pins" ] || die "missing $pins"

pinned_sha() {  # pinned_sha PINFILE RELPATH -> the pinned hash, or empty
  awk -v p="$2" '$1 !~ /^#/ && $2 == p { print $1 }' "$1"
}

# verify PINFILE RELPATH: the cached file exists and matches its pin.
verify() {
  local want got
  want="$(pinned_sha "$1" "$2")"
  [ -n "$want" ] || die "no pin for $2 in $1"
  [ -f "$SIGHTLINE_CACHE/$2" ] || return 1
  got="$(sha256sum "$SIGHTLINE_CACHE/$2" | cut -d' ' -f1)"
  [ "$got" = "$want" ]
}

# place TMPFILE RELPATH: check a freshly extracted file against its pin, then move it into the cache.
place() {
  local tmp="$1" rel="$2" want got
  want="$(pinned_sha "$pins" "$rel")"
  got="$(sha256sum "$tmp" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    die "$rel: sha256 $got does not match the pinned $want (the Debian package changed? see $pins and tests/eval/DATASET.md)"
  fi
  mkdir -p "$(dirname "$SIGHTLINE_CACHE/$rel")"
  mv -f "$tmp" "$SIGHTLINE_CACHE/$rel"
}

# ---------------------------------------------------------------- inputs from scripts/setup.sh
# The core documents and the sources of the talk video must already be in the cache.
core=(
  samples/pdf/R-intro.pdf samples/pdf/R-exts.pdf samples/pptx/pandoc-reference.pptx
  samples/video/vtest.avi samples/audio/librivox/transcription
)
for id in 0870 0880 0890 0920 0930; do
  core+=("samples/audio/librivox/sense_and_sensibility_01_austen_64kb-$id.wav")
done
for rel in "${core[@]}"; do
  verify "$setup_pins" "$rel" || die "$SIGHTLINE_CACHE/$rel missing or not matching its pin: run scripts/setup.sh first"
done

# ---------------------------------------------------------------- documents (Debian packages)
# Each row: package | path inside the package | path in the cache | how to take it (copy|gunzip)
docs=(
  "r-doc-pdf|usr/share/R/doc/manual/R-data.pdf|eval/pdf/R-data.pdf|copy"
  "r-doc-pdf|usr/share/R/doc/manual/R-lang.pdf|eval/pdf/R-lang.pdf|copy"
  "debian-refcard|usr/share/doc/debian-refcard/refcard-en-a4.pdf.gz|eval/pdf/debian-refcard-en-a4.pdf|gunzip"
  "octave-doc|usr/share/doc/octave/refcard-a4.pdf|eval/pdf/octave-refcard-a4.pdf|copy"
  "auctex|usr/share/doc/auctex/tex-ref.pdf|eval/pdf/auctex-tex-ref.pdf|copy"
)

declare -A need_pkg=()
for row in "${docs[@]}"; do
  IFS='|' read -r pkg _ rel _ <<<"$row"
  verify "$pins" "$rel" || need_pkg[$pkg]=1
done

if [ ${#need_pkg[@]} -gt 0 ]; then
  mkdir -p "$SIGHTLINE_CACHE/downloads"
  dl="$(mktemp -d "$SIGHTLINE_CACHE/downloads/eval.XXXXXX")"
  trap 'rm -rf "$dl"' EXIT
  log "fetching Debian packages ${!need_pkg[*]}"
  ( cd "$dl" && apt-get download "${!need_pkg[@]}" >/dev/null 2>&1 ) || {
    as_root apt-get update -qq
    ( cd "$dl" && apt-get download "${!need_pkg[@]}" >/dev/null 2>&1 )
  } || die "apt-get download ${!need_pkg[*]} failed"
  for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$dl/root"; done
  for row in "${docs[@]}"; do
    IFS='|' read -r pkg src rel how <<<"$row"
    [ -n "${need_pkg[$pkg]:-}" ] || continue
    verify "$pins" "$rel" && continue
    [ -f "$dl/root/$src" ] || die "$pkg no longer ships $src"
    case "$how" in
      copy)   cp "$dl/root/$src" "$dl/doc.tmp" ;;
      gunzip) gunzip -c "$dl/root/$src" > "$dl/doc.tmp" ;;
      *)      die "unknown action $how" ;;
    esac
    place "$dl/doc.tmp" "$rel"
    log "  $rel ok"
  done
  rm -rf "$dl"
  trap - EXIT
fi
log "documents: ${#docs[@]} files ok in $SIGHTLINE_CACHE/eval/pdf"

# ---------------------------------------------------------------- derived talk video
video_rel="eval/video/talk.mkv"
if [ ! -f "$SIGHTLINE_CACHE/$video_rel" ]; then
  log "building $video_rel"
  "$SIGHTLINE_ROOT/tests/eval/make_talk_video.sh" "$SIGHTLINE_CACHE/$video_rel" | sed 's/^/  /'
fi
# The video is derived locally; its pin holds for Debian bookworm's FFmpeg 5.1. Another FFmpeg may
# mux different (equally valid) bytes, so a mismatch is a warning: the ground-truth times rest
# on the pinned audio clips, not on the container bytes.
if verify "$pins" "$video_rel"; then
  log "video: $video_rel ok"
else
  log "warning: $video_rel differs from its pin (another FFmpeg version?); delete it to rebuild"
fi

log "done (cache: $SIGHTLINE_CACHE; library list: tests/eval/documents.tsv)"
