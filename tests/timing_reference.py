"""A deliberately naive reading of docs/timing.md for tests: one Python step per cycle, every
quantity recomputed from its definition (occupancy and token values by counting logged events).

It models time only (no data), so it is slow and small, and shares nothing with sim/cycle: the
engine's event skipping, state arrays and ordering tricks are checked against the text.
"""

from __future__ import annotations

from vtasim.hw.config import MEM_INP, MEM_WGT
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE

PRIORITY = {"fetch": 0, "uop": 1, "inp": 2, "wgt": 3, "acc": 4, "out": 5}
POPS = {"load": {"pop_next": "g2l"}, "compute": {"pop_prev": "l2g", "pop_next": "s2g"},
        "store": {"pop_prev": "g2s"}}
PUSHES = {"load": {"push_next": "l2g"}, "compute": {"push_prev": "g2l", "push_next": "g2s"},
          "store": {"push_prev": "s2g"}}
MODULES = ("load", "compute", "store")


def bursts(addr, nbytes, B, K):
    w, w1 = addr // B, -(-(addr + nbytes) // B)
    out = []
    while w < w1:
        end = min(w1, (w // K + 1) * K)
        out.append(end - w)
        w = end
    return out


def module_of(op, mt):
    if op == OP_STORE:
        return "store"
    if op == OP_LOAD and mt in (MEM_INP, MEM_WGT):
        return "load"
    return "compute"


def simulate(cfg, f, insn_addr, max_cycles=2_000_000):
    """-> dict(start, end, dispatch: {program index: cycle}, cycles, breakdown)."""
    n = len(f["opcode"])
    L, B, K = cfg.DRAM_LATENCY, cfg.bus_bytes, cfg.BURST_BEATS
    mod = [module_of(int(f["opcode"][j]), int(f["memory_type"][j])) for j in range(n)]
    disp, start, end = {}, {}, {}
    pushes, pops = [], []                  # (cycle, counter)
    port = None                            # (client owner, completion cycle)
    # a client's outstanding burst: {"owner", "client", "issued", "beats", "granted"}
    reqs = {}
    xfers = {}                             # owner -> list of remaining transfers (each a list of bursts)
    chunk = 0
    chunk_state = "xfer"
    next_disp = 0
    last_disp = -1
    run = {m: None for m in MODULES}       # m -> [j, s, e or None]
    bd = {u: dict(busy=0, mem_wait=0, token_wait=0, queue_stall=0, idle=0) for u in ("fetch",) + MODULES}

    def begin(owner, client, rows, t_req):
        xfers[owner] = [list(r) for r in rows]
        reqs[owner] = dict(client=client, issued=t_req, beats=xfers[owner][0].pop(0), granted=False)

    def fetch_begin(t_req):
        first = chunk * cfg.FETCH_INSNS
        cnt = min(cfg.FETCH_INSNS, n - first)
        begin("fetch", "fetch", [bursts(insn_addr + 16 * first, 16 * cnt, B, K)], t_req)

    fetch_begin(0)
    for t in range(max_cycles):
        xfer_done = set()
        # a burst completing at t
        if port is not None and port[1] == t:
            owner = port[0]
            port = None
            rows = xfers[owner]
            while rows and not rows[0]:
                rows.pop(0)
            if rows:
                reqs[owner] = dict(client=reqs[owner]["client"], issued=t, beats=rows[0].pop(0), granted=False)
            else:
                del reqs[owner]
                xfer_done.add(owner)
        if "fetch" in xfer_done:
            chunk_state = "dispatch"
        ended = set()
        for m in MODULES:
            if run[m] is not None and m in xfer_done:
                run[m][2] = t
            if run[m] is not None and run[m][2] == t:
                end[run[m][0]] = t
                ended.add(m)
        # dispatch
        dispatched = False
        if chunk_state == "dispatch":
            j = next_disp
            m = mod[j]
            occ = sum(1 for i, d in disp.items() if mod[i] == m and d < t) - \
                sum(1 for i, s in start.items() if mod[i] == m and s < t)
            if occ < cfg.CMD_QUEUE_DEPTH and last_disp < t:
                disp[j] = t
                last_disp = t
                next_disp += 1
                dispatched = True
                if next_disp == n:
                    chunk_state = "done"
                elif next_disp % cfg.FETCH_INSNS == 0:
                    chunk += 1
                    chunk_state = "xfer"
                    fetch_begin(t + 1)
        # starts

        def value(counter, t=t):
            return (sum(1 for c, k in pushes if k == counter and c < t)
                    - sum(1 for c, k in pops if k == counter and c < t))

        def head(m):
            done = sum(1 for i in start if mod[i] == m)
            queued = [i for i in range(n) if mod[i] == m]
            return queued[done] if done < len(queued) else None

        for m in MODULES:
            busy = run[m] is not None and (run[m][2] is None or run[m][2] >= t)
            if busy:
                continue
            j = head(m)
            if j is None or j not in disp or disp[j] >= t:
                continue
            need = [c for flag, c in POPS[m].items() if f[flag][j]]
            if any(value(c) == 0 for c in need):
                continue
            for c in need:
                pops.append((t, c))
            start[j] = t
            op, x, y = int(f["opcode"][j]), int(f["x_size"][j]), int(f["y_size"][j])
            run[m] = [j, t, None]
            if op in (OP_LOAD, OP_STORE) and x == 0 or op == OP_FINISH:
                run[m][2] = t + 1
            elif op in (OP_GEMM, OP_ALU):
                nu = int(f["iter_out"][j]) * int(f["iter_in"][j]) * max(0, int(f["uop_end"][j]) - int(f["uop_bgn"][j]))
                if nu == 0:
                    run[m][2] = t + 1
                elif op == OP_GEMM:
                    run[m][2] = t + nu + cfg.GEMM_PIPE_DEPTH
                elif f["use_imm"][j]:
                    run[m][2] = t + nu + cfg.ALU_PIPE_DEPTH
                else:
                    run[m][2] = t + 2 * nu - 1 + cfg.ALU_PIPE_DEPTH
            else:
                mt = int(f["memory_type"][j])
                if op == OP_STORE:
                    eb, client, pads = cfg.out_elem_bytes, "out", 0
                else:
                    eb = cfg.dram_elem_bytes(mt)
                    client = {0: "uop", 1: "wgt", 2: "inp", 3: "acc", 5: "acc"}[mt]
                    xt = int(f["x_pad_0"][j]) + x + int(f["x_pad_1"][j])
                    yt = int(f["y_pad_0"][j]) + y + int(f["y_pad_1"][j])
                    pads = xt * yt - x * y
                if y == 0:
                    run[m][2] = t + 1 + pads
                else:
                    base, stride = int(f["dram_base"][j]), int(f["x_stride"][j])
                    rows = [bursts((base + r * stride) * eb, x * eb, B, K) for r in range(y)]
                    begin(m, client, rows, t + 1 + pads)
        # arbitration
        granted_now = None
        if port is None:
            cand = [(PRIORITY[r["client"]], o) for o, r in reqs.items() if not r["granted"] and r["issued"] <= t]
            if cand:
                _, o = min(cand)
                reqs[o]["granted"] = True
                port = (o, t + L + reqs[o]["beats"])
                granted_now = o
        # pushes
        for m in ended:
            j = run[m][0]
            for flag, c in PUSHES[m].items():
                if f[flag][j]:
                    pushes.append((t, c))
        # buckets
        if dispatched:
            bd["fetch"]["busy"] += 1
        elif "fetch" in reqs:
            bd["fetch"]["busy" if reqs["fetch"]["granted"] else "mem_wait"] += 1
        elif chunk_state == "dispatch":
            bd["fetch"]["queue_stall"] += 1
        else:
            bd["fetch"]["idle"] += 1
        for m in MODULES:
            if run[m] is not None and (run[m][2] is None or run[m][2] >= t):
                r = reqs.get(m)
                pending = r is not None and not r["granted"] and r["issued"] <= t
                bd[m]["mem_wait" if pending else "busy"] += 1
            else:
                j = head(m)
                visible = j is not None and j in disp and disp[j] < t
                bd[m]["token_wait" if visible else "idle"] += 1
        _ = granted_now
        fin = [j for j in end if f["opcode"][j] == OP_FINISH]
        if fin:
            return dict(start=start, end=end, dispatch=disp, cycles=t + 1, breakdown=bd)
    raise RuntimeError("reference model did not finish")
