#!/usr/bin/env python3
"""A real OpenAI client (the `openai` package) against `sightline-cli serve`.

Checks, printing one line per check and exiting 1 on the first failure:
  models      the list holds "sightline" and the plain model, with their context length
  chat        a streamed plain chat with the local model: several deltas, a finish_reason, usage
  library     a whole library answer: text, the "sightline" member with citations (locator, page
              or time), the question echoed
  stream      a streamed library answer: deltas, then the last chunk carries the citations
Used by tests/app/tst_cli_serve.cpp; also a smoke test by hand:
  python tests/app/serve_client.py --base http://127.0.0.1:8080/v1
"""
import argparse
import sys

import openai


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--key", default="none")
    ap.add_argument("--question", default="What is this document about?")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base, api_key=args.key, max_retries=0, timeout=600)

    models = client.models.list()
    ids = [m.id for m in models.data]
    if "sightline" not in ids or len(ids) < 2:
        fail(f"models: {ids}")
    raw = [i for i in ids if i != "sightline"][0]
    if not (models.data[0].model_extra or {}).get("context_length"):
        fail("models: no context_length")
    print("models ok:", ids)

    deltas, finish, usage, text = 0, None, None, ""
    for chunk in client.chat.completions.create(
            model=raw, messages=[{"role": "user", "content": "Name three colours."}], stream=True,
            temperature=0, max_tokens=24, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                deltas += 1
                text += c.delta.content
            if c.finish_reason:
                finish = c.finish_reason
    if deltas < 2 or not text.strip() or finish not in ("stop", "length") or not usage or usage.completion_tokens < 1:
        fail(f"chat: {deltas} deltas, finish {finish}, usage {usage}, text {text!r}")
    print(f"chat ok: {deltas} deltas, finish {finish}: {text.strip()[:60]!r}")

    r = client.chat.completions.create(model="sightline", messages=[{"role": "user", "content": args.question}],
                                       extra_body={"effort": "low"})
    extra = (r.model_extra or {}).get("sightline")
    content = r.choices[0].message.content or ""
    if not content.strip() or not extra or extra.get("question") != args.question:
        fail(f"library: content {content[:80]!r}, extra {extra}")
    cites = extra.get("citations", [])
    for c in cites:
        if not c.get("locator") or not ("page" in c or "slide" in c or "t0" in c):
            fail(f"library: citation without a place: {c}")
    if cites and "[" not in content:
        fail("library: citations but no inline markers")
    print(f"library ok: {len(cites)} citations ({', '.join(c['locator'] for c in cites[:3])}); chat {extra.get('chat_id')}")

    deltas, last_extra = 0, None
    for chunk in client.chat.completions.create(model="sightline", messages=[{"role": "user", "content": args.question}],
                                                stream=True, extra_body={"effort": "low"}):
        for c in chunk.choices:
            if c.delta.content:
                deltas += 1
        if (chunk.model_extra or {}).get("sightline"):
            last_extra = chunk.model_extra["sightline"]
    if deltas < 2 or not last_extra or "citations" not in last_extra:
        fail(f"stream: {deltas} deltas, extra {last_extra}")
    print(f"stream ok: {deltas} deltas, {len(last_extra['citations'])} citations")


if __name__ == "__main__":
    main()
