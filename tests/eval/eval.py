#!/usr/bin/env python3
"""Sightline's answer-quality evaluation: asks the CLI each question of tests/eval/questions.jsonl
over a library of the documents of tests/eval/documents.tsv and scores the citations (the right
page, slide or second) and the answer (the key fact stated).

  eval.py run [--cli PATH] [--library DIR] [--questions FILE] [--documents FILE] [--limit N]
              [--ids a,b] [--core-only] [--ctx N] [--effort low|medium|high] [--attention msa|dense]
              [--dense N] [--tag NAME] [--extra "ARGS"] [--min-top3 K] [--timeout S] [--time-tol S]
  eval.py report RESULTS.jsonl
  eval.py compare A.jsonl B.jsonl          (A = before, B = after)

Standard library only. See tests/eval/README.md.
"""

import argparse
import json
import os
import re
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SLIDE_EXT = {"pptx", "ppt", "odp", "key"}
VIDEO_EXT = {"mp4", "mkv", "webm", "avi", "mov", "m4v", "mpg", "mpeg", "ogv", "wmv", "flv", "ts"}
KINDS = ("pdf", "slides", "video")
# Answer budgets per effort (core/context/effort.cpp): an answer that used all of them was cut.
ANSWER_TOKENS = {"low": 128, "medium": 256, "high": 512}
MARKER = re.compile(r"\s*\[\d+\??\]")


class EvalError(Exception):
    pass


def die(msg):
    print("eval: error: " + msg, file=sys.stderr)
    sys.exit(2)


def cache_dir():
    if os.environ.get("SIGHTLINE_CACHE"):
        return os.environ["SIGHTLINE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sightline")


def kind_of(doc):
    ext = doc.rsplit(".", 1)[-1].lower() if "." in doc else ""
    if ext == "pdf":
        return "pdf"
    if ext in SLIDE_EXT:
        return "slides"
    if ext in VIDEO_EXT:
        return "video"
    return "other"


# ---------------------------------------------------------------------------------------- inputs

def read_documents(path):
    """documents.tsv -> [(file name, relative path)] in file order."""
    docs, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) < 2 or not parts[0].strip() or not parts[1].strip():
                raise EvalError("%s:%d: expected <file name><TAB><path relative to the cache>" % (path, n))
            name, rel = parts[0].strip(), parts[1].strip()
            if name in seen:
                raise EvalError("%s:%d: %s listed twice" % (path, n, name))
            seen.add(name)
            docs.append((name, rel))
    return docs


def read_questions(path):
    qs, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                q = json.loads(line)
            except json.JSONDecodeError as e:
                raise EvalError("%s:%d: not JSON (%s)" % (path, n, e))
            for k in ("id", "doc", "question"):
                if not isinstance(q.get(k), str) or not q[k]:
                    raise EvalError("%s:%d: needs a string '%s'" % (path, n, k))
            if q["id"] in seen:
                raise EvalError("%s:%d: id %s used twice" % (path, n, q["id"]))
            seen.add(q["id"])
            has_units = isinstance(q.get("units"), list) and len(q["units"]) > 0
            has_time = isinstance(q.get("time"), list) and len(q["time"]) == 2
            if not has_units and not has_time:
                raise EvalError("%s:%d (%s): needs 'units' [pages/slides, 1-based] or 'time' [t0, t1]"
                                % (path, n, q["id"]))
            key = q.get("key", [])
            if isinstance(key, str):
                key = [key]
            q["key"] = key
            qs.append(q)
    return qs


# ---------------------------------------------------------------------------------------- library

def db_path(library):
    return os.path.join(library, "library.sqlite")


def connect(library):
    # Read-only, so the eval never takes a write lock on the CLI's store (WAL readers are fine).
    con = sqlite3.connect("file:%s?mode=ro" % db_path(library), uri=True, timeout=30)
    # A damaged string must not stop the run: undecodable bytes become U+FFFD.
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    return con


def library_documents(library):
    """path -> (state, size_bytes, mtime_ns, error) of the newest row per path."""
    if not os.path.exists(db_path(library)):
        return {}
    con = connect(library)
    try:
        rows = con.execute("SELECT path, state, size_bytes, mtime_ns, error FROM documents ORDER BY id").fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


def newest_chat(library):
    if not os.path.exists(db_path(library)):
        return None
    con = connect(library)
    try:
        row = con.execute("SELECT id, question, answer, citations, settings, created_ms FROM chats "
                          "ORDER BY created_ms DESC, id DESC LIMIT 1").fetchone()
    finally:
        con.close()
    if row is None:
        return None
    return dict(zip(("id", "question", "answer", "citations", "settings", "created_ms"), row))


def run_logged(cmd, log_path, timeout, echo=False):
    """Runs cmd with stdout+stderr into log_path (and to our stdout when echo). -> (rc, seconds, timed_out)."""
    t0 = time.monotonic()
    timed_out = False
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        log.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=ROOT)
        deadline = None if not timeout else t0 + timeout
        try:
            # Line by line, so the log grows while it runs; the deadline is checked below.
            def reader():
                for raw in iter(p.stdout.readline, b""):
                    s = raw.decode("utf-8", errors="replace")
                    log.write(s)
                    log.flush()
                    if echo:
                        sys.stdout.write("    " + s)
                        sys.stdout.flush()

            t = threading.Thread(target=reader, daemon=True)
            t.start()
            while True:
                try:
                    p.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if deadline and time.monotonic() > deadline:
                        timed_out = True
                        try:
                            os.killpg(p.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            t.join(timeout=10)
        except KeyboardInterrupt:
            try:
                os.killpg(p.pid, signal.SIGINT)  # the CLI stops cleanly on Ctrl-C
                p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise
        if timed_out:
            log.write("\n[eval] killed after %d s (--timeout)\n" % timeout)
    return p.returncode, time.monotonic() - t0, timed_out


def tail(path, n=15):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def ensure_library(cli, library, docs, log_dir, extra_add):
    """Adds the documents the library lacks (or holds an older version of). -> ingest seconds or None."""
    os.makedirs(library, exist_ok=True)
    have = library_documents(library)
    missing = []
    for name, path in docs:
        st = os.stat(path)
        row = have.get(path)
        if row is None or row[0] != "ready" or row[1] != st.st_size or row[2] != st.st_mtime_ns:
            missing.append(path)
    wanted = {p for _, p in docs}
    extra = sorted(p for p, row in have.items() if row[0] == "ready" and p not in wanted)
    if extra:
        print("eval: warning: the library holds %d document(s) not in the document list; every ask reads them "
              "too: %s" % (len(extra), ", ".join(os.path.basename(p) for p in extra)))
    if not missing:
        what = "the document" if len(docs) == 1 else "all %d documents" % len(docs)
        print("Library: %s holds %s (nothing to add)" % (library, what))
        return None
    print("Library: adding %d of %d documents to %s: %s"
          % (len(missing), len(docs), library, ", ".join(os.path.basename(p) for p in missing)))
    cmd = [cli, "add", "--library", library] + extra_add + missing
    rc, secs, _ = run_logged(cmd, os.path.join(log_dir, "add.txt"), None, echo=True)
    print("Ingest: %.1f s for %d document(s) (log %s)" % (secs, len(missing), os.path.join(log_dir, "add.txt")))
    have = library_documents(library)
    bad = [(p, have.get(p)) for _, p in docs if have.get(p) is None or have[p][0] != "ready"]
    for p, row in bad:
        print("eval: warning: %s is not ready in the library (%s); its questions will miss"
              % (os.path.basename(p), "absent" if row is None else row[0] + (": " + row[3] if row[3] else "")))
    if rc != 0:
        print("eval: warning: sightline-cli add exited with %d" % rc)
    return secs


# ---------------------------------------------------------------------------------------- scoring

def strip_markers(text):
    return MARKER.sub("", text or "")


def norm_ws(s):
    return " ".join(s.split()).lower()


def citation_matches(c, q, tol):
    if os.path.basename(c.get("path", "")) != q["doc"]:
        return False
    if q.get("time"):
        t = c.get("time")
        if not t or len(t) != 2:
            return False
        lo, hi = float(q["time"][0]) - tol, float(q["time"][1]) + tol
        return float(t[0]) <= hi and float(t[1]) >= lo
    return (int(c.get("unit_index", -10)) + 1) in [int(u) for u in q["units"]]


def log_sections(log_text):
    """(answer section, context plan) of an ask log, best effort: the answer section is the streamed
    answer and the answer with citations (up to "Sources:"), without the plan between them."""
    def part(start, ends):
        i = log_text.find(start)
        if i < 0:
            return ""
        i += len(start)
        stops = [j for j in (log_text.find(e, i) for e in ends) if j >= 0]
        return log_text[i:min(stops) if stops else len(log_text)]
    answer = part("Answer (streaming):", ("Context plan:", "KV cache:", "Read:", "Answer with citations:"))
    answer += "\n" + part("Answer with citations:", ("Sources:",))
    plan = part("Context plan:", ("Answer with citations:", "KV cache:", "Read:"))
    return answer, plan


def answer_was_cut(cj, chat, log_text, budget):
    """Whether generation stopped at its limit rather than at the end of the answer. The answer JSON's
    own "cut" / "stop_reason" when the CLI records them; otherwise all answer tokens used, or the word
    "cut" in the log's answer section outside the answer's own text (R has a cut() function)."""
    if "cut" in cj or "stop_reason" in cj:
        return bool(cj.get("cut")) or cj.get("stop_reason") in ("max tokens", "context full")
    steps = cj.get("steps")
    if steps is not None and budget and steps >= budget:
        return True
    section, _ = log_sections(log_text)
    section += "\n".join(l for l in log_text.splitlines() if l.startswith("Note:"))
    for t in (chat["answer"] if chat else "", cj.get("text", "")):
        if t:
            section = section.replace(t, " ")
    return re.search(r"\bcut\b", section, re.IGNORECASE) is not None


def score(q, chat, log_text, tol, effort):
    """The scored fields of one answered question."""
    cj = json.loads(chat["citations"]) if chat and chat.get("citations") else {}
    cits = sorted(cj.get("citations", []), key=lambda c: c.get("number", 0))
    rank = None
    for i, c in enumerate(cits, 1):
        if citation_matches(c, q, tol):
            rank = i
            break
    answer = strip_markers(chat["answer"]) if chat else ""
    if not answer and cj.get("text"):
        answer = cj["text"]
    hay = norm_ws(answer)
    key_hit = next((k for k in q["key"] if norm_ws(k) and norm_ws(k) in hay), None)
    try:
        settings = json.loads(chat["settings"]) if chat and chat.get("settings") else {}
    except json.JSONDecodeError:
        settings = {}
    steps = cj.get("steps")
    budget = ANSWER_TOKENS.get(settings.get("effort") or effort or "medium")
    _, plan = log_sections(log_text)
    cut = answer_was_cut(cj, chat, log_text, budget) if chat else False
    # Was the right place in the context at all ("read")? The chat's settings list the context's
    # units (name, unit index[, t0, t1]) since the ask flow moved to core/ask.
    read = None
    ctx = settings.get("context_units")
    if isinstance(ctx, list):
        read = False
        for u in ctx:
            c = {"path": u[0], "unit_index": u[1]}
            if len(u) >= 4:
                c["time"] = [u[2], u[3]]
            if citation_matches(c, q, tol):
                read = True
                break
    # Which place each ranking signal alone would have put first (the answer's "ranking").
    signals = {}
    ranking = cj.get("ranking") or []
    for sig in SIGNALS:
        have = [r for r in ranking if sig in r and (sig == "semantic" or (r.get(sig) or 0) > 0)]
        if not have:
            continue
        best = max(have, key=lambda r: r[sig])
        signals[sig] = citation_matches(best, q, tol)
    return {
        "read": read,
        "signals": signals,
        "rank": rank,
        "top1": rank == 1,
        "top3": rank is not None and rank <= 3,
        "cited": rank is not None,
        "key": key_hit is not None,
        "key_matched": key_hit,
        "n_citations": len(cits),
        "locators": [c.get("locator", "") for c in cits[:3]],
        "answer_cut": cut,
        "context_cut": "cut to fit" in plan,
        "steps": steps,
        "stop_reason": cj.get("stop_reason"),
        "answer": answer,
        "chat_id": chat["id"] if chat else None,
        "settings": settings,
        # Every ranked place with its signals and whether it is the right one (to study the fusion
        # offline: tests/eval/README.md).
        "ranking": [dict({k: r.get(k) for k in ("path", "unit_index", "time", "mass", "lexical", "bm25", "semantic",
                                                 "question", "score")}, match=bool(citation_matches(r, q, tol)))
                    for r in ranking],
    }


# ---------------------------------------------------------------------------------------- tables

def pct(n, d):
    return "%5.1f" % (100.0 * n / d) if d else "    -"


SIGNALS = ("mass", "bm25", "semantic", "question", "score")
SIGNAL_NAMES = {"mass": "attention mass", "bm25": "answer words (BM25)", "semantic": "answer meaning (MiniLM)",
                "question": "question relevance", "score": "fusion (what [1] is)"}


def signal_table(rows):
    """How often each ranking signal alone would have put the right place first (answers with a
    ranking only)."""
    with_rank = [r for r in rows if r.get("signals")]
    if not with_rank:
        return ""
    lines = ["Right place ranked first by each signal alone (%d answers with a ranking):" % len(with_rank)]
    for sig in SIGNALS:
        n = sum(1 for r in with_rank if r["signals"].get(sig))
        lines.append("  %-26s %5s %%" % (SIGNAL_NAMES[sig], pct(n, len(with_rank))))
    read = [r for r in rows if r.get("read") is not None]
    if read:
        lines.append("Right place in the context (read): %s %% of %d" % (pct(sum(1 for r in read if r["read"]), len(read)).strip(), len(read)))
    return "\n".join(lines)


def figures(rows):
    n = len(rows)
    secs = [r["seconds"] for r in rows if r.get("seconds") is not None]
    return {
        "N": n,
        "top1": sum(1 for r in rows if r.get("top1")),
        "top3": sum(1 for r in rows if r.get("top3")),
        "cited": sum(1 for r in rows if r.get("rank") is not None),
        "key": sum(1 for r in rows if r.get("key")),
        "cut": sum(1 for r in rows if r.get("answer_cut")),
        "failed": sum(1 for r in rows if not r.get("ok", True)),
        "mean_s": statistics.mean(secs) if secs else None,
    }


def groups(rows):
    out = [("all", rows)]
    for k in KINDS + ("other",):
        sub = [r for r in rows if r.get("kind") == k]
        if sub or k in KINDS:
            out.append((k, sub))
    return out


def table(rows, title=None, compact=False):
    """The summary table; compact (for compare's side by side) leaves out cut % and failed."""
    lines = [title] if title else []
    if compact:
        lines.append("%-7s %4s %6s %6s %7s %6s %6s" % ("", "N", "top1%", "top3%", "cited%", "key%", "s/q"))
    else:
        lines.append("%-8s %5s %7s %7s %7s %7s %7s %6s %8s" % ("", "N", "top1 %", "top3 %", "cited %", "key %",
                                                             "cut %", "failed", "s/q"))
    for name, sub in groups(rows):
        f = figures(sub)
        secs = "%.1f" % f["mean_s"] if f["mean_s"] is not None else "-"
        if compact:
            lines.append("%-7s %4d %6s %6s %7s %6s %6s" % (
                name, f["N"], pct(f["top1"], f["N"]), pct(f["top3"], f["N"]), pct(f["cited"], f["N"]),
                pct(f["key"], f["N"]), secs))
        else:
            lines.append("%-8s %5d %7s %7s %7s %7s %7s %6d %8s" % (
                name, f["N"], pct(f["top1"], f["N"]), pct(f["top3"], f["N"]), pct(f["cited"], f["N"]),
                pct(f["key"], f["N"]), pct(f["cut"], f["N"]), f["failed"], secs))
    return "\n".join(lines)


LEGEND = ("top1 / top3: a citation to the right page, slide or time ranked 1st / in the first 3; "
          "cited: at any rank;\nkey: the key fact in the answer; cut: the answer was cut short; "
          "failed: the ask exited non-zero or timed out;\ns/q: mean wall seconds per ask")


def load_results(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise EvalError("%s:%d: not JSON (%s)" % (path, n, e))
    return rows


def by_pass(rows):
    passes = {}
    for r in rows:
        passes.setdefault(r.get("pass", "main"), []).append(r)
    return passes


# ---------------------------------------------------------------------------------------- run

def one_line(i, total, r):
    rank = "-" if r["rank"] is None else str(r["rank"])
    flags = ""
    if not r["ok"]:
        flags += "  FAILED (rc %s)" % r["rc"]
    if r.get("answer_cut"):
        flags += "  [answer cut]"
    return "[%*d/%d] %-16s rank %-2s key %-3s %6.1f s  %s%s" % (
        len(str(total)), i, total, r["id"], rank, "yes" if r["key"] else "no", r["seconds"],
        " | ".join(r["locators"]) if r["locators"] else "(no citations)", flags)


def ask_all(args, qs, cli, library, log_dir, out, pass_name, attention):
    ask_opts = []
    if args.ctx:
        ask_opts += ["--ctx", str(args.ctx)]
    if args.effort:
        ask_opts += ["--effort", args.effort]
    if attention:
        ask_opts += ["--attention", attention]
    extra = shlex.split(args.extra) if args.extra else []
    rows = []
    for i, q in enumerate(qs, 1):
        before = newest_chat(library)
        log_path = os.path.join(log_dir, q["id"] + (".dense" if pass_name == "dense" else "") + ".txt")
        cmd = [cli, "ask", "--library", library] + ask_opts + extra + [q["question"]]
        rc, secs, timed_out = run_logged(cmd, log_path, args.timeout)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            log_text = f.read()
        chat = None
        ok = rc == 0 and not timed_out
        if ok:
            chat = newest_chat(library)
            if chat is None or (before is not None and chat["id"] == before["id"]):
                raise EvalError("%s: the ask exited 0 but stored no chat in %s (log %s)"
                                % (q["id"], db_path(library), log_path))
            if chat["question"] != q["question"]:
                raise EvalError("%s: the newest chat (id %s) asked %r, not %r: is another process using the "
                                "library %s?" % (q["id"], chat["id"], chat["question"], q["question"], library))
        s = score(q, chat, log_text, args.time_tol, args.effort)
        r = {"id": q["id"], "pass": pass_name, "doc": q["doc"], "kind": kind_of(q["doc"]),
             "units": q.get("units"), "time": q.get("time"), "core": bool(q.get("core")),
             "question": q["question"], "key_options": q["key"],
             "ok": ok, "rc": rc, "timed_out": timed_out, "seconds": round(secs, 2), "log": log_path}
        r.update(s)
        rows.append(r)
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
        out.flush()
        print(one_line(i, len(qs), r), flush=True)
        if not ok:
            why = "timed out after %d s" % args.timeout if timed_out else "exit %d" % rc
            print("    ask %s; the tail of %s:" % (why, log_path))
            for line in tail(log_path):
                print("    | " + line)
    return rows


def cmd_run(args):
    cli = os.path.abspath(args.cli or os.path.join(ROOT, "build/release/app/sightline-cli"))
    if not (os.path.isfile(cli) and os.access(cli, os.X_OK)):
        raise EvalError("no CLI at %s (build it: scripts/build.sh release sightline-cli, or pass --cli PATH)" % cli)
    default_lib = "build/eval/library-core" if args.core_only else "build/eval/library"
    library = os.path.abspath(args.library or os.path.join(ROOT, default_lib))
    qfile = args.questions or os.path.join(ROOT, "tests/eval/questions.jsonl")
    dfile = args.documents or os.path.join(ROOT, "tests/eval/documents.tsv")
    for f in (qfile, dfile):
        if not os.path.isfile(f):
            raise EvalError("no %s" % f)
    cache = cache_dir()

    docs = read_documents(dfile)
    if args.core_only:
        docs = [(n, r) for n, r in docs if r.startswith("samples/")]
    by_name = {n: os.path.abspath(os.path.join(cache, r)) for n, r in docs}
    all_names = {n for n, _ in read_documents(dfile)}

    qs = read_questions(qfile)
    for q in qs:
        if q["doc"] not in all_names:
            raise EvalError("question %s names %s, which %s does not list" % (q["id"], q["doc"], dfile))
    if args.core_only:
        qs = [q for q in qs if q.get("core") and q["doc"] in by_name]
    if args.ids:
        want = [s.strip() for s in args.ids.split(",") if s.strip()]
        known = {q["id"] for q in qs}
        unknown = [w for w in want if w not in known]
        if unknown:
            raise EvalError("no such question%s%s: %s" % ("s" if len(unknown) > 1 else "",
                                                          " (with --core-only)" if args.core_only else "",
                                                          ", ".join(unknown)))
        qs = [q for q in qs if q["id"] in set(want)]
    if args.limit is not None:
        qs = qs[:args.limit]
    if not qs:
        raise EvalError("no questions selected")

    absent = [p for p in by_name.values() if not os.path.isfile(p)]
    if absent:
        raise EvalError("missing document file%s (run scripts/setup.sh and scripts/eval_assets.sh, or check "
                        "SIGHTLINE_CACHE=%s): %s" % ("s" if len(absent) > 1 else "", cache, ", ".join(absent)))

    tag = args.tag or time.strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.join(ROOT, "build/eval")
    log_dir = os.path.join(out_dir, "logs", tag)
    os.makedirs(log_dir, exist_ok=True)
    results = os.path.join(out_dir, "results-%s.jsonl" % tag)

    print("Sightline eval: %d question%s, %d document%s, cli %s" % (
        len(qs), "" if len(qs) == 1 else "s", len(by_name), "" if len(by_name) == 1 else "s", cli))
    print("Results: %s   logs: %s" % (results, log_dir))
    docs_abs = [(n, by_name[n]) for n, _ in docs]
    ingest_s = ensure_library(cli, library, docs_abs, log_dir, shlex.split(args.add_extra) if args.add_extra else [])

    meta = {"tag": tag, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cli": cli, "library": library,
            "questions": os.path.abspath(qfile), "documents": os.path.abspath(dfile), "ctx": args.ctx,
            "effort": args.effort, "attention": args.attention, "extra": args.extra, "dense": args.dense,
            "core_only": args.core_only, "ingest_seconds": ingest_s, "time_tol": args.time_tol}
    try:
        meta["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True, timeout=10).stdout.strip()
        meta["cli_version"] = subprocess.run([cli, "--version"], capture_output=True, text=True,
                                             timeout=60).stdout.splitlines()[:1]
    except Exception:
        pass

    print()
    with open(results, "w", encoding="utf-8") as out:
        main = ask_all(args, qs, cli, library, log_dir, out, "main", args.attention)
        dense = []
        if args.dense:
            print("\nDense pass (--attention dense) on the first %d question%s:" % (
                min(args.dense, len(qs)), "" if args.dense == 1 else "s"))
            dense = ask_all(args, qs[:args.dense], cli, library, log_dir, out, "dense", "dense")
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    with open(os.path.join(out_dir, "results-%s.meta.json" % tag), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)

    print()
    if ingest_s is not None:
        print("Ingest: %.1f s" % ingest_s)
    print(table(main, "Summary (%s attention), %s:" % (args.attention or "msa", results)))
    print(signal_table(main))
    if dense:
        print()
        print(table(dense, "Dense pass (--attention dense), the first %d question%s:" % (
            len(dense), "" if len(dense) == 1 else "s")))
    print(LEGEND)
    top3 = sum(1 for r in main if r["top3"])
    if args.min_top3 is not None and top3 < args.min_top3:
        print("eval: FAIL: %d question%s with the right unit in the top 3, fewer than --min-top3 %d"
              % (top3, "" if top3 == 1 else "s", args.min_top3))
        return 1
    return 0


def cmd_report(args):
    rows = load_results(args.results)
    if not rows:
        raise EvalError("%s holds no results" % args.results)
    passes = by_pass(rows)
    first = True
    for name, sub in passes.items():
        if not first:
            print()
        first = False
        print(table(sub, "%s%s:" % (args.results, "" if name == "main" else " (%s pass)" % name)))
        print(signal_table(sub))
    print(LEGEND)
    return 0


def cmd_compare(args):
    a_rows, b_rows = load_results(args.a), load_results(args.b)
    a_p, b_p = by_pass(a_rows), by_pass(b_rows)
    shared_passes = [p for p in a_p if p in b_p]
    if not shared_passes:
        raise EvalError("the two files share no pass (main/dense)")
    for p in shared_passes:
        a = {r["id"]: r for r in a_p[p]}
        b = {r["id"]: r for r in b_p[p]}
        ids = [i for i in a if i in b]
        only_a, only_b = len(a) - len(ids), len(b) - len(ids)
        label = "" if p == "main" else " (%s pass)" % p
        print("Compare%s on %d shared question%s (A = %s, B = %s)%s" % (
            label, len(ids), "" if len(ids) == 1 else "s", args.a, args.b,
            "; left out: %d only in A, %d only in B" % (only_a, only_b) if only_a or only_b else ""))
        ta = table([a[i] for i in ids], compact=True).splitlines()
        tb = table([b[i] for i in ids], compact=True).splitlines()
        w = max(len(s) for s in ta)
        print("%-*s   |   %s" % (w, "A (before)", "B (after)"))
        for la, lb in zip(ta, tb):
            print("%-*s   |   %s" % (w, la, lb))
        fa, fb = figures([a[i] for i in ids]), figures([b[i] for i in ids])
        n = fa["N"]
        if n:
            d = lambda k: 100.0 * (fb[k] - fa[k]) / n
            print("change (points): top1 %+.1f, top3 %+.1f, cited %+.1f, key %+.1f, answer cut %+.1f; s/q %s; "
                  "failed asks %d -> %d" % (
                      d("top1"), d("top3"), d("cited"), d("key"), d("cut"),
                      "%+.1f" % (fb["mean_s"] - fa["mean_s"]) if fa["mean_s"] is not None and fb["mean_s"] is not None
                      else "-", fa["failed"], fb["failed"]))
        for what, field in (("top3", "top3"), ("key fact", "key")):
            gained = [i for i in ids if not a[i].get(field) and b[i].get(field)]
            lost = [i for i in ids if a[i].get(field) and not b[i].get(field)]
            def show(ids_):
                if field != "top3":
                    return ", ".join(ids_) or "-"
                rk = lambda r: "-" if r.get("rank") is None else str(r["rank"])
                return ", ".join("%s (rank %s -> %s)" % (i, rk(a[i]), rk(b[i])) for i in ids_) or "-"
            print("%s miss -> hit (%d): %s" % (what, len(gained), show(gained)))
            print("%s hit -> miss (%d): %s" % (what, len(lost), show(lost)))
        if p != shared_passes[-1]:
            print()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="eval.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="ask every question and score the answers")
    r.add_argument("--cli", help="sightline-cli (default build/release/app/sightline-cli)")
    r.add_argument("--library", help="library folder (default build/eval/library; build/eval/library-core "
                                     "with --core-only)")
    r.add_argument("--questions", help="default tests/eval/questions.jsonl")
    r.add_argument("--documents", help="default tests/eval/documents.tsv")
    r.add_argument("--limit", type=int, help="only the first N selected questions")
    r.add_argument("--ids", help="only these question ids (comma-separated)")
    r.add_argument("--core-only", action="store_true",
                   help="only core questions and documents under samples/ (what setup.sh fetches)")
    r.add_argument("--ctx", type=int, help="ask --ctx N")
    r.add_argument("--effort", choices=("low", "medium", "high"), help="ask --effort")
    r.add_argument("--attention", choices=("msa", "dense"), help="ask --attention")
    r.add_argument("--dense", type=int, default=0, metavar="N",
                   help="then ask the first N questions again with --attention dense")
    r.add_argument("--tag", help="results in build/eval/results-TAG.jsonl (default: the time)")
    r.add_argument("--extra", help="extra arguments for every ask (one string, shell-split)")
    r.add_argument("--add-extra", help="extra arguments for add when the library is filled (one string)")
    r.add_argument("--min-top3", type=int, metavar="K",
                   help="exit 1 when fewer than K questions have the right unit in the top 3")
    r.add_argument("--timeout", type=int, default=900, metavar="S", help="seconds per question (default 900)")
    r.add_argument("--time-tol", type=float, default=5.0, metavar="S",
                   help="a video citation matches when it overlaps the question's [t0 - S, t1 + S] (default 5)")
    r.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="the summary table of a results file")
    p.add_argument("results")
    p.set_defaults(func=cmd_report)

    c = sub.add_parser("compare", help="two results files side by side (A = before, B = after)")
    c.add_argument("a")
    c.add_argument("b")
    c.set_defaults(func=cmd_compare)

    # `--extra "--no-cache"`: argparse takes a value starting with "--" for an option, so glue it on.
    argv = list(sys.argv[1:] if argv is None else argv)
    glued = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--extra", "--add-extra") and i + 1 < len(argv):
            glued.append(argv[i] + "=" + argv[i + 1])
            i += 2
        else:
            glued.append(argv[i])
            i += 1
    args = ap.parse_args(glued)
    try:
        return args.func(args)
    except EvalError as e:
        die(str(e))
    except BrokenPipeError:  # `| head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        die("%s: %s" % (e.filename or "", e.strerror or e))
    except KeyboardInterrupt:
        print("\neval: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
