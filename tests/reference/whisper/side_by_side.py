#!/usr/bin/env python3
"""Seconds to transcribe the same recording, Sightline beside faster-whisper, in one run.

    /work/fw-venv/bin/python tests/reference/whisper/side_by_side.py [--build build/release] [--rounds 3]

The recording is make_fw_transcript.py's (~54 s from pocketsphinx-testdata's LibriVox clips).
Each round runs faster-whisper (2 CPU threads; float32 greedy, int8 greedy, int8 beam 5) and then
Sightline's tst_transcriber rows matchesFasterWhisper (float32 greedy), beamSearch (float32
beam 5), int8MatchesFasterWhisperInt8 (int8 greedy) and defaultComputeNearFloat32 (what ingest
runs: int8 encoder, Q8_0 decoder; greedy) on a 2-thread pool, alternating so both see the same machine load; the best of the rounds
is reported, as seconds and seconds per audio minute. The whisper-tiny.en model of
scripts/setup.sh is used by both.
"""
import argparse
import re
import subprocess
import time
from pathlib import Path

from make_fw_transcript import CACHE, recording

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build" / "release"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from faster_whisper import WhisperModel

    model_dir = str(CACHE / "models" / "whisper-tiny.en")
    audio = recording(CACHE / "samples" / "audio" / "librivox")
    minutes = audio.size / 16000 / 60
    fw = {ct: WhisperModel(model_dir, device="cpu", compute_type=ct, cpu_threads=2)
          for ct in ("float32", "int8")}
    runs = {"faster-whisper float32 greedy": ("float32", 1), "faster-whisper int8 greedy": ("int8", 1),
            "faster-whisper int8 beam 5": ("int8", 5), "faster-whisper float32 beam 5": ("float32", 5)}
    best = {}
    test = Path(args.build) / "tests" / "core" / "whisper" / "tst_transcriber"
    for _ in range(args.rounds):
        for name, (ct, beam) in runs.items():
            t = time.time()
            segments, _ = fw[ct].transcribe(audio, beam_size=beam, temperature=0.0, language="en")
            list(segments)
            best[name] = min(best.get(name, 1e9), time.time() - t)
        out = subprocess.run([str(test), "matchesFasterWhisper", "beamSearch",
                              "int8MatchesFasterWhisperInt8", "defaultComputeNearFloat32"],
                             capture_output=True, text=True).stdout
        m = re.search(r"of audio in ([0-9.]+) s \(3 windows\)", out)
        b = re.search(r"beam 5: [0-9.]+ s of audio in ([0-9.]+) s", out)
        if m:
            best["Sightline float32 greedy"] = min(best.get("Sightline float32 greedy", 1e9), float(m.group(1)))
        i8 = re.search(r"int8: [0-9.]+ s of audio in ([0-9.]+) s", out)
        if i8:
            best["Sightline int8 greedy"] = min(best.get("Sightline int8 greedy", 1e9), float(i8.group(1)))
        dflt = re.search(r"default \(int8 encoder, Q8_0 decoder\): [0-9.]+ s of audio in ([0-9.]+) s", out)
        if dflt:
            name = "Sightline default greedy (int8 enc, Q8_0 dec)"
            best[name] = min(best.get(name, 1e9), float(dflt.group(1)))
        if b:
            best["Sightline float32 beam 5"] = min(best.get("Sightline float32 beam 5", 1e9), float(b.group(1)))
    for name in sorted(best):
        print("%-32s %6.2f s  %5.2f s per audio minute" % (name, best[name], best[name] / minutes))


if __name__ == "__main__":
    main()
