"""setuptools' hook for pyproject.toml (which holds the metadata): refuses
a tree without the generated stubs, and marks the wheel as binary when the
native extension was built into it.

The package is complete only in the build tree (<build>/python), where the
build puts isometry_pb2.py, isometry_pb2_grpc.py and isometry/_version.py
next to the sources, and isometry/_native*.so where pybind11 is installed.
"""

import glob
import os
import sys

from setuptools import setup
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "isometry")
GENERATED = ("isometry_pb2.py", "isometry_pb2_grpc.py", "_version.py")

missing = [name for name in GENERATED if not os.path.exists(os.path.join(PACKAGE, name))]
if missing:
    sys.exit(
        f"isometry: {', '.join(missing)} missing in {PACKAGE}: install the package from the "
        "build tree, where the build generates them: cmake --build BUILD && "
        "pip install --no-build-isolation BUILD/python"
    )

NATIVE = bool(glob.glob(os.path.join(PACKAGE, "_native*.so")))


class _Distribution(Distribution):
    """A wheel with isometry._native in it is for this Python and platform only."""

    def has_ext_modules(self) -> bool:
        return NATIVE


setup(distclass=_Distribution)
