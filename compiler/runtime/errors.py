"""The one error class of the runtime stream builder.

Every bad runtime call raises :class:`RuntimeContractError` with one line naming the call, the value
and the rule it breaks (e.g. ``push_gemm_op(key=('gemm', 0)): kernel has 9000 uops, the uop SRAM
holds 8192``).  It derives from :class:`vtasim.sim.errors.SimError`, so the CLI prints it as one line.
"""

from __future__ import annotations

from vtasim.sim.errors import SimError

__all__ = ["RuntimeContractError"]


class RuntimeContractError(SimError):
    """A runtime call breaks the contract of TVM's VTA runtime (compiler spec 5, hardware spec 5)."""
