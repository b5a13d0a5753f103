#!/usr/bin/env python3
"""How other orders of an answer's sources would have scored, from a results file alone.

Each result of `eval.py run` keeps the places its answer ranked (`ranking`) with every signal:
attention `mass`, the answer sentences' `bm25`, MiniLM `semantic`, the question's relevance
(`question`, the rank the context was filled by) and the CLI's fused `score`, and whether the place
is the right one (`match`). This reorders them by other rules and prints right-first and
right-in-three rates, on all questions and on two halves (odd and even lines of questions.jsonl),
so a rule chosen on one half can be checked on the other.

    python3 tests/eval/fusion.py build/eval/results-after-full.jsonl

Reciprocal rank fusion as in core/answer/citations.cpp: each signal adds w / (60 + rank), rank
1-based, over the places with a positive value of that signal (semantic: any value).
"""
import json
import sys

RRF_K = 60
SIGNALS = ("mass", "bm25", "semantic", "question")


def ranks(entries, sig):
    have = [i for i, e in enumerate(entries) if e.get(sig) is not None and (sig == "semantic" or e[sig] > 0)]
    have.sort(key=lambda i: -entries[i][sig])
    return {i: r for r, i in enumerate(have, 1)}


def rrf(entries, weights):
    score = [0.0] * len(entries)
    for sig, w in weights.items():
        for i, r in ranks(entries, sig).items():
            score[i] += w / (RRF_K + r)
    return score


RULES = {
    "the CLI's order (citations as listed)": None,
    "fused score (ranking list)": lambda e: [x.get("score") or 0 for x in e],
    "attention mass alone": lambda e: [x.get("mass") or 0 for x in e],
    "answer words (BM25) alone": lambda e: [x.get("bm25") or 0 for x in e],
    "answer meaning (MiniLM) alone": lambda e: [x.get("semantic") if x.get("semantic") is not None else -9 for x in e],
    "question relevance alone": lambda e: [x.get("question") or 0 for x in e],
    "RRF, equal weights": lambda e: rrf(e, {s: 1.0 for s in SIGNALS}),
    "RRF, question x2": lambda e: rrf(e, {"mass": 1, "bm25": 1, "semantic": 1, "question": 2}),
    "RRF, question x3": lambda e: rrf(e, {"mass": 1, "bm25": 1, "semantic": 1, "question": 3}),
    "RRF, mass + question": lambda e: rrf(e, {"mass": 1, "question": 1}),
    "RRF, without mass": lambda e: rrf(e, {"bm25": 1, "semantic": 1, "question": 1}),
}


def outcome(row, rule):
    """(top1, top3) of one answer under `rule`."""
    if rule is None:
        return bool(row.get("top1")), bool(row.get("top3"))
    e = row.get("ranking") or []
    if not e:
        return False, False
    s = rule(e)
    order = sorted(range(len(e)), key=lambda i: -s[i])
    m = [e[i].get("match") for i in order]
    return bool(m and m[0]), any(m[:3])


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    rows = [json.loads(l) for l in open(argv[1], encoding="utf-8") if l.strip()]
    rows = [r for r in rows if r.get("pass", "main") == "main"]
    order = {}
    try:
        with open("tests/eval/questions.jsonl", encoding="utf-8") as f:
            for n, l in enumerate(f):
                if l.strip():
                    order[json.loads(l)["id"]] = n
    except OSError:
        pass
    halves = {"all": rows,
              "odd lines": [r for r in rows if order.get(r["id"], 0) % 2 == 0],
              "even lines": [r for r in rows if order.get(r["id"], 0) % 2 == 1]}
    with_rank = sum(1 for r in rows if r.get("ranking"))
    print("%d answers, %d with a ranking; right first / right in the first three, %%" % (len(rows), with_rank))
    head = "%-40s" % "order" + "".join("%18s" % ("%s (%d)" % (h, len(v))) for h, v in halves.items())
    print(head)
    for name, rule in RULES.items():
        cells = []
        for rs in halves.values():
            t1 = sum(outcome(r, rule)[0] for r in rs)
            t3 = sum(outcome(r, rule)[1] for r in rs)
            cells.append("%8.1f /%6.1f  " % (100.0 * t1 / len(rs) if rs else 0, 100.0 * t3 / len(rs) if rs else 0))
        print("%-40s" % name + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
