#!/usr/bin/env python3
"""Word error rate of Sightline's speech transcription beside faster-whisper, in one run.

    /work/fw-venv/bin/python tests/reference/whisper/wer_eval.py --cli build/ci/app/sightline-cli

Sets (each file has a reference transcript):
  librivox  pocketsphinx-testdata's five LibriVox clips (scripts/setup.sh installs them)
  cards     pocketsphinx-testdata's five "cards" recordings (short commands: "ten of clubs")
  espeak    three spoken tracks (~40 s each, over one 30 s window) that espeak-ng makes from
            espeak_sentences.txt (our own sentences), three voices and speeds; needs espeak-ng
Sightline: `sightline-cli ingest --json FILE` (what `add` stores: greedy with the temperature
fallback and word times) with each SIGHTLINE_WHISPER_COMPUTE of ingest/audio/whisper_speech.cpp:
default (int8 encoder, Q8_0 decoder), q8 (float32 encoder, Q8_0 decoder), float32, int8. faster-whisper (PyPI, when importable;
same model folder, 2 CPU threads, int8): greedy with word times (as ingest runs), and its
defaults (beam 5, no word times), both with the temperature fallback. Text is compared after lower-casing, dropping punctuation, splitting hyphens and
spelling out numbers up to 99. Prints one table (errors / words per set) and the seconds each
engine spent (Sightline's include starting the CLI and loading the model for every file), and
how many of faster-whisper's phrase bounds (its greedy run with word times, starts and ends) have
one of the engine's within 0.5 s (the issue's boundary goal).

--seeds N runs the whole set N times: the files as they are, then N - 1 copies with a dither of
one least significant bit (each 16-bit sample plus -1, 0 or +1 at random, seeded; inaudible, 90 dB
under full scale), every engine on the same copies. int8 transcription is chaotic at near-ties:
a change of 1e-7 in the features moves the int8 encoder's output by ~1.5 % (as far as
CTranslate2's int8 and ours are from each other), which flips a word here and there, so one
pass over 477 words measures a draw, not the engine; the table then gives each engine's errors
summed over the passes and the range of its per-pass totals.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time
import wave
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("SIGHTLINE_CACHE", Path.home() / ".cache" / "sightline"))
ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen " \
       "fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def spell(n: int) -> str:
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    return str(n)


def words(text: str) -> list:
    text = text.lower().replace("-", " ")
    text = re.sub(r"\d+", lambda m: " " + spell(int(m.group())) + " ", text)
    text = re.sub(r"[^a-z' ]", " ", text).replace("mr ", "mister ")
    return text.split()


def edit_distance(ref: list, hyp: list) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def librivox() -> list:
    d = CACHE / "samples" / "audio" / "librivox"
    refs = {}
    for line in (d / "transcription").read_text().splitlines():
        m = re.match(r"(.*)\((.*)\)\s*$", line)
        if m:
            refs[m.group(2).strip()] = m.group(1).replace("<s>", "").replace("</s>", "").strip()
    return [(wav, refs[wav.stem]) for wav in sorted(d.glob("*.wav")) if wav.stem in refs]


def cards() -> list:
    d = CACHE / "samples" / "audio" / "cards"
    if not (d / "cards.transcription").exists():
        return []
    out = []
    for line in (d / "cards.transcription").read_text().splitlines():
        m = re.match(r"(.*)\((.*)\)\s*$", line)
        if m:
            text = m.group(1).replace("<s>", "").replace("</s>", "").strip()
            out.append((d / (m.group(2).strip() + ".wav"), text))
    return out


def espeak(tmp: Path) -> list:
    sentences = (Path(__file__).parent / "espeak_sentences.txt").read_text().split("\n")
    sentences = [s.strip() for s in sentences if s.strip()]
    voices = [("en-us", 160), ("en-gb", 150), ("en-us+f3", 175)]
    out = []
    per = (len(sentences) + len(voices) - 1) // len(voices)
    for i, (voice, speed) in enumerate(voices):
        text = " ".join(sentences[i * per:(i + 1) * per])
        wav = tmp / f"espeak-{i}.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(wav), text], check=True)
        out.append((wav, text))
    return out


def dithered(wav: Path, out: Path, seed: int) -> Path:
    """`wav` (16-bit PCM) with -1/0/+1 added to each sample (random, from `seed`), as `out`."""
    import numpy as np
    with wave.open(str(wav)) as w:
        params = w.getparams()
        if params.sampwidth != 2:
            raise SystemExit(f"{wav}: --seeds needs 16-bit PCM")
        pcm = np.frombuffer(w.readframes(params.nframes), dtype="<i2").astype(np.int32)
    rng = np.random.default_rng(seed)
    pcm = np.clip(pcm + rng.integers(-1, 2, size=pcm.shape), -32768, 32767).astype("<i2")
    with wave.open(str(out), "wb") as w:
        w.setparams(params)
        w.writeframes(pcm.tobytes())
    return out


def sightline(cli: str, wav: Path, compute: str):
    """(text, phrase bounds [t0, t1, t0, t1, ...] in seconds) of what `ingest` stores."""
    env = dict(os.environ, SIGHTLINE_WHISPER_COMPUTE=compute)
    r = subprocess.run([cli, "ingest", "--json", str(wav)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{cli} ingest {wav}: {r.stderr}")
    doc = json.loads(r.stdout)
    blocks = [b for u in doc["units"] for b in u["blocks"] if b.get("role") == "transcript"]
    return " ".join(b["text"] for b in blocks), [t for b in blocks for t in (b["t0"], b["t1"])]


def bounds_within(want: list, got: list, tol: float = 0.5) -> int:
    """How many of `want`'s phrase bounds have one of `got`'s within tol seconds."""
    return sum(1 for b in want if got and min(abs(b - g) for g in got) <= tol)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=str(ROOT / "build" / "ci" / "app" / "sightline-cli"))
    ap.add_argument("--model", default=str(CACHE / "models" / "whisper-tiny.en"))
    ap.add_argument("--show", action="store_true", help="print each file's hypotheses")
    ap.add_argument("--seeds", type=int, default=1,
                    help="passes: the files, then dithered copies (see the module's text)")
    ap.add_argument("--engines", default="",
                    help="comma-separated substrings: only the engines whose name holds one")
    args = ap.parse_args()
    try:
        from faster_whisper import WhisperModel
        fw = WhisperModel(args.model, device="cpu", compute_type="int8", cpu_threads=2)
    except ImportError:
        fw = None
        print("faster-whisper is not importable: its columns are left out")
    engines = {
        "Sightline default (int8/Q8_0)": lambda wav: sightline(args.cli, wav, "default"),
        "Sightline q8 (f32/Q8_0)": lambda wav: sightline(args.cli, wav, "q8"),
        "Sightline float32": lambda wav: sightline(args.cli, wav, "float32"),
        "Sightline int8": lambda wav: sightline(args.cli, wav, "int8"),
    }
    if fw:
        def run_fw(wav, beam):
            segments, _ = fw.transcribe(str(wav), beam_size=beam, language="en", word_timestamps=beam == 1)
            segments = list(segments)
            return " ".join(s.text for s in segments), [t for s in segments for t in (s.start, s.end)]
        engines["faster-whisper int8 greedy+words"] = lambda wav: run_fw(wav, 1)
        engines["faster-whisper int8 beam 5"] = lambda wav: run_fw(wav, 5)
    if args.engines:
        keep = [k.strip() for k in args.engines.split(",") if k.strip()]
        engines = {e: run for e, run in engines.items() if any(k in e for k in keep)}
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"librivox": librivox(), "cards": cards()}
        try:
            sets["espeak"] = espeak(Path(tmp))
        except FileNotFoundError:
            print("espeak-ng is not installed: the espeak set is left out")
        errors = {e: {s: 0 for s in sets} for e in engines}
        per_pass = {e: [] for e in engines}
        # Phrase bounds against faster-whisper's greedy run with word times (as ingest runs).
        ref_engine = "faster-whisper int8 greedy+words"
        bounds = {e: [0, 0] for e in engines}
        seconds = {e: 0.0 for e in engines}
        n_words = {s: 0 for s in sets}
        for seed in range(args.seeds):
            before = {e: sum(errors[e].values()) for e in engines}
            for name, files in sets.items():
                for i, (wav, ref) in enumerate(files):
                    if seed > 0:
                        wav = dithered(wav, Path(tmp) / f"d-{name}-{i}.wav", seed * 1000 + i)
                    ref_words = words(ref)
                    n_words[name] += len(ref_words)
                    got = {}
                    for e, run in engines.items():
                        t = time.time()
                        hyp, got[e] = run(wav)
                        seconds[e] += time.time() - t
                        errors[e][name] += edit_distance(ref_words, words(hyp))
                        if args.show:
                            print(f"{e:28s} {seed} {wav.name}: {hyp.strip()}")
                    if ref_engine in got:
                        for e in engines:
                            bounds[e][0] += bounds_within(got[ref_engine], got[e])
                            bounds[e][1] += len(got[ref_engine])
            for e in engines:
                per_pass[e].append(sum(errors[e].values()) - before[e])
    print("%-32s" % "engine" + "".join("%18s" % s for s in sets) + "%18s%10s%18s" % ("all", "seconds", "bounds <= 0.5 s") +
          ("   per pass" if args.seeds > 1 else ""))
    total_words = sum(n_words.values())
    for e in engines:
        cells = "".join("%18s" % ("%d/%d %.1f%%" % (errors[e][s], n_words[s], 100.0 * errors[e][s] / max(1, n_words[s])))
                        for s in sets)
        tot = sum(errors[e].values())
        spread = ("   %d..%d" % (min(per_pass[e]), max(per_pass[e]))) if args.seeds > 1 else ""
        b = bounds[e]
        bcell = "%d/%d %.1f%%" % (b[0], b[1], 100.0 * b[0] / b[1]) if b[1] else "-"
        print("%-32s" % e + cells + "%18s%10.1f%18s" % ("%d/%d %.2f%%" % (tot, total_words, 100.0 * tot / total_words), seconds[e], bcell) + spread)

if __name__ == "__main__":
    main()
