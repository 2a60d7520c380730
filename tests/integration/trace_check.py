#!/usr/bin/python3
"""trace_check.py: checks a torus-train --trace timeline (Chrome trace-event
JSON) for tests/integration/train_trace.sh.

  trace_check.py TRACE.json RANKS STEPS BUCKETS CKPT_EVERY

Exits 1 with a "FAIL: ..." line per finding, else prints what it checked:
  - the file is JSON with a traceEvents list, every rank 0..RANKS-1 is a
    process named "rank N (host)", and the closing event counts the rest;
  - on every thread, complete ("X") events nest: two spans are disjoint or
    one holds the other;
  - every rank has steps 1..STEPS, each once, each holding one data wait,
    forward, backward, exchange wait and update, in that order;
  - backward's layer groups lie inside it, one after the other, the first
    starting with it, and they include the model's stages (layer1...);
  - every step of every rank has BUCKETS all-reduces, buckets 0..BUCKETS-1
    in order, on a thread named "comm" (not the step thread), each with
    its algorithm, fp32 bytes, wire and wire bytes (fp16: half);
  - bucket reductions overlap backward: on every rank some bucket starts
    before the last layer group of its step's backward begins, i.e. while
    layers still compute gradients (one bucket of all gradients cannot:
    it is complete only when the last layer is done);
  - every CKPT_EVERY steps rank 0's step holds a "checkpoint write" and the
    other ranks' a "checkpoint wait".
"""
import json
import sys

EPS = 0.002  # us: ts and dur are printed to 1 ns and rounded
ALGOS = {"flat", "ring", "hier", "hier-rs", "torus2d"}
PHASES = ["data wait", "forward", "backward", "exchange wait", "update"]
fails = []


def fail(msg):
    fails.append(msg)


def end(e):
    return e["ts"] + e["dur"]


def inside(a, b):
    """a lies within b."""
    return a["ts"] >= b["ts"] - EPS and end(a) <= end(b) + EPS


def check_nesting(spans):
    by_thread = {}
    for e in spans:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= end(stack[-1]) - EPS:
                stack.pop()
            if stack and not inside(e, stack[-1]):
                fail("rank %d thread %d: '%s' at %.3f us overlaps '%s' "
                     "without nesting in it" % (key[0], key[1], e["name"],
                                                e["ts"], stack[-1]["name"]))
                return
            stack.append(e)


def check_step(rank, step, s, evs, ckpt_every):
    kids = [e for e in evs if e is not s and inside(e, s)]
    phases = [e for e in kids if e["name"] in PHASES]
    names = [e["name"] for e in phases]
    if names != PHASES:
        fail("rank %d step %d: phases %s, expected %s" % (rank, step, names,
                                                          PHASES))
        return None
    bwd = phases[2]
    groups = [e for e in kids if e["name"].startswith("backward ")]
    if not groups or abs(groups[0]["ts"] - bwd["ts"]) > EPS:
        fail("rank %d step %d: no layer group starts with backward" %
             (rank, step))
    for a, b in zip(groups, groups[1:]):
        if b["ts"] < end(a) - EPS:
            fail("rank %d step %d: layer groups '%s' and '%s' overlap" %
                 (rank, step, a["name"], b["name"]))
    if not any(g["name"] == "backward layer1" for g in groups):
        fail("rank %d step %d: no 'backward layer1' group: %s" %
             (rank, step, [g["name"] for g in groups]))
    want = "checkpoint write" if rank == 0 else "checkpoint wait"
    has = [e for e in kids if e["name"] == want]
    if ckpt_every and step % ckpt_every == 0 and len(has) != 1:
        fail("rank %d step %d: %d '%s' spans, expected 1" %
             (rank, step, len(has), want))
    return bwd, groups[-1] if groups else bwd


def check_buckets(rank, bwds, buckets, nbuckets, step_tid, names):
    per_step = [[] for _ in bwds]
    predicted = {}
    for b in buckets:
        # a bucket belongs to the step whose backward last began before it
        i = max([k for k, w in enumerate(bwds) if w[0]["ts"] <= b["ts"] + EPS],
                default=None)
        if i is None:
            fail("rank %d: bucket at %.3f us before any backward" %
                 (rank, b["ts"]))
            continue
        per_step[i].append(b)
        a = b["args"]
        if b["tid"] == step_tid or names.get((rank, b["tid"])) != "comm":
            fail("rank %d: bucket %s not on the comm thread" % (rank, a))
        if (a.get("algo") not in ALGOS or a.get("bytes", 0) <= 0 or
                a.get("wire") != "fp16" or
                a.get("wire_bytes") * 2 != a.get("bytes") or
                not isinstance(a.get("predicted_us"), (int, float)) or
                a.get("predicted_us") <= 0):
            fail("rank %d: bucket args %s" % (rank, a))
        # the bucket plan is resolved at seal: one prediction per bucket
        # in every step
        seen = predicted.setdefault(a.get("bucket"), a.get("predicted_us"))
        if seen != a.get("predicted_us"):
            fail("rank %d: bucket %s predicted %s us, earlier %s us" %
                 (rank, a.get("bucket"), a.get("predicted_us"), seen))
    overlap = 0
    for i, got in enumerate(per_step):
        idx = [b["args"]["bucket"] for b in got]
        if idx != list(range(nbuckets)):
            fail("rank %d step %d: buckets %s, expected 0..%d in order" %
                 (rank, i + 1, idx, nbuckets - 1))
        overlap += sum(1 for b in got if b["ts"] < bwds[i][1]["ts"] - EPS)
    if overlap == 0:
        fail("rank %d: no bucket reduction overlaps backward" % rank)
    return overlap


def main():
    path, ranks, steps, nbuckets, ckpt_every = sys.argv[1], *map(
        int, sys.argv[2:6])
    try:
        with open(path) as f:
            doc = json.load(f)
        ev = doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("FAIL: %s is not a trace: %s" % (path, e))
        return 1
    meta = [e for e in ev if e.get("ph") == "M"]
    spans = [e for e in ev if e.get("ph") == "X"]
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in meta if e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"]
             for e in meta if e["name"] == "process_name"}
    for r in range(ranks):
        if not procs.get(r, "").startswith("rank %d (" % r):
            fail("no process named 'rank %d (host)': %s" % (r, procs))
    last = ev[-1] if ev else {}
    if last.get("name") != "trace_end" or last["args"]["events"] != len(ev) - 1:
        fail("closing event %s does not count the %d others" %
             (last, len(ev) - 1))
    check_nesting(spans)
    total = 0
    for r in range(ranks):
        mine = [e for e in spans if e["pid"] == r]
        step_spans = sorted((e for e in mine if e["name"] == "step"),
                            key=lambda e: e["ts"])
        got = [e["args"].get("step") for e in step_spans]
        if got != list(range(1, steps + 1)):
            fail("rank %d: steps %s, expected 1..%d" % (r, got, steps))
            continue
        tid = step_spans[0]["tid"]
        if names.get((r, tid)) != "step":
            fail("rank %d: the step thread is not named 'step'" % r)
        bwds = [check_step(r, i + 1, s, mine, ckpt_every)
                for i, s in enumerate(step_spans)]
        if None in bwds:
            continue
        buckets = sorted((e for e in mine if e["name"].startswith("allreduce")),
                         key=lambda e: e["ts"])
        total += check_buckets(r, bwds, buckets, nbuckets, tid, names)
    for m in fails:
        print("FAIL: " + m)
    if fails:
        return 1
    print("ok: %d events, %d ranks x %d steps nest, %d buckets per step, %d "
          "bucket reductions overlap backward" %
          (len(ev), ranks, steps, nbuckets, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
