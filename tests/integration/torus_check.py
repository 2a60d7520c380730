#!/usr/bin/env python3
"""torus_check.py: checks shared by the torus-layout and spank_torus tests.

  torus_check.py json LAYOUT.json
      Assert the invariants of one `torus-layout --json` object: R*C tasks,
      tasks ordered by procid, unique coordinates, groups partitioning the
      nodes, each task's group matching its node's group.
  torus_check.py env LAYOUT.json DUMP
      DUMP holds one line per task, as printed by
      `srun sh -c 'echo $SLURM_PROCID $(hostname) $TORUS_DIMS ...'`:
        procid node DIMS COORD GROUP NGROUPS NODE_INDEX SOURCE VERSION
      Assert every task's TORUS_* values equal the layout's.
  torus_check.py unset DUMP
      Assert no task saw any TORUS_* value (torus off).
Exit status 0 on success; 1 with a "FAIL: ..." line otherwise.
"""
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_json(path):
    with open(path) as f:
        doc = json.load(f)
    if sorted(doc) != ["dims", "groups", "source", "tasks"]:
        fail("keys are %s, expected dims/source/groups/tasks" % sorted(doc))
    rows, cols = doc["dims"]
    tasks = doc["tasks"]
    if len(tasks) != rows * cols:
        fail("%d tasks for dims %dx%d" % (len(tasks), rows, cols))
    node_group = {}
    for g, members in enumerate(doc["groups"]):
        for node in members:
            if node in node_group:
                fail("node %s in two groups" % node)
            node_group[node] = g
    seen = set()
    for i, t in enumerate(tasks):
        if sorted(t) != ["col", "group", "node", "procid", "row"]:
            fail("task keys %s" % sorted(t))
        if t["procid"] != i:
            fail("tasks not ordered by procid at %d" % i)
        if not (0 <= t["row"] < rows and 0 <= t["col"] < cols):
            fail("task %d outside the grid" % i)
        if (t["row"], t["col"]) in seen:
            fail("coordinate %d,%d used twice" % (t["row"], t["col"]))
        seen.add((t["row"], t["col"]))
        if node_group.get(t["node"]) != t["group"]:
            fail("task %d: group %d but node %s is in group %s"
                 % (i, t["group"], t["node"], node_group.get(t["node"])))
    return doc


def check_env(path, dump):
    doc = check_json(path)
    order = [n for members in doc["groups"] for n in members]
    want = {}
    for t in doc["tasks"]:
        want[t["procid"]] = (
            t["node"], "%dx%d" % tuple(doc["dims"]), "%d,%d" % (t["row"], t["col"]),
            str(t["group"]), str(len(doc["groups"])), str(order.index(t["node"])),
            doc["source"], "1")
    got = {}
    with open(dump) as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 9:
                fail("dump line %r: expected 9 fields (TORUS_* missing?)" % line.strip())
            got[int(fields[0])] = tuple(fields[1:])
    if sorted(got) != sorted(want):
        fail("tasks in dump %s, layout has %s" % (sorted(got), sorted(want)))
    for procid in sorted(want):
        if got[procid] != want[procid]:
            fail("task %d: env %s, torus-layout %s" % (procid, got[procid], want[procid]))
    print("ok: %d tasks match %dx%d from %s" % (len(want), doc["dims"][0], doc["dims"][1],
                                                doc["source"]))


def check_unset(dump):
    n = 0
    with open(dump) as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            n += 1
            if len(fields) != 2:
                fail("torus off but a task saw TORUS_*: %r" % line.strip())
    if n == 0:
        fail("no task output")
    print("ok: %d tasks without TORUS_*" % n)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "json":
        check_json(sys.argv[2])
        print("ok: layout invariants hold")
    elif len(sys.argv) == 4 and sys.argv[1] == "env":
        check_env(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "unset":
        check_unset(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
