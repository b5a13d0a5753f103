#!/usr/bin/env python3
"""Regenerates tests/reference/whisper/fw_transcript.json: faster-whisper's own long-form
transcription of a ~54 s recording made from the five LibriVox clips of pocketsphinx-testdata
(the five in order, twice, each followed by 0.5 s of silence), for tst_transcriber.

    /work/fw-venv/bin/python tests/reference/whisper/make_fw_transcript.py \
        [--model DIR] [--audio DIR] [--out tests/reference/whisper/fw_transcript.json]
    # the multilingual base model (SIGHTLINE_WHISPER_BASE=1 scripts/setup.sh), language detected:
    ... make_fw_transcript.py --model ~/.cache/sightline/models/whisper-base --language auto \
        --out tests/reference/whisper/fw_transcript_base.json

Runs faster-whisper on the same model directory with compute_type float32, beam_size 1,
temperature 0 (no fallback), its other defaults (timestamps, condition_on_previous_text, no
VAD, no word timestamps), the samples passed as an array (no decoding or resampling), and
records every segment (start, end, text, tokens, avg_logprob, no_speech_prob), then again with
word_timestamps=True ("word_segments": segments with their words' text, times and
probabilities), with beam search (beam 5, "beam5_segments") and with an initial prompt
("prompted_segments"). Also records
faster-whisper's default int8 transcription (beam 5) text and its run time, and the float32 run's
time, for the side-by-side report.

Word error rate: for each clip alone, faster-whisper's text (int8 with its defaults, and float32
greedy) against the clip's line in pocketsphinx-testdata's `transcription`, after normalize()
(lowercase, every character but a-z, 0-9 and the apostrophe a space); "wer" holds the errors and
reference words summed over the five clips. tst_transcriber normalizes the same way.
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
INITIAL_PROMPT = "  Sense and Sensibility, by Jane Austen. Mr. John Dashwood, ill-disposed.  "


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


def normalize(text: str) -> list:
    return "".join(c if c.isascii() and (c.isalnum() or c == "'") else " "
                   for c in text.lower()).split()


def edit_distance(ref: list, hyp: list) -> int:
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)]


def references(audio_dir: Path) -> dict:
    """clip id -> reference words, from pocketsphinx-testdata's transcription file."""
    out = {}
    for line in open(audio_dir / "transcription", encoding="utf-8"):
        text, _, name = line.rpartition("(")
        words = [w for w in text.split() if w not in ("<s>", "</s>")]
        out[name.strip().rstrip(")")[-4:]] = normalize(" ".join(words))
    return out


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
    ap.add_argument("--language", default="en", help='"auto": let faster-whisper detect it')
    args = ap.parse_args()
    lang = None if args.language == "auto" else args.language

    import faster_whisper
    from faster_whisper import WhisperModel

    audio = recording(Path(args.audio))
    out = {"faster_whisper": faster_whisper.__version__, "samples": int(audio.size),
           "recipe": "clips 0870 0880 0890 0920 0930, twice, each + 8000 zero samples"}

    m = WhisperModel(args.model, device="cpu", compute_type="float32", cpu_threads=2)
    t = time.time()
    segments, info = m.transcribe(audio, beam_size=1, temperature=0.0, language=lang)
    segs = list(segments)
    out["language"] = info.language
    out["language_probability"] = info.language_probability
    out["float32_greedy_seconds"] = time.time() - t
    out["segments"] = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                        "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob}
                       for s in segs]

    # Beam search (faster-whisper's default beam 5, patience 1, length penalty 1), float32.
    t = time.time()
    segments, _ = m.transcribe(audio, beam_size=5, temperature=0.0, language=lang)
    segs = list(segments)
    out["float32_beam5_seconds"] = time.time() - t
    out["beam5_segments"] = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                              "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob}
                             for s in segs]

    # An initial prompt (faster-whisper's initial_prompt).
    segments, _ = m.transcribe(audio, beam_size=1, temperature=0.0, language=lang,
                               initial_prompt=INITIAL_PROMPT)
    out["initial_prompt"] = INITIAL_PROMPT
    out["prompted_segments"] = [{"start": s.start, "end": s.end, "text": s.text,
                                 "tokens": list(s.tokens), "avg_logprob": s.avg_logprob,
                                 "no_speech_prob": s.no_speech_prob} for s in segments]

    # The same with word timestamps (cross-attention alignment).
    t = time.time()
    segments, _ = m.transcribe(audio, beam_size=1, temperature=0.0, language=lang,
                               word_timestamps=True)
    segs = list(segments)
    out["float32_greedy_words_seconds"] = time.time() - t
    out["word_segments"] = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                             "words": [{"word": w.word, "start": w.start, "end": w.end,
                                        "probability": w.probability} for w in s.words]}
                            for s in segs]

    m8 = WhisperModel(args.model, device="cpu", compute_type="int8", cpu_threads=2)
    t = time.time()
    segments, _ = m8.transcribe(audio, language=lang)
    out["int8_default_text"] = "".join(s.text for s in segments)
    out["int8_default_seconds"] = time.time() - t
    t = time.time()
    segments, _ = m8.transcribe(audio, beam_size=1, temperature=0.0, language=lang)
    out["int8_greedy_text"] = "".join(s.text for s in segments)
    out["int8_greedy_seconds"] = time.time() - t

    refs = references(Path(args.audio))
    out["clips"] = []
    totals = {"words": 0, "int8_default_errors": 0, "float32_greedy_errors": 0}
    for c in CLIPS:
        clip = read_wav(Path(args.audio) / f"sense_and_sensibility_01_austen_64kb-{c}.wav")
        a = "".join(s.text for s in m8.transcribe(clip, language=lang)[0])
        b = "".join(s.text for s in m.transcribe(clip, beam_size=1, temperature=0.0, language=lang)[0])
        ea, eb = edit_distance(refs[c], normalize(a)), edit_distance(refs[c], normalize(b))
        out["clips"].append({"clip": c, "reference": " ".join(refs[c]), "int8_default_text": a,
                             "float32_greedy_text": b, "int8_default_errors": ea,
                             "float32_greedy_errors": eb})
        totals["words"] += len(refs[c])
        totals["int8_default_errors"] += ea
        totals["float32_greedy_errors"] += eb
    out["wer"] = totals
    print("WER int8 default %.2f%%, float32 greedy %.2f%% over %d words" % (
        100 * totals["int8_default_errors"] / totals["words"],
        100 * totals["float32_greedy_errors"] / totals["words"], totals["words"]))

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
