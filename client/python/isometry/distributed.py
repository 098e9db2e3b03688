"""Distributed instances and M:N redistribution (docs/guides/redistribution.md, "Redistributing
between jobs (M:N)"): how a Python rank describes its distribution.

A dimension's distribution is ``"block"``, ``"cyclic"``, an int ``b`` or
``("block_cyclic", b)`` (blocks of ``b`` indices dealt round-robin over the
grid coordinates of that dimension).
"""

import os
from typing import Sequence, Tuple, Union

from . import isometry_pb2 as pb

DimLike = Union[str, int, Tuple[str, int]]


def _dim(d: DimLike, i: int) -> "pb.DimDistribution":
    if isinstance(d, bool):
        raise TypeError(f"dists[{i}]: {d!r} is not a distribution")
    if d == "block":
        return pb.DimDistribution(kind=pb.DIST_BLOCK)
    if d == "cyclic":
        return pb.DimDistribution(kind=pb.DIST_CYCLIC)
    if isinstance(d, tuple) and len(d) == 2 and d[0] == "block_cyclic":
        d = d[1]
    if isinstance(d, int) and d > 0:
        return pb.DimDistribution(kind=pb.DIST_BLOCK_CYCLIC, block=d)
    raise ValueError(f"dists[{i}]: {d!r}; use 'block', 'cyclic' or a block size > 0")


def new_grant() -> bytes:
    """A fresh grant for a job of gRPC ranks: 32 random bytes. The rank that
    makes the distributed instance chooses it and hands it to the job's
    other ranks (and to a job that redistributes into or out of it) the way
    the job shares other secrets; never log it."""
    return os.urandom(32)


def distribution_spec(extents: Sequence[int], dists: Sequence[DimLike], grid: Sequence[int],
                      column_major: bool = False) -> "pb.DistributionSpec":
    """The wire form of a distribution (the daemon validates the values)."""
    return pb.DistributionSpec(
        extents=[int(e) for e in extents],
        dists=[_dim(d, i) for i, d in enumerate(dists)],
        grid=[int(g) for g in grid],
        column_major=bool(column_major),
    )
