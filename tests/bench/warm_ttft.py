#!/usr/bin/env python3
"""Time to the first answer token from `sightline-cli serve` over a library with a saved library
prefill: the prefilled context kept in memory between questions (the default) vs restored from its
file for every question (--no-keep-context), side by side in one run.

For each mode a fresh `serve` (port 0, --no-semantic, --effort low) over its own copy of the
library (without the question contexts saved before, so that neither mode finds the other's)
answers the same questions one after another, streamed; per question it prints the seconds to the first content token and to the
end, then asks the last question again (the same units: a held session prefills nothing, the
other restores the question's saved context) and the first one again (other units: its saved
context's own part is restored onto the held session, or the whole context from the files). The first question of each mode restores the file
either way (nothing is held yet); the rest show the difference. The ratio line compares the
medians of questions 2..N.

  sightline-cli add --library /tmp/lib R-intro.pdf R-exts.pdf
  sightline-cli prefill --library /tmp/lib --max-tokens 100000
  python3 tests/bench/warm_ttft.py --cli build/release/app/sightline-cli --library /tmp/lib
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

QUESTIONS = [
    "Which function reads a data frame from a file?",
    "How are missing values represented?",
    "How do I define my own function?",
    "What does the apply family do?",
    "How do I fit a linear model?",
    "How are packages checked before they are submitted?",
]


def start(cli, library, keep):
    cmd = [cli, "serve", "--port", "0", "--library", library, "--no-semantic", "--effort", "low"]
    if not keep:
        cmd.append("--no-keep-context")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = re.search(r"listening on (http://\S+/v1)", line)
        if m:
            return p, m.group(1)
    raise SystemExit("serve did not start: " + " ".join(cmd))


def ask(base, question):
    body = json.dumps({"model": "sightline", "stream": True,
                       "messages": [{"role": "user", "content": question}]}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    first = None
    text = ""
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for c in chunk.get("choices", []):
                piece = (c.get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = time.monotonic() - t0
                text += piece
    if first is None or not text.strip():
        raise SystemExit("no answer to: " + question)
    return first, time.monotonic() - t0, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--questions", type=int, default=4)
    a = ap.parse_args()
    qs = QUESTIONS[: max(2, min(a.questions, len(QUESTIONS)))]
    firsts = {}
    again = {}
    earlier = {}
    answers = {}
    for keep in (True, False):
        mode = "kept in memory" if keep else "restored per question"
        work = tempfile.mkdtemp(prefix="warm_ttft-", dir=os.path.dirname(os.path.abspath(a.library)))
        library = os.path.join(work, "library")
        shutil.copytree(a.library, library, ignore=lambda d, names: [n for n in names if n.startswith("q-")])
        p, base = start(a.cli, library, keep)
        try:
            firsts[keep] = []
            for i, q in enumerate(qs):
                f, t, text = ask(base, q)
                firsts[keep].append(f)
                answers.setdefault(q, []).append(text)
                print(f"{mode:22s} q{i + 1}: first token {f:7.2f} s, answer done {t:7.2f} s  ({q})", flush=True)
            f, t, text = ask(base, qs[-1])  # the same question again: the same units
            again[keep] = f
            answers[qs[-1]].append(text)
            print(f"{mode:22s} q{len(qs)} again: first token {f:7.2f} s, answer done {t:7.2f} s", flush=True)
            f, t, text = ask(base, qs[0])  # an earlier question again: its saved context, other units
            earlier[keep] = f
            answers[qs[0]].append(text)
            print(f"{mode:22s} q1 again:  first token {f:7.2f} s, answer done {t:7.2f} s", flush=True)
        finally:
            p.terminate()
            p.wait()
            shutil.rmtree(work, ignore_errors=True)
    same = sum(1 for q in qs if len(set(answers[q])) == 1)
    warm = statistics.median(firsts[True][1:])
    cold = statistics.median(firsts[False][1:])
    print(f"median first token, questions 2..{len(qs)}: kept {warm:.2f} s, restored {cold:.2f} s, "
          f"ratio restored/kept {cold / warm:.2f}; the last question again: kept {again[True]:.2f} s, "
          f"restored {again[False]:.2f} s; the first question again: kept {earlier[True]:.2f} s, "
          f"restored {earlier[False]:.2f} s; identical answers {same} of {len(qs)}")
    return 0 if same == len(qs) else 1


if __name__ == "__main__":
    sys.exit(main())
