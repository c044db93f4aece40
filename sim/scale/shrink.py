"""Shrink a diverging program to a minimal one that still diverges the same way.

Two kinds of step, repeated until neither finds anything (a fixpoint, bounded by ``max_rounds``):

1. **drop instructions**: chunks of ``n/2, n/4, ..., 1`` instructions (never the closing FINISH);
2. **drop loop iterations**: per GEMM/ALU ``iter_out -> 1``, ``iter_in -> 1``, ``uop_end -> uop_bgn + 1``;
   per LOAD/STORE ``y_size -> 1``, ``x_size -> 1`` (its stride kept) and each pad -> 0.

Every candidate must stay a LEGAL program (:func:`legal_run`: the static checks of
:func:`vtasim.sim.program.load_program` pass, the functional model and the cycle engine run it to FINISH and
agree: no index out of range, no deadlock from a dropped token push, no FINISH overtaking work)
before it is tried; the legal candidates of a step are tried together in one call of
``still_fails`` (one simulator process for a batch of RTL runs).  When several candidates of a step
still fail, all of their edits together are tried next (accepted if that still fails, else the
first alone).  The result is the last candidate ``still_fails`` accepted, so it diverges by
construction; ``shrink`` never returns an unchecked program.

``still_fails(pairs) -> list[bool]`` gets ``[(image, cycle-engine RunResult)]``;
:func:`rtl_still_fails` builds the one the RTL fuzz uses (same divergence signature as the original:
the RTL error's type, or the first divergent field and opcode).

::

    >>> from vtasim.sim.scale.shrink import shrink, rtl_still_fails, signature   # doctest: +SKIP
    >>> small = shrink(image, rtl_still_fails(sig, sim="icarus")).image    # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vtasim.hw.config import INSN_BYTES
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, decode_stream, encode_stream
from vtasim.sim.image import MemoryImage, Segment

__all__ = ["with_insns", "legal_run", "shrink", "Shrunk", "signature", "rtl_still_fails"]

PADS = ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")


def with_insns(image: MemoryImage, insns: list) -> MemoryImage:
    """``image`` with its instruction stream replaced by ``insns`` (at most as many as it had; the rest
    of the old stream's bytes are zeroed).  Expected outputs and counters are dropped: they belonged to
    the old program."""
    if len(insns) > image.insn_count:
        raise ValueError(f"{len(insns)} instructions do not fit the {image.insn_count} of the image")
    raw = encode_stream(image.cfg, insns)
    old_n = image.insn_count * INSN_BYTES
    segs = [Segment(s.addr, raw + bytes(old_n - len(raw)) + s.data[old_n:]) if s.addr == image.insn_addr else s
            for s in image.segments]
    return MemoryImage(image.cfg, image.insn_addr, len(insns), segs, outputs=image.outputs,
                       dram_size=image.explicit_dram_size)


def legal_run(image: MemoryImage):
    """The cycle engine's run of ``image`` when it is a legal program, else None: the static checks
    pass, and the functional model and the cycle engine both run it to FINISH (no deadlock, no FINISH
    ahead of unexecuted work) with the same DRAM bytes."""
    from vtasim.sim.engines import run_engine
    from vtasim.sim.errors import SimError
    from vtasim.sim.program import load_program
    try:
        load_program(image)
        ref = run_engine("functional", image, executor="numpy")  # independent of the cycle engine's kernels
        run = run_engine("cycle", image)
    except (SimError, ValueError):
        return None
    return run if run.outputs == ref.outputs and bytes(run.dram) == bytes(ref.dram) else None


@dataclass
class Shrunk:
    image: MemoryImage      # the minimal program (the input image when nothing could be dropped)
    expected: object        # its cycle-engine RunResult
    insns_before: int
    insns_after: int
    uops_before: int        # GEMM/ALU micro-ops executed (iterations x uops)
    uops_after: int
    tried: int              # candidates given to still_fails
    calls: int              # still_fails calls (simulator processes for the RTL)


def _uops(insns) -> int:
    return sum(i.uop_count for i in insns)


def _drop_chunks(insns: list, size: int) -> list:
    """``(edit description, candidate)`` per chunk of ``size`` instructions before the last one."""
    body = len(insns) - 1
    return [((a, min(a + size, body)), insns[:a] + insns[min(a + size, body):]) for a in range(0, body, size)]


def _iteration_edits(insns: list) -> list:
    """``((index, field, value), candidate)`` per loop-iteration reduction of the module docstring."""
    out = []
    for k, i in enumerate(insns):
        edits = []
        if i.opcode in (OP_GEMM, OP_ALU):
            edits += [("iter_out", 1)] if i.iter_out > 1 else []
            edits += [("iter_in", 1)] if i.iter_in > 1 else []
            edits += [("uop_end", i.uop_bgn + 1)] if i.uop_end - i.uop_bgn > 1 else []
        elif i.opcode in (OP_LOAD, OP_STORE) and i.x_size:
            edits += [("y_size", 1)] if i.y_size > 1 else []
            edits += [("x_size", 1)] if i.x_size > 1 else []
            edits += [(p, 0) for p in PADS if getattr(i, p)]
        for f, v in edits:
            out.append(((k, f, v), insns[:k] + [replace(i, **{f: v})] + insns[k + 1:]))
    return out


def _apply_all(insns: list, kind: str, edits: list) -> list:
    """Several winning edits of one step at once (chunks are disjoint; field edits compose)."""
    if kind == "drop":
        gone = {j for a, b in edits for j in range(a, b)}
        return [i for j, i in enumerate(insns) if j not in gone]
    out = list(insns)
    for k, f, v in edits:
        out[k] = replace(out[k], **{f: v})
    return out


def shrink(image: MemoryImage, still_fails, max_rounds: int = 20) -> Shrunk:
    """Minimise ``image`` while ``still_fails`` holds (module docstring)."""
    from vtasim.sim.errors import SimError
    cfg = image.cfg
    cur = decode_stream(cfg, image.insn_bytes())
    if not cur or cur[-1].opcode != OP_FINISH:
        raise SimError("shrink: the program does not end with FINISH (not a legal program)")
    best_img, best_exp = image, legal_run(image)
    if best_exp is None:
        raise SimError("shrink: the program to shrink is not legal (static checks fail, or the functional model "
                       "or the cycle engine fails on it or they disagree)")
    st = {"tried": 0, "calls": 0}

    def attempt(cands, kind):
        """The first candidate of ``cands`` (after trying several winners together) that still fails."""
        nonlocal best_img, best_exp
        legal = []
        for desc, insns in cands:
            img = with_insns(image, insns)
            exp = legal_run(img)
            if exp is not None:
                legal.append((desc, insns, img, exp))
        if not legal:
            return None
        st["tried"] += len(legal)
        st["calls"] += 1
        fails = still_fails([(img, exp) for _, _, img, exp in legal])
        wins = [c for c, f in zip(legal, fails) if f]
        if not wins:
            return None
        choice = wins[0]
        if len(wins) > 1:
            both = _apply_all(cur, kind, [w[0] for w in wins])
            img = with_insns(image, both)
            exp = legal_run(img)
            if exp is not None:
                st["tried"] += 1
                st["calls"] += 1
                if still_fails([(img, exp)])[0]:
                    choice = (None, both, img, exp)
        best_img, best_exp = choice[2], choice[3]
        return choice[1]

    for _ in range(max_rounds):
        changed = False
        size = max(1, (len(cur) - 1) // 2)
        while size >= 1 and len(cur) > 1:
            nxt = attempt(_drop_chunks(cur, size), "drop")
            if nxt is None:
                size //= 2
            else:
                cur, changed = nxt, True
                size = min(size, max(1, (len(cur) - 1) // 2))
        while True:
            nxt = attempt(_iteration_edits(cur), "edit")
            if nxt is None:
                break
            cur, changed = nxt, True
        if not changed:
            break
    before = decode_stream(cfg, image.insn_bytes())
    return Shrunk(best_img, best_exp, len(before), len(cur), _uops(before), _uops(cur), st["tried"], st["calls"])


def signature(image, expected, actual):
    """What kind of divergence ``actual`` (an RTL RunResult or the exception it stopped with) shows
    against ``expected``: None when they agree, ``("error", type)`` for a run that raised,
    ``("diff", fields, opcode)`` for the first divergent retire record (``("data",)`` for bytes only)."""
    from vtasim.sim.diff import compare
    if isinstance(actual, BaseException):
        return ("error", type(actual).__name__)
    d = compare(expected, actual, image)
    if d.ok:
        return None
    if d.first is None:
        return ("diff", ("data",), None)
    rec = d.first.expected or d.first.actual
    return ("diff", tuple(d.first.fields), getattr(rec, "opcode", None))


def rtl_still_fails(sig, sim: str = "icarus", rtl_dir=None):
    """``still_fails`` for :func:`shrink`: run the candidates in one RTL batch; a candidate still fails
    when its divergence has signature ``sig``."""
    def still_fails(pairs):
        from vtasim.sim.errors import SimulatorError
        from vtasim.sim.engines import run_many
        from vtasim.sim.rtl import watchdog_for
        images = [img for img, _ in pairs]
        try:
            acts = run_many("rtl", images, sim=sim, rtl_dir=rtl_dir, errors="return",
                              max_cycles=[watchdog_for(exp.cycles) for _, exp in pairs])
        except SimulatorError:              # the simulator crashed on the batch: none counts as failing
            return [False] * len(pairs)
        return [signature(img, exp, act) == sig for (img, exp), act in zip(pairs, acts)]
    return still_fails
