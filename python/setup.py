# setup.py: the Python package `torus` (pure Python; the input pipeline is
# the C library libtorusdata, loaded with ctypes at run time, see
# torus/_lib.py). A plain setup.py and no pyproject.toml, so that
# `pip install ./python` builds offline with the setuptools already there.
from setuptools import setup

setup(
    name="torus",
    version="0.1.0",
    description="torus for PyTorch: HDF5 shard loader over libtorusdata, "
    "checkpoint import/export, 2D-torus DDP all-reduce hook",
    packages=["torus"],
    python_requires=">=3.9",
)
