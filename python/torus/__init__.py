"""torus: Python helpers around torus-train's files.

checkpoint_convert: torus HDF5 checkpoints <-> PyTorch state dicts
(torchvision names), and the PyTorch modules of the models torus builds.
"""
