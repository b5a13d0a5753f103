#!/usr/bin/env bash
# Builds the evaluation "talk" video: the video track of OpenCV's vtest.avi (79.5 s, no audio)
# with an audio track made of five LibriVox clips (Sense and Sensibility, ch. 1, from
# pocketsphinx-testdata) played back to back, the video cut to the length of the speech.
#
#   tests/eval/make_talk_video.sh [OUT]     default OUT: $SIGHTLINE_CACHE/eval/video/talk.mkv
#
# Needs the samples that scripts/setup.sh fetches. Deterministic for a given FFmpeg version:
# the video is stream-copied (no re-encode), the audio is PCM (lossless), and the Matroska
# muxer runs with +bitexact (no random UIDs, no encoder strings). It prints the clip offsets,
# which are the basis of the "time" ground truth in tests/eval/questions.jsonl.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/env.sh
source "$here/../../scripts/env.sh"

die() { printf '[talk-video] error: %s\n' "$*" >&2; exit 1; }

out="${1:-$SIGHTLINE_CACHE/eval/video/talk.mkv}"
video="$SIGHTLINE_CACHE/samples/video/vtest.avi"
lib="$SIGHTLINE_CACHE/samples/audio/librivox"
clips=(0870 0880 0890 0920 0930)

for tool in ffmpeg ffprobe; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/setup.sh installs ffmpeg)"
done
[ -f "$video" ] || die "$video missing: run scripts/setup.sh first"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Concatenation list and offsets (sum of the ffprobe durations of the clips before).
offset=0
: > "$work/list.txt"
for id in "${clips[@]}"; do
  wav="$lib/sense_and_sensibility_01_austen_64kb-$id.wav"
  [ -f "$wav" ] || die "$wav missing: run scripts/setup.sh first"
  dur="$(ffprobe -v error -show_entries format=duration -of default=nw=1:nk=1 "$wav")"
  printf "file '%s'\n" "$wav" >> "$work/list.txt"
  printf '[talk-video] clip %s  offset %6.2f s  duration %5.2f s\n' "$id" "$offset" "$dur"
  offset="$(awk -v a="$offset" -v b="$dur" 'BEGIN { printf "%.3f", a + b }')"
done
total="$offset"
printf '[talk-video] speech total %.2f s; video cut to that length\n' "$total"

mkdir -p "$(dirname "$out")"
tmp="$work/talk.mkv"
ffmpeg -nostdin -hide_banner -loglevel error -y \
  -i "$video" \
  -f concat -safe 0 -i "$work/list.txt" \
  -map 0:v:0 -map 1:a:0 -c:v copy -c:a pcm_s16le -ar 16000 -ac 1 \
  -t "$total" -fflags +bitexact -flags:a +bitexact -metadata title="Sightline eval talk" \
  "$tmp"
mv -f "$tmp" "$out"
printf '[talk-video] wrote %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
