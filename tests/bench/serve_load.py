#!/usr/bin/env python3
"""Answers per minute from `sightline-cli serve` under concurrent OpenAI clients.

Starts `serve` (port 0, --ctx 2048, effort low) over a library, then in one run:
  sequential   one client asks N questions one after another (the baseline)
  concurrent   C clients (threads, each its own openai.OpenAI) ask N questions at once
Every answer is checked: the "sightline" member echoes the client's own question, the text is not
empty and the citations carry places; a lost or mixed-up answer fails the run (exit 1). Prints the
answers per minute of both phases and their ratio.

  python tests/bench/serve_load.py --cli build/ci/app/sightline-cli --library /tmp/lib [--clients 8]
(the library must exist: sightline-cli add --library DIR FILE...)
"""
import argparse
import re
import subprocess
import sys
import threading
import time

import openai

QUESTIONS = [
    "How do I quit R?",
    "How are missing values represented?",
    "What does the c() function do?",
    "How do I read data from a file?",
    "What is a data frame?",
    "How do I plot a histogram?",
    "What is a factor?",
    "How are lists different from vectors?",
    "How do I define my own function?",
    "What does attach() do?",
    "How are matrices created?",
    "What is the workspace?",
    "How do I get help on a function?",
    "What does the apply family do?",
    "How do I fit a linear model?",
    "What is a probability distribution function in R?",
]


def ask(client, q, out, i):
    t = time.time()
    try:
        r = client.chat.completions.create(model="sightline", messages=[{"role": "user", "content": q}],
                                           extra_body={"effort": "low"})
        extra = (r.model_extra or {}).get("sightline") or {}
        ok = extra.get("question") == q and bool((r.choices[0].message.content or "").strip()) and all(
            c.get("locator") for c in extra.get("citations", []))
        out[i] = (ok, time.time() - t, "" if ok else f"question {extra.get('question')!r} for {q!r}")
    except Exception as e:  # noqa: BLE001 - reported as lost
        out[i] = (False, time.time() - t, f"{type(e).__name__}: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--sequential", type=int, default=4)
    args = ap.parse_args()
    srv = subprocess.Popen([args.cli, "serve", "--port", "0", "--library", args.library, "--ctx", "2048", "--effort", "low",
                            "--queue", str(args.clients)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = srv.stdout.readline()
        m = re.search(r"listening on (http://\S+/v1)", line)
        if not m:
            sys.exit(f"serve did not start: {line}")
        base = m.group(1)
        mk = lambda: openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=3600)  # noqa: E731

        seq_out = [None] * args.sequential
        client = mk()
        t0 = time.time()
        for i in range(args.sequential):
            ask(client, QUESTIONS[i % len(QUESTIONS)], seq_out, i)
        seq_s = time.time() - t0

        conc_out = [None] * args.clients
        threads = [threading.Thread(target=ask, args=(mk(), QUESTIONS[(args.sequential + i) % len(QUESTIONS)], conc_out, i))
                   for i in range(args.clients)]
        t0 = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        conc_s = time.time() - t0

        bad = [o for o in seq_out + conc_out if not o or not o[0]]
        seq_rate = 60 * args.sequential / seq_s
        conc_rate = 60 * args.clients / conc_s
        print(f"sequential: {args.sequential} answers in {seq_s:.1f} s = {seq_rate:.2f} answers/min")
        print(f"concurrent: {args.clients} clients, {args.clients} answers in {conc_s:.1f} s = {conc_rate:.2f} answers/min "
              f"(slowest client waited {max(o[1] for o in conc_out if o):.1f} s)")
        print(f"ratio concurrent / sequential: {conc_rate / seq_rate:.2f}")
        print(f"lost or mixed up: {len(bad)}")
        for b in bad:
            print("  ", b)
        sys.exit(1 if bad else 0)
    finally:
        srv.terminate()
        srv.wait(30)


if __name__ == "__main__":
    main()
