"""Deadlock report of the cycle engine (docs/timing.md 7): who waits on what, when nothing can move.

The core stops as soon as it proves that no future event exists; this module reads the frozen state
and names, per module, the instruction it waits on (disassembled), the token it needs, the command
queue occupancies, what fetch is blocked on, and the four token counters.
"""

from __future__ import annotations

from vtasim.hw.disasm import one_line
from vtasim.hw.isa import TOKEN_POPS
from vtasim.sim.cycle.layout import (FPHASE_DISPATCH, S_FNEXT, S_FPHASE, S_T, TOKEN_NAMES, UNIT_NAMES, US_BUSY,
                              US_NDISP, US_NSTART, US_NTOTAL, US_PIDX, US_QOFF)
from vtasim.sim.errors import DeadlockError



def deadlock_error(m) -> DeadlockError:
    """Build the :class:`DeadlockError` for a machine whose core stopped in the deadlock state."""
    US, S = m.US, m.S
    tokens = m.tokens()
    depth = m.cfg.CMD_QUEUE_DEPTH
    lines, summary = [f"deadlock at cycle {int(S[S_T])}: no module can start and FINISH has not ended"], []
    for u in (1, 2, 3):
        name = UNIT_NAMES[u]
        occ = int(US[u, US_NDISP] - US[u, US_NSTART])
        queue = f"queue {occ}/{depth}"
        if US[u, US_BUSY]:
            j = int(US[u, US_PIDX])
            lines.append(f"  {name}: running instruction {j} `{one_line(m.prog.insn(j))}` ({queue})")
            continue
        if US[u, US_NSTART] >= US[u, US_NTOTAL]:
            lines.append(f"  {name}: done ({int(US[u, US_NTOTAL])} instructions)")
            continue
        j = int(m.modq[US[u, US_QOFF] + US[u, US_NSTART]])
        if US[u, US_NSTART] >= US[u, US_NDISP]:
            lines.append(f"  {name}: queue empty, next instruction {j} not yet dispatched ({queue})")
            continue
        row = m.prog.row(j)
        need = [tok for flag, tok in TOKEN_POPS[u - 1] if row[flag] and tokens[tok] == 0]
        lines.append(f"  {name}: instruction {j} `{one_line(m.prog.insn(j))}` waits for token "
                     f"{', '.join(need)} ({queue})")
        summary.append(f"{name} insn {j} needs {'/'.join(need)}")
    if S[S_FPHASE] == FPHASE_DISPATCH:
        j = int(S[S_FNEXT])
        u = int(m.prog.module[j]) + 1
        lines.append(f"  fetch: instruction {j} `{one_line(m.prog.insn(j))}` blocked: {UNIT_NAMES[u]} "
                     f"queue full ({int(US[u, US_NDISP] - US[u, US_NSTART])}/{depth})")
        summary.append(f"fetch blocked on full {UNIT_NAMES[u]} queue at insn {j}")
    else:
        lines.append("  fetch: all instructions dispatched" if S[S_FNEXT] >= m.prog.count else "  fetch: idle")
    tok = ", ".join(f"{k}={tokens[k]}" for k in TOKEN_NAMES)
    lines.append(f"  tokens: {tok}")
    return DeadlockError(f"deadlock at cycle {int(S[S_T])}: {'; '.join(summary)}; tokens {tok}", "\n".join(lines))
