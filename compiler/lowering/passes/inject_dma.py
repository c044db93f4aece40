"""InjectDMAIntrin (spec 4.2): ``pragma_dma_copy`` loop nests -> one 2-D DMA call each.

For every ``Attr("pragma_dma_copy")`` the perfect loop nest below it must end in one
``Store(dst, idx, value)`` with ``value`` a ``Load`` (optionally in a ``Cast``) or
``Select(cond, load, 0)`` (padding).  The copy becomes

* ``Attr("coproc_scope", 1|2, Evaluate(VTALoadBuffer2D(src, off, x, y, stride, pads..., sram, mem)))``
  for DRAM -> SRAM (stage 1 for inp/wgt, 2 for acc), or
* ``Attr("coproc_scope", 3, Evaluate(VTAStoreBuffer2D(sram, OUT, dst, off, x, y, stride)))`` for
  acc -> DRAM,

where the SRAM side is ``tvm_access_ptr(buffer, scalar_offset)`` (lower_storage_access turns it into
an element index).  The DRAM side is matched to a 2-D element pattern: the innermost loops must
cover exactly one element contiguously, outer loops fold into x and y when their strides chain
(folding is off for padded loads), and every DRAM size, stride and offset is converted to element
units of the destination memory.  Padding comes from the ``Select``'s clip bounds (TVM's
DetectClipBound): ``pad_before = max(lo, 0)``, ``pad_after = max(extent - hi - 1, 0)``; these may be
expressions of outer loops (only the border tiles are padded).
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.passes._util import access_ptr, loop_nest, rewrite_attrs, scope_lanes
from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_WGT

__all__ = ["inject_dma"]

PASS = "inject_dma"
_LOAD_TARGET = {ir.SCOPE_INP: (MEM_INP, 1), ir.SCOPE_WGT: (MEM_WGT, 1), ir.SCOPE_ACC: (MEM_ACC, 2)}


def inject_dma(body, cfg):
    """Replace every ``pragma_dma_copy`` region of ``body`` by its DMA call (see module doc)."""
    return rewrite_attrs(body, "pragma_dma_copy", lambda a: _lower_copy(a.body, cfg))


def _fail(name, msg):
    raise CompileError(PASS, f"dma_copy of `{name}`: {msg}")


def _lower_copy(stmt, cfg):
    loops, store = loop_nest(stmt, PASS, "dma_copy")
    name = store.buffer.name
    vars_ = [v for v, _ in loops]
    extents = [e for _, e in loops]
    load, cond, pad_value, cast = _split_value(store.value, name)
    if cond is not None and not (isinstance(pad_value, ir.IntImm) and pad_value.value == 0):
        _fail(name, f"pad value {ir.to_text(pad_value)} is not 0 (the DMA engine pads with zeros)")
    dst_lin = ir.linear(store.index, vars_)
    src_lin = ir.linear(load.index, vars_)
    for buf, lin in ((store.buffer, dst_lin), (load.buffer, src_lin)):
        if lin is None:
            _fail(name, f"the index into `{buf.name}` is not linear in the copy loops")
    dst_strides, dst_base = dst_lin
    src_strides, src_base = src_lin
    if not vars_:                       # a single scalar: TVM's shape-(1,) view
        extents, dst_strides, src_strides = [1], [1], [1]
        vars_ = [None]

    pad_before = pad_after = None
    src_shape = list(extents)
    if cond is not None:
        bounds = _clip_bounds(cond, [v for v in vars_ if v is not None], name)
        pad_before, pad_after = [], []
        for i, (lo, hi) in enumerate(bounds):
            pb = ir.simplify(ir.max_(lo, 0)) if lo is not None else ir.IntImm(0)
            pa = ir.simplify(ir.max_(extents[i] - hi - 1, 0)) if hi is not None else ir.IntImm(0)
            src_base = src_base + pb * src_strides[i]
            src_shape[i] = ir.simplify(ir.const(extents[i]) - pb - pa)
            pad_before.append(pb)
            pad_after.append(pa)
        src_base = ir.simplify(src_base)

    dst_scope, src_scope = store.buffer.scope, load.buffer.scope
    if dst_scope == ir.SCOPE_GLOBAL:
        if src_scope != ir.SCOPE_ACC:
            _fail(name, f"a store to DRAM must read {ir.SCOPE_ACC}, `{load.buffer.name}` is {src_scope}")
        if pad_before is not None:
            _fail(name, "a store to DRAM cannot pad")
        _check_compact(name, load.buffer.name, extents, src_strides, vars_)
        eb = cfg.batch * cfg.block_out                   # OUT element lanes
        x, y, stride, off = _pattern_2d(name, extents, dst_strides, dst_base, eb, True, vars_)
        call = ir.Call("VTAStoreBuffer2D", (access_ptr(load.buffer, src_base), ir.const(MEM_OUT),
                                            store.buffer, off, x, y, stride))
        return ir.Attr("coproc_scope", 3, ir.Evaluate(call))

    if src_scope != ir.SCOPE_GLOBAL:
        _fail(name, f"copy from {src_scope} to {dst_scope} has no DMA (one side must be DRAM)")
    if dst_scope not in _LOAD_TARGET:
        _fail(name, f"a load from DRAM cannot write scope {dst_scope}")
    mem, stage = _LOAD_TARGET[dst_scope]
    eb = scope_lanes(cfg, dst_scope)
    if dst_scope == ir.SCOPE_ACC and load.buffer.dtype != store.buffer.dtype:
        if load.buffer.dtype != f"int{cfg.inp_width}":
            _fail(name, f"an accumulator load reads int{cfg.acc_width} or int{cfg.inp_width}, "
                        f"`{load.buffer.name}` is {load.buffer.dtype}")
        mem = MEM_ACC_8BIT                               # fused int8 -> int32 cast
    elif load.buffer.dtype != store.buffer.dtype:
        _fail(name, f"`{load.buffer.name}` is {load.buffer.dtype} but {dst_scope} holds {store.buffer.dtype}")
    zero = ir.IntImm(0)
    xpb = ypb = xpa = ypa = zero
    if pad_before is not None:
        nd = len(pad_before)
        if nd < 3 or nd > 5:
            _fail(name, f"a padded load needs 3 to 5 loops, this one has {nd}")
        yd = 1 if nd == 5 else 0                         # batch > 1 puts the image rows at dim 1
        ypb, xpb, ypa, xpa = pad_before[yd], pad_before[yd + 1], pad_after[yd], pad_after[yd + 1]
        for d in list(range(0, yd)) + list(range(yd + 2, nd)):
            if not _is_zero(pad_before[d]) or not _is_zero(pad_after[d]):
                _fail(name, f"padding on loop `{vars_[d].name}`: only the two image dimensions "
                            f"(loops `{vars_[yd].name}`, `{vars_[yd + 1].name}`) can be padded")
    _check_compact(name, store.buffer.name, extents, dst_strides, vars_)
    x, y, stride, off = _pattern_2d(name, src_shape, src_strides, src_base, eb,
                                    pad_before is None, vars_)
    call = ir.Call("VTALoadBuffer2D", (load.buffer, off, x, y, stride, xpb, ypb, xpa, ypa,
                                       access_ptr(store.buffer, dst_base), ir.const(mem)))
    return ir.Attr("coproc_scope", stage, ir.Evaluate(call))


def _split_value(value, name):
    """``(load, cond, pad_value, cast_dtype)`` of a copy's stored value."""
    cond = pad = None
    if isinstance(value, ir.Cast) and isinstance(value.value, ir.Select):   # cast(pad(x)) = pad(cast(x))
        sel = value.value
        value = ir.Select(sel.cond, ir.Cast(value.dtype, sel.true_value), sel.false_value)
    if isinstance(value, ir.Select):
        cond, pad, value = value.cond, value.false_value, value.true_value
    cast = None
    if isinstance(value, ir.Cast):
        cast, value = value.dtype, value.value
    if not isinstance(value, ir.Load):
        _fail(name, f"the copied value {ir.to_text(value)} is not a load (optionally cast or padded)")
    return value, cond, pad, cast


def _is_zero(e) -> bool:
    return isinstance(e, ir.IntImm) and e.value == 0 or e == 0


def _clip_bounds(cond, vars_, name):
    """Per loop ``(lo, hi)`` inclusive bounds with ``cond <=> lo <= v <= hi`` (None: unbounded)."""
    terms = []

    def conj(e):
        if isinstance(e, ir.BinOp) and e.op == "&&":
            conj(e.a)
            conj(e.b)
        else:
            terms.append(e)
    conj(cond)
    lo = [None] * len(vars_)
    hi = [None] * len(vars_)
    for t in terms:
        if not (isinstance(t, ir.BinOp) and t.op in ("<", "<=", ">", ">=")):
            _fail(name, f"padding condition {ir.to_text(t)} is not a comparison")
        # normalise to  e >= 0
        if t.op in (">=", ">"):
            e = t.a - t.b - (1 if t.op == ">" else 0)
        else:
            e = t.b - t.a - (1 if t.op == "<" else 0)
        lin = ir.linear(e, vars_)
        if lin is None:
            _fail(name, f"padding condition {ir.to_text(t)} is not linear in the copy loops")
        coeffs, base = lin
        used = [i for i, c in enumerate(coeffs) if c]
        if len(used) != 1 or abs(coeffs[used[0]]) != 1:
            _fail(name, f"padding condition {ir.to_text(t)} must bound one copy loop with coefficient 1")
        i = used[0]
        if coeffs[i] == 1:          # v + base >= 0  ->  v >= -base
            b = ir.simplify(ir.IntImm(0) - base)
            lo[i] = b if lo[i] is None else ir.simplify(ir.max_(lo[i], b))
        else:                       # base - v >= 0  ->  v <= base
            b = ir.simplify(base)
            hi[i] = b if hi[i] is None else ir.simplify(ir.min_(hi[i], b))
    return list(zip(lo, hi))


def _check_compact(name, sram_name, extents, strides, vars_):
    """The SRAM side of a DMA is a dense row-major tile of the loop extents."""
    need = 1
    for i in reversed(range(len(extents))):
        if strides[i] != need:
            v = vars_[i].name if vars_[i] is not None else "-"
            _fail(name, f"the SRAM side `{sram_name}` is not compact: loop `{v}` has stride "
                        f"{strides[i]}, a dense tile needs {need}")
        need *= extents[i]


def _const(e):
    if isinstance(e, int):
        return e
    if isinstance(e, ir.IntImm):
        return e.value
    return None


def _div_exact(name, e, d, what):
    q = ir.simplify(ir.const(e) // d)
    if isinstance(q, ir.BinOp) and q.op == "//":
        _fail(name, f"{what} {ir.to_text(e)} is not a multiple of the element ({d} scalars)")
    return q


def _fold(name, shape, strides, eb, vars_):
    """Fold the loop dims into ``[..., elem]``: the innermost dims must cover one element
    contiguously; outer dims whose strides chain merge into one."""
    n = len(shape)
    size, k = 1, n
    while k > 0 and size != eb:
        k -= 1
        if strides[k] != size:
            if k == n - 1:
                _fail(name, f"stride of the inner loop is {strides[k]} elements, the pattern needs {size}")
            _fail(name, f"stride of loop `{vars_[k].name}` is {strides[k]} elements, the pattern needs {size}")
        size *= shape[k]
        if size > eb:
            break
    if size != eb:
        _fail(name, f"the inner loops cover {size} scalars, one element is {eb} (the pragma must "
                    f"enclose whole elements: the BATCH and BLOCK loops)")
    out_shape, out_strides = [eb], [1]
    if k > 0 and strides[k - 1] != eb:
        out_shape.append(1)                 # elements are not adjacent: an x dim of one element
        out_strides.append(eb)
    while k > 0:
        stride = strides[k - 1]
        if stride % eb:
            _fail(name, f"stride of loop `{vars_[k - 1].name}` is {stride} scalars, not a multiple "
                        f"of the element ({eb})")
        group = 1
        while k > 0 and strides[k - 1] == group * stride:
            group *= shape[k - 1]
            k -= 1
        out_shape.append(group)
        out_strides.append(stride)
    return list(reversed(out_shape)), list(reversed(out_strides))


def _pattern_2d(name, shape, strides, offset, eb, allow_fold, vars_):
    """``(x_size, y_size, x_stride, elem_offset)`` in elements of the DRAM view."""
    off = _div_exact(name, offset, eb, "the DRAM offset")
    if allow_fold:
        shape, strides = _fold(name, [_const(s) for s in shape], list(strides), eb, vars_)

    def bad():
        _fail(name, f"cannot match a 2-D pattern with elements of {eb} scalars: loop extents "
                    f"{[ir.to_text(ir.const(s)) for s in shape0]}, strides {list(strides0)}")
    shape0, strides0 = shape, strides
    nd = len(shape)
    if _const(shape[-1]) != eb:
        # the two innermost dims together form the element (batch x block): one dim of one element
        if nd < 2 or strides[-1] != 1 or strides[-2] != _const(shape[-1]) \
                or _const(shape[-1]) is None or _const(shape[-2]) is None \
                or _const(shape[-1]) * _const(shape[-2]) != eb:
            bad()
        shape, strides, nd = list(shape[:-2]) + [eb], list(strides[:-2]) + [1], nd - 1
    # the innermost dim is one element
    one = ir.IntImm(1)
    if strides[-1] != 1:
        bad()
    if nd == 1:
        return one, one, one, off
    if strides[-2] != eb:
        bad()
    if nd == 2:
        return ir.const(shape[-2]), one, ir.const(shape[-2]), off
    if strides[-3] % eb:
        bad()
    if nd == 3:
        return ir.const(shape[-2]), ir.const(shape[-3]), ir.const(strides[-3] // eb), off
    bad()
