"""InjectCoProcSync (TVM CoProcSync's instruction-dependence part, spec 4.3.4 and 5.4).

Every ``coproc_scope = q`` region is a *state* entered and left on stage ``q``.  Walking the
program in order, two consecutive states on different stages ``a`` then ``b`` get
``vta.coproc_dep_push(a, b)`` at the end of the first region and ``vta.coproc_dep_pop(a, b)`` at the
start of the second.  A loop is itself a state: its body's last state -> first state pair is the
loop-carried dependence (push at the end of the body, pop at its start), remembered as the loop's
exit pushes / entry pops.  Composing such a loop with a neighbour compensates what does not match:
a token pushed by the last iteration that nobody pops gets a draining ``dep_pop`` right after the
loop, an entry pop nobody pushed for gets a priming ``dep_push`` before it.  The same fix-up runs on
the first and last state of the whole function.  Virtual threads are still one opaque attribute
here: the plan is single-threaded and inject_virtual_thread replicates it.

Finally one ``vta.coproc_sync()`` closes the function, after every draining pop (TVM may place a
drain after the sync, which only works because the token carries over to the next launch; spec 5.4).
"""

from __future__ import annotations

from collections import defaultdict

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.passes._util import fresh

__all__ = ["coproc_sync", "dep_push", "dep_pop", "SYNC"]

SYNC = "vta.coproc_sync"


def dep_push(a: int, b: int) -> ir.Stmt:
    return ir.Evaluate(ir.Call("vta.coproc_dep_push", (ir.IntImm(a), ir.IntImm(b))))


def dep_pop(a: int, b: int) -> ir.Stmt:
    return ir.Evaluate(ir.Call("vta.coproc_dep_pop", (ir.IntImm(a), ir.IntImm(b))))


class _State:
    __slots__ = ("node", "enter", "exit", "enter_pop", "exit_push")

    def __init__(self, node, enter=(), exit_=()):
        self.node = node
        self.enter = set(enter)
        self.exit = set(exit_)
        self.enter_pop: list = []
        self.exit_push: list = []


class _Planner:
    def __init__(self):
        self.first = self.last = None
        self.before = defaultdict(list)     # id(node) -> statements placed before it
        self.after = defaultdict(list)      # id(node) -> statements placed after it

    def plan(self, stmt):
        self.visit(stmt)
        if self.last is not None:
            self.prime(self.first)
            self.drain(self.last)

    def visit(self, s):
        if isinstance(s, ir.Attr) and s.key == "coproc_scope":
            self.update(_State(s.body, {s.value}, {s.value}))
        elif isinstance(s, ir.For):
            saved = self.first, self.last
            self.first = self.last = None
            self.visit(s.body)
            state = None
            if self.last is not None:
                state = _State(s, self.first.enter, self.last.exit)
                # loop-carried: the end of one iteration feeds the start of the next
                self.connect(self.last, self.first, state.exit_push, state.enter_pop)
            self.first, self.last = saved
            if state is not None:
                self.update(state)
        elif isinstance(s, ir.IfThenElse):
            saved = self.first, self.last
            state = _State(s)
            for branch in (s.then, s.otherwise):
                if branch is None:
                    continue
                self.first = self.last = None
                self.visit(branch)
                if self.last is not None:       # each branch balances its own tokens
                    self.prime(self.first)
                    self.drain(self.last)
                    state.enter |= self.first.enter
                    state.exit |= self.last.exit
            self.first, self.last = saved
            if state.enter:
                self.update(state)
        elif isinstance(s, ir.Seq):
            for c in s.stmts:
                self.visit(c)
        elif isinstance(s, (ir.Attr, ir.Allocate)):
            self.visit(s.body)

    def update(self, state):
        if self.last is not None:
            self.connect(self.last, state, [], [])
            self.last = state
        else:
            self.first = self.last = state

    def connect(self, prev, nxt, prev_exit_push, next_enter_pop):
        """Place the tokens between ``prev`` and ``nxt``; report what stays open at the seam."""
        if not prev.exit_push and not nxt.enter_pop and len(prev.exit) == 1 and len(nxt.enter) == 1:
            a, b = next(iter(prev.exit)), next(iter(nxt.enter))
            if a != b:
                self.after[id(prev.node)].append(dep_push(a, b))
                self.before[id(nxt.node)].append(dep_pop(a, b))
                prev_exit_push.append((a, b))
                next_enter_pop.append((a, b))
            return
        pushes, pops = list(prev.exit_push), list(nxt.enter_pop)
        after, before = [], []
        for a in sorted(prev.exit):
            for b in sorted(nxt.enter):
                if a == b:
                    continue
                if (a, b) not in prev.exit_push:
                    pushes.append((a, b))
                    after.append(dep_push(a, b))
                if (a, b) not in nxt.enter_pop:
                    pops.append((a, b))
                    before.append(dep_pop(a, b))
        for p in pushes:
            if p in pops:
                prev_exit_push.append(p)
            else:
                after.append(dep_pop(*p))          # drain: nobody downstream pops it
        for p in pops:
            if p in pushes:
                next_enter_pop.append(p)
            else:
                before.append(dep_push(*p))        # prime: nobody upstream pushed it
        self.after[id(prev.node)].extend(after)
        self.before[id(nxt.node)].extend(before)

    def prime(self, state):
        for p in state.enter_pop:
            self.before[id(state.node)].append(dep_push(*p))

    def drain(self, state):
        for p in state.exit_push:
            self.after[id(state.node)].append(dep_pop(*p))

    def rebuild(self, s):
        if isinstance(s, ir.For):
            new = ir.For(s.var, s.extent, self.rebuild(s.body), s.kind)
        elif isinstance(s, ir.Attr):
            new = ir.Attr(s.key, s.value, self.rebuild(s.body), s.extra)
        elif isinstance(s, ir.Allocate):
            new = ir.Allocate(s.buffer, self.rebuild(s.body))
        elif isinstance(s, ir.Seq):
            new = ir.seq(*[self.rebuild(c) for c in s.stmts])
        elif isinstance(s, ir.IfThenElse):
            new = ir.IfThenElse(s.cond, self.rebuild(s.then),
                                self.rebuild(s.otherwise) if s.otherwise is not None else None)
        else:
            new = s
        return ir.seq(*self.before.get(id(s), ()), new, *self.after.get(id(s), ()))


def coproc_sync(body, cfg=None):
    """Insert dependence push/pop pairs and the closing ``vta.coproc_sync`` (see module doc)."""
    body = fresh(body)
    planner = _Planner()
    planner.plan(body)
    return ir.seq(planner.rebuild(body), ir.Evaluate(ir.Call(SYNC, ())))
