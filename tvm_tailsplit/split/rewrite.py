"""The IR surgery: turn a split plan into statements.

Every loop piece becomes a copy of the loop over its interval (pieces below a mark are rebased to start at
0, so that the mark's loops look like the instruction's description); every guard case becomes an ``if`` over
its range (disjoint ``if``s, never an if/else chain: TVM 0.27's ``HoistIfThenElse`` miscompiles those inside
loop nests); every block copy gets fresh iter vars, a unique name (``B`` when it is emitted once, ``B_0``,
``B_1``, ... otherwise) and keeps only the predicate atoms and ``if`` branches the plan kept. An opaque block
with marks inside is rebuilt (same reads, writes, annotations and predicate, named like a block copy) around
the statements emitted for its body. All loop variables and block iter vars are defined afresh, so the copies
of one loop never share a definition.

Symbolic pieces below a mark are emitted as ``for v in range(v_extent)`` with ``v_start`` / ``v_extent``
bound by ``Bind`` statements just above the mark (``if v_extent > 0`` guards the mark when the range may be
empty); pieces whose ends depend on loops below the mark keep their ``min``/``max`` in the loop header. A copy
of a vectorized or unrolled loop whose extent is not a constant is emitted serial (TVM vectorizes and unrolls
only constant extents); the report says so.

**Guards inside a branch of an if/else.** The guards emitted here (guard-chain arms, ``if v_extent > 0``,
guarded cases) have no ``else`` and often do not depend on the loops around them. TVM 0.27's
``HoistIfThenElse`` (in its default pipeline) hoists such an ``if`` above the outermost loop it does not depend
on, also out of a branch of an enclosing if/else, and then the *other* branch only runs when the hoisted
condition holds. It never hoists out of a loop whose body holds a sequence of statements. So a kept if/else
whose branches hold a guard emitted here is emitted as two disjoint ``if``s, ``if c: A`` and ``if not c: B``
(``c`` is bound first by a ``Bind`` when it reads memory, which ``A`` may write): the sequence keeps every
guard below the innermost loop around it.

**``likely`` hints are dropped from the emitted nest.** TVM 0.27's ``LoopPartition`` (in its default pipeline)
partitions a loop around a ``T.likely`` condition, and it miscompiles the loops emitted here whose extents clamp an
offset (``for j in range(T.max(1 - T.max(0, i * 3 + m * 2 - n - 11), 0))`` around ``if not T.likely(-1 * (j +
T.max(0, ...)) + 3 * n - m >= 3)``: stores far outside the buffer,
``tests/split/test_split_regressions.py::test_likely_hints_kept_under_the_mark_are_dropped``). ``likely`` only
hints at a condition's value and TailSplit has already cut the loops at the affine conditions it can, so every
``T.likely(c)`` of a nest TailSplit rewrites is emitted as ``c``.

Nothing is decided here: the plan (``plan.py``) says what to emit.
"""

from __future__ import annotations

from contextlib import contextmanager

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import MatchBufferRegion, SBlock, SBlockRealize

from ..ir_utils import conjunction, drop_loop_annotation, substitute, with_loop
from .conditions import MARK_KEY, has_load_or_call, is_mark
from .intervals import as_expr
from .plan import (
    AttrPlan,
    GuardChain,
    IfPlan,
    LoopPlan,
    Note,
    OpaqueBlockPlan,
    RealizePlan,
    SequencePlan,
    VerbatimPlan,
    WholeLoopPlan,
)

__all__ = ["Emitter", "is_temporary_block_name", "remove_marks", "unique_block_names"]


# Loop kinds TVM lowers only with a constant extent (VectorizeLoop, UnrollLoop): a copy whose extent is an
# expression is emitted serial.
_CONSTANT_EXTENT_KINDS = {tirx.ForKind.VECTORIZED: "vectorizes", tirx.ForKind.UNROLLED: "unrolls"}


def _no_op() -> tirx.Stmt:
    return tirx.Evaluate(tirx.const(0, "int32"))


class Emitter:
    """Emits statements from plans, with fresh definitions for every loop and block copy."""

    def __init__(self) -> None:
        self.var_map: dict = {}
        self.block_copies: dict[str, int] = {}
        self.loop_copies: dict = {}  # original loop variable -> the loop variables of its copies, in order
        self._hoisted: list[tuple[list, list]] = []  # per mark being emitted: its Binds and emptiness guards
        self.notes: list[Note] = []  # see take_notes
        self._bound_extents: dict = {}  # extent variable bound above a mark -> its value (for the notes)
        self._guards_emitted = 0  # else-less ifs of TailSplit's own (chain arms, emptiness guards, cases)

    def _fresh_var(self, var) -> tirx.Var:
        return tirx.Var(var.name, var.ty)

    def emit_nest(self, plan) -> tirx.Stmt:
        """The statements of the plan of a whole loop nest, without ``likely`` hints (see the module docstring)."""
        return tvm_ffi.structural_map(self.emit(plan), (tvm.ir.Call, _without_likely), order="post")

    def emit(self, plan) -> tirx.Stmt:
        if isinstance(plan, SequencePlan):
            return tirx.SeqStmt([self.emit(item) for item in plan.items])
        if isinstance(plan, LoopPlan):
            return self._emit_loop(plan)
        if isinstance(plan, WholeLoopPlan):
            return self._emit_whole_loop(plan)
        if isinstance(plan, GuardChain):
            return self._emit_chain(plan)
        if isinstance(plan, RealizePlan):
            return self._emit_realize(plan)
        if isinstance(plan, OpaqueBlockPlan):
            return self._emit_opaque_block(plan)
        if isinstance(plan, AttrPlan):
            stmt = plan.stmt
            if isinstance(stmt, tirx.While):
                return tirx.While(substitute(stmt.condition, self.var_map), self.emit(plan.body))
            return tirx.AttrStmt(stmt.node, stmt.attr_key, substitute(stmt.value, self.var_map), self.emit(plan.body))
        if isinstance(plan, IfPlan):
            return self._emit_if(plan)
        if isinstance(plan, VerbatimPlan):
            return self._emit_verbatim(plan.stmt)
        raise TypeError(f"unknown plan node {type(plan).__name__}")

    def _emit_loop(self, plan: LoopPlan) -> tirx.Stmt:
        loop = plan.loop
        var = loop.loop_var
        previous = self.var_map.get(var)
        copies = []
        dtype = var.ty.dtype
        for piece in plan.pieces:
            new_var = self._fresh_var(var)
            with self._mark_scope(loop) as wrap:
                if isinstance(piece.lo, int) and isinstance(piece.hi, int):
                    start, extent, offset = self._constant_bounds(piece, dtype)
                else:
                    start, extent, offset = self._symbolic_bounds(loop, piece)
                self.var_map[var] = new_var if offset is None else new_var + offset
                copies.append(wrap(self._copy_loop(loop, new_var, start, extent, piece.body)))
        self._restore(var, previous)
        return copies[0] if len(copies) == 1 else tirx.SeqStmt(copies)

    @staticmethod
    def _constant_bounds(piece, dtype: str):
        """``(start, extent, offset)`` of a piece with integer ends."""
        extent = tirx.const(piece.hi - piece.lo, dtype)
        if piece.rebased and piece.lo != 0:
            return tirx.const(0, dtype), extent, tirx.const(piece.lo, dtype)
        return tirx.const(piece.lo, dtype), extent, None

    def _symbolic_bounds(self, loop: tirx.For, piece):
        """``(start, extent, offset)`` of a piece with symbolic ends; hoisted ones are bound above the mark."""
        var = loop.loop_var
        dtype = var.ty.dtype
        lo, hi = (substitute(as_expr(end, dtype), self.var_map) for end in (piece.lo, piece.hi))
        extent = hi - lo
        zero = tirx.const(0, dtype)
        if not piece.rebased:
            return lo, tirx.Max(extent, zero) if piece.may_be_empty else extent, None
        if piece.hoisted and self._hoisted:
            bindings, guards = self._hoisted[-1]
            offset = None
            if not (isinstance(lo, tirx.IntImm) and lo.value == 0):
                offset = tirx.Var(f"{var.name}_start", var.ty)
                bindings.append(tirx.Bind(offset, lo))
                extent = hi - offset
            extent_var = tirx.Var(f"{var.name}_extent", var.ty)
            if piece.may_be_empty and not is_mark(loop):
                extent = tirx.Max(extent, zero)  # a guard above the mark would skip the loop's siblings too
            bindings.append(tirx.Bind(extent_var, extent))
            self._bound_extents[extent_var] = extent
            if piece.may_be_empty and is_mark(loop):
                guards.append(extent_var > zero)
            return zero, extent_var, offset
        offset = None if isinstance(lo, tirx.IntImm) and lo.value == 0 else lo
        return zero, tirx.Max(extent, zero) if piece.may_be_empty else extent, offset

    @contextmanager
    def _mark_scope(self, loop: tirx.For):
        """Around the emission of a mark: collects the Binds and guards of the symbolic pieces below it and
        yields the function that puts them above the emitted loop."""
        if not is_mark(loop):
            yield lambda stmt: stmt
            return
        bindings: list = []
        guards: list = []
        self._hoisted.append((bindings, guards))

        def wrap(stmt):
            if guards:
                stmt = self._guard(conjunction(guards), stmt)
            return tirx.SeqStmt([*bindings, stmt]) if bindings else stmt

        try:
            yield wrap
        finally:
            self._hoisted.pop()

    def _emit_whole_loop(self, plan: WholeLoopPlan) -> tirx.Stmt:
        loop = plan.loop
        var = loop.loop_var
        previous = self.var_map.get(var)
        start, extent = substitute(loop.min, self.var_map), substitute(loop.extent, self.var_map)
        new_var = self._fresh_var(var)
        self.var_map[var] = new_var
        with self._mark_scope(loop) as wrap:
            result = wrap(self._copy_loop(loop, new_var, start, extent, plan.body))
        self._restore(var, previous)
        return result

    def _copy_loop(self, loop: tirx.For, new_var, start, extent, body_plan) -> tirx.For:
        self.loop_copies.setdefault(loop.loop_var, []).append(new_var)
        body = self.emit(body_plan)
        thread_binding = None
        if loop.thread_binding is not None:
            binding = loop.thread_binding
            thread_binding = tirx.IterVar(binding.dom, new_var, binding.iter_type, binding.thread_tag)
        kind = loop.kind
        if kind in _CONSTANT_EXTENT_KINDS:
            constant = tvm.sym.Analyzer().simplify(extent)
            if isinstance(constant, tirx.IntImm):
                extent = constant
            else:
                kind = tirx.ForKind.SERIAL
                how = _CONSTANT_EXTENT_KINDS[loop.kind]
                shown = self._bound_extents.get(extent, extent)
                note = Note(f"loop {loop.loop_var.name}",
                            f"the copy of extent {shown} is serial: TVM {how} only loops of constant extent")
                if note not in self.notes:  # each copy of an enclosing split loop makes one such copy
                    self.notes.append(note)
        return with_loop(loop, loop_var=new_var, min=start, extent=extent, kind=kind, body=body,
                         thread_binding=thread_binding)

    def take_notes(self) -> list[Note]:
        """What the emission changed beyond the plan (copies made serial) since the last call."""
        notes, self.notes = self.notes, []
        return notes

    def _restore(self, var, previous) -> None:
        if previous is None:
            self.var_map.pop(var, None)
        else:
            self.var_map[var] = previous

    def _emit_chain(self, plan: GuardChain) -> tirx.Stmt:
        """One ``if`` per case with the case's whole range as its condition, and no ``else``: the cases are
        disjoint, and TVM 0.27's ``HoistIfThenElse`` miscompiles nested if/else chains inside loop nests."""
        var = self.var_map.get(plan.loop.loop_var, plan.loop.loop_var)
        dtype = plan.loop.loop_var.ty.dtype
        arms = []
        for case in plan.cases:
            if isinstance(case.lo, int) and isinstance(case.hi, int):
                if case.hi - case.lo == 1:
                    conditions = [tirx.EQ(var, tirx.const(case.lo, dtype))]
                else:
                    conditions = []
                    if case.lo > plan.range_lo:
                        conditions.append(var >= tirx.const(case.lo, dtype))
                    if case.hi < plan.range_hi:
                        conditions.append(var < tirx.const(case.hi, dtype))
            else:
                conditions = []
                if not tvm_ffi.structural_equal(case.lo, plan.range_lo):
                    conditions.append(var >= substitute(case.lo, self.var_map))
                if not tvm_ffi.structural_equal(case.hi, plan.range_hi):
                    conditions.append(var < substitute(case.hi, self.var_map))
            body = self.emit(case.body)
            arms.append(self._guard(conjunction(conditions), body) if conditions else body)
        return arms[0] if len(arms) == 1 else tirx.SeqStmt(arms)

    def _guard(self, condition, body) -> tirx.Stmt:
        """``if condition: body`` for a guard of TailSplit's own (counted: see ``_emit_if``)."""
        self._guards_emitted += 1
        return tirx.IfThenElse(condition, body, None)

    def _emit_if(self, plan: IfPlan) -> tirx.Stmt:
        guards_before = self._guards_emitted
        then_case = self.emit(plan.then_plan) if plan.then_plan is not None else None
        else_case = self.emit(plan.else_plan) if plan.else_plan is not None else None
        if not plan.kept_atoms:
            return then_case if then_case is not None else _no_op()
        condition = substitute(conjunction([a.expr for a in plan.kept_atoms]), self.var_map)
        if plan.if_stmt is None:  # a guarded case of the planner
            return self._guard(condition, then_case)
        if else_case is None or self._guards_emitted == guards_before:
            return tirx.IfThenElse(condition, then_case if then_case is not None else _no_op(), else_case)
        return _disjoint_ifs(condition, then_case, else_case)

    def _block_name(self, name: str) -> str:
        index = self.block_copies.get(name, 0)
        self.block_copies[name] = index + 1
        return _temporary_block_name(name, index)

    def _emit_realize(self, plan: RealizePlan) -> tirx.Stmt:
        realize = plan.realize
        block = realize.block
        iter_map = {iv.var: self._fresh_var(iv.var) for iv in block.iter_vars}
        body_map = {**self.var_map, **iter_map}

        def rewrite_body(stmt):
            if not plan.if_decisions:
                return stmt
            statements = list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]
            result = []
            for child in statements:
                decision = plan.if_decisions.get(child) if isinstance(child, tirx.IfThenElse) else None
                if decision is None:
                    result.append(child)
                elif decision == "then":
                    result.append(child.then_case)
                elif decision == "else":
                    if child.else_case is not None:
                        result.append(child.else_case)
                else:
                    result.append(tirx.IfThenElse(conjunction([a.expr for a in decision]), child.then_case,
                                                  child.else_case))
            if not result:
                return _no_op()
            return result[0] if len(result) == 1 else tirx.SeqStmt(result)

        new_block = SBlock(
            [tirx.IterVar(substitute(iv.dom, self.var_map), iter_map[iv.var], iv.iter_type, iv.thread_tag)
             for iv in block.iter_vars],
            [substitute(r, body_map) for r in block.reads],
            [substitute(w, body_map) for w in block.writes],
            self._block_name(block.name_hint),
            substitute(rewrite_body(block.body), body_map),
            substitute(block.init, body_map) if block.init is not None else None,
            block.alloc_buffers,
            [MatchBufferRegion(m.buffer, substitute(m.source, body_map)) for m in block.match_buffers],
            block.annotations,
        )
        predicate = (
            substitute(conjunction([a.expr for a in plan.predicate_atoms]), self.var_map)
            if plan.predicate_atoms
            else tirx.const(True, "bool")
        )
        iter_values = [substitute(v, self.var_map) for v in realize.iter_values]
        return SBlockRealize(iter_values, predicate, new_block)

    def _emit_opaque_block(self, plan: OpaqueBlockPlan) -> tirx.Stmt:
        realize = plan.realize
        block = realize.block
        new_block = SBlock(
            [],
            [substitute(r, self.var_map) for r in block.reads],
            [substitute(w, self.var_map) for w in block.writes],
            self._block_name(block.name_hint),
            self.emit(plan.body),
            None,
            [],
            [],
            block.annotations,
        )
        return SBlockRealize([], substitute(realize.predicate, self.var_map), new_block)

    def _emit_verbatim(self, stmt) -> tirx.Stmt:
        return substitute(stmt, self.var_map)


_LIKELY = tvm.ir.Op.get("prim.likely")


def _without_likely(call: tvm.ir.Call) -> tvm.ir.PrimExpr:
    return call.args[0] if isinstance(call.op, tvm.ir.Op) and call.op.same_as(_LIKELY) else call


def _disjoint_ifs(condition, then_case: tirx.Stmt | None, else_case: tirx.Stmt) -> tirx.Stmt:
    """``if condition: then_case else: else_case`` as ``if c: then_case`` and ``if not c: else_case`` (see the
    module docstring: TVM's ``HoistIfThenElse`` hoists no guard out of a loop whose body is a sequence). A
    condition that reads memory is bound to a variable first (``then_case`` may change what it reads)."""
    statements = []
    if has_load_or_call(condition):
        bound = tirx.Var("if_condition", "bool")
        statements.append(tirx.Bind(bound, condition))
        condition = bound
    if then_case is not None:
        statements.append(tirx.IfThenElse(condition, then_case, None))
    statements.append(tirx.IfThenElse(tirx.Not(condition), else_case, None))
    return statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)


_TEMPORARY_PREFIX = "__tailsplit_copy"


def _temporary_block_name(name: str, index: int) -> str:
    return f"{_TEMPORARY_PREFIX}{index}__{name}"


def unique_block_names(body, copies: dict[str, int], taken: set[str]) -> tirx.Stmt:
    """Give each emitted block copy its final name: the original one when it was emitted once, else
    ``name_k`` with the smallest ``k`` not used by any other block.

    ``copies`` counts the copies of each original name; ``taken`` holds every block name that stays as it is
    (outside the rewritten region, or blocks inside it that were copied verbatim).
    """
    final: dict[str, str] = {}
    used = set(taken)
    for name, count in copies.items():
        if count == 1 and name not in used:
            final[_temporary_block_name(name, 0)] = name
            used.add(name)
            continue
        suffix = 0
        for index in range(count):
            while f"{name}_{suffix}" in used:
                suffix += 1
            final[_temporary_block_name(name, index)] = f"{name}_{suffix}"
            used.add(f"{name}_{suffix}")
            suffix += 1

    def rename(block: SBlock) -> SBlock:
        if block.name_hint not in final:
            return block
        return SBlock(block.iter_vars, block.reads, block.writes, final[block.name_hint], block.body,
                      block.init, block.alloc_buffers, block.match_buffers, block.annotations)

    return tvm_ffi.structural_map(body, (SBlock, rename), order="post")


def is_temporary_block_name(name: str) -> bool:
    """True for the names blocks carry between emission and ``unique_block_names``."""
    return name.startswith(_TEMPORARY_PREFIX)


def remove_marks(mod: tvm.IRModule) -> tvm.IRModule:
    """The module without ``pragma_emit_insn`` annotations (what is left once no instruction is mapped: llvm
    codegen would otherwise warn about an unknown pragma on every marked loop)."""

    return drop_loop_annotation(mod, MARK_KEY)
