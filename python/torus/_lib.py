"""ctypes binding of libtorusdata (data/api/tdata_api.h), the versioned C
API of torus's input pipeline. Nothing here reimplements the pipeline: the
structs mirror the C header field for field, and every call goes to C.

The library is searched, first match wins, in
    $TORUS_LIBDIR (a folder, or the library file itself),
    the torus folder under the usual library folders
    (/usr/lib/<multiarch>/torus, /usr/local/lib/torus, ...).
"""

import ctypes
import os
import sysconfig

SONAME = "libtorusdata.so.1"
API_VERSION = 1


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


def _candidates():
    env = os.environ.get("TORUS_LIBDIR")
    if env:
        yield env if env.endswith(".so") or ".so." in env else os.path.join(env, SONAME)
        return
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for base in ("/usr/lib/" + multiarch, "/usr/local/lib/" + multiarch,
                 "/usr/local/lib", "/usr/lib64", "/usr/lib"):
        yield os.path.join(base, "torus", SONAME)


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
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


_LIB = None


def lib():
    """The loaded libtorusdata (loaded once), its API version checked."""
    global _LIB
    if _LIB is not None:
        return _LIB
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.exists(path):
            handle = ctypes.CDLL(path)
            _declare(handle)
            got = handle.tdata_api_version()
            if got < API_VERSION:
                raise ImportError(f"{path}: libtorusdata API version {got}, "
                                  f"this package needs {API_VERSION}")
            _LIB = handle
            return _LIB
    raise ImportError("libtorusdata not found (tried " + ", ".join(tried) +
                      "); install torus or set TORUS_LIBDIR to the folder "
                      "holding " + SONAME)


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
