"""fuzz_ckpt_py.py CKPT CORPUS SECONDS [SEED]: a property test of the Python
package's checkpoint reader (torus.checkpoint_convert.read_checkpoint, what
torus.checkpoint.load and torus-torch export run) over the corpus the C
loader is fuzzed with (tests/fuzz/corpus-ckpt, fuzz_ckpt.c).

Each input is read as fuzz_ckpt.c reads its own: up to 8 edits of a copy of
checkpoint CKPT (a cifar-resnet here; tiny-cnn there, which the converter
does not convert), each (op, which, ...) bytes: an attribute replaced by one
of another type, rank, size or value (NaN, inf, 2^62, -1, ...), an
attribute deleted, one element of a dataset poisoned, a dataset replaced by
one of another length and type, a dataset deleted; and four edits of the
storage that fuzz_ckpt.c's mutator cannot make but a hostile file can: a
dataset stored in an external file, a virtual dataset, an external link, a
gzip filter. The first 64 attribute and dataset names in HDF5's name order
are the targets, as there. Every corpus file is run, then seeded random
inputs until SECONDS have passed.

The property: read_checkpoint returns, or raises ConvertError (a message
naming the file); nothing else escapes, nothing blocks. What it returns is
finite, every BN running variance is >= 0, and no byte of the external
"secret" file is in it. Exit 0, or 1 naming the input (its bytes in hex)."""
import math
import os
import random
import shutil
import struct
import sys
import tempfile
import time

import h5py
import numpy as np

from torus import checkpoint_convert as cc

MAXN = 64
SPECIAL = [math.nan, math.inf, -math.inf, 2.0 ** 62, -1.0, 0.0, 1e-300, 2.0 ** 31, 1e308, 0.5]
SECRET = np.frombuffer(b"FUZZ-SECRET-0123456789-ABCDEFGHIJKLMNOPQ", dtype="<f4")


class Input:
    """fuzz_input.h's reader: a byte, a big-endian 64-bit word; zeros once
    the input is spent."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def left(self):
        return len(self.data) - self.at

    def u8(self):
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1]

    def u64(self):
        v = 0
        for _ in range(8):
            v = v << 8 | self.u8()
        return v


def value(inp):
    k, v = inp.u8(), inp.u64()
    if k % 12 < 10:
        return SPECIAL[k % 12]
    return float(struct.unpack(">q", struct.pack(">Q", v))[0]) if k % 12 == 10 else float(v % 1000)


def _as(v, dtype):
    """v converted as HDF5 clips it (NaN: 0) for an integer type."""
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        return 0 if math.isnan(v) else int(min(max(v, info.min), info.max))
    return v


def edit_attr(f, name, inp):
    t, c = inp.u8(), inp.u8()
    count = 300 if c % 6 == 5 else c % 6
    v = value(inp)
    if name in f.attrs:
        del f.attrs[name]
    shape = (count,) if count else ()
    if t % 5 == 4:
        size = 1 + int(math.fmod(abs(v), 300) if math.isfinite(v) else 7)
        raw = np.full(shape, b"x" * (size - 1), dtype="S%d" % size)
        f.attrs.create(name, raw, dtype=h5py.string_dtype("ascii", size))
        return
    dtype = ("<i8", "<i4", "<f8", "<f4")[t % 5]
    f.attrs.create(name, np.full(shape, _as(v, dtype), dtype=dtype))


def poison(f, name, inp):
    k, v = inp.u64(), value(inp)
    d = f.get(name)
    if not isinstance(d, h5py.Dataset) or not 0 < d.size < (1 << 22):
        return
    a = d[...].reshape(-1)
    a[k % a.size] = _as(v, a.dtype)
    d[...] = a.reshape(d.shape)


def edit_dset(f, name, inp):
    t, n, v = inp.u8(), inp.u8() % 200, value(inp)
    if name in f:
        del f[name]
    dtype = ("<f4", "<f8", "<i8")[t % 3]
    f.create_dataset(name, data=np.full((n,), _as(v, dtype), dtype=dtype))


def _n(f, name):
    d = f.get(name)
    n = d.size if isinstance(d, h5py.Dataset) else 4
    if name in f:
        del f[name]
    return max(1, min(int(n), 1 << 16))


def external(f, name, secret, inp):
    n = _n(f, name)
    f.create_dataset(name, shape=(n,), dtype="<f4", external=[(secret, 0, 4 * n)])


def virtual(f, name, secret_h5, inp):
    n = _n(f, name)
    lay = h5py.VirtualLayout(shape=(n,), dtype="<f4")
    lay[:] = h5py.VirtualSource(secret_h5, "x", shape=(n,))
    f.create_virtual_dataset(name, lay)


def extlink(f, name, secret_h5, inp):
    _n(f, name)
    f[name] = h5py.ExternalLink(secret_h5, "/x")


def gzip(f, name, inp):
    n = _n(f, name)
    f.create_dataset(name, data=np.zeros(n, "<f4"), compression="gzip", fletcher32=True)


def names(path):
    with h5py.File(path, "r") as f:
        attrs = sorted(f.attrs.keys())[:MAXN]
        dsets = []
        f.visititems(lambda n, o: dsets.append(n) if isinstance(o, h5py.Dataset) else None)
    return attrs, sorted(dsets, key=lambda n: n.split("/"))[:MAXN]


def _edit(f, op, an, dn, secrets, inp):
    """Edit op of the input on f."""
    if op == 0:
        edit_attr(f, an, inp)
    elif op == 1:
        if an in f.attrs:
            del f.attrs[an]
    elif op == 2:
        poison(f, dn, inp)
    elif op == 3:
        edit_dset(f, dn, inp)
    elif op == 4:
        if dn in f:
            del f[dn]
    elif op == 5:
        external(f, dn, secrets[0], inp)
    elif op == 6:
        virtual(f, dn, secrets[1], inp)
    elif op == 7:
        extlink(f, dn, secrets[1], inp)
    else:
        gzip(f, dn, inp)


def mutate(path, attrs, dsets, secrets, data):
    inp = Input(data)
    with h5py.File(path, "r+") as f:
        for _ in range(8):
            if not inp.left():
                break
            op, which = inp.u8(), inp.u8()
            an, dn = attrs[which % len(attrs)], dsets[which % len(dsets)]
            try:
                _edit(f, op % 9, an, dn, secrets, inp)
            except (OSError, ValueError, KeyError, TypeError, RuntimeError):
                pass  # an edit HDF5 refuses is left out, as fuzz_ckpt.c does


def check(path):
    """(what is wrong with read_checkpoint's answer or None, refused)."""
    try:
        spec, params, momentum, stats, _ = cc.read_checkpoint(path)
    except cc.ConvertError as e:
        return (None if path in str(e) else "ConvertError not naming the file: %s" % e), 1
    except Exception as e:  # the property: nothing but ConvertError
        return "%s: %s" % (type(e).__name__, e), 0
    return _check_values(params, momentum, stats), 0


def _check_values(params, momentum, stats):
    secret = SECRET.tobytes()[:16]
    for group in (params, momentum):
        for k, a in group.items():
            if not np.all(np.isfinite(a)) or secret in a.tobytes():
                return "returned %s: not finite, or the secret's bytes" % k
    for i, a in enumerate(stats):
        if not np.all(np.isfinite(a)) or (i % 2 and np.any(a < 0)):
            return "returned BN statistics %d: not finite or a variance < 0" % i
    return None


def main():
    ck, corpus, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    work = tempfile.mkdtemp(prefix="fuzz_ckpt_py.")
    try:
        secrets = (os.path.join(work, "secret.bin"), os.path.join(work, "secret.h5"))
        with open(secrets[0], "wb") as s:
            s.write(np.resize(SECRET, 1 << 16).tobytes())
        with h5py.File(secrets[1], "w") as s:
            s["x"] = np.resize(SECRET, 1 << 16)
        attrs, dsets = names(ck)
        path = os.path.join(work, os.path.basename(ck))
        inputs = [open(os.path.join(corpus, n), "rb").read() for n in sorted(os.listdir(corpus))]
        ran, refused, end = 0, 0, time.monotonic() + seconds
        while inputs or time.monotonic() < end:
            data = inputs.pop(0) if inputs else bytes(
                rnd.randrange(256) for _ in range(rnd.randrange(2, 96)))
            shutil.copyfile(ck, path)
            with np.errstate(all="ignore"):  # values clipped as HDF5 clips them
                mutate(path, attrs, dsets, secrets, data)
            why, no = check(path)
            if why:
                print("FAIL: input %s: %s" % (data.hex(), why))
                return 1
            ran, refused = ran + 1, refused + no
        print("ok: %d inputs (%d of the corpus), %d refused with a ConvertError, "
              "no other outcome" % (ran, len(os.listdir(corpus)), refused))
        return 0
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
