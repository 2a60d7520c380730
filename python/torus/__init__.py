"""torus for PyTorch users.

Modules:
    torus.data         ShardDataset / ShardLoader: the HDF5 shards through
                       libtorusdata's C decode and augment threads.
    torus.distributed  init_from_env() and the 2D-torus DDP comm hooks.
    torus.checkpoint   torus-train checkpoints into torchvision models and
                       back (over checkpoint_convert).
    torus.env          rank, world size and the plugin's grid from the
                       environment.
    torus.checkpoint_convert
                       torus HDF5 checkpoints <-> PyTorch state dicts
                       (torchvision names), and the PyTorch modules of the
                       models torus builds; behind tools/torus-torch.

The C libraries (libtorusdata, libtoruscomm) are found through
$TORUS_LIBDIR, then the usual install folders (see torus._lib).
"""

__version__ = "0.1.0"
