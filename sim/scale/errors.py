"""The errors of vtasim's Dask helpers (:mod:`vtasim.sim.scale.cluster`, :mod:`vtasim.sim.scale.handshake`)."""

from __future__ import annotations

from vtasim.sim.errors import SimError
from vtasim.sim.install import MissingExtra

__all__ = ["MissingExtra", "ClusterError"]


class ClusterError(SimError):
    """Bad cluster options (worker count, TLS files, both an address and a scheduler file), or a scheduler
    that cannot be reached or is none."""
