"""Several compiled kernels in one launch, their activations shared in DRAM (a multi-op VTA region).

A kernel's lowered program (``Built.func``) is emitted again on one :class:`CommandQueue` through a
:class:`KernelProxy`: uop-kernel keys are made unique per kernel, ``synchronize`` is left to the
caller (``kernel_boundary`` between kernels, ``synchronize`` after the last), and DMA calls on a
:class:`Window` are rewritten to the physical buffer the window lies in.

A :class:`Window` is how graph_pack's padding stays on VTA: a tensor whose consumer convolution pads
it with its zero point lives in DRAM already padded (the border written once, in the image), its
producer stores into the interior, and a consumer that reads it unpadded loads the interior.  Both are
the same remapping of element offsets ``(plane, y, x) -> (plane, y + dy, x + dx)`` from the logical
``(planes, h, w)`` to the physical ``(planes, hp, wp)``; an access is split at row boundaries where
the physical rows are not evenly strided, and the pieces that are merge back into 2-D transfers.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasim.compiler.runtime.errors import RuntimeContractError
from vtasim.compiler.runtime.queue import CommandQueue, DramBuffer

__all__ = ["Window", "KernelProxy"]


@dataclass(frozen=True)
class Window:
    """Logical ``(planes, h, w)`` elements inside the physical ``(planes, hp, wp)`` buffer at ``(dy, dx)``."""

    buffer: DramBuffer
    planes: int
    h: int
    w: int
    hp: int
    wp: int
    dy: int
    dx: int

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def identity(self) -> bool:
        return (self.h, self.w, self.dy, self.dx) == (self.hp, self.wp, 0, 0)

    def _runs(self, off: int, x_size: int, y_size: int, x_stride: int):
        """(physical offset, length, local offset) of each contiguous run of the logical access."""
        for r in range(y_size):
            e, local, left = off + r * x_stride, r * x_size, x_size
            while left:
                row, x = divmod(e, self.w)
                plane, y = divmod(row, self.h)
                if plane >= self.planes:
                    raise RuntimeContractError(f"window {self.name}: element {e} is beyond the "
                                               f"{self.planes} x {self.h} x {self.w} logical tensor")
                n = min(left, self.w - x)
                yield (plane * self.hp + y + self.dy) * self.wp + x + self.dx, n, local
                e, local, left = e + n, local + n, left - n

    def pieces(self, off: int, x_size: int, y_size: int, x_stride: int) -> list:
        """``[(physical offset, x_size, y_size, x_stride, local offset)]`` covering the access in order."""
        out = []
        for p, n, local in self._runs(off, x_size, y_size, x_stride):
            if out:
                q, qn, qy, qs, ql = out[-1]
                stride = p - (q + (qy - 1) * qs) if qy > 1 else p - q
                if qn == n and local == ql + qy * qn and stride >= n and (qy == 1 or stride == qs):
                    out[-1] = (q, n, qy + 1, stride, ql)
                    continue
            out.append((p, n, 1, n, local))
        return [(p, n, y, s if y > 1 else n, local) for p, n, y, s, local in out]


class KernelProxy:
    """The queue one kernel's emitted program talks to (see the module docstring)."""

    def __init__(self, queue: CommandQueue, tag: str):
        self.q, self.tag, self.synchronized = queue, tag, False

    def load_buffer_2d(self, src, off, x_size, y_size, x_stride, xpb, ypb, xpa, ypa, sram, mem) -> None:
        if not isinstance(src, Window) or src.identity:
            src = src.buffer if isinstance(src, Window) else src
            return self.q.load_buffer_2d(src, off, x_size, y_size, x_stride, xpb, ypb, xpa, ypa, sram, mem)
        pieces = src.pieces(off, x_size, y_size, x_stride)
        if len(pieces) > 1 and (xpb or ypb or xpa or ypa):
            raise RuntimeContractError(f"window {src.name}: a padded load of {y_size} x {x_size} elements at "
                                       f"{off} crosses a plane (rule: a DMA-padded load stays in one image plane)")
        for p, n, y, s, local in pieces:
            self.q.load_buffer_2d(src.buffer, p, n, y, s, xpb, ypb, xpa, ypa, sram + local, mem)

    def store_buffer_2d(self, sram, mem, dst, off, x_size, y_size, x_stride) -> None:
        if not isinstance(dst, Window) or dst.identity:
            dst = dst.buffer if isinstance(dst, Window) else dst
            return self.q.store_buffer_2d(sram, mem, dst, off, x_size, y_size, x_stride)
        for p, n, y, s, local in dst.pieces(off, x_size, y_size, x_stride):
            self.q.store_buffer_2d(sram + local, mem, dst.buffer, p, n, y, s)

    def push_gemm_op(self, key, record) -> None:
        self.q.push_gemm_op((self.tag, key), record)

    def push_alu_op(self, key, record) -> None:
        self.q.push_alu_op((self.tag, key), record)

    def dep_push(self, frm, to) -> None:
        self.q.dep_push(frm, to)

    def dep_pop(self, frm, to) -> None:
        self.q.dep_pop(frm, to)

    def synchronize(self) -> None:
        """The kernel's own end: the caller closes it (``kernel_boundary`` or ``synchronize``)."""
        self.synchronized = True
