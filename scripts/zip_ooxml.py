#!/usr/bin/env python3
"""Zip an unpacked Office Open XML package (e.g. pandoc's reference PPTX) back into a file.

[Content_Types].xml goes first, as the format wants; every entry gets a fixed timestamp and
permissions so the same input always gives the same bytes (and the same pinned sha256).

usage: zip_ooxml.py SRC_DIR OUT_FILE
"""
import os
import sys
import zipfile


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    names = []
    for root, _dirs, files in os.walk(src):
        for f in files:
            names.append(os.path.relpath(os.path.join(root, f), src).replace(os.sep, "/"))
    names.sort(key=lambda n: (n != "[Content_Types].xml", n))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n in names:
            info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with open(os.path.join(src, n), "rb") as fh:
                z.writestr(info, fh.read(), compresslevel=6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
