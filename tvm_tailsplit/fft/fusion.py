"""Element-wise consumers of an FFT stage computed in the stores of its last pass (cuFFT's store callbacks, derived).

Algorithm: in a PrimFunc made by `te.create_prim_func` from a graph holding `te_fft` stages (the stage is one
block carrying the transform's fields as annotations, `te_op._SPEC_FIELDS`), the output of a stage is the one
buffer its passes store to and it does not allocate. A consumer of that output is fused when it is the only
statement of the root block that reads the output and it is element-wise: one loop nest around one block of
spatial iterators, whose body stores `O[i...] = F` at its own iterators (covering `O` exactly once), where every
read of the stage output `Y` in `F` is either

* `Y[i...]`, the same float (a "component" consumer: `F` maps each float of `Y` on its own), or
* `Y[i..., 0]` / `Y[i..., 1]` (with `O` one dimension less than `Y`) or `Y[i[:-1]..., 0|1]` (same shape), the two
  parts of the same complex element (a "pair" consumer: a complex product, a power spectrum).

The rewrite replaces each store of the last pass, `Y[J] = v`, by `O[J] = F` with the consumer's iterators
substituted by `J` and its reads of `Y` by the stored values. A pair consumer needs both parts of the element
where it is stored, and every store form of the passes has them: two scalar stores side by side
(`Y[b, k, 0] = re; Y[b, k, 1] = im`, llvm), one vector store `Y[b, k, 0:2] = (re, im)` (CUDA; it stays one
vector store of the consumer's two results), and the float-by-float copy of an output staged through shared
memory (CUDA, several transforms per block: `Y[b, f // 2, f % 2] = row[f]`, whose other part is the copied value
at `f` of the other parity; a consumer with one value per element stores it from the float of the real part).
A third form is a consumer reading `Y[flattened batch iterators, other iterators...]` into an `O` of `Y`'s trailing
shape with the batch axis reshaped (what `te_fft` adds to give a 1-D signal or a tensor with several batch axes,
transformed along its last axis, its shape back): a component consumer whose stores go to `O[unflattened b...,
...]`; its own consumer fuses after it.
The consumer's loop nest and the buffer `Y` are removed; the pass blocks declare `O` written (whole where the
batch is reshaped) and the consumer's other inputs read, whole. Chains of consumers fuse one after another.

What is refused, with the reason in `report` and the function unchanged there: a second reader of `Y`, another
statement writing `Y`, a consumer that is not one element-wise block (its loops, one per iterator, must run over
`O` whole, each element once: the fused stores write all of it), reads of `Y` at other elements (a transform
along another axis than the last moves its output back in a stage of its own: that stage is the consumer then,
and not element-wise), `O` touched between the stage and the consumer, and a stage that reads its own output or
accesses `O`. Statements between the stage and the consumer (e.g. a stage computing the consumer's other input)
move before the stage when none of them writes what the stage accesses; otherwise a consumer reading what one
of them writes is refused.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.s_tir import SBlock, SBlockRealize

from ..ir_utils import require_list, require_prim_func, substitute, touches, uses_var, with_root_body
from .te_op import _SPEC_FIELDS, SCATTER_STAGE

__all__ = ["fuse_consumers"]

logger = logging.getLogger("tvm_tailsplit")

COMPONENT = "component"
PAIR = "pair"


class _Refused(Exception):
    """Why a consumer is not fused (the function is left unchanged there)."""


@dataclass(frozen=True)
class Fusion:
    """One consumer to fuse: the root statements' positions of the stage and the consumer, the stage output `Y`,
    the consumer's block and its iterators, its output `O`, its value `F` and how it reads `Y`."""

    stage: int
    consumer: int
    output: tirx.Buffer
    block: SBlock
    iterators: tuple
    result: tirx.Buffer
    value: tvm.ir.PrimExpr
    mode: str
    reads: int  # of `Y` in `F` (a stored value read once is not bound to a variable)
    hoisted: bool  # the statements between the stage and the consumer move before the stage (they may: their
    # writes are nothing the stage accesses), so that the consumer's inputs they write are there for the last pass
    batch: tuple | None = None  # `O`'s batch axes when they are `Y`'s one batch axis reshaped (component mode):
    # the float `Y[b, ...]` is `O[unflattened b..., ...]`


# -------------------------------------------------------------------------------------------------------- analysis


def _is_fft_stage(stmt: tirx.Stmt) -> bool:
    return isinstance(stmt, SBlockRealize) and all(name in stmt.block.annotations for name in _SPEC_FIELDS)


def _loads(node: tvm.ir.Node) -> list[tvm.ir.TensorLoad]:
    found: list[tvm.ir.TensorLoad] = []
    tvm_ffi.structural_walk(node, (tvm.ir.TensorLoad, found.append))
    return found


def _stores(node: tvm.ir.Node) -> list[tirx.BufferStore]:
    found: list[tirx.BufferStore] = []
    tvm_ffi.structural_walk(node, (tirx.BufferStore, found.append))
    return found


def _stage_output(stage: SBlockRealize) -> tirx.Buffer:
    """The buffer the passes of an FFT stage store to and do not allocate (its output)."""
    allocated: list[tirx.Buffer] = []
    tvm_ffi.structural_walk(stage, (SBlock, lambda block: allocated.extend(block.alloc_buffers)))
    outputs: list[tirx.Buffer] = []
    for store in _stores(stage):
        if not any(store.buffer.same_as(b) for b in allocated + outputs):
            outputs.append(store.buffer)
    if len(outputs) != 1:
        raise _Refused(f"its passes store to {len(outputs)} buffers it does not allocate, not one")
    return outputs[0]


def _single_block(stmt: tirx.Stmt) -> tuple[list[tirx.For], SBlockRealize]:
    loops = []
    while isinstance(stmt, tirx.For):
        loops.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, SBlockRealize):
        raise _Refused("it is not one loop nest around one block")
    return loops, stmt


def _same(a, b) -> bool:
    return tvm_ffi.structural_equal(a, b, map_free_vars=False)


def _is_constant(expr: tvm.ir.PrimExpr, value: int) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == value


def _read_mode(value: tvm.ir.PrimExpr, output: tirx.Buffer, result: tirx.Buffer, iterators: tuple) -> str:
    """How the consumer's value reads the stage output (`COMPONENT` or `PAIR`); `_Refused` for other reads."""
    reads = [load for load in _loads(value) if load.source.same_as(output)]
    if not reads:
        raise _Refused(f"its value does not read {output.name}")
    modes = set()
    for load in reads:
        index = list(load.indices)
        if len(index) == len(iterators) and all(_same(i, v) for i, v in zip(index, iterators, strict=True)):
            modes.add(COMPONENT)
            continue
        leading = iterators if len(index) == len(iterators) + 1 else iterators[:-1]
        part = index[-1]
        if (len(index) - 1 == len(leading) and all(_same(i, v) for i, v in zip(index[:-1], leading, strict=True))
                and isinstance(part, tirx.IntImm) and part.value in (0, 1) and int(output.shape[-1]) == 2):
            modes.add(PAIR)
            continue
        raise _Refused(f"it reads {output.name}[{', '.join(map(str, index))}], not at its own element")
    expected = [int(d) for d in output.shape]
    if PAIR in modes and len(iterators) == len(expected) - 1:
        expected = expected[:-1]
    if [int(d) for d in result.shape] != expected or len(iterators) != len(expected):
        raise _Refused(f"it writes {result.name} of shape {list(result.shape)}, which is not one value per "
                       f"{'complex element' if PAIR in modes else 'float'} of {output.name} {list(output.shape)}")
    return PAIR if PAIR in modes else COMPONENT


def _reshaped_batch(value: tvm.ir.PrimExpr, output: tirx.Buffer, result: tirx.Buffer,
                    iterators: tuple) -> tuple | None:
    """`O`'s batch axes when `O` is `Y` with its batch axis (the first) reshaped into them, and every read of `Y`
    in the consumer's value is at its own float (`Y[flattened batch iterators, other iterators...]`): the stage
    `te_fft` adds to give a tensor that is not `(batch, n[, 2])` its shape back (a 1-D signal, several batch axes);
    otherwise None."""
    trailing = len(output.shape) - 1
    axes = len(iterators) - trailing
    shape = [int(d) for d in result.shape]
    if axes < 0 or axes == 1 or shape[axes:] != [int(d) for d in output.shape[1:]]:
        return None
    batch = shape[:axes]
    if math.prod(batch) != int(output.shape[0]):
        return None
    flat: tvm.ir.PrimExpr = tirx.IntImm("int32", 0)
    for extent, var in zip(batch, iterators[:axes], strict=True):
        flat = flat * extent + var
    expected = [flat, *iterators[axes:]]
    analyzer = sym.Analyzer()
    reads = [load for load in _loads(value) if load.source.same_as(output)]
    if reads and all(len(load.indices) == len(expected) and all(
            analyzer.can_prove_equal(i - e, 0) for i, e in zip(load.indices, expected, strict=True))
            for load in reads):
        return tuple(batch)
    return None


def _require_one_store(block: SBlock, realize: SBlockRealize) -> None:
    """`_Refused`, naming what it has, unless the consumer's block is one store alone (no init, buffers of its own
    or predicate: what the fused stores compute is the store's value, at every element)."""
    if not isinstance(block.body, tirx.BufferStore):
        raise _Refused(f"its body is a {type(block.body).__name__}, not one store")
    if block.init is not None:
        raise _Refused("it has an init statement")
    if block.alloc_buffers or block.match_buffers:
        names = [b.name for b in block.alloc_buffers] + [m.buffer.name for m in block.match_buffers]
        raise _Refused(f"it has buffers of its own ({', '.join(names)})")
    if not _is_constant(realize.predicate, 1):
        raise _Refused(f"it has the predicate {realize.predicate}: it does not write every element")


def _same_extent(a: tvm.ir.PrimExpr, b: tvm.ir.PrimExpr) -> bool:
    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return a.value == b.value  # (a shape's int64 and a loop's int32)
    return _same(a, b)


def _require_covering(loops: list, block: SBlock, realize: SBlockRealize, result: tirx.Buffer) -> None:
    """`_Refused` unless the consumer's iterators run over `result` whole, each element once: every iterator is
    bound to a loop of its own whose extent is the iterator's and the extent of `result` along the iterator's axis
    (the fused stores write every element of `result`)."""
    used: list[tirx.Var] = []
    for axis, (iv, bound) in enumerate(zip(block.iter_vars, realize.iter_values, strict=True)):
        loop = next((lp for lp in loops if bound.same_as(lp.loop_var)), None)
        if loop is None or not _is_constant(iv.dom.min, 0):
            raise _Refused("its iterators are not its loops")
        if any(bound.same_as(v) for v in used):
            raise _Refused(f"two of its iterators are bound to loop {bound.name}, so it does not write every "
                           f"element of {result.name}")
        used.append(loop.loop_var)
        if not (_same_extent(loop.extent, iv.dom.extent) and _same_extent(iv.dom.extent, result.shape[axis])):
            raise _Refused(f"its iterator {iv.var.name} (loop {loop.loop_var.name}) runs over {loop.extent} of the "
                           f"{result.shape[axis]} elements of {result.name} along axis {axis}, not all")


def _statement_name(stmt: tirx.Stmt) -> str:
    """A root statement as the report names it: its first block, or its kind."""
    blocks: list[str] = []
    tvm_ffi.structural_walk(stmt, (SBlock, lambda block: blocks.append(block.name_hint)))
    return f"block {blocks[0]}" if blocks else f"a {type(stmt).__name__}"


def _consumer(statements: list, stage: int, output: tirx.Buffer) -> Fusion:
    """The consumer of `output` (the stage at `statements[stage]`) to fuse; `_Refused` says why there is none."""
    readers = [position for position, stmt in enumerate(statements)
               if position != stage and any(load.source.same_as(output) for load in _loads(stmt))]
    if not readers:
        raise _Refused(f"nothing reads {output.name}")
    if len(readers) > 1:
        raise _Refused(f"{len(readers)} statements read {output.name}; only a single consumer is fused")
    position = readers[0]
    if position < stage:
        raise _Refused(f"{output.name} is read before the stage")
    writer = next((stmt for n, stmt in enumerate(statements)
                   if n != stage and any(s.buffer.same_as(output) for s in _stores(stmt))), None)
    if writer is not None:  # the consumer would read the stage's values where the program has the writer's
        raise _Refused(f"{_statement_name(writer)} writes {output.name} too; only a buffer the stage alone writes "
                       f"is fused away")
    loops, realize = _single_block(statements[position])
    block = realize.block
    name = f"block {block.name_hint}"
    try:
        if _is_fft_stage(realize):
            raise _Refused(f"it is an FFT stage (its passes read {output.name}), not an element-wise consumer")
        if any(iv.iter_type != tirx.IterVar.DataPar for iv in block.iter_vars):
            raise _Refused("it has a reduction iterator")
        _require_one_store(block, realize)
        store = block.body
        iterators = tuple(iv.var for iv in block.iter_vars)
        if len(store.indices) != len(iterators) or not all(
                _same(i, v) for i, v in zip(store.indices, iterators, strict=True)):
            raise _Refused(f"it stores {store.buffer.name} at ({', '.join(map(str, store.indices))}), not at its "
                           f"iterators")
        if len(loops) != len(iterators) or any(not _is_constant(loop.min, 0) for loop in loops):
            raise _Refused("its loops are not one per iterator from 0")
        result = store.buffer
        _require_covering(loops, block, realize, result)
        if result.same_as(output) or any(load.source.same_as(result) for load in _loads(store.value)):
            raise _Refused(f"it reads the buffer it writes, {result.name}")
        if touches(statements[stage], result):
            raise _Refused(f"the stage accesses {result.name}, which it writes")
        batch = _reshaped_batch(store.value, output, result, iterators)
        mode = COMPONENT if batch is not None else _read_mode(store.value, output, result, iterators)
        inputs = [load.source for load in _loads(store.value) if not load.source.same_as(output)]
        between = statements[stage + 1:position]
        blocker = None  # a statement between writing what the stage reads: they all stay after the stage
        for stmt in between:
            if touches(stmt, result):
                raise _Refused(f"{result.name} is accessed between the stage and the consumer")
            read = next((s.buffer for s in _stores(stmt) if touches(statements[stage], s.buffer)), None)
            if blocker is None and read is not None:
                blocker = (stmt, read)
        independent = blocker is None  # of the stage: every statement between may run before it
        for stmt in between if not independent else []:
            written = [s.buffer for s in _stores(stmt)]
            clash = next((b for b in inputs if any(b.same_as(w) for w in written)), None)
            if clash is not None:
                raise _Refused(f"it reads {clash.name}, which {_statement_name(stmt)} between the stage and it "
                               f"writes, and the statements between stay after the stage "
                               f"({_statement_name(blocker[0])} writes {blocker[1].name}, which the stage reads)")
        if mode == PAIR:
            _require_paired_stores(statements[stage], output)
    except _Refused as refusal:
        hint = (" (it moves the output of a transform along another axis than the last back: a consumer fuses "
                "after a transform along the last axis)" if block.name_hint == SCATTER_STAGE else "")
        raise _Refused(f"{name}: {refusal}{hint}") from None
    reads = sum(1 for load in _loads(store.value) if load.source.same_as(output))
    return Fusion(stage, position, output, block, iterators, result, store.value, mode, reads,
                  hoisted=bool(between) and independent, batch=batch)


def _vector_parts(store: tirx.BufferStore) -> list | None:
    """The two scalar parts of a vector store `Y[..., 0:2] = Shuffle([re, im])`, or None for another store."""
    last = store.indices[-1]
    value = store.value
    if (isinstance(last, tirx.Ramp) and isinstance(value, tirx.Shuffle) and len(value.vectors) == 2
            and [int(i) for i in value.indices] == [0, 1] and _is_constant(last.base, 0)):
        return list(value.vectors)
    return None


def _part(store: tirx.BufferStore) -> int | None:
    last = store.indices[-1]
    return last.value if isinstance(last, tirx.IntImm) else None


def _is_partner(output: tirx.Buffer, a: tirx.Stmt, b: tirx.Stmt) -> bool:
    """Whether `a` and `b` store the two parts of one element of `output` (scalar stores)."""
    return (isinstance(a, tirx.BufferStore) and isinstance(b, tirx.BufferStore) and a.buffer.same_as(output)
            and b.buffer.same_as(output) and _part(a) is not None
            and _part(b) == 1 - _part(a)
            and all(_same(x, y) for x, y in zip(a.indices[:-1], b.indices[:-1], strict=True)))


def _float_copy_var(store: tirx.BufferStore) -> tirx.Var | None:
    """The float counter `f` of a store `Y[..., f // 2, f % 2] = value(f)` (an output staged through shared memory,
    copied float by float: the other part of the element is `value` at `f` of the other parity), or None."""
    last = store.indices[-1]
    if not (isinstance(last, tirx.FloorMod) and isinstance(last.a, tirx.Var) and _is_constant(last.b, 2)
            and int(store.buffer.shape[-1]) == 2):
        return None
    counter = last.a
    element = tirx.Var("element", str(counter.ty.dtype))

    def halved(div: tirx.FloorDiv):  # `f // 2`, the element of both floats of a pair
        return element if div.a.same_as(counter) and _is_constant(div.b, 2) else div

    leading = [tvm_ffi.structural_map(index, (tirx.FloorDiv, halved), order="post") for index in store.indices[:-1]]
    # the element's other indices read `f` only as `f // 2`, so both floats of the pair store the same element
    return None if any(uses_var(index, counter) for index in leading) else counter


def _require_paired_stores(stage: tirx.Stmt, output: tirx.Buffer) -> None:
    """`_Refused` unless every store of `output` in `stage` holds both parts of its element: one vector store, or
    two scalar stores side by side in a sequence, or a copy float by float (`_float_copy_var`) whose partner float
    is the same value at the other parity (what a pair consumer needs)."""
    paired: list[tirx.BufferStore] = []

    def on_seq(seq: tirx.SeqStmt) -> None:
        items = list(seq.seq)
        for a, b in zip(items, items[1:], strict=False):
            if _is_partner(output, a, b) and not any(a.same_as(p) for p in paired):
                paired.extend([a, b])

    tvm_ffi.structural_walk(stage, (tirx.SeqStmt, on_seq))
    for store in _stores(stage):
        if (store.buffer.same_as(output) and _vector_parts(store) is None and _float_copy_var(store) is None
                and not any(store.same_as(p) for p in paired)):
            raise _Refused(f"the stage stores {output.name}[{', '.join(map(str, store.indices))}] alone, and a "
                           f"consumer of both parts of an element needs them in one place")


def _plan_fusions(func: tirx.PrimFunc) -> tuple[Fusion | None, list[str]]:
    """The first consumer of an FFT stage of `func` to fuse (or None) and, for the stages passed over, why."""
    if not isinstance(func.body, SBlockRealize):
        return None, []
    root = func.body.block
    statements = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    reasons = []
    for position, stmt in enumerate(statements):
        if not _is_fft_stage(stmt):
            continue
        try:
            output = _stage_output(stmt)
            if not any(output.same_as(b) for b in root.alloc_buffers):
                continue  # the function's output: no consumer
            if any(load.source.same_as(output) for load in _loads(stmt)):
                raise _Refused(f"its passes read its output {output.name}")
            return _consumer(statements, position, output), reasons
        except _Refused as refusal:
            reasons.append(f"stage {stmt.block.name_hint}: {refusal}")
    return None, reasons


# ------------------------------------------------------------------------------------------------------- rewriting


def _value_at(fusion: Fusion, index: list, parts: dict) -> tvm.ir.PrimExpr:
    """The consumer's value for its element `index` (a store index of the pass), its reads of the stage output
    replaced by `parts` (the stored value by part: None for the float itself in component mode, else 0 and 1)."""
    value = substitute(fusion.value, dict(zip(fusion.iterators, index, strict=True)))

    def replace(load: tvm.ir.TensorLoad):
        if not load.source.same_as(fusion.output):
            return load
        if fusion.mode == COMPONENT:
            return parts[None]
        part = load.indices[-1]
        if isinstance(part, tirx.IntImm):
            return parts[part.value]
        return tirx.Select(tirx.EQ(part, 0), parts[0], parts[1])  # the float's own part (a staged copy)

    return tvm_ffi.structural_map(value, (tvm.ir.TensorLoad, replace), order="post")


def _element(fusion: Fusion, index: list) -> list:
    """The consumer's element holding the float `Y[index]` (a store index of the pass): `index` itself, or with
    its batch index unflattened into `O`'s batch axes (`Fusion.batch`)."""
    if fusion.batch is None:
        return index
    batch, leading = index[0], []
    for extent in reversed(fusion.batch):
        leading.append(tirx.floormod(batch, extent))
        batch = tirx.floordiv(batch, extent)
    return [*reversed(leading), *index[1:]]


def _bound(value: tvm.ir.PrimExpr, name: str, binds: list) -> tvm.ir.PrimExpr:
    if isinstance(value, (tirx.Var, tirx.IntImm, tirx.FloatImm, tvm.ir.TensorLoad)):
        return value  # (a load is not bound: TVM's VectorizeLoop loses a `Bind` of a vectorized load)
    var = tirx.Var(name, str(value.ty.dtype))
    binds.append(tirx.Bind(var, value))
    return var


def _fused_store(fusion: Fusion, store: tirx.BufferStore) -> list:
    """The statements replacing one store of the stage output in component mode (or a vector store of a pair)."""
    binds: list = []
    vector = _vector_parts(store)
    counter = _float_copy_var(store) if fusion.mode == PAIR else None
    if counter is not None:  # a float of a staged copy: both parts of its element, from the floats of either parity
        # (not bound: TVM's VectorizeLoop loses a `Bind` of a value that depends on the vectorized counter)
        first = counter - tirx.floormod(counter, 2)
        parts = {c: substitute(store.value, {counter: first + c}) for c in (0, 1)}
        if len(fusion.iterators) == len(store.indices):
            return [tirx.BufferStore(fusion.result, _value_at(fusion, list(store.indices), parts),
                                     list(store.indices))]
        leading = list(store.indices[:-1])  # one result per element: stored by the float of the real part
        fused = tirx.BufferStore(fusion.result, _value_at(fusion, leading, parts), leading)
        return [tirx.IfThenElse(tirx.EQ(tirx.floormod(counter, 2), 0), fused, None)]
    if vector is None:  # component mode (the analysis refuses a pair consumer of a part stored alone)
        value = _bound(store.value, "fused_part", binds) if fusion.reads > 1 else store.value
        element = _element(fusion, list(store.indices))
        return [*binds, tirx.BufferStore(fusion.result, _value_at(fusion, element, {None: value}), element)]
    leading = list(store.indices[:-1])
    parts = [_bound(part, f"fused_{name}", binds) for part, name in zip(vector, ("re", "im"), strict=True)]
    if fusion.mode == PAIR and len(fusion.iterators) == len(leading):
        return [*binds, tirx.BufferStore(fusion.result, _value_at(fusion, leading, dict(enumerate(parts))),
                                         leading)]
    results = [_value_at(fusion, _element(fusion, [*leading, tirx.IntImm("int32", c)]),
                         dict(enumerate(parts)) if fusion.mode == PAIR else {None: parts[c]}) for c in (0, 1)]
    return [*binds, tirx.BufferStore(fusion.result, tirx.Shuffle(results, [0, 1]),
                                     _element(fusion, list(store.indices)))]


def _fused_pair(fusion: Fusion, first: tirx.BufferStore, second: tirx.BufferStore) -> list:
    """The statements replacing the adjacent scalar stores of the two parts of one element (pair mode)."""
    stores = sorted([first, second], key=lambda s: int(s.indices[-1]))
    binds: list = []
    parts = {c: _bound(s.value, f"fused_{name}", binds) for c, s, name in zip((0, 1), stores, ("re", "im"),
                                                                             strict=True)}
    leading = list(stores[0].indices[:-1])
    if len(fusion.iterators) == len(leading):
        return [*binds, tirx.BufferStore(fusion.result, _value_at(fusion, leading, parts), leading)]
    return [*binds, *[tirx.BufferStore(fusion.result, _value_at(fusion, [*leading, tirx.IntImm("int32", c)], parts),
                                       [*leading, tirx.IntImm("int32", c)]) for c in (0, 1)]]


def _rewrite_stores(fusion: Fusion, stage: tirx.Stmt) -> tirx.Stmt:
    def on_seq(seq: tirx.SeqStmt):
        items = list(seq.seq)
        out: list = []
        binds: list = []  # of the current run of fused stores, placed before it: the stores stay side by side
        stores: list = []
        position = 0
        while position < len(items):
            stmt = items[position]
            if isinstance(stmt, tirx.BufferStore) and stmt.buffer.same_as(fusion.output):
                if (fusion.mode == PAIR and _vector_parts(stmt) is None and position + 1 < len(items)
                        and _is_partner(fusion.output, stmt, items[position + 1])):
                    fused = _fused_pair(fusion, stmt, items[position + 1])
                    position += 1
                else:
                    fused = _fused_store(fusion, stmt)
                binds.extend(s for s in fused if isinstance(s, tirx.Bind))
                stores.extend(s for s in fused if not isinstance(s, tirx.Bind))
            else:
                out.extend([*binds, *stores, stmt])
                binds, stores = [], []
            position += 1
        out.extend([*binds, *stores])
        return tirx.SeqStmt(out) if len(out) > 1 else out[0]

    def on_store(store: tirx.BufferStore):
        if not store.buffer.same_as(fusion.output):
            return store
        statements = _fused_store(fusion, store)  # a store alone (not in a sequence)
        return tirx.SeqStmt(statements) if len(statements) > 1 else statements[0]

    # sequences first (pairs are siblings), then stores outside any sequence
    stage = tvm_ffi.structural_map(stage, (tirx.SeqStmt, on_seq), order="pre")
    return tvm_ffi.structural_map(stage, (tirx.BufferStore, on_store), order="post")


def _with_regions(fusion: Fusion, stage: tirx.Stmt) -> tirx.Stmt:
    """The pass blocks declaring `O` written where they declared `Y`, and the consumer's inputs read."""
    inputs: list[tirx.Buffer] = []
    for load in _loads(fusion.value):
        if not load.source.same_as(fusion.output) and not any(load.source.same_as(b) for b in inputs):
            inputs.append(load.source)
    drop_last = len(fusion.result.shape) < len(fusion.output.shape)

    def on_block(block: SBlock) -> SBlock:
        if not any(region.source.same_as(fusion.output) for region in block.writes):
            return block
        writes = [r if not r.source.same_as(fusion.output) else _whole(fusion.result) if fusion.batch is not None
                  else tirx.BufferRegion(fusion.result, list(r.region[:-1] if drop_last else r.region))
                  for r in block.writes]
        reads = list(block.reads) + [_whole(b) for b in inputs if not any(r.source.same_as(b) for r in block.reads)]
        return SBlock(block.iter_vars, reads, writes, block.name_hint, block.body, block.init, block.alloc_buffers,
                      block.match_buffers, block.annotations)

    return tvm_ffi.structural_map(stage, (SBlock, on_block), order="post")


def _whole(buffer: tirx.Buffer) -> tirx.BufferRegion:
    return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, extent) for extent in buffer.shape])


def _apply(func: tirx.PrimFunc, fusion: Fusion) -> tirx.PrimFunc:
    root = func.body.block
    statements = list(root.body.seq)
    stage = _with_regions(fusion, _rewrite_stores(fusion, statements[fusion.stage]))
    between = statements[fusion.stage + 1:fusion.consumer]
    middle = [*between, stage] if fusion.hoisted else [stage, *between]
    statements = statements[:fusion.stage] + middle + statements[fusion.consumer + 1:]
    fused = with_root_body(func, tirx.SeqStmt(statements) if len(statements) > 1 else statements[0])
    root = fused.body.block
    block = SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, root.body, root.init,
                   [b for b in root.alloc_buffers if not b.same_as(fusion.output)], root.match_buffers,
                   root.annotations)
    return fused.with_body(SBlockRealize(fused.body.iter_values, fused.body.predicate, block))


def fuse_consumers(func: tirx.PrimFunc, report: list | None = None) -> tirx.PrimFunc:
    """`func` (from `te.create_prim_func` of a graph with `te_fft` stages) with each element-wise consumer of an
    FFT stage's output computed in the stores of the stage's last pass (see the module docstring for what is
    fused). The consumer's loop nest and the intermediate buffer are gone: on CUDA, one kernel less and one
    round trip through global memory less; on llvm, one pass over memory less. Apply it before scheduling the
    function (a producer is inlined into the first pass by `sch.compute_inline`). `report`, a list, receives a
    line per fused consumer and per stage whose consumer is not fused, with the reason (also logged)."""
    require_prim_func(func, "fuse_consumers")
    require_list(report, "fuse_consumers", "report")
    lines: list[str] = []
    while True:
        fusion, reasons = _plan_fusions(func)
        if fusion is None:
            lines.extend(reasons)
            break
        stage_name = func.body.block.body.seq[fusion.stage].block.name_hint
        func = _apply(func, fusion)
        lines.append(f"stage {stage_name}: block {fusion.block.name_hint} ({fusion.mode} consumer) fused into the "
                     f"stores of the last pass, writing {fusion.result.name}")
    for line in lines:
        logger.info("fuse_consumers: %s", line)
    if report is not None:
        report.extend(lines)
    return func
