#!/usr/bin/env bash
# The .deb installs like a desktop program: `cpack -G DEB` in the build folder, the package unpacked
# (dpkg-deb -x, no root needed) into a temporary root, and from another folder its binaries run:
# `sightline --version` / `--help` (no GUI), and `sightline-cli quickstart` (add the samples, ask,
# print an answer with citations, write the report) on a fresh library. Checks the package's
# desktop entry, icon, AppStream data and dependencies (the OCR and speech data included).
#
#   tests/app/deb_quickstart.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "deb_quickstart: $*" >&2; exit 1; }

( cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1 ) || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb="$(ls "$work"/pkg/*.deb)"
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"
dpkg-deb -x "$deb" "$work/root"
for f in usr/bin/sightline usr/bin/sightline-cli usr/share/applications/sightline.desktop \
         usr/share/icons/hicolor/scalable/apps/sightline.svg usr/share/metainfo/sightline.metainfo.xml; do
  [ -f "$work/root/$f" ] || fail "the package lacks /$f"
done
grep -q '^Exec=sightline' "$work/root/usr/share/applications/sightline.desktop" || fail "the desktop entry does not run sightline"
python3 -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" \
  "$work/root/usr/share/metainfo/sightline.metainfo.xml" || fail "the AppStream data is not XML"
depends="$(dpkg-deb -f "$deb" Depends)"
for d in libqt6widgets6 libpoppler-qt6-3 tesseract-ocr-eng pocketsphinx-en-us qt6-qpa-plugins; do
  case "$depends" in *"$d"*) ;; *) fail "Depends lacks $d: $depends" ;; esac
done

# From another folder, with the installed binaries only.
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
bin="$work/root/usr/bin"
"$bin/sightline-cli" --version | head -3
QT_QPA_PLATFORM=offscreen "$bin/sightline" --version >/dev/null || fail "sightline --version failed"
QT_QPA_PLATFORM=offscreen "$bin/sightline" --help | grep -q -i usage || fail "sightline --help printed no usage"
"$bin/sightline-cli" quickstart --library "$work/library" --ctx 2048 --effort low --report "$work/report.md" \
  >"$work/quickstart.log" 2>&1 || { tail -40 "$work/quickstart.log" >&2; fail "quickstart failed"; }
grep -q "Answer with citations" "$work/quickstart.log" || { tail -40 "$work/quickstart.log" >&2; fail "no answer"; }
grep -Eq '^\[1\] ' "$work/quickstart.log" || { tail -40 "$work/quickstart.log" >&2; fail "no numbered source"; }
[ -s "$work/report.md" ] || fail "no report written"
grep -E '^\[1\] ' "$work/quickstart.log" | head -3
echo "deb_quickstart: ok"
