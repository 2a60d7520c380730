"""py_ckpt_trust.py: the Python half of py_ckpt_trust.sh (see there).

    craft CKPT OUT     hostile copies of checkpoint CKPT: OUT/<case>/<its
                       name>, and OUT/cases.txt of "case|reason" lines
    load OUT           torus.checkpoint.load refuses every case of OUT with
                       its reason (ConvertError), and loads CKPT's own copy
    names              libtorusdata's checkpoint names through torus._lib
    save CKPT OUT      torus.checkpoint.save(model, "OUT/new/") names its file
                       as torus-train does, in the folder it creates
    pt OUT             hostile .pt files for torus-torch import: OUT/<case>.pt
                       and OUT/pt-cases.txt of "case|reason" lines
"""
import os
import sys
from typing import Tuple

import h5py
import numpy as np
import torch

SECRET = np.frombuffer(b"TORUS-SECRET-0123456789-ABCDEFGHIJKLMNOP", dtype="<f4")  # 10 floats


def _case(out, name, ck, lines, reason, edit):
    d = os.path.join(out, name)
    os.makedirs(d)
    path = os.path.join(d, os.path.basename(ck))
    with open(ck, "rb") as a, open(path, "wb") as b:
        b.write(a.read())
    with h5py.File(path, "r+") as f:
        edit(f, d)
    lines.append("%s|%s" % (name, reason))


def _replace(f, key, **kw):
    """Dataset key recreated as kw says (another storage, type or shape)."""
    n = f[key].shape[0]
    del f[key]
    kw.setdefault("shape", (n,))
    kw.setdefault("dtype", "<f4")
    return f.create_dataset(key, **kw)


def _secret_h5(d):
    p = os.path.join(d, "secret.h5")
    with h5py.File(p, "w") as s:
        s["x"] = SECRET
    return p


def _external(f, d):
    p = os.path.join(d, "secret.bin")
    with open(p, "wb") as s:
        s.write(SECRET.tobytes())
    _replace(f, "params/fc.b", external=[(p, 0, 40)])


def _virtual(f, d):
    lay = h5py.VirtualLayout(shape=(10,), dtype="<f4")
    lay[:] = h5py.VirtualSource(_secret_h5(d), "x", shape=(10,))
    del f["params/fc.b"]
    f["params"].create_virtual_dataset("fc.b", lay)


def _extlink(f, d):
    del f["params/fc.b"]
    f["params/fc.b"] = h5py.ExternalLink(_secret_h5(d), "/x")


def _extgroup(f, d):
    p = os.path.join(d, "other.h5")
    with h5py.File(p, "w") as o:
        f.copy("momentum", o)
    del f["momentum"]
    f["momentum"] = h5py.ExternalLink(p, "/momentum")


def _set(key, index, value):
    def edit(f, d):
        v = f[key][...]
        v[index] = value
        f[key][...] = v
    return edit


CASES = [
    ("negvar", "BN running variance and holds -1", _set("bn_stats/1", 0, -1.0)),
    ("nanvar", "holds 1 NaN or infinite value(s) of 16", _set("bn_stats/3", 2, np.nan)),
    ("external", "stored in an external file", _external),
    ("virtual", "a virtual dataset", _virtual),
    ("extlink", "fc.b is a soft or external link", _extlink),
    ("extgroup", "group momentum is a soft or external link", _extgroup),
    ("gzip", "has a filter other than the Fletcher32", lambda f, d: _replace(
        f, "params/fc.b", data=np.zeros(10, "<f4"), compression="gzip", fletcher32=True,
        chunks=(10,))),
    ("unwritten", "stores 0 bytes", lambda f, d: _replace(
        f, "params/fc.b", chunks=(10,), fletcher32=True)),
    ("shape2d", "holds 10 values in 2 dimension(s)", lambda f, d: _replace(
        f, "params/fc.b", shape=(2, 5), data=np.zeros((2, 5), "<f4"))),
    ("f64", "is not of 4-byte floats", lambda f, d: _replace(
        f, "params/fc.b", dtype="<f8", data=np.zeros(10))),
]


def craft(ck, out):
    lines = []
    for name, reason, edit in CASES:
        _case(out, name, ck, lines, reason, edit)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load(out):
    import torus.checkpoint as tc
    for line in open(os.path.join(out, "cases.txt")).read().splitlines():
        name, reason = line.split("|", 1)
        d = os.path.join(out, name)
        path = os.path.join(d, [x for x in os.listdir(d) if x.startswith("ckpt-")][0])
        try:
            tc.load(path)
        except tc.ConvertError as e:
            if reason not in str(e) or path not in str(e):
                sys.exit("%s: the error '%s' lacks '%s' or the file" % (name, e, reason))
            print("ok: torus.checkpoint.load refuses %s: %s" % (name, e))
            continue
        sys.exit("torus.checkpoint.load accepted %s" % name)


def names():
    from torus import _lib
    a = _lib.ckpt_name("run/", 5, "0123abcd")
    b = _lib.ckpt_name("run", 5, "0123abcd")
    c = _lib.ckpt_name("run//", 5, "0123abcd")
    assert a == b == c == "run/ckpt-5-0123abcd.h5", (a, b, c)
    for run, step in (("b'0123abcd'", 5), ("0123ABCD", 5), ("0123abc", 5),
                      ("0123abcd0", 5), ("0123abcd", -1)):
        try:
            _lib.ckpt_name("run/", step, run)
        except _lib.TorusDataError as e:
            print("ok: refused run %s step %d: %s" % (run, step, e))
            continue
        sys.exit("ckpt_name accepted run %s step %d" % (run, step))
    print("ok: ckpt_name('run/') == ckpt_name('run') == %s" % a)


def save(ck, out):
    import re
    import torus.checkpoint as tc
    m = tc.load(ck)
    folder = os.path.join(out, "new") + "/"
    path = tc.save(m, folder, "cifar-resnet", image_size=12)
    if os.path.dirname(path) + "/" != folder or not re.match(
            r"^ckpt-0-[0-9a-f]{8}\.h5$", os.path.basename(path)):
        sys.exit("torus.checkpoint.save to %s wrote %s" % (folder, path))
    back = tc.load(path)
    for (k, a), b in zip(m.state_dict().items(), back.state_dict().values()):
        if not k.endswith("num_batches_tracked") and not torch.equal(a, b):
            sys.exit("torus.checkpoint.save: %s differs after a load" % k)
    print("ok: torus.checkpoint.save to a new folder %s wrote %s" % (folder, path))
    try:
        tc.save(m, folder, "cifar-resnet", image_size=1)
        sys.exit("torus.checkpoint.save wrote an image size of 1, which torus-train refuses")
    except tc.ConvertError as e:
        print("ok: image size 1 refused: %s" % e)


class _Script(torch.nn.Module):
    """A module whose TorchScript __setstate__ prints a marker: loading its
    archive runs code."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def __getstate__(self):
        return (self.w, self.training)

    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        print("TORUS-TEST-RAN-CODE")
        self.w = state[0]
        self.training = state[1]

    def forward(self, x):
        return x


def pt(ck, out):
    """Hostile state dicts made from CKPT's own (exported) state dict."""
    import torus.checkpoint_convert as cc
    spec, params, _, stats, _ = cc.read_checkpoint(ck)
    sd = cc.to_state_dict(spec, params, stats, 2)
    cases = []

    def save(name, reason, d):
        torch.save(d, os.path.join(out, name + ".pt"))
        cases.append("%s|%s" % (name, reason))
    torch.save(sd, os.path.join(out, "plain.pt"))
    big = dict(sd)
    big["fc.weight"] = torch.zeros(1, 64).expand(4_000_000, 64)
    big["fc.bias"] = torch.zeros(1).expand(4_000_000)
    save("stride0", "fc.weight of shape (4000000, 64) is an expanded view", big)
    flat = dict(sd)
    flat["conv1.weight"] = sd["conv1.weight"].reshape(-1)
    save("conv1d", "conv1.weight has 1 dimension(s) (144,)", flat)
    neg = dict(sd)
    neg["bn1.running_var"] = -torch.ones_like(sd["bn1.running_var"])
    save("negvar", "bn1.running_var is a BN running variance and holds -1", neg)
    save("wrapped", "entry 'state_dict' is a ", {"state_dict": sd})
    half = dict(sd)
    half["fc.bias"] = torch.arange(10, dtype=torch.int64)
    save("int", "fc.bias is a torch.strided torch.int64 tensor", half)
    # Torch's own scripted class from this file's source (jit needs it).
    _Script.__getstate__ = torch.jit.export(_Script.__getstate__)
    _Script.__setstate__ = torch.jit.export(_Script.__setstate__)
    torch.jit.save(torch.jit.script(_Script()), os.path.join(out, "script.pt"))
    cases.append("script|is a TorchScript archive (entry")
    with open(os.path.join(out, "pt-cases.txt"), "w") as f:
        f.write("\n".join(cases) + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "craft":
        craft(sys.argv[2], sys.argv[3])
    elif cmd == "load":
        load(sys.argv[2])
    elif cmd == "names":
        names()
    elif cmd == "save":
        save(sys.argv[2], sys.argv[3])
    elif cmd == "pt":
        pt(sys.argv[2], sys.argv[3])
    else:
        sys.exit("unknown command " + cmd)
