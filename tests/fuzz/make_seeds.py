#!/usr/bin/env python3
"""Write the seeds of the fuzz targets added for issue #26 into tests/fuzz/corpus/<target>/.

    python3 tests/fuzz/make_seeds.py [--out tests/fuzz/corpus] [--only fuzz_pdf,fuzz_image,...]

Every seed is small (a few KB at most) and made here, from nothing downloaded:
  fuzz_pdf            hand-written PDFs (text, Info, outline, page labels, URI and GoTo links,
                      rotation, a Flate content stream, a TJ array)
  fuzz_image          PNG and BMP written here; JPEG, TIFF and WebP through the ffmpeg CLI when
                      it is installed (skipped otherwise)
  fuzz_tokenizer      texts for the synthetic vocabularies and whole fuzzed vocabularies
  fuzz_model_load     tiny llama models through tests/reference/model/make_tiny_model.py (needs
                      numpy + gguf: run with $SIGHTLINE_VENV/bin/python; skipped otherwise)
  fuzz_library        codec blobs and damaged-row records
  fuzz_document_json  JSON texts, an answer as the library stores it, a document description
  fuzz_gguf           regression seed: arrays of count 0 of every kind
The formats the targets expect are described at the top of each tests/fuzz/fuzz_*.cpp.
Deterministic: running it twice writes the same bytes (ffmpeg's output aside).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_SEED = 64 * 1024


def write(out: Path, target: str, name: str, data: bytes) -> None:
    if len(data) > MAX_SEED:
        raise SystemExit(f"{target}/{name}: {len(data)} bytes, over the {MAX_SEED}-byte seed limit")
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# ------------------------------------------------------------------------------------------ PDF

def pdf(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    """A PDF from its objects (object i + 1 is objects[i]) with a correct xref table."""
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, trailer_extra, xref)
    return bytes(out)


def stream(data: bytes, flate: bool = False) -> bytes:
    if flate:
        data = zlib.compress(data, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def pdf_seeds(out: Path) -> None:
    t = "fuzz_pdf"
    text = b"BT /F1 12 Tf 72 720 Td (Hello, fuzzed world.) Tj 0 -16 Td (Second line here.) Tj ET"
    write(out, t, "hello.pdf", pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >>"
        b" /Contents 4 0 R >>",
        stream(text),
        FONT,
    ]))

    # Two pages: outline (nested), page labels (roman, then decimal from 1), a URI link and a
    # GoTo link, an Info dictionary with dates.
    p1 = b"BT /F1 18 Tf 72 700 Td (Chapter one) Tj /F1 11 Tf 0 -30 Td (See page two.) Tj ET"
    p2 = b"BT /F1 18 Tf 72 700 Td (Chapter two) Tj /F1 11 Tf 0 -30 Td [(Kerned) -250 (words)] TJ ET"
    write(out, t, "outline_labels_links.pdf", pdf([
        b"<< /Type /Catalog /Pages 2 0 R /Outlines 7 0 R /PageLabels << /Nums [0 << /S /r >> 1"
        b" << /S /D /St 1 /P (p-) >>] >> >>",
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 10 0 R >>"
        b" >> /Contents 5 0 R /Annots [11 0 R 12 0 R] >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 10 0 R >>"
        b" >> /Contents 6 0 R >>",
        stream(p1),
        stream(p2),
        b"<< /Type /Outlines /First 8 0 R /Last 9 0 R /Count 2 >>",
        b"<< /Title (One) /Parent 7 0 R /Next 9 0 R /Dest [3 0 R /XYZ 0 792 0] /First 13 0 R"
        b" /Last 13 0 R /Count 1 >>",
        b"<< /Title (Two) /Parent 7 0 R /Prev 8 0 R /Dest [4 0 R /Fit] >>",
        FONT,
        b"<< /Type /Annot /Subtype /Link /Rect [72 660 200 680] /Border [0 0 0]"
        b" /A << /S /URI /URI (https://example.org/a) >> >>",
        b"<< /Type /Annot /Subtype /Link /Rect [72 640 200 660] /Dest [4 0 R /Fit] >>",
        b"<< /Title (One, nested) /Parent 8 0 R /Dest [3 0 R /Fit] >>",
        b"<< /Title (Fuzz seed) /Author (Sightline) /CreationDate (D:20240102030405Z)"
        b" /ModDate (D:20240102030405+01'00') >>",
    ], b"/Info 14 0 R "))

    # A rotated page whose content stream is Flate-compressed, with words in two columns.
    cols = b"BT /F1 10 Tf 72 700 Td (Left column text) Tj 300 0 Td (Right column text) Tj ET\n" * 6
    write(out, t, "rotated_flate.pdf", pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Rotate 90 /Resources << /Font <<"
        b" /F1 5 0 R >> >> /Contents 4 0 R >>",
        stream(cols, flate=True),
        FONT,
    ]))

    # A page without text (would be OCRed; the target has OCR off) and one with a CropBox.
    write(out, t, "blank_and_cropped.pdf", pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /CropBox [50 50 400 400]"
        b" /Resources << /Font << /F1 6 0 R >> >> /Contents 5 0 R >>",
        stream(b"BT /F1 9 Tf 60 380 Td (Cropped) Tj ET"),
        FONT,
    ]))


# ---------------------------------------------------------------------------------------- images

def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, color_type: int, rows: list[bytes], text: dict | None = None,
        bit_depth: int = 8) -> bytes:
    raw = b"".join(b"\x00" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth,
                                                               color_type, 0, 0, 0))
    for k, v in (text or {}).items():
        out += png_chunk(b"tEXt", k.encode() + b"\x00" + v.encode())
    out += png_chunk(b"pHYs", struct.pack(">IIB", 11811, 11811, 1))  # 300 dpi
    out += png_chunk(b"IDAT", zlib.compress(raw, 9))
    return out + png_chunk(b"IEND", b"")


def bmp(width: int, height: int) -> bytes:
    row = bytearray()
    for x in range(width):
        row += bytes((x * 40 % 256, 128, 255 - x * 40 % 256))
    row += b"\x00" * ((4 - len(row) % 4) % 4)
    pixels = bytes(row) * height
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def image_seeds(out: Path) -> None:
    t = "fuzz_image"
    rows_rgb = [b"".join(bytes(((x * 37) % 256, (y * 53) % 256, 90)) for x in range(8)) for y in range(8)]
    write(out, t, "rgb8x8_text.png", png(8, 8, 2, rows_rgb, {"Title": "Seed", "Author": "Sightline"}))
    rows_ga = [b"".join(bytes(((x + y) * 20 % 256, 200)) for x in range(5)) for y in range(3)]
    write(out, t, "gray_alpha5x3.png", png(5, 3, 4, rows_ga))
    rows_1bit = [bytes((0b10101010,)) for _ in range(6)]
    write(out, t, "bilevel8x6.png", png(8, 6, 0, rows_1bit, bit_depth=1))
    write(out, t, "rgb6x4.bmp", bmp(6, 4))
    ffmpeg = shutil.which("ffmpeg")
    if not ffmpeg:
        print("fuzz_image: no ffmpeg; JPEG, TIFF and WebP seeds skipped", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src.png"
        src.write_bytes(png(8, 8, 2, rows_rgb))
        for name, extra in (("small.jpg", ["-q:v", "8"]), ("small.tiff", []),
                            ("small.webp", ["-lossless", "1"])):
            dst = Path(tmp) / name
            r = subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(src), *extra, str(dst)],
                               capture_output=True)
            if r.returncode == 0 and dst.exists():
                write(out, t, name, dst.read_bytes())
            else:
                print(f"fuzz_image: ffmpeg could not write {name}; skipped", file=sys.stderr)


# ------------------------------------------------------------------------------------- tokenizer

def tokenizer_seeds(out: Path) -> None:
    t = "fuzz_tokenizer"
    text = "The cat sat on the mat in 2024, isn't it?\n\nYes: 12345 caf\u00e9 \u65e5\u672c\u8a9e  \t end."
    # Synthetic vocabularies: flags bit 0 model, bits 1-2 pre-tokenizer, 3 bos, 4 eos, 5 space
    # prefix, 6 parse_special.
    write(out, t, "gpt2_smollm.txt", bytes([0x00]) + text.encode())
    write(out, t, "gpt2_llama3_bos.txt", bytes([0x02 | 0x08]) + text.encode())
    write(out, t, "gpt2_qwen2_eos.txt", bytes([0x04 | 0x10]) + text.encode())
    write(out, t, "gpt2_specials.txt", bytes([0x06 | 0x40]) +
          b"<|im_start|>user\nHi <tool> there<|im_end|>\n<|im_start|>assistant\n")
    write(out, t, "spm_prefix.txt", bytes([0x01 | 0x20 | 0x08]) + text.encode())
    write(out, t, "spm_specials.txt", bytes([0x01 | 0x40]) + b"[INST] the cat </s><s> \xff\xfe bytes")
    # Whole vocabularies: tokens (leading digit: type) / merges / template / text.
    vocab = "\n".join(["3<s>", "3</s>", "2<unk>", "6<0x41>", "h", "e", "he", "l", "o", "hel",
                       "\u0120", "\u0120h", "4<tool>", "5unused"])
    merges = "h e\nhe l\n\u0120 h"
    desc = bytes([0x05]) + vocab.encode() + b"\n--\n" + merges.encode() + \
        b"\n--\n<|im_start|>system\\nYou are a seed.<|im_end|>\n--\nhello hel <tool> he"
    write(out, t, "vocab_gpt2.bin", bytes([0x80]) + desc)
    write(out, t, "vocab_spm.bin", bytes([0x80 | 0x01 | 0x20]) + desc)
    write(out, t, "vocab_llama3_template.bin", bytes([0x80 | 0x02 | 0x40]) + bytes([0x06]) +
          vocab.encode() + b"\n--\n" + merges.encode() +
          b"\n--\n<|start_header_id|>Cutting Knowledge Date\n--\nsystem\n\nuser text\n\nassistant")


# -------------------------------------------------------------------------------------- model

def model_seeds(out: Path) -> None:
    t = "fuzz_model_load"
    try:
        import numpy  # noqa: F401
        import gguf  # noqa: F401
    except ImportError:
        print("fuzz_model_load: needs numpy + gguf (run with $SIGHTLINE_VENV/bin/python); skipped",
              file=sys.stderr)
        return
    sys.path.insert(0, str(ROOT / "tests" / "reference" / "model"))
    import make_tiny_model  # noqa: E402

    small = ["--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--n-kv-heads", "1",
             "--ffn", "32", "--vocab", "262", "--ctx", "64"]
    variants = {
        "tied_q8_0.gguf": ["--wtype", "q8_0"],
        "untied_f16_q4_0_rope_linear.gguf": ["--untied", "--wtype", "f16", "--embd-type", "q8_0",
                                             "--out-type", "q4_0", "--rope-linear-factor", "2",
                                             "--n-layers", "2"],
        "msa_indexer.gguf": ["--wtype", "q8_0", "--msa", "--n-layers", "2", "--msa-dense-layers",
                             "1"],
        "mixed_q4_1_q5_0.gguf": ["--attn-type", "q4_1", "--ffn-type", "q5_0", "--embd-type", "q5_1"],
        "minimax_m3_q8_0.gguf": ["--arch", "minimax-m3", "--wtype", "q8_0", "--n-layers", "2",
                                 "--experts", "4", "--expert-ffn", "32", "--msa-dense-layers", "1"],
        "mixtral_f16.gguf": ["--experts", "3", "--experts-used", "2", "--wtype", "f16"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in variants.items():
            dst = Path(tmp) / name
            with contextlib.redirect_stdout(io.StringIO()):
                make_tiny_model.main([str(dst), *small, *extra])
            write(out, t, name, dst.read_bytes())


# ------------------------------------------------------------------------------------ library

def library_seeds(out: Path) -> None:
    t = "fuzz_library"
    # Codec mode (even first byte): block lines blob, spans blob, id lists, enumerations.
    lines = b""
    for text, box in ((b"Hello", (0.1, 0.1, 0.3, 0.2)), (b"world", (0.35, 0.1, 0.6, 0.2))):
        lines += struct.pack("<I", len(text)) + text + struct.pack("<4f", *box)
    write(out, t, "codec_lines.bin", b"\x00" + lines)
    spans = b"".join(struct.pack("<qqiii", b, e, u, blk, v)
                     for b, e, u, blk, v in ((0, 3, 0, -1, -1), (3, 9, 0, 0, -1), (9, 12, 1, -1, 0)))
    write(out, t, "codec_spans.bin", b"\x00" + spans)
    write(out, t, "codec_ids.txt", b"\x00" + b"3,1,7,-2,9223372036854775807")
    write(out, t, "codec_kind.txt", b"\x00" + b"transcript")
    # Regressions: std::stoll's own exceptions escaped decode_ids ("-", out of range).
    write(out, t, "codec_ids_damaged.txt", b"\x00" + b"-")
    write(out, t, "codec_ids_huge.txt", b"\x00" + b"1,99999999999999999999")
    # Damaged-row mode (odd first byte): records [slot][length][bytes]; slots as kSlots in
    # fuzz_library.cpp (0 documents.kind, 2 documents.unit_count, 6 units.idx, 13 blocks.lines,
    # 19 visuals.encoded, 30 token_streams.tokens, 31 token_streams.spans, 34 kv_caches.documents,
    # 42 reports.chats); bit 7: NULL.
    def rec(slot: int, value: bytes) -> bytes:
        return bytes([slot, len(value)]) + value
    write(out, t, "rows_kinds.bin", b"\x01" + rec(0, b"video") + rec(7, b"segment") +
          rec(12, b"caption") + rec(18, b"frame"))
    # Regression: a unit count above the stored units made load_unit throw std::out_of_range.
    write(out, t, "rows_counts.bin", b"\x01" + rec(2, b"5") + rec(6, b"1") + rec(15, b"3"))
    write(out, t, "rows_blobs.bin", b"\x01" + rec(13, lines[:20]) + rec(31, spans[:28]) +
          rec(30, b"\x01\x00\x00\x00\x02\x00\x00\x00"))
    write(out, t, "rows_ids.bin", b"\x01" + rec(34, b"1,1") + rec(42, b"1") + rec(0x80 | 22, b""))


# ------------------------------------------------------------------------------ document JSON

def document_json_seeds(out: Path) -> None:
    t = "fuzz_document_json"
    answer = (
        '{"version":1,"question":"What is R?","text":"R is a language [1]. It has packages [2].",'
        '"document_mass":0.75,"steps":12,"stop_reason":"eos","sentences":['
        '{"begin":0,"end":20,"supports":[{"citation":0,"mass":0.5,"lexical":0.25,"semantic":0.5,'
        '"verified":true,"weak":false}]},'
        '{"begin":21,"end":41,"supports":[{"citation":1,"mass":0.1,"lexical":0,"verified":false,'
        '"weak":true}]}],'
        '"citations":[{"number":1,"unit":3,"locator":"R-intro.pdf p. 4","path":"/d/R-intro.pdf",'
        '"kind":0,"document":"ab12","unit_index":3,"bbox":[0.1,0.2,0.9,0.4],"mass":0.5,"share":0.6,'
        '"begin":10,"end":90,"snippet":"R is","text":"R is a language","lexical":0.3,"score":1.5},'
        '{"number":2,"unit":0,"locator":"talk.mp4 00:01:02","path":"/d/talk.mp4","kind":3,'
        '"document":"cd34","unit_index":0,"time":[62.0,70.5],"mass":0.2,"share":0.4,"begin":0,'
        '"end":5,"snippet":"pkgs","text":"packages \\u00e9\\ud83d\\ude00","lexical":0.1,'
        '"semantic":0.2,"score":0.5}],'
        '"ranking":[{"path":"/d/R-intro.pdf","unit_index":3,"mass":0.5,"lexical":0.3,"bm25":2.5,'
        '"question":0.1,"semantic":0.4,"score":1.5},{"path":"/d/talk.mp4","unit_index":0,'
        '"time":[62,70.5],"mass":0.2,"lexical":0,"bm25":0,"question":0,"score":0.5}]}')
    write(out, t, "answer.json", b"\x00" + answer.encode())
    write(out, t, "config.json", b"\x00" + b'{"hidden_size":384,"layers":[1,2,3],"name":"x\\n\\"y",'
          b'"big":18446744073709551615,"neg":-1.5e-3,"ok":true,"none":null,"nested":{"a":[{}]}}')
    write(out, t, "strings.json", b"\x00" + '["\\u0000", "caf\u00e9", "\\ud834\\udd1e", ""]'.encode())
    # Document mode: strings end at '\n', numbers are raw little-endian bytes (see fuzz_document).
    doc = bytearray(b"\x01")
    doc += b"/docs/seed.pdf\nabcdef\nSeed title\n" + b"\x00" + struct.pack("<d", 0.0)
    doc += b"author\nSightline\n"
    for i in range(2):
        doc += bytes([0xF0 | i]) + b"%d\n" % (i + 1) + struct.pack("<dd", 1.0 * i, 1.0 * i + 1)
        doc += struct.pack("<ff", 612, 792) + b"\x01" + b"\x01" + b"Block text \xc3\xa9\xff\n"
        doc += struct.pack("<ffff", 0.1, 0.1, 0.9, 0.2) + struct.pack("<dd", 0, 1)
        doc += struct.pack("<f", 0.5) + b"line\n" + struct.pack("<f", 0.1)
        doc += b"\x02" + struct.pack("<d", 1.5) + struct.pack("<hh", 64, 48)
        doc += b"frame:pts=1\nimage/png\n" + b"Chapter\n" + b"\x00\x00" + b"\x00" + b"https://x\n" + b"\x01"
    write(out, t, "document.bin", bytes(doc))


# --------------------------------------------------------------------------------------- gguf

def gguf_seeds(out: Path) -> None:
    def s(x: bytes) -> bytes:
        return struct.pack("<Q", len(x)) + x

    kvs = [
        (b"general.architecture", struct.pack("<I", 8) + s(b"llama")),
        (b"tokenizer.ggml.token_type", struct.pack("<IIQ", 9, 5, 0)),   # int32[0]
        (b"tokenizer.ggml.scores", struct.pack("<IIQ", 9, 6, 0)),       # float32[0]
        (b"tokenizer.ggml.tokens", struct.pack("<IIQ", 9, 8, 0)),       # string[0]
        (b"nested", struct.pack("<IIQ", 9, 9, 0)),                      # array[0]
        (b"bytes", struct.pack("<IIQ", 9, 0, 0)),                       # uint8[0], ends the file
    ]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for k, v in kvs:
        body += s(k) + v
    write(out, "fuzz_gguf", "empty_arrays.gguf", body)


GENERATORS = {
    "fuzz_pdf": pdf_seeds,
    "fuzz_image": image_seeds,
    "fuzz_tokenizer": tokenizer_seeds,
    "fuzz_model_load": model_seeds,
    "fuzz_library": library_seeds,
    "fuzz_document_json": document_json_seeds,
    "fuzz_gguf": gguf_seeds,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / "corpus")
    ap.add_argument("--only", default="", help="comma-separated targets (default: all)")
    args = ap.parse_args(argv)
    only = [x for x in args.only.split(",") if x]
    for name, gen in GENERATORS.items():
        if not only or name in only:
            gen(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
