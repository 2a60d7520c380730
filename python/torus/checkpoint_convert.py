"""checkpoint_convert: torus checkpoints <-> PyTorch state dicts.

A torus checkpoint (trainer/train/checkpoint.c) is an HDF5 file with three
groups of flat little-endian float32 datasets, each with a Fletcher32
checksum: params/<name> (the fp32 master weights in canonical OIHW / OI /
C order), momentum/<name> (the optimizer's velocity, laid out alike) and
bn_stats/<i> (BN running mean and variance: BN layer k in forward order has
statistics 2k and 2k+1), plus attributes (format, run, model, world,
batch_schedule, data, data_id, wire, config, epoch, step, global_step,
samples, dropout_step, optimizer_steps, previous_lr, loss_scale_mode,
loss_scale, loss_scale_clean, loss_scale_overflows).

Torus names its layers as torchvision does ("layer2.0.conv1"), so the
mapping is per parameter kind: <conv>.w -> <conv>.weight, <bn>.gamma ->
<bn>.weight, <bn>.beta -> <bn>.bias, fc.w -> fc.weight, fc.b -> fc.bias;
the statistics become <bn>.running_mean and <bn>.running_var, and
<bn>.num_batches_tracked is the checkpoint's global step. HDF5 lists
datasets by name, not in creation order, so the forward order comes from
layout(), which builds the same list as trainer/models/resnet.c.

Models: "resnet50" (v1.5), "resnet18" and "cifar-resnet" (depth 6n+2).
Their PyTorch modules: torchvision's resnet50/resnet18 (torch_model), and
CifarResNet here.

Trust: a checkpoint's tensors are checked and read by libtorusdata
(torus._lib.Checkpoint, data/format/tdata_ckpt.h: the validation
torus-train's loader runs), and its file name is libtorusdata's too
(tdata_api_ckpt_name); h5py reads only attributes and names, of the same
checked file. A .pt file is read only as a plain state dict
(load_state_dict_file: no TorchScript, no pickled objects, bounded
tensors). Every refusal is a ConvertError naming the file and tensor.

numpy is needed for the conversions, h5py for checkpoints, torch for state
dicts and modules; each is imported where it is used.
"""
import collections
import os
import re
import secrets
import shutil
import tempfile

FORMAT = "torus-checkpoint-2"
MODELS = ("resnet50", "resnet18", "cifar-resnet")
_CHUNK = 1 << 18  # floats per HDF5 chunk, as checkpoint.c writes them


class ConvertError(Exception):
    """A file or state dict that does not fit the model; the message names
    the file and the tensor."""


Spec = collections.namedtuple("Spec", "name depth in_channels classes image_size")
# torus: the checkpoint's name; torch: the state dict's; kind: conv, bn.weight,
# bn.bias, fc.weight or fc.bias.
Entry = collections.namedtuple("Entry", "torus torch shape kind")


def default_spec(name, depth=None, in_channels=3, classes=None, image_size=None):
    if name not in MODELS:
        raise ConvertError("unknown model '%s' (one of %s)" % (name, ", ".join(MODELS)))
    cifar = name == "cifar-resnet"
    if cifar and (depth is None or depth < 8 or (depth - 2) % 6):
        raise ConvertError("cifar-resnet: depth %s is not 6n+2 with n >= 1" % depth)
    spec = Spec(name, depth if cifar else None, in_channels,
                classes or (10 if cifar else 1000), image_size or (32 if cifar else 224))
    # torus-train's own limits (tmodel_validate): a file it would refuse is
    # not written, and a forged model record is named here.
    if not (1 <= spec.in_channels <= 64 and 2 <= spec.image_size <= 4096 and
            spec.classes >= 2):
        raise ConvertError("%s: %d input channels (1..64), image size %d (2..4096), "
                           "%d classes (>= 2): outside what torus-train builds" % (
                               name, spec.in_channels, spec.image_size, spec.classes))
    return spec


def _conv(out, pre, cout, cin, k):
    out.append(Entry(pre + ".w", pre + ".weight", (cout, cin, k, k), "conv"))


def _bn(out, bns, pre, c):
    out.append(Entry(pre + ".gamma", pre + ".weight", (c,), "bn.weight"))
    out.append(Entry(pre + ".beta", pre + ".bias", (c,), "bn.bias"))
    bns.append(pre)


def _block(out, bns, pre, cin, width, stride, bottleneck):
    """One residual block as resnet.c's _bottleneck/_basic adds it; returns
    its output channels."""
    if bottleneck:
        convs = [("conv1", "bn1", width, 1), ("conv2", "bn2", width, 3),
                 ("conv3", "bn3", 4 * width, 1)]
    else:
        convs = [("conv1", "bn1", width, 3), ("conv2", "bn2", width, 3)]
    c = cin
    for conv, bn, cout, k in convs:
        _conv(out, pre + conv, cout, c, k)
        _bn(out, bns, pre + bn, cout)
        c = cout
    if stride != 1 or cin != c:
        _conv(out, pre + "downsample.0", c, cin, 1)
        _bn(out, bns, pre + "downsample.1", c)
    return c


def layout(spec):
    """(entries in forward order, BN layer names in forward order)."""
    out, bns = [], []
    if spec.name == "cifar-resnet":
        n = (spec.depth - 2) // 6
        blocks, width0, stem, bottleneck = [n, n, n], 16, 3, False
        _conv(out, "conv1", 16, spec.in_channels, 3)
        _bn(out, bns, "bn1", 16)
        c = 16
    else:
        bottleneck = spec.name == "resnet50"
        blocks, width0, stem = ([3, 4, 6, 3] if bottleneck else [2, 2, 2, 2]), 64, 7
        _conv(out, "conv1", 64, spec.in_channels, stem)
        _bn(out, bns, "bn1", 64)
        c = 64
    for s, nb in enumerate(blocks):
        for b in range(nb):
            stride = 2 if s > 0 and b == 0 else 1
            c = _block(out, bns, "layer%d.%d." % (s + 1, b), c, width0 << s, stride,
                       bottleneck)
    out.append(Entry("fc.w", "fc.weight", (spec.classes, c), "fc.weight"))
    out.append(Entry("fc.b", "fc.bias", (spec.classes,), "fc.bias"))
    return out, bns


# ---- the "model" attribute: "cifar-resnet depth 8, 3x32x32 input, 10 classes"

_MODEL_RE = re.compile(r"^([a-z0-9-]+)(?: depth (\d+))?, (\d+)x(\d+)x(\d+) input, "
                       r"(\d+) classes$")


def model_attr(spec):
    depth = " depth %d" % spec.depth if spec.name == "cifar-resnet" else ""
    return "%s%s, %dx%dx%d input, %d classes" % (
        spec.name, depth, spec.in_channels, spec.image_size, spec.image_size,
        spec.classes)


def parse_model_attr(text, where):
    m = _MODEL_RE.match(text)
    if not m:
        raise ConvertError("%s: model attribute '%s' is not understood" % (where, text))
    name, depth, c, h, w, k = m.groups()
    if name not in MODELS:
        raise ConvertError("%s: model %s is not one torus-torch converts (%s)" %
                           (where, name, ", ".join(MODELS)))
    if h != w:
        raise ConvertError("%s: non-square input %sx%s" % (where, h, w))
    return default_spec(name, int(depth) if depth else None, int(c), int(k), int(h))


def _storage_bytes(t):
    """Bytes of the storage under tensor t (torch 2: untyped_storage;
    torch 1.13: storage)."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return st.nbytes()


def check_tensor(where, key, t, shape=None):
    """t is a plain dense float tensor whose every element has its own
    bytes in its storage (no stride-0 expansion, which would make a small
    file allocate gigabytes), and, given shape, of that shape: checked
    before anything is converted or allocated."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise ConvertError("%s: %s is a %s, not a tensor" % (where, key, type(t).__name__))
    if t.layout != torch.strided or t.is_quantized or not t.is_floating_point():
        raise ConvertError("%s: %s is a %s %s tensor, not a dense float one" % (
            where, key, t.layout, t.dtype))
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ConvertError("%s: %s has shape %s, the model needs %s" % (
            where, key, tuple(t.shape), tuple(shape)))
    if any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape)) or \
            _storage_bytes(t) < t.numel() * t.element_size():
        raise ConvertError("%s: %s of shape %s is an expanded view (a stride of "
                           "0, or fewer stored elements than it has): refused" % (
                               where, key, tuple(t.shape)))


def check_state_dict(sd, where):
    """A plain state dict: a dict of names to tensors, nothing else (a
    wrapping dict, a module, a TorchScript archive are refused)."""
    import torch
    if not isinstance(sd, dict):
        raise ConvertError("%s holds a %s, not a state dict" % (where, type(sd).__name__))
    for k, v in sd.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise ConvertError("%s: entry %r is a %s, not a tensor: not a plain "
                               "state dict (save model.state_dict())" % (
                                   where, k, type(v).__name__))


def spec_from_state_dict(name, sd, image_size=None, where="state dict"):
    """The spec a state dict of model `name` was made from (its input
    channels, classes and, for cifar-resnet, depth); image_size is not in
    it."""
    check_state_dict(sd, where)
    for key, dims in (("conv1.weight", 4), ("fc.weight", 2)):
        if key not in sd:
            raise ConvertError("%s: no %s: not a %s state dict" % (where, key, name))
        if sd[key].dim() != dims:
            raise ConvertError("%s: %s has %d dimension(s) %s, a %s needs %d" % (
                where, key, sd[key].dim(), tuple(sd[key].shape), name, dims))
    depth = None
    if name == "cifar-resnet":
        n = len({k.split(".")[1] for k in sd if k.startswith("layer1.")})
        depth = 6 * n + 2
    return default_spec(name, depth, int(sd["conv1.weight"].shape[1]),
                        int(sd["fc.weight"].shape[0]), image_size)


# ---- state dicts <-> torus tensors (numpy, torus names, canonical layout)

def to_state_dict(spec, params, stats, steps=0):
    """A torchvision-named state dict (torch tensors) from params (torus
    name -> array) and stats (the bn_stats list)."""
    import numpy as np
    import torch
    entries, bns = layout(spec)
    sd = collections.OrderedDict()
    by_bn = {}
    for k, bn in enumerate(bns):
        by_bn[bn] = (stats[2 * k], stats[2 * k + 1])
    for e in entries:
        sd[e.torch] = torch.from_numpy(np.ascontiguousarray(params[e.torus],
                                                            dtype="<f4").reshape(e.shape))
        bn = e.torch[:-len(".bias")] if e.kind == "bn.bias" else None
        if bn:
            mean, var = by_bn[bn]
            sd[bn + ".running_mean"] = torch.from_numpy(np.array(mean, dtype="<f4"))
            sd[bn + ".running_var"] = torch.from_numpy(np.array(var, dtype="<f4"))
            sd[bn + ".num_batches_tracked"] = torch.tensor(int(steps), dtype=torch.int64)
    return sd


def from_state_dict(spec, sd, where="state dict"):
    """(params: torus name -> flat float32 array, stats list) from a
    torchvision-named state dict; every tensor the model has must be there
    with its shape, and nothing else (num_batches_tracked may be absent)."""
    import numpy as np
    entries, bns = layout(spec)
    want = {e.torch for e in entries}
    for bn in bns:
        want |= {bn + ".running_mean", bn + ".running_var"}
    have = set(sd.keys())
    extra = sorted(k for k in have - want if not k.endswith(".num_batches_tracked"))
    missing = sorted(want - have)
    if missing or extra:
        raise ConvertError("%s does not fit %s: missing %s; unexpected %s" % (
            where, model_attr(spec), missing[:5] or "none", extra[:5] or "none"))

    def arr(key, shape, variance=False):
        check_tensor(where, key, sd[key], shape)
        a = sd[key].detach().cpu().float().numpy()
        if not np.all(np.isfinite(a)):
            raise ConvertError("%s: %s holds inf or nan" % (where, key))
        if variance and np.any(a < 0):
            raise ConvertError("%s: %s is a BN running variance and holds %g "
                               "(a variance is >= 0)" % (where, key, a.min()))
        return np.ascontiguousarray(a, dtype="<f4").reshape(-1)

    params = collections.OrderedDict((e.torus, arr(e.torch, e.shape)) for e in entries)
    stats = []
    for bn in bns:
        c = sd[bn + ".weight"].shape[0]
        stats += [arr(bn + ".running_mean", (c,)),
                  arr(bn + ".running_var", (c,), variance=True)]
    return params, stats


# ---- HDF5 checkpoints

def _text(v):
    """An attribute's text: h5py gives numpy bytes, a 0-d array of them or
    str; str() of the first two would keep their b'...' around it."""
    if hasattr(v, "item"):
        v = v.item()
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _attr(f, name, where, kinds):
    """Attribute name: one value (a scalar, or an array of one) of a numpy
    kind in kinds ("S" text, "i" integer), as torus-train's checked reader
    takes it."""
    import numpy as np
    v = f.attrs.get(name)
    if v is None:
        raise ConvertError("%s: attribute '%s' is missing" % (where, name))
    a = np.asarray(v)
    if a.size != 1 or a.dtype.kind not in kinds:
        raise ConvertError("%s: attribute '%s' is not one %s" % (
            where, name, "string" if "S" in kinds else "integer"))
    return a.reshape(()).item()


def _attr_str(f, name, where):
    return _text(_attr(f, name, where, "SU"))


def _attr_count(f, name, where):
    v = _attr(f, name, where, "iu")
    if v < 0:
        raise ConvertError("%s: attribute '%s' is %d, below 0" % (where, name, v))
    return v


def _c_error(e):
    """A libtorusdata refusal (its message names the file and the tensor)
    as a ConvertError."""
    return ConvertError(str(e))


def _open_checked(path):
    """The C reader's Checkpoint of path (torus._lib): a regular file only,
    its tensors checked by the validation torus-train runs."""
    from . import _lib
    try:
        return _lib, _lib.Checkpoint(path)
    except _lib.TorusDataError as e:
        raise _c_error(e)
    except ImportError as e:
        raise ConvertError("%s: cannot check it: %s" % (path, e))


def _tensor(lib, ck, path, group, key, count, kind):
    """GROUP/KEY of COUNT floats, checked by C before the array is
    allocated (its bytes are in the file), then read and checked."""
    import numpy as np
    try:
        ck.tensor(group, key, count, kind)
        return ck.tensor(group, key, count, kind, np.empty(count, dtype="<f4"))
    except lib.TorusDataError as e:
        raise _c_error(e)


def read_checkpoint(path, name=None):
    """(spec, params, momentum, stats, attrs) of checkpoint path; name, when
    given, must be its model. Its tensors are checked and read by the C
    reader's own validation (tdata_ckpt.h, through torus._lib); h5py reads
    only attributes and names, of the same open file."""
    lib, ck = _open_checked(path)
    with ck:
        return _read_open(lib, ck, path, name)


def _read_open(lib, ck, path, name):
    import h5py
    import numpy as np
    try:
        f = h5py.File(ck.h5_path(), "r")
    except OSError as e:
        raise ConvertError("%s: not a readable HDF5 file (%s)" % (path, e))
    with f:
        if _attr_str(f, "format", path) != FORMAT:
            raise ConvertError("%s: not a %s checkpoint" % (path, FORMAT))
        spec = parse_model_attr(_attr_str(f, "model", path), path)
        if name and spec.name != name:
            raise ConvertError("%s holds model %s, not %s" % (path, spec.name, name))
        attrs = {k: f.attrs[k] for k in f.attrs.keys()}
        # What callers take from attrs as it is: checked as C checks it.
        attrs["global_step"] = _attr_count(f, "global_step", path)
        _attr_str(f, "run", path)
        entries, bns = layout(spec)
        params, momentum = collections.OrderedDict(), collections.OrderedDict()
        for e in entries:
            n = int(np.prod(e.shape))
            params[e.torus] = _tensor(lib, ck, path, "params", e.torus, n, lib.VALUES)
            momentum[e.torus] = _tensor(lib, ck, path, "momentum", e.torus, n,
                                        lib.VALUES)
        stats, shapes = [], {e.torus: e.shape for e in entries}
        for k, bn in enumerate(bns):
            c = shapes[bn + ".gamma"][0]
            stats += [_tensor(lib, ck, path, "bn_stats", str(2 * k), c, lib.VALUES),
                      _tensor(lib, ck, path, "bn_stats", str(2 * k + 1), c,
                              lib.VARIANCE)]
        # Listed only now that C has seen both groups as hard links: h5py
        # would follow an external link into another file.
        names = {e.torus for e in entries}
        for group in ("params", "momentum"):
            extra = sorted(set(f[group].keys()) - names)
            if extra:
                raise ConvertError("%s: %s/%s is not a tensor of %s" % (
                    path, group, extra[0], model_attr(spec)))
    return spec, params, momentum, stats, attrs


def _fixed_str(s):
    import numpy as np
    b = s.encode()
    return np.array(b, dtype="S%d" % (len(b) + 1))  # NUL-terminated, fixed length


# The longest texts torus-train reads back (ttrain_ckpt_meta's fields,
# less the NUL): a longer one would make a file it refuses.
_TEXT_MAX = {"batch_schedule": 255, "data_id": 127, "data": 511}


def _fresh_attrs(spec, source, batch_schedule, data_id):
    import numpy as np
    for key, text in (("batch_schedule", batch_schedule), ("data_id", data_id),
                      ("data", data_id)):
        if len(text.encode()) > _TEXT_MAX[key]:
            raise ConvertError("the %s '%s...' is %d bytes; torus-train reads at "
                               "most %d" % (key.replace("_", " "), text[:40],
                                            len(text.encode()), _TEXT_MAX[key]))
    i64, f64 = np.int64, np.float64
    return collections.OrderedDict([
        ("format", _fixed_str(FORMAT)), ("run", _fixed_str(secrets.token_hex(4))),
        ("model", _fixed_str(model_attr(spec))), ("world", i64(1)),
        ("batch_schedule", _fixed_str(batch_schedule)),
        ("data", _fixed_str("synthetic data" if data_id == "synthetic" else data_id)),
        ("data_id", _fixed_str(data_id)), ("wire", _fixed_str("fp16")),
        ("config", _fixed_str("imported by torus-torch from %s" % source)),
        ("epoch", i64(0)), ("step", i64(0)), ("global_step", i64(0)), ("samples", i64(0)),
        ("dropout_step", i64(0)), ("optimizer_steps", i64(0)), ("previous_lr", f64(0)),
        ("loss_scale_mode", _fixed_str("off")), ("loss_scale", f64(1)),
        ("loss_scale_clean", i64(0)), ("loss_scale_overflows", i64(0))])


def _put(group, key, values):
    """Dataset key of group := values: written over in place when it holds
    as many (a --like template's, already chunked with its checksum, and
    the file does not grow), else created as checkpoint.c creates it."""
    n = values.shape[0]
    if key in group and group[key].shape == (n,):
        group[key][...] = values
        return
    if key in group:
        del group[key]
    group.create_dataset(key, data=values, dtype="<f4", chunks=(max(1, min(n, _CHUNK)),),
                         fletcher32=True)


def checkpoint_path(out, attrs):
    """out itself, or, when out is a folder (one that exists, or any name
    ending in '/', created here as torus-train creates its
    --checkpoint-dir), the name torus-train gives the checkpoint of that
    run and step in it: libtorusdata's tdata_api_ckpt_name, the function
    torus-train names its own files with."""
    from . import _lib
    if not (os.path.isdir(out) or out.endswith(os.sep)):
        return out
    if not os.path.isdir(out):
        try:
            os.mkdir(out)
        except OSError as e:
            raise ConvertError("cannot create the folder '%s': %s" % (out, e.strerror))
    try:
        return _lib.ckpt_name(out, int(attrs["global_step"]), _text(attrs["run"]))
    except _lib.TorusDataError as e:
        raise _c_error(e)
    except ImportError as e:
        raise ConvertError("cannot name a checkpoint in '%s': %s" % (out, e))


def write_checkpoint(out, spec, params, stats, source, like=None, zero_momentum=False,
                     batch_schedule="0:256 over 1281167 samples per epoch",
                     data_id="synthetic"):
    """Writes params and stats as a checkpoint to out (a file, or a
    directory to name it in). With like (a checkpoint of the same model),
    every attribute and the momentum come from it (zero_momentum: zeros),
    so that the run it belongs to can --resume from the result; without,
    a fresh position at step 0. Written to a temporary name and renamed.
    Returns the path written and the spec it records."""
    import h5py
    import numpy as np
    if like:
        lspec, _, _, _, attrs = read_checkpoint(like)
        if lspec != spec._replace(image_size=lspec.image_size):
            raise ConvertError("--like %s holds %s, the weights are %s" % (
                like, model_attr(lspec), model_attr(spec._replace(image_size=lspec.image_size))))
        spec = lspec
    else:
        attrs = _fresh_attrs(spec, source, batch_schedule, data_id)
    path = checkpoint_path(out, attrs)
    fd, tmp = _temp_beside(path)
    os.close(fd)
    try:
        if like:
            shutil.copyfile(like, tmp)
        with h5py.File(tmp, "r+" if like else "w") as f:
            if not like:
                for k, v in attrs.items():
                    f.attrs[k] = v
            groups = {g: f.require_group(g) for g in ("params", "momentum", "bn_stats")}
            for name, v in params.items():
                _put(groups["params"], name, v)
                if zero_momentum or not like:
                    _put(groups["momentum"], name, np.zeros_like(v))
            for i, v in enumerate(stats):
                _put(groups["bn_stats"], str(i), v)
        _publish(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path, spec


def _temp_beside(path):
    """(fd, name) of a fresh temporary file in path's folder, for an
    atomic rename onto path; ConvertError naming path (not the temporary
    name) when its folder is missing or not writable."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        return tempfile.mkstemp(prefix=".torus-torch-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise ConvertError("cannot write %s: its folder %s: %s" % (
            path, folder, e.strerror or e))


def _publish(tmp, path):
    """tmp, written, renamed onto path with the mode a file torus-train
    writes gets (mkstemp's is 0600). A FIFO or device at path is replaced,
    never written through."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


# ---- state dict files (.pt): only plain ones, checked before torch reads

# The entries of a zip that torch.save writes (torch 1.13 to 2.x), under
# one top folder. A TorchScript archive adds code/ and constants.pkl, and
# torch.load hands such a zip to torch.jit.load, even with weights_only,
# which runs its code: anything else is refused before torch sees it.
_PLAIN_RECORD = (r"(data\.pkl|version|\.format_version|byteorder|"
                 r"\.storage_alignment|\.data/version|\.data/serialization_id|"
                 r"data/[0-9]+)")
_PLAIN_ENTRY = re.compile(r"^[^/]+/%s$" % _PLAIN_RECORD)  # zipfile's names
_PLAIN_TORCH = re.compile(r"^%s$" % _PLAIN_RECORD)  # torch's, its folder cut


def _open_regular(path, mode="rb"):
    """path opened for reading when it is a regular file (O_NONBLOCK and
    fstat first: a FIFO or device is refused by name, never waited on)."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ConvertError("cannot open %s: %s" % (path, e.strerror))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ConvertError("%s is not a regular file (a FIFO, device, socket or "
                           "folder): refused" % path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode)


def _zip_entries(path, f):
    """The entries of zip f as Python's zipfile lists them and as torch's
    own reader does (what torch.load decides on; its names lack the top
    folder): (zipfile's names, torch's records, those of either that
    torch.save does not write, the compressed ones)."""
    import zipfile
    import torch
    try:
        infos = zipfile.ZipFile(f).infolist()
        f.seek(0)
        names = [i.filename for i in infos]
        reader = getattr(torch._C, "PyTorchFileReader", None)
        records = list(reader(f).get_all_records()) if reader else []
    except Exception as e:  # a malformed zip, in either reader
        raise ConvertError("%s: not a readable PyTorch zip (%s: %s)" % (
            path, type(e).__name__, e))
    packed = [i.filename for i in infos if i.compress_type != zipfile.ZIP_STORED]
    odd = [n for n in names if not _PLAIN_ENTRY.match(n)] + \
        [n for n in records if not _PLAIN_TORCH.match(n)]
    return names, records, odd, packed


def _check_archive(path, f):
    """A zip (torch's test: its first four bytes) must hold only what
    torch.save writes, under one top folder; a TorchScript archive is named
    as such."""
    if f.read(4) != b"PK\x03\x04":
        f.seek(0)
        return  # the legacy format: only the weights_only unpickler reads it
    f.seek(0)
    names, records, odd, packed = _zip_entries(path, f)
    f.seek(0)
    tops = {n.split("/", 1)[0] for n in names}
    script = [n for n in names + records if n.split("/")[-1] == "constants.pkl"
              or n.startswith("code/") or "/code/" in n]
    if script:
        raise ConvertError("%s is a TorchScript archive (entry %s), not a state "
                           "dict: refused, as loading it runs its code; save "
                           "model.state_dict() with torch.save" % (path, script[0]))
    if packed:  # torch.save stores; a deflated entry could expand unbounded
        raise ConvertError("%s: entry %s is compressed; torch.save stores its "
                           "entries: refused unread" % (path, packed[0]))
    if odd or len(tops) != 1:
        raise ConvertError("%s: entry %s is not one torch.save writes: refused "
                           "unread" % (path, (sorted(odd) or sorted(names))[0]))


def load_state_dict_file(path):
    """The plain state dict in .pt file path (torch.save(model.state_dict())):
    a regular file; a zip's entries checked before torch reads a byte of
    it; then torch.load with weights_only (tensors and containers, never
    pickled objects), from the same open file; then a dict of names to
    tensors. ConvertError naming the file otherwise."""
    import torch
    with _open_regular(path) as f:
        _check_archive(path, f)
        try:
            sd = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many kinds for a bad file
            raise ConvertError("%s: not a readable PyTorch file (%s: %s)" %
                               (path, type(e).__name__, e))
    check_state_dict(sd, path)
    return sd


def save_state_dict_file(sd, path):
    """torch.save(sd) to path, through a temporary file beside it and a
    rename (a FIFO or device at path is replaced, never written to)."""
    import torch
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(sd, f)
        _publish(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---- PyTorch modules of the models

def torch_model(spec):
    """The PyTorch module of spec, its state dict named as layout() says:
    torchvision's resnet50/resnet18, or CifarResNet."""
    import torch.nn as nn
    if spec.name == "cifar-resnet":
        return CifarResNet(spec.depth, spec.in_channels, spec.classes)
    import torchvision
    m = getattr(torchvision.models, spec.name.replace("-", ""))(num_classes=spec.classes)
    if spec.in_channels != 3:
        m.conv1 = nn.Conv2d(spec.in_channels, 64, 7, 2, 3, bias=False)
    return m


def _cifar_classes():
    import torch.nn as nn
    import torch.nn.functional as F

    class BasicBlock(nn.Module):
        """3x3 conv, BN, ReLU, 3x3 conv, BN, plus the shortcut (a 1x1
        conv and BN where the shape changes), ReLU."""

        def __init__(self, cin, width, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.downsample = None
            if stride != 1 or cin != width:
                self.downsample = nn.Sequential(nn.Conv2d(cin, width, 1, stride, 0, bias=False),
                                                nn.BatchNorm2d(width))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (self.downsample(x) if self.downsample is not None else x))

    class CifarResNet(nn.Module):
        """He et al. 2016, sec. 4.2: a 3x3 stem of 16 filters, three stages
        of (depth-2)/6 basic blocks at 16, 32 and 64 filters, global average
        pooling and a fully connected layer (trainer/models/resnet.c)."""

        def __init__(self, depth, in_channels=3, classes=10):
            super().__init__()
            n = (depth - 2) // 6
            self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            c = 16
            for s in range(3):
                blocks = []
                for b in range(n):
                    blocks.append(BasicBlock(c, 16 << s, 2 if s > 0 and b == 0 else 1))
                    c = 16 << s
                setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
            self.fc = nn.Linear(c, classes)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(x.mean(dim=(2, 3)))

    return CifarResNet


def CifarResNet(depth, in_channels=3, classes=10):
    return _cifar_classes()(depth, in_channels, classes)
