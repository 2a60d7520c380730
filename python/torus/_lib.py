"""ctypes bindings of torus's two shared libraries:
    libtorusdata (data/api/tdata_api.h), the versioned C API of the input
        pipeline (torus.data) and of the checkpoints' names and checked
        tensors (torus.checkpoint_convert: Checkpoint, ckpt_name);
    libtoruscomm (trainer/comm/api/tcomm_api.h), the wire kernels of the
        collectives: fp32 to and from fp16/bf16 and the fused decode-and-add
        (torus.distributed's hooks, on CPU tensors).
Nothing here reimplements the C code: the structs mirror the C header field
for field, and every call goes to C.

Each library is searched, first match wins, in
    $TORUS_LIBDIR: folders (or a library file itself), separated by ':';
    the torus folder under the usual library folders
        (/usr/lib/<multiarch>/torus, /usr/local/lib/torus, ...).
"""

import ctypes
import os
import sysconfig

SONAME = "libtorusdata.so.1"
API_VERSION = 2  # 2: tdata_api_ckpt_*, tdata_api_partition
COMM_SONAME = "libtoruscomm.so.1"
COMM_API_VERSION = 1


class TorusDataError(RuntimeError):
    """An error of the C reader; the message is libtorusdata's (it names the
    file, shard or sample)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Info(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("num_shards", ctypes.c_int32),
        ("num_classes", ctypes.c_int32),
        ("height", ctypes.c_int32),
        ("width", ctypes.c_int32),
        ("channels", ctypes.c_int32),
        ("dense", ctypes.c_int32),
        ("num_images", ctypes.c_uint64),
        ("mean", ctypes.c_double * 3),
        ("std", ctypes.c_double * 3),
    ]


class Opts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("train", ctypes.c_int32),
        ("batch_size", ctypes.c_int32),
        ("out_size", ctypes.c_int32),
        ("u8_nhwc", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("world", ctypes.c_int32),
        ("drop_remainder", ctypes.c_int32),
        ("io_threads", ctypes.c_int32),
        ("decode_threads", ctypes.c_int32),
        ("eval_resize", ctypes.c_int32),
        ("pad_", ctypes.c_int32),
        ("max_bad", ctypes.c_int64),
        ("seed", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("sample_offset", ctypes.c_uint64),
        ("scale_min", ctypes.c_double),
        ("scale_max", ctypes.c_double),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("n", ctypes.c_int32),
        ("c", ctypes.c_int32),
        ("h", ctypes.c_int32),
        ("w", ctypes.c_int32),
        ("pad_", ctypes.c_int32),
        ("epoch", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("labels", ctypes.POINTER(ctypes.c_int32)),
        ("ids", ctypes.POINTER(ctypes.c_uint64)),
    ]


def _lib_dirs():
    """The usual library folders, in search order."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    return ("/usr/lib/" + multiarch, "/usr/local/lib/" + multiarch,
            "/usr/local/lib", "/usr/lib64", "/usr/lib")


def _candidates(soname):
    env = os.environ.get("TORUS_LIBDIR")
    if env:
        stem = soname.split(".so")[0]
        for entry in env.split(":"):
            if not entry:
                continue
            if os.path.basename(entry).startswith(stem + ".so"):
                yield entry
            elif not (entry.endswith(".so") or ".so." in entry):
                yield os.path.join(entry, soname)
        return
    for base in _lib_dirs():
        yield os.path.join(base, "torus", soname)


JPEG_SONAME = "libjpeg.so.62"


def _mapped_jpegs():
    """The real paths of the libjpeg files mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f]
        paths = {x[5].strip() for x in fields if len(x) == 6}
    except OSError:
        return set()
    return {os.path.realpath(p) for p in paths
            if os.path.basename(p).startswith("libjpeg.") and ".so" in p}


def _jpeg_ahead():
    """libtorusdata needs the system's libjpeg.so.62 (libjpeg-turbo, with
    jpeg_crop_scanline). A wheel's own copy, loaded first, answers to the
    same soname (torchvision 0.20 bundles one without jpeg_crop_scanline),
    so the loader would hand libtorusdata that copy and fail on the missing
    symbol. Where such a copy is mapped and the system's is not, the
    system's is loaded, by path and global, so that on a second try
    libtorusdata's jpeg_* symbols bind to it (the global scope is searched
    first). Returns the foreign copies, empty when none (then there is
    nothing to retry)."""
    mapped = _mapped_jpegs()
    if not mapped:
        return mapped
    system = [os.path.realpath(os.path.join(d, JPEG_SONAME)) for d in _lib_dirs()
              if os.path.exists(os.path.join(d, JPEG_SONAME))]
    if system and system[0] not in mapped:
        try:
            ctypes.CDLL(system[0], mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass  # the second try fails too, and its error names the copy
    return mapped - set(system)


def _open(path, soname):
    """ctypes.CDLL(PATH); libtorusdata that fails to load beside a foreign
    libjpeg is tried once more with the system's ahead (_jpeg_ahead), so
    nothing changes for a process that needs no help. ImportError else."""
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        foreign = _jpeg_ahead() if soname == SONAME else set()
        if not foreign:
            raise ImportError(f"{path}: {e}") from e
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"{path}: {e} (a libjpeg other than the system's was "
                          f"loaded first: {', '.join(sorted(foreign))})") from e


def _load(soname, declare, version_fn, need):
    """The first of _candidates(soname) that exists, declared and its API
    version checked; ImportError naming every path tried."""
    tried = []
    for path in _candidates(soname):
        tried.append(path)
        if os.path.exists(path):
            handle = _open(path, soname)
            declare(handle)
            got = getattr(handle, version_fn)()
            if got < need:
                raise ImportError(f"{path}: {soname.split('.so')[0]} API "
                                  f"version {got}, this package needs {need}")
            return handle
    raise ImportError(f"{soname.split('.so')[0]} not found (tried " +
                      ", ".join(tried) + "); install torus or set "
                      "TORUS_LIBDIR to the folder holding " + soname)


def _declare(lib):
    P, vp = ctypes.POINTER, ctypes.c_void_p
    sig = {
        "tdata_api_version": (ctypes.c_uint, []),
        "tdata_api_errmsg": (ctypes.c_char_p, []),
        "tdata_api_open": (ctypes.c_int, [ctypes.c_char_p, P(vp)]),
        "tdata_api_close": (None, [vp]),
        "tdata_api_info_get": (ctypes.c_int, [vp, P(Info)]),
        "tdata_api_class_name": (ctypes.c_char_p, [vp, ctypes.c_int]),
        "tdata_api_loader_new": (ctypes.c_int, [vp, P(Opts), P(vp)]),
        "tdata_api_loader_next": (ctypes.c_int, [vp, P(Batch)]),
        "tdata_api_loader_steps": (ctypes.c_uint64, [vp]),
        "tdata_api_loader_stats": (None, [vp, P(ctypes.c_uint64)]),
        "tdata_api_loader_norm": (None, [vp, P(ctypes.c_float), P(ctypes.c_float)]),
        "tdata_api_loader_free": (None, [vp]),
        "tdata_api_perm": (None, [ctypes.c_uint64, ctypes.c_uint64,
                                  ctypes.c_uint64, P(ctypes.c_uint64)]),
        "tdata_api_partition": (None, [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.c_int32, P(ctypes.c_uint64),
                                       P(ctypes.c_uint64)]),
        "tdata_api_ckpt_name": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int64,
                                               ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_uint64]),
        "tdata_api_ckpt_open": (ctypes.c_int, [ctypes.c_char_p, P(vp)]),
        "tdata_api_ckpt_fd": (ctypes.c_int, [vp]),
        "tdata_api_ckpt_tensor": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_char_p,
                                                 ctypes.c_uint64, ctypes.c_int32, vp]),
        "tdata_api_ckpt_close": (None, [vp]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def _declare_comm(lib):
    vp, n = ctypes.c_void_p, ctypes.c_size_t
    sig = {
        "tcomm_api_version": (ctypes.c_uint, []),
        "tcomm_api_isa": (ctypes.c_char_p, []),
        "tcomm_api_encode": (ctypes.c_int, [ctypes.c_int, vp, vp, n]),
        "tcomm_api_decode": (ctypes.c_int, [ctypes.c_int, vp, vp, n]),
        "tcomm_api_decode_add": (ctypes.c_int, [ctypes.c_int, vp, vp, n]),
        "tcomm_api_scale_round": (ctypes.c_int, [ctypes.c_int, vp, n,
                                                 ctypes.c_float]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


_LIB = None
_COMM = None


def lib():
    """The loaded libtorusdata (loaded once), its API version checked."""
    global _LIB
    if _LIB is None:
        _LIB = _load(SONAME, _declare, "tdata_api_version", API_VERSION)
    return _LIB


def comm():
    """The loaded libtoruscomm (loaded once), its API version checked."""
    global _COMM
    if _COMM is None:
        _COMM = _load(COMM_SONAME, _declare_comm, "tcomm_api_version",
                      COMM_API_VERSION)
    return _COMM


def check(rc):
    """Raise TorusDataError with the C message when rc is an error code."""
    if rc != 0:
        msg = lib().tdata_api_errmsg() or b"unknown error"
        raise TorusDataError(rc, msg.decode("utf-8", "replace"))
    return rc


def new(struct):
    """A struct of the C API with its size field set."""
    s = struct()
    s.size = ctypes.sizeof(struct)
    return s


# ---- checkpoints (tdata_api_ckpt_*): one implementation, the C one

VALUES, VARIANCE = 0, 1  # what a tensor holds: tdata_ckpt.h's kinds


def ckpt_name(folder, step, run):
    """The path torus-train gives the checkpoint of RUN at global STEP in
    FOLDER (a trailing slash or none: the same name). TorusDataError for a
    run id that is not 8 lowercase hex digits or a negative step."""
    buf = ctypes.create_string_buffer(4096)
    check(lib().tdata_api_ckpt_name(os.fsencode(folder), int(step),
                                    str(run).encode(), buf, len(buf)))
    return os.fsdecode(buf.value)


class Checkpoint:
    """An open checkpoint: a regular file only (a FIFO or device is refused
    by name, never waited on), and its tensors checked by the C reader's
    own validation before anything is allocated or read (tdata_ckpt.h:
    hard links only, no external or virtual storage, no filter but
    Fletcher32, the count the model needs, every byte in the file, finite,
    BN variances >= 0). h5_path(): the same file for reading attributes."""

    def __init__(self, path):
        h = ctypes.c_void_p()
        check(lib().tdata_api_ckpt_open(os.fsencode(path), ctypes.byref(h)))
        self._h = h

    def h5_path(self):
        return "/proc/self/fd/%d" % lib().tdata_api_ckpt_fd(self._h)

    def tensor(self, group, name, count, kind, out=None):
        """Checks GROUP/NAME for COUNT floats of KIND; with out (a
        writable buffer of COUNT float32, e.g. a numpy array) reads them
        into it and checks the values."""
        ptr = None if out is None else out.ctypes.data
        check(lib().tdata_api_ckpt_tensor(self._h, group.encode(), name.encode(),
                                          int(count), int(kind), ptr))
        return out

    def close(self):
        if getattr(self, "_h", None):
            lib().tdata_api_ckpt_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
