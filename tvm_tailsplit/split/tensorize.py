"""Tensorize the marked regions TailSplit leaves behind: main tiles, tail tiles, marks.

A *mark* is the loop annotation ``pragma_emit_insn`` whose value names a registered ``TensorIntrin``; the marked
loop is the outermost loop of the region the intrinsic covers. After ``TailSplit`` a *main tile* is a marked,
condition-free nest whose loop extents equal the description's; a *tail tile* is a marked, condition-free nest
with smaller extents: constants (static shapes) or expressions such as ``T.min(16, n - i_0 * 16)`` or a variable
bound by a ``tirx.Bind`` above the mark (symbolic shapes). ``tensorize_marked`` visits every mark, outermost
first, one at a time, and removes it in every case:

0. A block annotated with the mark (``sch.annotate(block, ...)`` instead of its loop) marks nothing: a
   ``ValueError`` naming the function, the block and the value (TVM would lower it to a pragma llvm ignores).
1. The mark's value must name a registered intrinsic (its description is the pattern of main tiles and of
   variable-length tails), else ``ValueError`` naming the loop and the value. A description loop whose extent is
   a free variable (``depth = T.int32()``; ``for k in range(depth)``) takes *any extent*: e.g. a matmul
   micro-kernel that keeps its accumulators in registers over the whole reduction. Its main tiles are the regions
   whose other extents equal the description's; they are matched as in 5, with the free variable bound to the
   region's extent, and the implementation is instantiated with the same binding (``sch.tensorize`` compares a
   free extent with the region's and never binds it, so it is not tried). A block under the mark that still
   has an init statement, when the description has none, is a ``ValueError`` naming the block
   (``sch.decompose_reduction`` first). A loop under the mark (the marked loop included) that is bound to a GPU
   thread is a ``ValueError`` naming both loops: the instruction replaces the region's loops, and a thread
   binding is part of the kernel's launch.
   An intrinsic that needs llvm CPU features (``intrinsics.TARGET_FEATURES``: the VNNI ones) is left as code, with
   the reason, where the function's ``target`` attribute (``tvm.compile`` binds it before the TIR pipeline) or else
   the current target lacks them: LLVM aborts the process when it compiles ``vpdpbusd.512`` for such a CPU. With
   no target known, nothing is checked.
2. A region with a guard under the mark (``conditions.guards_under``) is not condition-free, and one with a loop
   whose ``step`` is not 1 is strided (``sch.tensorize`` ignores the step): either stays as code.
3. Main tile (extents equal the description's): ``sch.unannotate(loop, MARK_KEY)`` (a loop annotation makes the
   pattern match fail) then ``sch.tensorize(loop, name)``.
4. Tail tile with constant extents: the intrinsic registered for the marked loop's extent (``by_extent``),
   when its description has the region's extents: ``sch.tensorize``, and when that refuses (it does on
   TailSplit's tail copies: a binding ``i_0 * 8 + i_1`` with ``i_1 < 4`` "can not be blockized", and a unit loop
   does not match), the region is matched as in 5 against that description and the intrinsic's implementation
   is instantiated in place of the marked loop (``instantiate``: its buffer accesses moved to the region's
   buffers at the matched starts).
5. Otherwise the *variable-length* form, when one is registered. ``sch.tensorize`` cannot be used for it: a
   description's parameters must all be handles ("Parameters of the description of the tensor intrinsic should
   be handle only"), so the extent cannot be an operand, and a loop over a free variable in the description is
   compared with the region's extent, never bound to it (tensorize is refused). So this module matches the
   tail itself: the description is specialized to the region's extents by pairing its loops with the region's
   (outermost first), the region's block body (iter vars replaced by their bindings, region loop ``l`` written
   as ``min_l + l_desc``) must equal the description's block body node for node, where every buffer access
   must be the description's index plus a start that does not depend on the loops (trailing dimensions; extra
   leading dimensions must not depend on the loops either). A description whose block has an init (a kernel
   that computes ``C = A @ B`` over the whole reduction) matches only blocks with an init, compared the same way,
   whose reduction iter vars each run over their whole domain along one loop of the region, from its first
   iteration (so the init runs once per region, at its start). The extents must be provably at most the
   description's (enclosing loop ranges and ``Bind`` values are known to the prover). The registered callable
   receives a ``TailMatch`` (buffers with start indices, extents) and returns the statement replacing the
   marked loop, e.g. masked AVX-512 loads and stores whose lane mask is ``ramp(0, 1, 16) < extent``.
6. Layouts: an implementation buffer declared without strides stands for a compact tile (its code may read the
   whole tile as one vector, as ``vpdpbusd`` reads the 64 bytes of a 16 x 4 weight tile). TVM's
   ``LowerMatchBuffer`` binds no strides for it and checks none, so a region of a buffer that is not contiguous
   in memory (an unpacked ``W[N, K]``, whose 16 x 4 tile is rows ``K`` apart) would be read wrongly: such a
   region is neither tensorized (3, 4) nor instantiated, and stays as code. It is contiguous when, over its
   dimensions of extent other than 1, the last has stride 1 and each other one's stride is the next one's times
   its extent (the strides its buffer declares, or row-major ones: a row of a view with strides ``[s, 1]`` is).
7. Anything refused (no tail form, pattern mismatch, ``sch.tensorize`` error) stays as code with its mark removed
   (llvm would warn "Unknown pragma"); the reason (block, loop, the first line of TVM's message) is recorded
   and logged (logger ``tvm_tailsplit``, INFO). A mark lowered past its block (``LowerOpaqueBlock``'s
   ``T.attr(loop_var, "pragma_emit_insn", value)`` above its loop, which TailSplit keeps) has no block to match: it
   is reported as left (``no block under the mark``) and removed the same way.

``sch.tensorize`` checks the pattern itself; a refused region is left unchanged, so the result is never wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock, SBlockRealize

from ..ir_utils import (
    checked_module_pass,
    has_unit_step,
    launched_extent,
    pragma_attributes_as_annotations,
    require_list,
    require_module,
    substitute,
    with_loop,
)
from .conditions import MARK_KEY, Mark, find_marks, loop_vars_in, marked_blocks
from .intrinsics import ensure_builtin_registered, missing_target_features, register_intrinsics
from .tail_forms import TailForms, TailMatch, TailMismatch, tail_intrinsics

__all__ = ["TensorizeMarked", "TensorizeRecord", "instantiate", "tensorize_marked"]

logger = logging.getLogger("tvm_tailsplit")


@dataclass(frozen=True)
class TensorizeRecord:
    """What ``tensorize_marked`` did with one mark. ``action`` is ``"tensorized"`` (main tile, by
    ``sch.tensorize``), ``"instantiated"`` (a main tile ``sch.tensorize`` refused, matched against the description
    and replaced by the implementation), ``"tail_intrinsic"`` (a fixed-size tail intrinsic), ``"variable_length"``
    (the emitter) or ``"left"``."""

    function: str
    loop: str
    block: str
    instruction: str
    action: str
    intrinsic: str | None = None
    reason: str = ""

    def __str__(self) -> str:
        used = f" with {self.intrinsic}" if self.intrinsic and self.action != "left" else ""
        why = f": {self.reason}" if self.reason else ""
        where = f"{self.function}: loop {self.loop} (block {self.block}, mark {self.instruction!r})"
        return f"{where} {self.action}{used}{why}"


def tensorize_marked(mod: tvm.IRModule, *, report: list | None = None) -> tvm.IRModule:
    """Tensorize every condition-free marked region of the PrimFuncs of ``mod`` (an ``IRModule``, after TailSplit;
    anything else is a ``TypeError``) whose shape matches the intrinsic its mark names; tails use a smaller
    intrinsic by extent or the variable-length form; everything else stays as code without its mark.

    When ``report`` is a list, one ``TensorizeRecord`` per mark is appended to it. Every record also goes to the
    ``tvm_tailsplit`` logger: INFO for a mark left as code (with the reason), DEBUG for the others."""
    require_module(mod, "tensorize_marked")
    require_list(report, "tensorize_marked", "report")
    register_intrinsics()
    # A mark lowered past its block (LowerOpaqueBlock's T.attr(loop_var, MARK_KEY, value) above its loop) is handled
    # as the loop's annotation: left as code (no block to match) and removed, not passed on to llvm's codegen
    # ("Unknown pragma pragma_emit_insn").
    functions = {global_var: pragma_attributes_as_annotations(func, MARK_KEY)[0]
                 if isinstance(func, tirx.PrimFunc) else func for global_var, func in mod.functions.items()}
    for global_var, func in functions.items():
        if isinstance(func, tirx.PrimFunc):
            on_blocks = marked_blocks(func)
            if on_blocks:  # (TVM lowers it to a pragma llvm warns about: "Unknown pragma"; nothing is mapped)
                block, value = on_blocks[0]
                raise ValueError(
                    f"{global_var.name_hint}: block {block!r} is annotated {MARK_KEY} = {value!r}: a mark on a block "
                    f"marks nothing; it goes on the outermost loop of the region its instruction covers "
                    f"(sch.annotate(loop, {MARK_KEY!r}, name))"
                )
            for mark in find_marks(func):
                ensure_builtin_registered(mark.instruction)
    for global_var, func in functions.items():
        if isinstance(func, tirx.PrimFunc) and find_marks(func):
            functions[global_var] = _tensorize_function(func, global_var.name_hint, report)
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def TensorizeMarked(report: list | None = None) -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """``tensorize_marked`` as a module pass (``report`` as there)."""
    require_list(report, "TensorizeMarked", "report")

    def transform(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        return tensorize_marked(mod, report=report)

    return checked_module_pass(transform, "TensorizeMarked")


def _tensorize_function(func: tirx.PrimFunc, name: str, report: list | None) -> tirx.PrimFunc:
    seen: set = set()
    while True:
        marks = find_marks(func)
        if not marks:
            return func
        mark = marks[0]
        key = mark.loop.loop_var
        if any(key.same_as(v) for v in seen):
            raise RuntimeError(f"internal error: the mark on loop {key.name} was not removed")
        seen.add(key)
        func, record = _handle(func, mark, name)
        # (a mark left as code at INFO: in the "tailsplit" pipeline no report list can be passed)
        logger.log(logging.INFO if record.action == "left" else logging.DEBUG, "TensorizeMarked %s", record)
        if report is not None:
            report.append(record)


# ---------------------------------------------------------------------------------------------------------------
# one mark


def _handle(func: tirx.PrimFunc, mark: Mark, fname: str) -> tuple[tirx.PrimFunc, TensorizeRecord]:
    value = mark.instruction
    loop_name = mark.loop.loop_var.name
    blocks = mark.blocks()
    block_name = blocks[0] if blocks else "?"
    raw = mark.loop.annotations[MARK_KEY]
    if not isinstance(raw, str):  # (str() of 5 read as a name: "names '5', which is not a registered TensorIntrin")
        raise ValueError(
            f"the mark on loop {loop_name!r} (block {block_name!r}) has the value {raw!r} ({type(raw).__name__}): a "
            f"{MARK_KEY} mark's value is the name of a registered TensorIntrin (a str)"
        )
    intrinsic = s_tir.TensorIntrin.get(value, allow_missing=True)
    forms = tail_intrinsics(value) or TailForms()
    if intrinsic is None:
        raise ValueError(
            f"the mark on loop {loop_name!r} (block {block_name!r}) names {value!r}, which is not a registered "
            "TensorIntrin (register it with tvm.s_tir.TensorIntrin.register)"
        )
    _check_decomposed(mark, intrinsic.desc, value)
    _check_no_thread_binding(mark, block_name, value)

    def record(action: str, used: str | None = None, reason: str = "") -> TensorizeRecord:
        return TensorizeRecord(fname, loop_name, block_name, value, action, used, reason)

    target = _target_of(func)
    missing = missing_target_features(value, target) if target is not None else ()
    if missing:  # LLVM would abort the process when it compiles the instruction for this CPU
        reason = f"target {target} lacks {', '.join(missing)}, which {value!r} needs"
        return _unmark(func, mark.loop), record("left", reason=reason)

    if mark.guards:
        reason = "not condition-free: " + "; ".join(g.describe() for g in mark.guards)
        return _unmark(func, mark.loop), record("left", reason=reason)

    stepped = [loop for loop in loop_vars_in(mark.loop) if not has_unit_step(loop)]
    if stepped:  # sch.tensorize ignores a loop's step: the intrinsic would cover every value of the range
        reason = f"loop {stepped[0].loop_var.name} has step {stepped[0].step}: no intrinsic covers a strided loop"
        return _unmark(func, mark.loop), record("left", reason=reason)

    loops, _ = _perfect_nest(mark.loop)
    extents = tuple(loop.extent for loop in loops) if loops else None
    desc_extents = _description_extents(intrinsic.desc)
    reasons: list[str] = []

    if extents is None or desc_extents is None or _same_constants(extents, desc_extents):  # a main tile
        reason = ""
        if not _has_free_extent(desc_extents):  # TVM decides
            result, reason = _try_tensorize(func, mark, value)
            if result is not None:
                return result, record("tensorized", value)
        if extents is not None and desc_extents is not None:
            # A main tile under a loop with a symbolic start (a piece of a symbolic split) cannot be blockized, and
            # sch.tensorize cannot bind a free extent: match the tile against the description and instantiate the
            # implementation, as for fixed-size tails.
            try:
                replacement = instantiate(_match_tail(func, mark, value, intrinsic.desc), intrinsic.impl)
            except TailMismatch as err:
                if str(err) not in reason:  # (a layout both refuse is said once)
                    reason = "; ".join(filter(None, [reason, f"not instantiated: {err}"]))
            else:
                return _replace_loop(func, mark.loop, replacement), record("instantiated", value, reason)
        return _unmark(func, mark.loop), record("left", reason=reason)

    if extents is not None and all(isinstance(e, tirx.IntImm) for e in extents):
        tail_name = forms.by_extent.get(int(extents[0].value))
        if tail_name is not None:
            tail = s_tir.TensorIntrin.get(tail_name, allow_missing=True)
            if tail is None:
                reasons.append(f"tail intrinsic {tail_name!r} is not registered")
            elif not _same_constants(extents, _description_extents(tail.desc)):
                reasons.append(f"tail intrinsic {tail_name!r} does not have the extents {_show(extents)}")
            else:
                result, reason = _try_tensorize(func, mark, tail_name)
                if result is not None:
                    return result, record("tail_intrinsic", tail_name)
                try:  # TailSplit's tails (bindings i_0 * 16 + i_1, i_1 < 4) cannot be blockized: instantiate
                    replacement = instantiate(_match_tail(func, mark, tail_name, tail.desc), tail.impl)
                except TailMismatch as err:
                    reasons.append(f"{tail_name}: {reason}; not instantiated: {err}")
                else:
                    return _replace_loop(func, mark.loop, replacement), record("tail_intrinsic", tail_name)

    if forms.variable_length is not None:
        try:
            match = _match_tail(func, mark, value, intrinsic.desc)
            replacement = forms.variable_length(match)
        except TailMismatch as err:
            reasons.append(f"variable-length form refused: {err}")
        else:
            _check_emitted(replacement, forms.variable_length, value, loop_name, block_name)
            return _replace_loop(func, mark.loop, replacement), record("variable_length", value)
    elif not reasons:
        what = _show(extents) if extents is not None else "a nest that is not perfect"
        reasons.append(f"tail {what} and no tail form registered for {value!r}")
    return _unmark(func, mark.loop), record("left", reason="; ".join(reasons))


def _check_emitted(replacement: object, emitter: Callable, value: str, loop_name: str, block_name: str) -> None:
    """Raise ``TypeError`` naming the emitter, the mark and its loop and block unless the variable-length emitter
    returned a statement (anything else failed inside TVM's mutator, naming none of them)."""
    if not isinstance(replacement, tirx.Stmt):
        emitter_name = getattr(emitter, "__qualname__", repr(emitter))
        raise TypeError(
            f"the variable-length tail form {emitter_name} registered for {value!r} returned "
            f"{type(replacement).__name__} ({replacement!r:.60}) for loop {loop_name!r} (block {block_name!r}); it "
            "must return a tirx.Stmt (wrap an expression in tirx.Evaluate, several statements in tirx.SeqStmt) or "
            "raise TailMismatch to refuse the tail"
        )


def _target_of(func: tirx.PrimFunc) -> tvm.target.Target | None:
    """The target ``func`` is compiled for: its ``target`` attribute (``tvm.compile`` binds it before the TIR
    pipeline), else the current target (``with target:``), else ``None``."""
    target = func.attrs.get("target") if func.attrs else None
    return target if target is not None else tvm.target.Target.current(allow_none=True)


def _show(extents) -> str:
    return "(" + ", ".join(str(e) for e in extents) + ")"


def _same_constants(extents, desc_extents) -> bool:
    """Every extent equals the description's constant (a free extent of the description matches any)."""
    if desc_extents is None or len(extents) != len(desc_extents):
        return False
    return all(
        isinstance(b, tirx.Var) or (isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm) and a.value == b.value)
        for a, b in zip(extents, desc_extents, strict=True)
    )


def _has_free_extent(desc_extents) -> bool:
    return desc_extents is not None and any(isinstance(e, tirx.Var) for e in desc_extents)


def _check_decomposed(mark: Mark, desc: tirx.PrimFunc, value: str) -> None:
    desc_inits = []
    tvm_ffi.structural_walk(desc.body, (SBlock, lambda b: desc_inits.append(b) if b.init is not None else None))
    if desc_inits:
        return
    with_init: list[str] = []
    tvm_ffi.structural_walk(mark.loop, (SBlock, lambda b: with_init.append(b.name_hint) if b.init else None))
    if with_init:
        raise ValueError(
            f"block {with_init[0]!r} under the mark on loop {mark.loop.loop_var.name!r} ({value!r}) still has its "
            "init statement, and the intrinsic covers only the update: call sch.decompose_reduction(block, loop) "
            "with a loop above the mark before marking"
        )


def _check_no_thread_binding(mark: Mark, block_name: str, value: str) -> None:
    """A loop under the mark bound to a GPU thread is an error: the instruction replaces every loop of the region,
    and the binding (part of the kernel's launch) would go with it."""
    for loop in loop_vars_in(mark.loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            where = "itself" if loop.same_as(mark.loop) else "under it"
            raise ValueError(
                f"the mark on loop {mark.loop.loop_var.name!r} (block {block_name!r}) names {value!r}, but loop "
                f"{loop.loop_var.name!r} {where} is bound to {loop.thread_binding.thread_tag}: an instruction "
                "replaces every loop under its mark, and a thread binding cannot be replaced (mark a loop inside "
                "the thread-bound ones)"
            )


def _perfect_nest(loop: tirx.For) -> tuple[tuple[tirx.For, ...] | None, SBlockRealize | None]:
    """The loops from ``loop`` down to the one block they contain, or ``(None, None)`` if not a perfect nest."""
    loops = []
    node = loop
    while isinstance(node, tirx.For):
        loops.append(node)
        node = node.body
    if isinstance(node, SBlockRealize):
        return tuple(loops), node
    return None, None


def _description_nest(desc: tirx.PrimFunc) -> tuple[tuple[tirx.For, ...] | None, SBlockRealize | None]:
    body = desc.body
    if isinstance(body, SBlockRealize):  # the "root" block of the description
        body = body.block.body
    return _perfect_nest(body) if isinstance(body, tirx.For) else (None, None)


def _description_extents(desc: tirx.PrimFunc):
    loops, _ = _description_nest(desc)
    return tuple(loop.extent for loop in loops) if loops else None


def _first_line(err: Exception) -> str:
    """The informative first line of a TVM error (the ``Error message:`` line of a ScheduleError)."""
    lines = str(err).splitlines()
    for line in lines:
        if line.strip().startswith("Error message:"):
            return line.strip()[len("Error message:") :].strip()
    for line in lines:
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "^")):
            return line
    return type(err).__name__


def _try_tensorize(func: tirx.PrimFunc, mark: Mark, name: str) -> tuple[tirx.PrimFunc | None, str]:
    """``sch.tensorize`` on the marked loop; ``(new function, "")`` or ``(None, reason)`` (input unchanged)."""
    blocks = mark.blocks()
    if not blocks:  # (a module lowered past its blocks: LowerOpaqueBlock)
        return None, "no block under the mark (sch.tensorize and the tail forms match blocks)"
    try:
        sch = s_tir.Schedule(func)
        loop_rv = None
        for rv in sch.get_loops(sch.get_sblock(blocks[0])):
            if sch.get(rv).loop_var.same_as(mark.loop.loop_var):
                loop_rv = rv
        if loop_rv is None:
            return None, f"the marked loop is not found above block {blocks[0]!r}"
        sch.unannotate(loop_rv, MARK_KEY)
        sch.tensorize(loop_rv, name)
    except (RuntimeError, ValueError, TypeError) as err:  # ScheduleError and TVM internal errors are RuntimeErrors
        return None, f"sch.tensorize refused: {_first_line(err)}"
    result = sch.mod["main"]
    existing = _match_buffers(func)
    for matched in _match_buffers(result):
        if any(matched.same_as(m) for m in existing):
            continue
        region = matched.source
        why = _not_compact(matched.buffer, region.source, [r.extent for r in region.region])
        if why:
            return None, f"not tensorized: {why}"
    return result, ""


def _match_buffers(func: tirx.PrimFunc) -> list:
    found: list = []
    tvm_ffi.structural_walk(func.body, (SBlock, lambda block: found.extend(block.match_buffers)))
    return found


def _not_compact(target: tirx.Buffer, source: tirx.Buffer, extents) -> str:
    """Why the region of ``source`` with ``extents`` (one per dimension of ``source``) is not the compact block of
    memory an intrinsic's buffer ``target`` declared without strides stands for ("" when it is, or when ``target``
    declares strides). TVM's ``LowerMatchBuffer`` binds the strides a buffer declares and checks nothing for one
    that declares none: its implementation then reads the tile as contiguous (``vload`` of 64 bytes). The region
    is contiguous when, over its dimensions of extent other than 1, the last has stride 1 and each other one's
    stride is the next one's stride times its extent (``source``'s strides, or the row-major ones of its shape
    when it declares none: past its first dimension of extent other than 1, it covers each dimension whole)."""
    if target.strides:
        return ""
    analyzer = sym.Analyzer()
    strides = list(source.strides) or _row_major_strides(source.shape)
    dims = [(stride, extent) for stride, extent in zip(strides, extents, strict=True)
            if not analyzer.can_prove_equal(extent, 1)]
    covered = not dims or (analyzer.can_prove_equal(dims[-1][0], 1) and all(
        analyzer.can_prove_equal(outer_stride, inner_stride * inner_extent)
        for (outer_stride, _), (inner_stride, inner_extent) in zip(dims, dims[1:], strict=False)))
    if covered:
        return ""
    return (f"buffer {source.name} {list(source.shape)}{' strided' if source.strides else ''}: the region "
            f"{_show(extents)} is not contiguous in memory, and the implementation reads {target.name} as a compact "
            f"{_show(target.shape)} tile (lay the operand out in whole tiles, e.g. packed, or declare strides in the "
            "implementation)")


def _row_major_strides(shape) -> list:
    """The strides of a compact row-major buffer of ``shape`` (each the product of the sizes after it)."""
    strides: list = []
    step = tirx.const(1, shape[-1].ty.dtype) if shape else None
    for size in reversed(list(shape)):
        strides.insert(0, step)
        step = step * (size if size.ty.dtype == step.ty.dtype else tirx.Cast(step.ty.dtype, size))
    return strides


# ---------------------------------------------------------------------------------------------------------------
# IR surgery


def _map_loop(func: tirx.PrimFunc, loop: tirx.For, make: Callable[[tirx.For], tirx.Stmt]) -> tirx.PrimFunc:
    target = loop.loop_var

    def on_for(node: tirx.For, mutator):
        if node.loop_var.same_as(target):
            return make(node)
        return mutator.default_mutate(node)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)]))


def _unmark(func: tirx.PrimFunc, loop: tirx.For) -> tirx.PrimFunc:
    def unmark(node: tirx.For) -> tirx.For:
        annotations = {k: v for k, v in node.annotations.items() if k != MARK_KEY}
        return with_loop(node, annotations=annotations)

    return _map_loop(func, loop, unmark)


def _replace_loop(func: tirx.PrimFunc, loop: tirx.For, stmt: tirx.Stmt) -> tirx.PrimFunc:
    return _map_loop(func, loop, lambda _: stmt)


# ---------------------------------------------------------------------------------------------------------------
# matching a tail against a description


def _scope_of(func: tirx.PrimFunc, loop: tirx.For) -> tuple[list[tirx.For], dict]:
    """The loops enclosing ``loop`` and the ``Bind`` values visible at it."""
    target = loop.loop_var
    found: list = []

    def walk(node, loops: list, binds: dict) -> bool:
        if isinstance(node, tirx.For):
            if node.loop_var.same_as(target):
                found.append((loops, binds))
                return True
            return walk(node.body, loops + [node], binds)
        if isinstance(node, SBlockRealize):
            return walk(node.block.body, loops, binds)
        if isinstance(node, tirx.SeqStmt):
            binds = dict(binds)
            for child in node.seq:
                if isinstance(child, tirx.Bind):
                    binds[child.var] = child.value
                elif walk(child, loops, binds):
                    return True
            return False
        if isinstance(node, tirx.IfThenElse):
            return walk(node.then_case, loops, binds) or (
                node.else_case is not None and walk(node.else_case, loops, binds)
            )
        if hasattr(node, "body") and isinstance(node.body, tirx.Stmt):
            return walk(node.body, loops, binds)
        return False

    walk(func.body, [], {})
    return found[0] if found else ([], {})


def _match_tail(func: tirx.PrimFunc, mark: Mark, name: str, desc: tirx.PrimFunc) -> TailMatch:
    loops, realize = _perfect_nest(mark.loop)
    if loops is None:
        raise TailMismatch("the marked region is not a perfect loop nest over one block")
    desc_loops, desc_realize = _description_nest(desc)
    if desc_loops is None:
        raise TailMismatch(f"the description of {name!r} is not a perfect loop nest")
    if len(loops) != len(desc_loops):
        raise TailMismatch(f"{len(loops)} loops under the mark, the description of {name!r} has {len(desc_loops)}")
    block, desc_block = realize.block, desc_realize.block
    if (block.init is None) != (desc_block.init is None):
        has, lacks = ("the block", "the description's") if block.init is not None else ("the description's",
                                                                                        "the block")
        raise TailMismatch(f"block {block.name_hint!r}: {has} has an init statement, {lacks} has none")

    enclosing, binds = _scope_of(func, mark.loop)
    analyzer = sym.Analyzer()
    for outer in enclosing:
        if outer.loop_var.ty.dtype.startswith("int"):
            analyzer.bind(outer.loop_var, Range.from_min_extent(outer.min, launched_extent(outer)))
    resolved_binds = {}
    for var, value in binds.items():  # later binds may use earlier ones
        resolved_binds[var] = substitute(value, resolved_binds)
    free_extents = {}  # a free extent variable of the description -> the region's extent
    for loop, desc_loop in zip(loops, desc_loops, strict=True):
        if isinstance(desc_loop.extent, tirx.Var):
            free_extents[desc_loop.extent] = loop.extent
            continue
        bound = substitute(loop.extent, resolved_binds)
        if not analyzer.can_prove(bound <= desc_loop.extent):
            raise TailMismatch(
                f"extent {loop.extent} of loop {loop.loop_var.name} is not provably <= {desc_loop.extent}"
            )

    def body_of(block_realize: SBlockRealize, renaming: dict, part: str = "body"):
        binding = {iv.var: v for iv, v in zip(block_realize.block.iter_vars, block_realize.iter_values, strict=True)}
        return substitute(substitute(getattr(block_realize.block, part), binding), renaming)

    desc_vars = [d.loop_var for d in desc_loops]
    for loop, desc_loop in zip(loops, desc_loops, strict=True):
        # the region's loops run over a prefix of the description's ranges, [0, the region's extent): its indices
        # are compared over that prefix (an index constant over the region, e.g. (j + 5) // 16 for j < 11, need
        # not be over the description's whole range)
        extent = substitute(loop.extent, resolved_binds)
        analyzer.bind(desc_loop.loop_var, Range.from_min_extent(desc_loop.min, extent))
    desc_body = body_of(desc_realize, {})
    renaming = {
        lp.loop_var: (d if d.ty.dtype == lp.loop_var.ty.dtype else tirx.Cast(lp.loop_var.ty.dtype, d)) + lp.min
        for lp, d in zip(loops, desc_vars, strict=True)
    }
    region_body = body_of(realize, renaming)
    matcher = _Matcher(desc_vars, analyzer)
    matcher.match(desc_body, region_body)
    if block.init is not None:
        _check_init_starts_the_region(realize, loops, renaming, desc_vars, analyzer)
        matcher.match(body_of(desc_realize, {}, "init"), body_of(realize, renaming, "init"))
    entries = list(matcher.buffers.items())
    for position, (desc_a, (buffer_a, starts_a)) in enumerate(entries):
        for desc_b, (buffer_b, starts_b) in entries[position + 1 :]:
            if not buffer_a.same_as(buffer_b):  # (operands of different ranks, e.g. a packed panel, compare here)
                continue
            same = all(analyzer.can_prove_equal(a, b) for a, b in zip(starts_a, starts_b, strict=True))
            if not same:  # e.g. C[v + 1] = C[v] * B[v]: a recurrence
                raise TailMismatch(
                    f"{buffer_a.name} is both {desc_a.name} and {desc_b.name} at different starts (a dependence)"
                )
    thread_bound = any(lp.kind == tirx.ForKind.THREAD_BINDING for lp in [*enclosing, *loops])
    return TailMatch(
        intrinsic=name,
        block_name=realize.block.name_hint,
        loops=loops,
        extents=tuple(loop.extent for loop in loops),
        buffers={d.name: (r, starts) for d, (r, starts) in matcher.buffers.items()},
        thread_bound=thread_bound,
        free_extents={var.name: extent for var, extent in free_extents.items()},
    )


def _check_init_starts_the_region(realize: SBlockRealize, loops, renaming: dict, desc_vars: list, analyzer) -> None:
    """A block's init runs at the first iteration of its reduction: the description's init runs once per tile at
    its start, so the region's must too. Each reduction iter var must be bound to the start of its domain plus
    one of the region's loops, and that loop must cover the whole domain (else the init would run in another
    execution of the region, or in none)."""
    for iter_var, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if iter_var.iter_type != tirx.IterVar.CommReduce:
            continue
        offset = substitute(value, renaming) - iter_var.dom.min
        covering = [
            loop
            for loop, desc_var in zip(loops, desc_vars, strict=True)
            if analyzer.can_prove_equal(offset, desc_var) and analyzer.can_prove_equal(loop.extent, iter_var.dom.extent)
        ]
        if not covering:
            raise TailMismatch(
                f"the init of block {realize.block.name_hint!r} does not run at the start of the region: its "
                f"reduction {iter_var.var.name} = {value} does not cover [{iter_var.dom.min}, "
                f"{iter_var.dom.min} + {iter_var.dom.extent}) with one of the region's loops"
            )


def instantiate(match: TailMatch, implementation: tirx.PrimFunc) -> tirx.Stmt:
    """The body of ``implementation`` acting on the matched region: its buffer accesses are moved to the region's
    buffers at the match's start indices (trailing dimensions; a ``Ramp`` index keeps its lanes), nested blocks
    without iter vars are inlined (their buffers become ``AllocBuffer`` statements), and the free extent variables
    of its buffer shapes take the region's extents (``match.free_extents``, by name). Raises ``TailMismatch``
    when the implementation uses its buffers otherwise (pointers, ``access_ptr``), has blocks with iter vars, or
    has a free extent the match does not bind. Every instantiation renews the implementation's definitions (its
    loops, its local buffers: ``s_tir.renew_defs``): a variable is defined at one site of a function only."""
    implementation = s_tir.renew_defs(implementation)
    params = {p.name: p for p in implementation.params if not isinstance(p.ty, tvm.ir.PrimType)}
    extents = {}
    for buffer in params.values():
        for dim in buffer.shape:
            if isinstance(dim, tirx.Var):
                if dim.name not in match.free_extents:
                    raise TailMismatch(f"the implementation's extent {dim.name} is not bound by the match")
                extents[dim] = match.free_extents[dim.name]
    mapping = []
    for name, (buffer, starts) in match.buffers.items():
        if name not in params:
            raise TailMismatch(f"the implementation has no buffer {name!r}")
        param = params[name]
        shape = [substitute(dim, extents) for dim in param.shape]
        why = _not_compact(param, buffer, [tirx.const(1, "int32")] * (len(starts) - len(shape)) + shape)
        if why:
            raise TailMismatch(why)
        mapping.append((param, buffer, starts))

    def target(buffer):
        return next(((b, s) for p, b, s in mapping if p.same_as(buffer)), None)

    def relocate(starts, indices):
        extra = len(starts) - len(indices)
        if extra < 0:
            raise TailMismatch("an implementation buffer has more dimensions than the region's")
        moved = list(starts[:extra])
        for start, index in zip(starts[extra:], indices, strict=True):
            if isinstance(index, tirx.Ramp):
                moved.append(tirx.Ramp(start + index.base, index.stride, index.lanes))
            elif index.ty.dtype.lanes > 1:
                moved.append(tirx.Broadcast(start, index.ty.dtype.lanes) + index)
            else:
                moved.append(start + index)
        return moved

    def on_store(store: tirx.BufferStore):
        found = target(store.buffer)
        return store if found is None else tirx.BufferStore(found[0], store.value, relocate(found[1], store.indices))

    def on_load(load):
        found = target(load.source)
        return load if found is None else tirx.BufferLoad(found[0], relocate(found[1], load.indices))

    def on_realize(realize: SBlockRealize):
        block = realize.block
        if block.iter_vars or block.match_buffers or block.init is not None:
            raise TailMismatch(f"the implementation's block {block.name_hint!r} has iter vars, match buffers or init")
        if not block.alloc_buffers:
            return block.body
        return tirx.SeqStmt([tirx.AllocBuffer(b) for b in block.alloc_buffers] + [block.body])

    body = tvm_ffi.structural_map(implementation.body, [(SBlockRealize, on_realize)], order="post")
    body = tvm_ffi.structural_map(body, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store)], order="post")
    left: list = []
    tvm_ffi.structural_walk(body, (tvm.ir.Var, lambda v: left.append(v) if target(v) is not None else None))
    if left:
        raise TailMismatch(f"the implementation uses buffer {left[0].name} other than by loads and stores")
    return _fold_after_binding(substitute(body, extents)) if extents else body


def _fold_after_binding(body: tirx.Stmt) -> tirx.Stmt:
    """Once the free extents are bound: replace each ``if`` whose condition is a constant by the branch taken, and
    fold loop extents and access indices that became constant (``depth // 4`` with ``depth = 17`` -> ``4``)."""
    analyzer = sym.Analyzer()

    def on_if(node: tirx.IfThenElse):
        condition = analyzer.simplify(node.condition)
        if not isinstance(condition, tirx.IntImm):
            return node
        taken = node.then_case if condition.value else node.else_case
        return taken if taken is not None else tirx.Evaluate(tirx.const(0, "int32"))

    def on_for(node: tirx.For):
        extent = analyzer.simplify(node.extent)
        if not isinstance(extent, tirx.IntImm) or isinstance(node.extent, tirx.IntImm):
            return node
        return with_loop(node, extent=extent)

    def on_load(node):
        return tirx.BufferLoad(node.source, [analyzer.simplify(index) for index in node.indices])

    def on_store(node: tirx.BufferStore):
        return tirx.BufferStore(node.buffer, node.value, [analyzer.simplify(index) for index in node.indices])

    return tvm_ffi.structural_map(
        body, [(tirx.IfThenElse, on_if), (tirx.For, on_for), (tvm.ir.TensorLoad, on_load),
               (tirx.BufferStore, on_store)], order="post"
    )


class _Matcher:
    """Node-for-node comparison of a description's block body with a region's (both over description loop vars)."""

    def __init__(self, desc_vars: list, analyzer: sym.Analyzer):
        self.desc_vars = desc_vars
        self.zero = {v: tirx.const(0, v.ty.dtype) for v in desc_vars}
        self.analyzer = analyzer
        self.buffers: dict = {}  # description buffer -> (region buffer, start indices)

    def fail(self, what: str) -> None:
        raise TailMismatch(f"the block does not match the description: {what}")

    def access(self, desc_buffer, desc_indices, buffer, indices) -> None:
        if desc_buffer.dtype != buffer.dtype:
            self.fail(f"{buffer.name} is {buffer.dtype}, the description's {desc_buffer.name} is {desc_buffer.dtype}")
        extra = len(indices) - len(desc_indices)
        if extra < 0:
            self.fail(f"{buffer.name} has fewer dimensions than {desc_buffer.name}")
        starts = []
        for position, index in enumerate(indices):
            start = self.analyzer.simplify(substitute(index, self.zero))
            if position < extra:
                if not self.analyzer.can_prove_equal(index, start):
                    self.fail(f"a leading index of {buffer.name} depends on the covered loops: {index}")
            elif not self.analyzer.can_prove_equal(index - start, desc_indices[position - extra]):
                self.fail(f"index {index} of {buffer.name} is not a start plus {desc_indices[position - extra]}")
            starts.append(start)
        known = next((v for k, v in self.buffers.items() if k.same_as(desc_buffer)), None)
        if known is None:
            self.buffers[desc_buffer] = (buffer, tuple(starts))
            return
        if not known[0].same_as(buffer):
            self.fail(f"{desc_buffer.name} is both {known[0].name} and {buffer.name}")
        if not all(self.analyzer.can_prove_equal(a, b) for a, b in zip(known[1], starts, strict=True)):
            self.fail(f"{buffer.name} is accessed at two different starts")

    def match(self, desc, region) -> None:
        if isinstance(desc, tirx.BufferStore):
            if not isinstance(region, tirx.BufferStore):
                self.fail(f"expected a store, found {type(region).__name__}")
            self.access(desc.buffer, desc.indices, region.buffer, region.indices)
            self.match(desc.value, region.value)
        elif isinstance(desc, tvm.ir.TensorLoad):
            if not isinstance(region, tvm.ir.TensorLoad):
                self.fail(f"expected a load of {desc.source.name}, found {region}")
            self.access(desc.source, desc.indices, region.source, region.indices)
        elif isinstance(desc, (tirx.FloatImm, tirx.IntImm)):
            if type(desc) is not type(region) or desc.ty.dtype != region.ty.dtype or desc.value != region.value:
                self.fail(f"expected {desc}, found {region}")
        elif isinstance(desc, tirx.Cast):
            if not isinstance(region, tirx.Cast) or desc.ty.dtype != region.ty.dtype:
                self.fail(f"expected {desc}, found {region}")
            self.match(desc.value, region.value)
        elif hasattr(desc, "a") and hasattr(desc, "b"):
            if type(desc) is not type(region):
                self.fail(f"expected {type(desc).__name__}, found {region}")
            self.match(desc.a, region.a)
            self.match(desc.b, region.b)
        else:
            self.fail(f"unsupported node {type(desc).__name__} in the description")
