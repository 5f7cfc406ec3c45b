"""Buffers private to the iterations of a split loop: one buffer per copy of the loop.

TVM places a buffer at the lowest common ancestor of its accesses and shrinks it to the region accessed there
(``PlanAndUpdateBufferAllocationLocation``, ``CompactBufferAllocation``): a panel of ``B`` packed and read inside
each iteration of a loop ``j`` becomes one panel, reused by every iteration and hot in L1. When TailSplit cuts
``j`` into copies (its always-true interval and its tail), the common ancestor of the copies is the root, and
the buffer keeps the size of the whole packed matrix: memory that grows with the problem, and a fresh panel per
iteration. So each copy of such a loop gets its own buffer, and TVM shrinks each one inside its copy again.

A ``global``-scope buffer allocated by the root block (a GPU kernel allocates ``shared`` and ``local`` buffers
statically, so copies of those would add up) is *private to the iterations* of the innermost loop ``L`` that holds
all its accesses when, in ``L``'s body, the first statement that touches it

- writes it without reading it, as a rectangular loop nest (bounds free of the nest's own loops, extents
  provably positive, no step) around one unpredicated block whose body is a single store, each index of which is either
  free of the nest's loops (a point) or ``loop + offset`` for its own loop (an interval): the region it writes
  is then known exactly;

and every later load of the buffer in the body lies, for all values of the loops around it, inside that region;
the buffer is accessed by loads and stores only (its pointer is never taken). No iteration then reads a value
written by another iteration or before ``L``, so giving each copy of ``L`` its own buffer (the first copy keeps
the original) computes the same values. When the proof fails the buffer stays shared, and the report says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import MatchBufferRegion, SBlockRealize

from ..ir_utils import has_unit_step, substitute, touches
from .conditions import loop_vars_in

__all__ = ["BufferPrivacy", "buffer_privacy", "give_each_copy_its_buffer"]


@dataclass(frozen=True)
class BufferPrivacy:
    """Whether a root-allocated buffer is private to the iterations of the innermost loop holding its accesses
    (``loop``), and why not (``reason``) when it is not."""

    buffer: tirx.Buffer
    loop: tirx.For
    private: bool
    reason: str = ""


def _loads_and_stores(stmt, buffer: tirx.Buffer) -> tuple[list, list]:
    loads: list = []
    stores: list = []
    tvm_ffi.structural_walk(
        stmt,
        [
            (tvm.ir.TensorLoad, lambda load: loads.append(load) if load.source.same_as(buffer) else None),
            (tirx.BufferStore, lambda store: stores.append(store) if store.buffer.same_as(buffer) else None),
        ],
    )
    return loads, stores


def _pointer_use(func: tirx.PrimFunc, buffer: tirx.Buffer) -> str:
    """Why the buffer is reached other than by loads and stores ('' when it is not)."""
    address_of = tvm.ir.Op.get("tirx.address_of")
    reasons: list = []

    def on_call(call) -> None:
        for argument in call.args:
            if argument.same_as(buffer):  # T.buffer_data(P), or the buffer passed as it is
                reasons.append("its data pointer is used directly")
            elif (call.op.same_as(address_of) and isinstance(argument, tvm.ir.TensorLoad)
                  and argument.source.same_as(buffer)):
                reasons.append("its address is taken")

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call))
    if reasons:
        return reasons[0]
    matched: list = []
    tvm_ffi.structural_walk(
        func.body, (MatchBufferRegion, lambda m: matched.append(m) if m.source.source.same_as(buffer) else None)
    )
    if matched:
        return "a block matches a region of it (match_buffer)"
    return ""


def _innermost_loop_holding(func: tirx.PrimFunc, buffer: tirx.Buffer) -> tirx.For | None:
    """The innermost loop whose body holds every load and store of ``buffer`` (loops holding all of them form a
    chain; in pre-order the last one visited is the innermost)."""
    loads, stores = _loads_and_stores(func.body, buffer)
    total = len(loads) + len(stores)
    if total == 0:
        return None
    innermost = None
    for loop in loop_vars_in(func.body):
        inside_loads, inside_stores = _loads_and_stores(loop.body, buffer)
        if len(inside_loads) + len(inside_stores) == total:
            innermost = loop
    return innermost


def _statements(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [s for item in stmt.seq for s in _statements(item)]
    return [stmt]


def _written_box(stmt, buffer: tirx.Buffer) -> tuple[list | None, str]:
    """``[(low, high)]`` per dimension (``high`` exclusive) of the region a whole-region write statement writes,
    or ``None`` and why the statement is not one."""
    loads, stores = _loads_and_stores(stmt, buffer)
    if loads:
        return None, "the first statement touching it also reads it"
    if len(stores) != 1:
        return None, "the first statement touching it stores to it more than once"
    nest = []
    while isinstance(stmt, tirx.For):
        nest.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, SBlockRealize):
        return None, "the first statement touching it is not a loop nest around one block"
    block = stmt.block
    if not (isinstance(stmt.predicate, tirx.IntImm) and stmt.predicate.value == 1):
        return None, f"the block {block.name_hint} writing it first has a predicate"
    store = block.body
    if block.init is not None or not isinstance(store, tirx.BufferStore) or not store.buffer.same_as(buffer):
        return None, f"the block {block.name_hint} writing it first is not a single store to it"
    nest_vars = {loop.loop_var for loop in nest}
    analyzer = tvm.sym.Analyzer()
    for loop in nest:
        if not has_unit_step(loop):  # (the box below would hold the elements between the steps too)
            return None, f"loop {loop.loop_var.name} of its first write has step {loop.step}: it skips elements"
        if _uses_any(loop.min, nest_vars) or _uses_any(loop.extent, nest_vars):
            return None, f"loop {loop.loop_var.name} of its first write is not rectangular"
        if not analyzer.can_prove(loop.extent > 0):
            return None, f"loop {loop.loop_var.name} of its first write may run no iteration"
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    bindings = {iter_var.var: value for iter_var, value in zip(block.iter_vars, stmt.iter_values, strict=True)}
    box = []
    used: set = set()
    for index in store.indices:
        index = analyzer.simplify(substitute(index, bindings))  # e.g. (j * 16 + x) // 16 -> j for x in [0, 16)
        if index.ty.dtype.lanes != 1:
            return None, f"the first write of it is a vector store ({index})"
        loops = [loop for loop in nest if _uses_any(index, {loop.loop_var})]
        if not loops:
            box.append((index, index + 1))
            continue
        offset = analyzer.simplify(index - loops[0].loop_var)
        if len(loops) > 1 or loops[0].loop_var in used or _uses_any(offset, nest_vars):
            return None, f"index {index} of its first write is not a loop plus an offset"
        used.add(loops[0].loop_var)
        box.append((loops[0].min + offset, loops[0].min + loops[0].extent + offset))
    return box, ""


def _uses_any(expr, variables: set) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.Var, lambda var: found.append(var) if var in variables else None))
    return bool(found)


def _reads_inside(stmt, buffer: tirx.Buffer, box: list, loop: tirx.For) -> str:
    """'' when every load of ``buffer`` in ``stmt`` (in the body of ``loop``) lies inside ``box`` for all values
    of ``loop`` and of the loops and block iter vars around the load; otherwise the first load that could not be
    proved inside."""
    bindings: dict = {}
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))

    def on_node(node) -> None:
        if isinstance(node, SBlockRealize):
            for iter_var, value in zip(node.block.iter_vars, node.iter_values, strict=True):
                bindings[iter_var.var] = substitute(value, bindings)
        elif isinstance(node, tirx.For):
            low, extent = substitute(node.min, bindings), substitute(node.extent, bindings)
            analyzer.bind(node.loop_var, tvm.ir.Range.from_min_extent(low, extent))

    tvm_ffi.structural_walk(stmt, [(SBlockRealize, on_node), (tirx.For, on_node)], order="pre")
    for load in _loads_and_stores(stmt, buffer)[0]:
        for index, (low, high) in zip(load.indices, box, strict=True):
            index = substitute(index, bindings)
            if not (analyzer.can_prove(index >= low) and analyzer.can_prove(index < high)):
                return f"the load {buffer.name}[{', '.join(str(i) for i in load.indices)}] is not provably inside " \
                       "the region its iteration writes first"
    return ""


def buffer_privacy(func: tirx.PrimFunc) -> list[BufferPrivacy]:
    """For every buffer the root block allocates whose accesses all lie inside one loop: whether it is private to
    that loop's iterations (see the module docstring)."""
    if not isinstance(func.body, SBlockRealize):
        return []
    verdicts = []
    for buffer in func.body.block.alloc_buffers:
        loop = _innermost_loop_holding(func, buffer)
        if loop is None:
            continue
        reason = ""
        if buffer.scope() != "global":
            reason = (f"its scope is {buffer.scope()!r}, not 'global' (a GPU kernel allocates every such buffer "
                      "statically: one per copy would add up)")
        reason = reason or _pointer_use(func, buffer) or _private_in(loop, buffer)
        verdicts.append(BufferPrivacy(buffer, loop, not reason, reason))
    return verdicts


def _private_in(loop: tirx.For, buffer: tirx.Buffer) -> str:
    statements = [s for s in _statements(loop.body) if touches(s, buffer)]
    box, reason = _written_box(statements[0], buffer)
    if box is None:
        return reason
    for stmt in statements[1:]:
        reason = _reads_inside(stmt, buffer, box, loop)
        if reason:
            return reason
    return ""


def give_each_copy_its_buffer(
    body: tirx.Stmt, buffer: tirx.Buffer, copies: list[tirx.Var]
) -> tuple[tirx.Stmt, list[tirx.Buffer]]:
    """Replace ``buffer`` in every loop over ``copies[1:]`` (the loop variables of the copies of the loop it is
    private to) by a buffer of its own, named ``<name>_<k>``; returns the new body and the new buffers."""
    if buffer.elem_offset is not None and not isinstance(buffer.elem_offset, tirx.IntImm):
        raise ValueError(f"buffer {buffer.name} has a symbolic element offset; it cannot be copied")
    replacements = {}
    for number, var in enumerate(copies[1:], start=1):
        replacements[var] = tirx.decl_buffer(
            buffer.shape, buffer.dtype, f"{buffer.name}_{number}", strides=list(buffer.strides),
            elem_offset=buffer.elem_offset, scope=buffer.scope(), data_alignment=buffer.data_alignment,
            offset_factor=buffer.offset_factor, **({} if buffer.layout is None else {"layout": buffer.layout}),
        )

    def on_loop(loop: tirx.For) -> tirx.For:
        replacement = replacements.get(loop.loop_var)
        if replacement is None:
            return loop
        return tvm_ffi.structural_map(
            loop, (tirx.Buffer, lambda b: replacement if b.same_as(buffer) else b), order="post"
        )

    return tvm_ffi.structural_map(body, (tirx.For, on_loop), order="post"), list(replacements.values())

