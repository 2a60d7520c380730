"""torus.checkpoint: torus-train checkpoints for torchvision models.

    import torchvision, torus.checkpoint as tc
    model = torchvision.models.resnet50()
    tc.load("run/ckpt-5000-ab12cd34.h5", model)          # weights + BN stats
    ...
    tc.save(model, "run/", "resnet50", like="run/ckpt-5000-ab12cd34.h5")
    # torus-train --resume --checkpoint-dir run/ goes on from these weights

The conversion is torus.checkpoint_convert's, the code behind tools/torus-torch
(one implementation): torus names layers as torchvision does, so a
checkpoint of resnet50, resnet18 or cifar-resnet maps one to one onto
torchvision's resnet50/resnet18 (or checkpoint_convert.CifarResNet).
Errors raise checkpoint_convert.ConvertError naming the file and tensor.
Needs numpy and h5py (python3-numpy, python3-h5py) besides torch.
"""

from . import checkpoint_convert as _cc
from .checkpoint_convert import ConvertError

__all__ = ["load", "save", "ConvertError"]


def _module(model):
    """The model itself, or the module a DDP/DataParallel wrapper holds."""
    return getattr(model, "module", model)


def load(path, model=None, name=None, strict=True):
    """Load checkpoint PATH into MODEL (a torchvision resnet50/resnet18 or a
    CifarResNet; None: build the checkpoint's own model) and return the
    model. name: the model the file must hold (resnet50, resnet18,
    cifar-resnet). Each num_batches_tracked becomes the checkpoint's
    global step."""
    spec, params, _, stats, attrs = _cc.read_checkpoint(path, name)
    sd = _cc.to_state_dict(spec, params, stats, int(attrs["global_step"]))
    if model is None:
        model = _cc.torch_model(spec)
    _module(model).load_state_dict(sd, strict=strict)
    return model


def save(model, out, name, like=None, zero_momentum=False, image_size=None,
         batch_schedule="0:256 over 1281167 samples per epoch",
         data_id="synthetic"):
    """Write MODEL's weights and BN statistics as a torus checkpoint to OUT
    (a file, or a directory: then named ckpt-STEP-RUN.h5 as torus-train
    names its own) and return its path. name: resnet50, resnet18 or
    cifar-resnet. With like=CHECKPOINT of the run that is to go on, every
    attribute and the momentum come from it (zero_momentum: zeros), so that
    torus-train --resume continues from these weights; without, a fresh
    position (step 0, momentum 0) on batch_schedule and data_id."""
    sd = _module(model).state_dict()
    spec = _cc.spec_from_state_dict(name, sd, image_size, where="the model")
    params, stats = _cc.from_state_dict(spec, sd, where="the model")
    path, _ = _cc.write_checkpoint(out, spec, params, stats, "torus.checkpoint",
                                   like=like, zero_momentum=zero_momentum,
                                   batch_schedule=batch_schedule,
                                   data_id=data_id)
    return path
