"""Uop SRAM residency: kernels placed in a ring with eviction (hardware spec 5.5).

The policy is TVM's: a bump pointer allocates each non-resident kernel right after the previous one;
when the kernel does not fit before the end of the buffer, allocation restarts at 0.  Resident
kernels are kept sorted by SRAM address with an insertion point just after the newest one; a new
kernel evicts the kernels from the insertion point on whose range starts before its end (those it
overwrites).  Kernels further up stay resident until a later allocation reaches them.
:meth:`UopRing.reset` forgets everything (TVM does so after every device run).
"""

from __future__ import annotations

from .kernel import UopKernel

__all__ = ["UopRing"]


class UopRing:
    def __init__(self, depth: int):
        self.depth = depth
        self.resident: list[UopKernel] = []     # sorted by sram_begin
        self.insert_at = 0                     # index in ``resident`` after the newest kernel
        self.end = 0                           # bump pointer: first free uop slot
        self.evictions = 0

    def place(self, kernel: UopKernel) -> bool:
        """Make ``kernel`` resident; True when it had to be (re)loaded, False when already resident.

        The caller checked ``kernel.size <= depth``."""
        if kernel.resident:
            return False
        n = kernel.size
        if self.end + n > self.depth:
            # wrap: start again at 0, walking the resident list from its beginning
            begin, self.end, self.insert_at = 0, n, 0
        else:
            begin, self.end = self.end, self.end + n
        i = self.insert_at
        while i < len(self.resident) and self.resident[i].sram_begin < self.end:
            victim = self.resident.pop(i)
            victim.sram_begin = victim.sram_end = 0
            self.evictions += 1
        kernel.sram_begin, kernel.sram_end = begin, self.end
        self.resident.insert(i, kernel)
        self.insert_at = i + 1
        return True

    def reset(self) -> None:
        for k in self.resident:
            k.sram_begin = k.sram_end = 0
        self.resident.clear()
        self.insert_at = 0
        self.end = 0
