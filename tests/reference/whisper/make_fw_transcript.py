#!/usr/bin/env python3
"""Regenerates tests/reference/whisper/fw_transcript.json: faster-whisper's own long-form
transcription of a ~54 s recording made from the five LibriVox clips of pocketsphinx-testdata
(the five in order, twice, each followed by 0.5 s of silence), for tst_transcriber.

    /work/fw-venv/bin/python tests/reference/whisper/make_fw_transcript.py \
        [--model DIR] [--audio DIR] [--out tests/reference/whisper/fw_transcript.json]

Runs faster-whisper on the same model directory with compute_type float32, beam_size 1,
temperature 0 (no fallback), its other defaults (timestamps, condition_on_previous_text, no
VAD, no word timestamps), the samples passed as an array (no decoding or resampling), and
records every segment (start, end, text, tokens, avg_logprob, no_speech_prob). Also records
faster-whisper's default int8 transcription (beam 5) text and its run time, and the float32 run's
time, for the side-by-side report.
"""
import argparse
import json
import os
import time
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("SIGHTLINE_CACHE", Path.home() / ".cache" / "sightline"))
CLIPS = ["0870", "0880", "0890", "0920", "0930"]
GAP = 8000  # 0.5 s of zeros after each clip


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


def recording(audio_dir: Path) -> np.ndarray:
    parts = []
    for _ in range(2):
        for c in CLIPS:
            parts.append(read_wav(audio_dir / f"sense_and_sensibility_01_austen_64kb-{c}.wav"))
            parts.append(np.zeros(GAP, dtype=np.float32))
    return np.concatenate(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(CACHE / "models" / "whisper-tiny.en"))
    ap.add_argument("--audio", default=str(CACHE / "samples" / "audio" / "librivox"))
    ap.add_argument("--out", default=str(HERE / "fw_transcript.json"))
    args = ap.parse_args()

    import faster_whisper
    from faster_whisper import WhisperModel

    audio = recording(Path(args.audio))
    out = {"faster_whisper": faster_whisper.__version__, "samples": int(audio.size),
           "recipe": "clips 0870 0880 0890 0920 0930, twice, each + 8000 zero samples"}

    m = WhisperModel(args.model, device="cpu", compute_type="float32", cpu_threads=2)
    t = time.time()
    segments, _ = m.transcribe(audio, beam_size=1, temperature=0.0, language="en")
    segs = list(segments)
    out["float32_greedy_seconds"] = time.time() - t
    out["segments"] = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                        "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob}
                       for s in segs]

    m8 = WhisperModel(args.model, device="cpu", compute_type="int8", cpu_threads=2)
    t = time.time()
    segments, _ = m8.transcribe(audio, language="en")
    out["int8_default_text"] = "".join(s.text for s in segments)
    out["int8_default_seconds"] = time.time() - t
    t = time.time()
    segments, _ = m8.transcribe(audio, beam_size=1, temperature=0.0, language="en")
    out["int8_greedy_text"] = "".join(s.text for s in segments)
    out["int8_greedy_seconds"] = time.time() - t

    for s in out["segments"]:
        print("[%6.2f %6.2f]%s" % (s["start"], s["end"], s["text"]))
    print("float32 greedy %.2f s, int8 default %.2f s, int8 greedy %.2f s for %.1f s of audio" % (
        out["float32_greedy_seconds"], out["int8_default_seconds"], out["int8_greedy_seconds"],
        audio.size / 16000))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
