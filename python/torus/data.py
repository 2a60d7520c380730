"""torus.data: torus's packed HDF5 shards as torch tensors.

ShardDataset opens a packed set (torus-pack's SPLIT-index.txt and shards);
ShardLoader iterates it through libtorusdata, the C loader that torus-train
runs: its I/O and decode threads, its per-(seed, epoch) shuffle and
per-rank slices, and its train and eval transforms. Python only copies each
finished batch into a torch tensor.

    ds = ShardDataset("/data/fmnist/train-index.txt")
    loader = ShardLoader(ds, batch_size=128, train=True, seed=1)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for x, y in loader:           # x: float32 NCHW, y: int64
            ...
    state = loader.state_dict()       # resume: load_state_dict(state)
"""

import ctypes
import operator

import torch

from . import _lib, env
from ._lib import TorusDataError

__all__ = ["ShardDataset", "ShardLoader", "TorusDataError", "permutation"]


class ShardDataset:
    """An open packed set. Every shard is checked on open (length, format
    version, counts, CRC of CRCs); a refused set raises TorusDataError with
    the C reader's message."""

    def __init__(self, index):
        self._lib = _lib.lib()
        self.index = str(index)
        h = ctypes.c_void_p()
        _lib.check(self._lib.tdata_api_open(self.index.encode(), ctypes.byref(h)))
        self._h = h
        info = _lib.new(_lib.Info)
        _lib.check(self._lib.tdata_api_info_get(self._h, ctypes.byref(info)))
        self.num_images = info.num_images
        self.num_shards = info.num_shards
        self.dense = bool(info.dense)
        self.height, self.width, self.channels = info.height, info.width, info.channels
        self.mean, self.std = tuple(info.mean), tuple(info.std)
        self.classes = [self._lib.tdata_api_class_name(self._h, c).decode()
                        for c in range(info.num_classes)]

    def __len__(self):
        return self.num_images

    def close(self):
        if getattr(self, "_h", None):
            self._lib.tdata_api_close(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_U64 = (1 << 64) - 1
_I32 = (1 << 31) - 1
# The loader's last epoch (libtdata's TDATA_EPOCH_MAX, 2^63 - 1): it refuses
# a later one, so a loader's epoch is checked against it here, before C.
_EPOCH_MAX = (1 << 63) - 1


def _int(name, v, lo, hi):
    """v as an int in [lo, hi], checked here: C would wrap a negative epoch
    or seed to a huge one, or truncate a size."""
    try:
        v = operator.index(v)  # ints and numpy integers, not floats
    except TypeError:
        raise ValueError(f"{name}={v!r} is not an integer") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name}={v} is out of range [{lo}, {hi}]")
    return v


def permutation(seed, epoch, n):
    """The (seed, epoch) order of n samples that torus-train's loader uses
    (libtdata's tdata_perm), as a list of sample ids."""
    seed, epoch = _int("seed", seed, 0, _U64), _int("epoch", epoch, 0, _U64 - 1)
    n = _int("n", n, 0, 1 << 40)
    buf = (ctypes.c_uint64 * n)()
    _lib.lib().tdata_api_perm(seed, epoch, n, buf)
    return list(buf)


class ShardLoader:
    """Batches of a ShardDataset, this rank's slice of each epoch.

    train: shuffled (seed, epoch) slices, random resized crop (area
        scale, torus-train's 0.64..1 by default) and horizontal flip;
        else the eval transform (resize, centre crop) in order.
    output: "float" (float32 NCHW, normalised with the set's mean/std) or
        "uint8" (uint8 NHWC as decoded, unnormalised; see norm()).
    rank, world_size: default from the environment (torus.env).
    drop_last: PyTorch's meaning, leave out the last batch of an epoch when
        it is not full. Train batches are always full (the C stream runs
        on into the next epoch), so train=True takes only True (the
        default); eval keeps the partial batch unless drop_last=True.
    even_slices: train only: every rank the same number of samples, the
        rest of the epoch left out (torus-train's; the default), or
        contiguous slices of all samples (ranks may then differ by a step).
    max_bad: fail once more than this many samples were bad (-1: never).
        A bad sample is reported on stderr as torus-train reports it and
        left out of its batch.
    return_ids: also yield each batch's global sample ids.
    """

    _h = None  # the C loader; a class default so that __del__ of a
    #            half-made loader (a refused option) finds it

    def __init__(self, dataset, batch_size, train=True, image_size=None,
                 output="float", seed=0, rank=None, world_size=None,
                 drop_last=None, io_threads=0, decode_threads=0, max_bad=-1,
                 eval_resize=0, scale=None, return_ids=False, even_slices=None):
        if not isinstance(dataset, ShardDataset):
            dataset = ShardDataset(dataset)
        if output not in ("float", "uint8"):
            raise ValueError(f"output={output!r}: 'float' or 'uint8'")
        if image_size is None:
            image_size = dataset.height if dataset.dense else 224
        self.dataset = dataset
        self.batch_size = _int("batch_size", batch_size, 1, _I32)
        self.train = bool(train)
        self.output = output
        self.return_ids = return_ids
        self.rank = _int("rank", env.rank() if rank is None else rank, 0, _I32)
        self.world_size = _int("world_size", env.world_size() if world_size is None
                               else world_size, 1, _I32)
        if self.rank >= self.world_size:
            raise ValueError(f"rank={self.rank} is not below world_size={self.world_size}")
        self.drop_last = self._drop_last(drop_last, even_slices)
        o = _lib.new(_lib.Opts)
        o.train, o.batch_size = int(self.train), self.batch_size
        o.out_size = _int("image_size", image_size, 1, 4096)
        o.u8_nhwc = int(output == "uint8")
        o.rank, o.world = self.rank, self.world_size
        o.drop_remainder = -1 if even_slices is None else int(bool(even_slices))
        o.io_threads = _int("io_threads", io_threads, 0, 1024)
        o.decode_threads = _int("decode_threads", decode_threads, 0, 1024)
        o.max_bad = _int("max_bad", max_bad, -1, (1 << 63) - 1)
        o.seed = _int("seed", seed, 0, _U64)
        o.eval_resize = _int("eval_resize", eval_resize, 0, 1 << 16)
        if scale is not None:
            o.scale_min, o.scale_max = float(scale[0]), float(scale[1])
            if not 0 < o.scale_min <= o.scale_max <= 1:
                raise ValueError(f"scale={tuple(scale)}: 0 < min <= max <= 1")
        self._opts = o
        self.seed = o.seed
        self.epoch, self.step = 0, 0
        self._h = None  # the C loader, positioned at (self._at)
        self._at = None
        self._steps = None
        self._start()  # checks the options now, not at the first batch

    def _drop_last(self, drop_last, even_slices):
        """drop_last as PyTorch means it, refused where it cannot hold."""
        if even_slices is not None and not self.train:
            raise ValueError("even_slices is for train=True (an eval pass covers "
                             "every sample once)")
        if drop_last is None:
            return self.train
        if self.train and not drop_last:
            raise ValueError("drop_last=False with train=True: train batches are "
                             "always full (the stream runs on into the next "
                             "epoch); for the ranks' slices see even_slices")
        return bool(drop_last)

    # -- position ---------------------------------------------------------
    def set_epoch(self, epoch):
        """Start the next iteration at the beginning of EPOCH."""
        epoch = _int("epoch", epoch, 0, _EPOCH_MAX)
        if epoch != self.epoch or self.step != 0:
            self.epoch, self.step = epoch, 0

    def state_dict(self):
        return {"epoch": self.epoch, "step": self.step, "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size}

    def load_state_dict(self, state):
        """Resume where state_dict() was taken: the next batch is the one
        the saving loader would have produced next."""
        for k in ("seed", "batch_size", "world_size"):
            if state[k] != getattr(self, k):
                raise ValueError(f"state_dict has {k}={state[k]}, this "
                                 f"loader {getattr(self, k)}")
        epoch = _int("state_dict epoch", state["epoch"], 0, _EPOCH_MAX)
        step = _int("state_dict step", state["step"], 0, _U64 // max(1, self.batch_size))
        self.epoch, self.step = epoch, step

    def __len__(self):
        """Batches of one epoch on this rank (without the partial last
        batch of an eval pass under drop_last)."""
        return self._steps - int(self._partial())

    def _partial(self):
        """Whether an eval pass here ends on a partial batch that
        drop_last leaves out."""
        if self.train or not self.drop_last:
            return False
        b, e = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib().tdata_api_partition(self.dataset.num_images, self.world_size,
                                        self.rank, 0, ctypes.byref(b), ctypes.byref(e))
        return (e.value - b.value) % self.batch_size != 0

    def norm(self):
        """(scale, bias), 3 floats each: value = byte * scale + bias, the
        normalisation of the float output, for normalising uint8 batches."""
        s, b = (ctypes.c_float * 3)(), (ctypes.c_float * 3)()
        self._lib().tdata_api_loader_norm(self._handle(), s, b)
        return list(s), list(b)

    def stats(self):
        """Samples, bad samples, bad CRC, bad decode so far."""
        st = (ctypes.c_uint64 * 4)()
        self._lib().tdata_api_loader_stats(self._handle(), st)
        return dict(zip(("samples", "bad", "bad_crc", "bad_decode"), st))

    # -- the C stream -----------------------------------------------------
    @staticmethod
    def _lib():
        return _lib.lib()

    def _handle(self):
        if self._h is None:
            self._start()
        return self._h

    def _start(self):
        self.close()
        self._opts.epoch = self.epoch
        self._opts.sample_offset = self.step * self.batch_size
        h = ctypes.c_void_p()
        _lib.check(self._lib().tdata_api_loader_new(
            self.dataset._h, ctypes.byref(self._opts), ctypes.byref(h)))
        self._h = h
        self._steps = int(self._lib().tdata_api_loader_steps(h))
        self._at = (self.epoch, self.step)

    def close(self):
        if self._h is not None:
            self._lib().tdata_api_loader_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def _tensors(self, b):
        n = b.n
        if self.output == "uint8":
            x = torch.empty((n, b.h, b.w, b.c), dtype=torch.uint8)
        else:
            x = torch.empty((n, b.c, b.h, b.w), dtype=torch.float32)
        if x.numel() * x.element_size() != b.bytes:
            raise TorusDataError(-1, f"batch of {b.bytes} bytes for a "
                                 f"{tuple(x.shape)} {x.dtype} tensor")
        if n:
            ctypes.memmove(x.data_ptr(), b.data, b.bytes)
        y = torch.tensor(b.labels[:n], dtype=torch.int64)
        if not self.return_ids:
            return x, y
        return x, y, torch.tensor(b.ids[:n], dtype=torch.int64)

    def __iter__(self):
        """One epoch from the current position (set_epoch /
        load_state_dict); afterwards the position is the next epoch."""
        # Train streams roll into the next epoch by themselves; an eval
        # stream ends with its epoch. Only a jump (resume, set_epoch) or a
        # new eval pass needs a new C stream.
        if self._h is None or self._at != (self.epoch, self.step):
            self._start()
        b = _lib.new(_lib.Batch)
        while self.train is False or self.step < self._steps:
            rc = self._lib().tdata_api_loader_next(self._h, ctypes.byref(b))
            if rc == 1:
                break
            _lib.check(rc)
            if b.n < self.batch_size and self.drop_last:
                break  # eval's partial last batch (train's are full)
            out = self._tensors(b)
            self.step += 1
            self._at = (self.epoch, self.step)
            yield out
        self.epoch, self.step = self.epoch + 1, 0
        self._at = (self.epoch, 0) if self.train else None
