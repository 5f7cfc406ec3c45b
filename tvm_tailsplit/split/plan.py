"""Split plans: what the rewrite will emit for one loop nest, decided by the interval analysis.

The planner walks a loop nest from the outside in, keeping the current range of every loop variable in a
``RangeContext`` (enclosing loops narrowed to the piece being planned, inner loops over their whole range).

- **Loops.** The atoms of the guards under marks in a loop's body that mention its variable and are fuzzy on
  the current ranges decide whether the loop is split. A full split splits every such loop (except
  thread-bound ones, which cannot be copied); a partial split only the mark and the loops below it. A split
  loop's range is decomposed into always-true / fuzzy / always-false intervals (``intervals.py``); a fuzzy
  interval whose atom also mentions a variable decided deeper in the nest is expanded element by element, so
  that the deeper split can decide the atom in each piece. Each interval (or point) becomes a ``LoopPiece``
  whose body is planned with the variable narrowed to it; a piece whose body plans to nothing (every guard in
  it always-false) is dropped, so no dead loop is left behind. A loop whose one interval is its whole range
  (atoms with no split point in it, e.g. ``f % 3 * 16 + j < 37``) is not cut: it stays as it is, is not counted
  as a change, and the notes show such a copy as ``(whole range: not cut)`` (a guard chain likewise).
- **Marks.** Enclosing loops that were not split but still appear in fuzzy atoms of the mark's guards are
  decided by a *guard chain* above the mark: one case per interval (and expanded point) of each such
  variable, outermost first, emitted as disjoint ``if``s (``rewrite.py``; never an if/elif chain). Below the
  mark nothing branches on them any more. The conditions of the enclosing ``if``s cut the chain too: an
  interval where one of them fails never reaches the mark, has no case, and the case beside it is tested over
  it as well, so that no arm repeats an enclosing ``if``.
- **Guards.** At a guard under a mark each atom is proved on the current ranges: always-true atoms are
  removed, an always-false atom removes the guarded block (or selects the else branch), fuzzy atoms stay.
- **Opaque blocks.** A block above the marks with no iter vars, no init and no buffers of its own (a task of
  a tile-level kernel: ``with T.sblock("store"): T.reads(...); T.writes(...); for i in ...``) binds nothing,
  so its body is planned like any nest: the loops around the block (thread-bound ones too) are in the
  ``RangeContext``, narrowed to the piece being planned; the guard chain of a mark inside stands inside the
  block body, and the mark and the loops below it are cut to their always-true intervals (always-false ones
  dropped). The block is rebuilt around the planned body (``OpaqueBlockPlan``: same name, reads, writes,
  annotations and predicate; the predicate is not assumed by the planner), once per copy of the loops around
  it, and dropped where every guard in its body is always-false. Any other block with marks inside (iter vars,
  an init, allocated or matched buffers) is copied as it is, its marks left unchanged (a note says so).

**Symbolic ranges** (a loop bound or an atom mentions a symbolic variable such as ``n``): a loop above the
mark is cut at symbolic split points (``decompose_symbolic_range``; a guard chain above the mark does the same
for loops that are not split), so the main tiles are condition-free copies over ``[lo, min/max(...))``. A
loop at or below the mark is not cut but has its range intersected with the bounds its atoms imply
(``intersect_range``): its new ends are ``min``/``max`` expressions computed *above the mark* (bound there by
``Bind`` statements when they only depend on variables above the mark), so nothing below the mark branches; a
range that may be empty gets a guard ``extent > 0`` above the mark. Every piece stays inside its loop's range
for every value of the symbolic variables; the planner proves it (``tvm.sym``) and keeps the loop as it is
when it cannot. A loop bound to a launch dimension (``blockIdx``, ``threadIdx``) ranges over ``max(extent, 1)``
(``ir_utils.launched_extent``): TVM launches an extent of 0 as 1, so at a symbolic size of 0 block 0 still runs,
and the guard chains decide it like any other index instead of assuming it absent. Constant and symbolic loops
go through the same code (``_plan_split``): the decomposition folds constant split points to integers, and only
a symbolic loop at or below the mark takes the intersection. A split point that mentions its own loop variable
(bounds over an inner loop whose extent depends on it, ``range(i // 4 + 1)``) is no split point.

**Expansion bound.** Expansions nest: a point of an expanded interval holds the plan of the loops inside it,
whose fuzzy intervals may be expanded again, so the copies of one statement multiply along the nest
(``i + j + k < 64`` over three loops of 64). A fuzzy interval is expanded only while its size times the sizes of
the expanded intervals around it is at most ``max_fuzzy_expansion`` (outermost first; otherwise the atom stays,
and a note says so), so no statement is copied more than ``max_fuzzy_expansion`` times by expansions.

Statements that define variables or buffers (lets, allocations, attributes, blocks with buffers) are never
copied; a loop with a ``step`` other than 1 is never cut (it is kept whole, decided by a guard chain when it is
above a mark); an ``AttrStmt`` above the marks (``T.attr``, ``T.launch_thread``) or a ``while`` loop holding marks stays
once around the plan of its body (``AttrPlan``; a ``while`` whose body plans to nothing stays as it is: its
condition may never turn false). The planner only reads IR; ``rewrite.py`` turns a plan into IR.

**Budget.** A planner given ``max_length`` keeps the code length of the sub-plans it has finished (those stay
in the final plan, so their sum is a lower bound of its length) and raises ``PlanTooLong`` as soon as it
passes the limit: a full split that could not be chosen is not planned to the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlockRealize

from ..ir_utils import has_unit_step, launched_extent, uses_var
from .conditions import (
    Atom,
    atoms_of,
    block_binding,
    block_if_statements,
    free_vars,
    guards_everything,
    guards_under,
    is_mark,
    loop_vars_in,
)
from .intervals import (
    Interval,
    RangeContext,
    Status,
    decompose_range,
    decompose_symbolic_range,
    intersect_range,
    is_symbolic,
)

__all__ = [
    "FULL_SPLIT",
    "PARTIAL_SPLIT",
    "AttrPlan",
    "GuardChain",
    "GuardCase",
    "IfPlan",
    "LoopPiece",
    "LoopPlan",
    "Note",
    "OpaqueBlockPlan",
    "PlanTooLong",
    "Planner",
    "RangeProof",
    "RealizePlan",
    "SequencePlan",
    "VerbatimPlan",
    "WholeLoopPlan",
    "code_length",
]

FULL_SPLIT = "full"
PARTIAL_SPLIT = "partial"
NOT_CUT = " (whole range: not cut)"  # a copy of a loop that a split or guard chain left whole, in the notes
MAX_CASE_DEPTH = 2  # guarded cases on the order of symbolic split points: at most 2 x 2 = 4 per loop


@dataclass
class LoopPiece:
    """One emitted copy of a loop over ``[lo, hi)`` (integers, or expressions for symbolic ranges).

    ``rebased`` copies start at 0 (below a mark, and above it where the loop's variable bounds an inner loop or
    the copy's ends use an enclosing loop: TVM's CanonicalizeLoop miscompiles such nests). ``hoisted`` copies
    have symbolic ends bound above the mark; ``may_be_empty`` ones need ``hi > lo`` checked: by a guard above the
    mark when the loop is the mark itself, else by ``max(0, ...)`` in its extent (a guard would also skip the
    statements beside the loop).
    """

    lo: object
    hi: object
    body: object
    rebased: bool = False
    hoisted: bool = False
    may_be_empty: bool = False


@dataclass
class LoopPlan:
    """A split loop: one copy per piece."""

    loop: tirx.For
    pieces: list[LoopPiece]


@dataclass
class WholeLoopPlan:
    """A loop kept over its original range (possibly symbolic)."""

    loop: tirx.For
    body: object


@dataclass
class GuardCase:
    """``if lo <= var < hi`` in a guard chain above a mark (integers, or expressions for symbolic ranges)."""

    lo: object
    hi: object
    body: object


@dataclass
class GuardChain:
    """Disjoint cases on the variable of ``loop`` over its range ``[range_lo, range_hi)`` (one ``if`` each)."""

    loop: tirx.For
    range_lo: object
    range_hi: object
    cases: list[GuardCase]


@dataclass
class RealizePlan:
    """A block copy: the predicate atoms that stay, and what each top-level ``if`` of its body becomes."""

    realize: SBlockRealize
    predicate_atoms: tuple[Atom, ...]
    if_decisions: dict = field(default_factory=dict)  # if stmt -> "then" | "else" | tuple of atoms kept
    changed: bool = False


@dataclass
class OpaqueBlockPlan:
    """An opaque block with marks inside (see "Opaque blocks" above), rebuilt around the plan of its body."""

    realize: SBlockRealize
    body: object


@dataclass
class AttrPlan:
    """An ``AttrStmt`` above marks (e.g. ``T.launch_thread`` in a function without blocks) or a ``while`` loop
    holding marks, kept once around the plan of its body (neither is ever copied: a loop holding one is not
    split)."""

    stmt: tirx.AttrStmt | tirx.While
    body: object


@dataclass
class IfPlan:
    """A loop-level ``if``: kept with some atoms (both branches planned), or replaced by one branch."""

    if_stmt: tirx.IfThenElse
    kept_atoms: tuple[Atom, ...]
    then_plan: object
    else_plan: object


@dataclass
class SequencePlan:
    items: list


@dataclass
class VerbatimPlan:
    """A statement copied as it is (with fresh definitions)."""

    stmt: object


@dataclass(frozen=True)
class RangeProof:
    """The obligation proved for a symbolic piece: ``[lo, hi)`` is empty or inside the loop's range
    ``[range_lo, range_hi)`` whenever the other loop variables are in ``ranges`` (``var -> (min, extent)``)."""

    loop: str
    lo: object
    hi: object
    range_lo: object
    range_hi: object
    ranges: dict

    @property
    def claim(self):
        """The proved statement as a boolean expression."""
        return tirx.Or(self.hi <= self.lo, tirx.And(self.range_lo <= self.lo, self.hi <= self.range_hi))

    def __str__(self) -> str:
        return f"loop {self.loop}: [{self.lo}, {self.hi}) inside [{self.range_lo}, {self.range_hi})"


@dataclass(frozen=True)
class Note:
    """A diagnostic of the planner: what was split or kept, and why."""

    subject: str
    text: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.text}"


class PlanTooLong(Exception):
    """Planning stopped: the code length of the plan passed the planner's ``max_length``."""

    def __init__(self, length: int) -> None:
        super().__init__(f"code length {length} passed the limit")
        self.length = length


def _statement_count(stmt) -> int:
    count = [0]
    tvm_ffi.structural_walk(stmt, (tirx.Stmt, lambda _: count.__setitem__(0, count[0] + 1)))
    return count[0]


def code_length(plan) -> int:
    """The length of the code a plan emits: one unit per loop copy, guard-chain arm and ``if``, plus one per
    statement of each block copy and of each statement copied verbatim (0 for ``None``)."""
    if plan is None:
        return 0
    if isinstance(plan, SequencePlan):
        return sum(code_length(item) for item in plan.items)
    if isinstance(plan, LoopPlan):
        return sum(1 + code_length(piece.body) for piece in plan.pieces)
    if isinstance(plan, WholeLoopPlan):
        return 1 + code_length(plan.body)
    if isinstance(plan, GuardChain):
        return sum(1 + code_length(case.body) for case in plan.cases)
    if isinstance(plan, IfPlan):
        return 1 + code_length(plan.then_plan) + code_length(plan.else_plan)
    if isinstance(plan, RealizePlan):
        return 1 + _statement_count(plan.realize.block.body)
    if isinstance(plan, (OpaqueBlockPlan, AttrPlan)):
        return 1 + code_length(plan.body)
    if isinstance(plan, VerbatimPlan):
        return _statement_count(plan.stmt)
    raise TypeError(f"unknown plan node {type(plan).__name__}")


_DEFINING_STATEMENTS = (tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer, tirx.AttrStmt, tirx.While)


def plans_body(realize: SBlockRealize) -> bool:
    """True for an opaque block with marks inside that the planner plans through (see "Opaque blocks" above):
    no iter vars, no init, no allocated or matched buffers."""
    block = realize.block
    if block.iter_vars or block.init is not None or block.alloc_buffers or block.match_buffers:
        return False
    return any(is_mark(loop) for loop in loop_vars_in(block.body))


def copy_blocker(stmt, below_mark: bool) -> str | None:
    """Why ``stmt`` cannot be copied into several pieces, or ``None`` when it can. Above the marks, an opaque
    block whose body the planner plans (``plans_body``) is copied with fresh definitions like a loop."""
    reasons: list[str] = []

    def on_node(node):
        if isinstance(node, _DEFINING_STATEMENTS):
            reasons.append(f"it contains a {type(node).__name__} statement")
        elif isinstance(node, SBlockRealize) and (node.block.alloc_buffers or node.block.match_buffers):
            reasons.append(f"block {node.block.name_hint!r} allocates or matches buffers")
        elif (isinstance(node, SBlockRealize) and _contains_loops_or_blocks(node.block.body)
              and (below_mark or not plans_body(node))):
            reasons.append(f"block {node.block.name_hint!r} contains loops or blocks (nested blocks are not copied)")

    tvm_ffi.structural_walk(stmt, [(tirx.Stmt, on_node)])
    return reasons[0] if reasons else None


def _contains_loops_or_blocks(stmt) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, found.append), (SBlockRealize, found.append)])
    return bool(found)


def _statements_left(block, if_decisions: dict) -> int:
    """How many top-level statements of a block body remain after its ifs are decided."""
    body = block.body
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    return sum(
        1
        for stmt in statements
        if not (if_decisions.get(stmt) == "else" and stmt.else_case is None)
    )


def _describe(atoms) -> str:
    return " and ".join(str(a) for a in atoms)


def _span(lo, hi) -> str:
    if is_symbolic(lo) or is_symbolic(hi):
        return f"[{lo}, {hi})"
    return f"[{lo},{hi - 1}]" if hi - lo > 1 else str(lo)


def _same(a, b) -> bool:
    """Equal interval ends (integers, or structurally equal expressions)."""
    if is_symbolic(a) or is_symbolic(b):
        return is_symbolic(a) and is_symbolic(b) and tvm_ffi.structural_equal(a, b)
    return a == b


class Planner:
    """Plans one strategy (full or partial split) for the loop nests of a function."""

    def __init__(self, func: tirx.PrimFunc, strategy: str, max_fuzzy_expansion: int,
                 max_length: int | None = None) -> None:
        if strategy not in (FULL_SPLIT, PARTIAL_SPLIT):
            raise ValueError(f"strategy must be {FULL_SPLIT!r} or {PARTIAL_SPLIT!r}, got {strategy!r}")
        self.strategy = strategy
        self.max_fuzzy_expansion = max_fuzzy_expansion
        self.max_length = max_length
        # The code length of the finished sub-plans that the plan being built will contain (a lower bound of its
        # final length: a sub-plan that runs is never dropped again).
        self._length = 0
        self.context = RangeContext()
        for loop in loop_vars_in(func.body):
            self.context.bind(loop.loop_var, loop.min, launched_extent(loop))
        bound: set = set()
        tvm_ffi.structural_walk(func.body, (tirx.Bind, lambda stmt: bound.add(stmt.var)))
        self.context.bound_variables = frozenset(bound)
        self._binds_in_scope: list = []  # variables of the Binds before the statement being planned, in scope there
        self._binds_at_mark: set = set()  # those in scope at the current mark (above it)
        self._notes: list[Note] = []
        self._splits: dict[str, tuple[str, list[str]]] = {}
        self._guard_atoms: dict = {}
        self._statement_atoms: dict = {}  # see _atoms_of
        self._enclosing: list[tirx.For] = []
        self._assumptions: list[Atom] = []  # atoms of the enclosing then-branches
        self._split_loops: set = set()
        self._mark_depth = 0  # how many of the enclosing loops are above the current mark
        self.range_proofs: list[RangeProof] = []
        self._case_depth = 0  # guarded cases (on the order of two symbolic split points) being planned
        self._expansion = 1  # copies made by the expanded intervals around the statement being planned
        self.changed = False

    @property
    def notes(self) -> list[Note]:
        """What was split (each split loop or guard chain once, with the pieces of every copy), then the rest."""
        splits = [
            Note(subject, f"{how}: " + " | ".join(pieces)) for subject, (how, pieces) in self._splits.items()
            if not all(piece.endswith(NOT_CUT) for piece in pieces)  # (a loop never cut was not split)
        ]
        return splits + self._notes

    # -- helpers -------------------------------------------------------------------------------------
    def _note(self, subject: str, text: str) -> None:
        note = Note(subject, text)
        if note not in self._notes:
            self._notes.append(note)

    def _log_split(self, subject: str, how: str, pieces: list) -> None:
        text = ", ".join(_span(p.lo, p.hi) for p in pieces) or "none"
        self._splits.setdefault(subject, (how, []))[1].append(text)

    def _is_symbolic(self, var, atoms) -> bool:
        """True when ``var``'s range is not constant or an atom mentions a variable that is not a loop with a
        constant range (a symbolic variable such as ``n``)."""
        if self.context.constant_range(var) is None:
            return True
        return any(
            other not in self.context.ranges or self.context.constant_range(other) is None
            for atom in atoms
            for other in atom.variables
        )

    def _atoms_under_marks(self, loop: tirx.For, below_mark: bool = False) -> list[Atom]:
        """Atoms of every guard at or below a mark inside ``loop`` (all of its guards when it is below a mark)."""
        key = (loop, below_mark)
        if key not in self._guard_atoms:
            marked = [loop] if below_mark or is_mark(loop) else [m for m in loop_vars_in(loop.body) if is_mark(m)]
            atoms: list[Atom] = []
            for stmt in marked:
                for site in guards_under(stmt):
                    atoms.extend(a for a in site.atoms if a not in atoms)
            self._guard_atoms[key] = atoms
        return self._guard_atoms[key]

    def _atoms_of(self, stmt, condition) -> tuple[Atom, ...]:
        """The atoms of the condition of ``stmt`` (a block's predicate or an ``if``), computed once per statement
        (a statement is planned once per piece of every loop around it)."""
        if stmt not in self._statement_atoms:
            self._statement_atoms[stmt] = tuple(atoms_of(condition))
        return self._statement_atoms[stmt]

    def _fuzzy_atoms_with(self, var, atoms) -> list[Atom]:
        return [a for a in atoms if var in a.variables and self.context.status(a) is Status.FUZZY]

    def _splits_as_loop(self, loop: tirx.For, below_mark: bool) -> bool:
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            return False
        return below_mark or self.strategy == FULL_SPLIT

    def _pieces(self, var, lo: int, hi: int, atoms, deeper_vars: set, subject: str) -> list[tuple[Interval, int]]:
        """Intervals of ``var``, fuzzy ones expanded element by element where a deeper split can decide them and
        the expansion bound allows it; each with the number of copies its expansion makes (1 if not expanded)."""
        pieces: list[tuple[Interval, int]] = []
        for interval in decompose_range(var, lo, hi, atoms, self.context):
            decidable_deeper = any(
                status is Status.FUZZY and atom.linear is not None and atom.variables & deeper_vars
                for atom, status in zip(atoms, interval.statuses, strict=True)
            )
            if interval.size > 1 and decidable_deeper:
                copies = self._expansion * interval.size
                if copies > self.max_fuzzy_expansion:
                    around = "" if self._expansion == 1 else (
                        f" ({copies} copies with the {self._expansion} of the expanded intervals around it)")
                    self._note(
                        subject,
                        f"fuzzy interval [{interval.lo},{interval.hi - 1}] of {var.name} has {interval.size} "
                        f"points{around}, more than max_fuzzy_expansion={self.max_fuzzy_expansion}: not expanded, "
                        "its condition stays",
                    )
                    pieces.append((interval, 1))
                    continue
                pieces.extend((Interval(p, p + 1, interval.statuses), interval.size)
                              for p in range(interval.lo, interval.hi))
            else:
                pieces.append((interval, 1))
        return pieces

    @contextmanager
    def _expanded(self, copies: int) -> Iterator[None]:
        """Plan inside a piece of an expansion into ``copies`` points (see "Expansion bound" above)."""
        self._expansion *= copies
        try:
            yield
        finally:
            self._expansion //= copies

    # -- planning --------------------------------------------------------------------------------------
    def plan(self, stmt, mark: tirx.For | None = None):
        """The plan of ``stmt``; ``None`` when nothing of it ever runs. ``mark`` is the enclosing mark.

        Raises ``PlanTooLong`` as soon as the code length of what is planned exceeds ``max_length``."""
        before = self._length
        result = self._plan_statement(stmt, mark)
        self._length = before + code_length(result)
        if self.max_length is not None and self._length > self.max_length:
            raise PlanTooLong(self._length)
        return result

    def _plan_statement(self, stmt, mark: tirx.For | None):
        if isinstance(stmt, tirx.SeqStmt):
            in_scope = len(self._binds_in_scope)
            items = []
            try:
                for child in stmt.seq:
                    item = self.plan(child, mark)
                    if item is not None:
                        items.append(item)
                    if isinstance(child, tirx.Bind):  # its variable is defined for the statements after it
                        self._binds_in_scope.append(child.var)
            finally:
                del self._binds_in_scope[in_scope:]
            if not items:
                return None
            return items[0] if len(items) == 1 else SequencePlan(items)
        if isinstance(stmt, tirx.For):
            if mark is None and is_mark(stmt):
                return self._plan_mark(stmt)
            return self._plan_loop(stmt, mark)
        if isinstance(stmt, SBlockRealize):
            return self._plan_realize(stmt, mark)
        if isinstance(stmt, tirx.IfThenElse):
            return self._plan_if(stmt, mark)
        if (isinstance(stmt, (tirx.AttrStmt, tirx.While)) and mark is None
                and any(is_mark(l) for l in loop_vars_in(stmt.body))):
            body = self.plan(stmt.body)
            if body is None:
                return VerbatimPlan(stmt) if isinstance(stmt, tirx.While) else None
            return AttrPlan(stmt, body)
        return VerbatimPlan(stmt)

    def _plan_loop(self, loop: tirx.For, mark: tirx.For | None):
        var = loop.loop_var
        atoms = self._fuzzy_atoms_with(var, self._atoms_under_marks(loop, mark is not None))
        if not atoms:
            return self._whole(loop, mark)
        if not has_unit_step(loop):
            self._note(f"loop {var.name}", f"range kept: a loop with step {loop.step} is never cut (a copy over part "
                                           "of its range would start off its step)")
            return self._whole(loop, mark)
        return self._plan_split(loop, mark, atoms, f"loop {var.name}")

    def _plan_split(self, loop: tirx.For, mark: tirx.For | None, atoms: list, subject: str):
        """A loop with fuzzy atoms, constant or symbolic: its range intersected with their bounds when it is
        symbolic and at or below the mark, else cut into one copy per interval (``_split``)."""
        var = loop.loop_var
        symbolic = self._is_symbolic(var, atoms)
        low, extent = self.context.ranges[var]
        if symbolic and mark is not None:
            hi = self.context.analyzer.simplify(low + extent)
            return self._intersect_below_mark(loop, mark, atoms, low, hi, subject)
        if not self._splits_as_loop(loop, mark is not None):
            return self._whole(loop, mark)
        blocker = copy_blocker(loop.body, below_mark=mark is not None)
        if blocker is not None:
            self._note(subject, f"not split: {blocker}")
            return self._whole(loop, mark)
        if not symbolic:
            deeper = {inner.loop_var for inner in loop_vars_in(loop.body)}
            return self._split(loop, mark, atoms, subject, self._pieces(var, *self.context.constant_range(var),
                                                                         atoms, deeper, subject))
        hi = self.context.analyzer.simplify(low + extent)
        intervals, unordered = self._symbolic_intervals(var, low, hi, atoms, subject)
        if unordered is not None and self._case_depth < MAX_CASE_DEPTH:
            return self._plan_cases(unordered, lambda: self._plan_split(loop, mark, atoms, subject), subject)
        if intervals is None:
            return self._whole(loop, mark)
        return self._split(loop, mark, atoms, subject, [(interval, 1) for interval in intervals])

    def _split(self, loop: tirx.For, mark: tirx.For | None, atoms: list, subject: str, intervals: list):
        """One copy of ``loop`` per interval whose body runs (rebased as ``LoopPiece`` says); a symbolic interval that
        may be empty is marked so (its copy's extent is clamped at 0). ``intervals`` pairs each interval with the
        copies its expansion makes (``_pieces``)."""
        var = loop.loop_var
        if len(intervals) == 1 and self._covers_range(var, intervals[0][0]):
            # One interval over the whole range (e.g. atoms with no split point): nothing is cut, the loop stays.
            whole = intervals[0][0]
            self._splits.setdefault(subject, (f"split by {_describe(atoms)}", []))[1].append(
                _span(whole.lo, whole.hi) + NOT_CUT)
            self._split_loops.add(var)
            try:
                return self._whole(loop, mark)
            finally:
                self._split_loops.discard(var)
        outside = self._outside(var)
        how = f"split by {_describe(atoms)}"
        self._split_loops.add(var)
        self._splits.setdefault(subject, (how, []))
        pieces: list[LoopPiece] = []
        bounds_inner = any(uses_var(bound, var) for inner in loop_vars_in(loop.body)
                           for bound in (inner.min, inner.extent, inner.step) if bound is not None)
        try:
            for interval, copies in intervals:
                with self._expanded(copies):
                    body = self._plan_body(loop, mark, interval.lo, interval.hi)
                if body is not None:
                    may_be_empty = is_symbolic(interval.lo) or is_symbolic(interval.hi)
                    may_be_empty = may_be_empty and not self.context.prove(interval.lo <= interval.hi, outside)
                    # TVM's CanonicalizeLoop shifts an enclosing loop's variable in the body but not in the bounds
                    # of a loop it canonicalizes too: such copies start at 0 (tests/split/test_split_hardening.py)
                    ends_use_loops = any(v in self.context.ranges for end in (interval.lo, interval.hi)
                                         if is_symbolic(end) for v in free_vars(end))
                    pieces.append(LoopPiece(interval.lo, interval.hi, body,
                                            rebased=mark is not None or bounds_inner or ends_use_loops,
                                            may_be_empty=may_be_empty))
        finally:
            self._split_loops.discard(var)
        self.changed = True
        self._log_split(subject, how, pieces)
        return LoopPlan(loop, pieces) if pieces else None

    def _covers_range(self, var, interval: Interval) -> bool:
        """Whether ``interval`` is the whole current range of ``var``."""
        constant = self.context.constant_range(var)
        if constant is not None:
            return _same(interval.lo, constant[0]) and _same(interval.hi, constant[1])
        low, extent = self.context.ranges[var]
        return _same(interval.lo, low) and _same(interval.hi, self.context.analyzer.simplify(low + extent))

    def _whole(self, loop: tirx.For, mark: tirx.For | None):
        """``loop`` kept over its range, its body planned (``None`` when the body never runs)."""
        body = self._plan_body(loop, mark)
        return None if body is None else WholeLoopPlan(loop, body)

    def _plan_body(self, loop: tirx.For, mark: tirx.For | None, lo=None, hi=None):
        """The plan of ``loop``'s body inside ``loop``, with its variable narrowed to ``[lo, hi)`` when given."""
        self._enclosing.append(loop)
        try:
            if lo is None:
                return self.plan(loop.body, mark)
            with self.context.narrowed(loop.loop_var, lo, hi):
                return self.plan(loop.body, mark)
        finally:
            self._enclosing.pop()

    def _outside(self, var) -> set:
        """The variables of the loops enclosing the statement being planned, other than ``var``: the ranges a
        proof about ``var``'s pieces may assume."""
        return {enclosing.loop_var for enclosing in self._enclosing if not enclosing.loop_var.same_as(var)} | set(
            self._binds_in_scope)

    def _intersect_below_mark(self, loop: tirx.For, mark: tirx.For, atoms: list, lo, hi, subject: str):
        """A loop at or below the mark: its range intersected with the bounds its atoms imply (one piece)."""
        var = loop.loop_var
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            self._note(subject, "range kept: a thread-bound loop's extent is the launch configuration")
            return self._whole(loop, mark)
        outside = self._outside(var)
        # Narrowing the range drops the iterations where an atom fails: only atoms that guard every statement of
        # the body may narrow it (not one with an else branch, or that some block lacks).
        guarding = [atom for atom in atoms if guards_everything(loop.body, atom)]
        intersection = intersect_range(var, lo, hi, guarding, outside, self.context)
        if intersection is None:
            self._note(subject, "range kept: no condition that guards the whole body bounds it through this loop "
                                "alone")
            return self._whole(loop, mark)
        new_lo, new_hi, used = intersection
        if not self._inside(var, new_lo, new_hi, lo, hi):
            self._note(subject, f"range kept: [{new_lo}, {new_hi}) not proved inside [{lo}, {hi})")
            return self._whole(loop, mark)
        above = {enclosing.loop_var for enclosing in self._enclosing[: self._mark_depth]} | self._binds_at_mark
        loop_vars = self.context.defined_inside()
        hoisted = all(v in above or v not in loop_vars for v in free_vars(new_lo) | free_vars(new_hi))
        may_be_empty = not self.context.prove(new_lo <= new_hi, outside)
        body = self._plan_body(loop, mark, new_lo, new_hi)
        self.changed = True
        inner = sorted({v.name for v in free_vars(new_lo) | free_vars(new_hi) if v in loop_vars and v not in above})
        where = "above the mark" if hoisted else (
            f"in the loop header (it depends on loop{'s' if len(inner) > 1 else ''} {', '.join(inner)}, at or below "
            "the mark)")
        if not hoisted and not any(v in self.context.ranges and v not in above
                                   for v in free_vars(new_lo) | free_vars(new_hi)):
            where = "in the loop header (it depends on variables bound below the mark)"
        self._note(subject, f"range intersected with {_describe(used)}: [{new_lo}, {new_hi}), computed {where}")
        if body is None:
            return None
        piece = LoopPiece(new_lo, new_hi, body, rebased=True, hoisted=hoisted, may_be_empty=may_be_empty)
        return LoopPlan(loop, [piece])

    def _inside(self, var, new_lo, new_hi, lo, hi) -> bool:
        """Prove that ``[new_lo, new_hi)`` is empty or inside ``[lo, hi)`` for every value of the variables;
        the proved obligation is kept in ``range_proofs``."""
        outside = self._outside(var)
        ranges = {v: r for v, r in self.context.ranges.items() if v in outside}
        proof = RangeProof(var.name, new_lo, new_hi, lo, hi, ranges)
        if not self.context.prove(proof.claim, outside):
            return False
        if all(str(proof) != str(known) for known in self.range_proofs):
            self.range_proofs.append(proof)
        return True

    def _symbolic_intervals(self, var, lo, hi, atoms, subject: str) -> tuple[list[Interval] | None, tuple | None]:
        """The symbolic pieces of ``var``'s range (``None`` when cutting gains nothing or is not proved safe),
        and the first two split points whose order could not be proved."""
        intervals, unordered = decompose_symbolic_range(var, lo, hi, atoms, self.context, self._outside(var))
        if len(intervals) < 2:
            return None, unordered
        for interval in intervals:
            if not self._inside(var, interval.lo, interval.hi, lo, hi):
                self._note(subject, f"not split: piece [{interval.lo}, {interval.hi}) not proved inside the range")
                return None, None
        return intervals, unordered

    def _plan_cases(self, pair: tuple, replan, subject: str):
        """Two guarded cases, ``p <= q`` and ``q < p``, each planned again with its condition assumed (so the
        split points can be ordered); nested at most ``MAX_CASE_DEPTH`` deep (four cases)."""
        first, second = pair
        plans = []
        for condition in (first <= second, second < first):
            self._case_depth += 1
            try:
                with self.context.assuming(condition):
                    plan = replan()
            finally:
                self._case_depth -= 1
            if plan is not None:
                plans.append(IfPlan(None, tuple(atoms_of(condition)), plan, None))
        self.changed = True
        self._note(subject, f"guarded cases {first} <= {second} and {second} < {first} above the loop: the order "
                            "of these split points decides the pieces")
        if not plans:
            return None
        return plans[0] if len(plans) == 1 else SequencePlan(plans)

    def _plan_mark(self, mark: tirx.For):
        blocker = copy_blocker(mark, below_mark=True)
        chain_loops = []
        self._mark_depth = len(self._enclosing)
        self._binds_at_mark = set(self._binds_in_scope)
        if blocker is None:
            mark_atoms = self._atoms_under_marks(mark)
            for loop in self._enclosing:
                var = loop.loop_var
                if var in self._split_loops or not self._fuzzy_atoms_with(var, mark_atoms):
                    continue
                chain_loops.append(loop)
        elif self._fuzzy_atoms_with(mark.loop_var, self._atoms_under_marks(mark)):
            self._note(f"mark {mark.loop_var.name}", f"not split: {blocker}")
            return self._whole(mark, mark)
        return self._plan_chain(mark, chain_loops, 0)

    def _plan_chain(self, mark: tirx.For, chain_loops: list, index: int):
        if index == len(chain_loops):
            return self._plan_loop(mark, mark)
        loop = chain_loops[index]
        var = loop.loop_var
        mark_atoms = self._fuzzy_atoms_with(var, self._atoms_under_marks(mark))
        # Enclosing ifs bound the variable too: a case where one of them is always-false never runs.
        assumed = [a for a in self._fuzzy_atoms_with(var, self._assumptions) if a not in mark_atoms]
        atoms = mark_atoms + assumed
        subject = f"loop {var.name}"
        if self._is_symbolic(var, atoms):
            low, extent = self.context.ranges[var]
            lo, hi = low, self.context.analyzer.simplify(low + extent)
            intervals, unordered = self._symbolic_intervals(var, lo, hi, atoms, subject)
            if unordered is not None and self._case_depth < MAX_CASE_DEPTH:
                return self._plan_cases(unordered, lambda: self._plan_chain(mark, chain_loops, index), subject)
            if intervals is None:
                self._note(subject, f"not decided above mark {mark.loop_var.name}: no symbolic split point")
                return self._plan_chain(mark, chain_loops, index + 1)
            intervals = [(interval, 1) for interval in intervals]
        else:
            lo, hi = self.context.constant_range(var)
            deeper = {c.loop_var for c in chain_loops[index + 1 :]} | {mark.loop_var}
            deeper |= {inner.loop_var for inner in loop_vars_in(mark.body)}
            intervals = self._pieces(var, lo, hi, atoms, deeper, subject)
        cases: list[GuardCase] = []
        self._splits.setdefault(subject, (f"decided by a guard chain above mark {mark.loop_var.name}", []))
        # An interval where an enclosing if fails never reaches the mark: the case next to it (the intervals are
        # consecutive) is tested over it too (see "Marks" above).
        unreached_lo = None  # start of the unreached intervals just before the next case
        extends_last = False  # whether the last case ends where the next interval starts
        for interval, copies in intervals:
            if Status.ALWAYS_FALSE in interval.statuses[len(mark_atoms) :]:
                if extends_last:
                    cases[-1] = GuardCase(cases[-1].lo, interval.hi, cases[-1].body)
                elif unreached_lo is None:
                    unreached_lo = interval.lo
                continue
            with self.context.narrowed(var, interval.lo, interval.hi), self._expanded(copies):
                body = self._plan_chain(mark, chain_loops, index + 1)
            extends_last = body is not None
            if body is not None:
                start = interval.lo if unreached_lo is None else unreached_lo
                cases.append(GuardCase(start, interval.hi, body))
            unreached_lo = None
        if not cases:
            return None
        if len(cases) == 1 and _same(cases[0].lo, lo) and _same(cases[0].hi, hi):
            # one case over the whole range: no chain, nothing decided here (the body says what changed)
            self._splits[subject][1].append(_span(lo, hi) + NOT_CUT)
            return cases[0].body
        self.changed = True
        self._log_split(f"loop {var.name}", f"decided by a guard chain above mark {mark.loop_var.name}", cases)
        return GuardChain(loop, lo, hi, cases)

    def _decide(self, atoms, binding=None):
        """``None`` when some atom is always-false, else the atoms that stay (fuzzy ones)."""
        kept = []
        for atom in atoms:
            status = self.context.status(atom, binding)
            if status is Status.ALWAYS_FALSE:
                return None
            if status is Status.FUZZY:
                kept.append(atom)
        return tuple(kept)

    def _plan_realize(self, realize: SBlockRealize, mark: tirx.For | None):
        name = realize.block.name_hint
        if mark is None and plans_body(realize):
            return self._plan_opaque_block(realize)
        if any(is_mark(loop) for loop in loop_vars_in(realize.block.body)):
            self._note(f"block {name!r}", "marks inside a nested block are left unchanged: only an opaque block "
                                          "above the marks (no iter vars, init, allocated or matched buffers) is "
                                          "planned through")
        if mark is None:
            # Not under a mark (e.g. the init block of a reduction): nothing is split for it, but in a piece of
            # a split loop its predicate atoms are decided like any other (a predicate-free init vectorizes).
            atoms = self._atoms_of(realize, realize.predicate)
            kept = self._decide(atoms)
            if kept is None:
                self._note(f"block {name!r}", "dropped where its predicate is always-false (outside the marks)")
                return None
            return RealizePlan(realize, kept, changed=len(kept) != len(atoms))
        original = self._atoms_of(realize, realize.predicate)
        kept = self._decide(original)
        if kept is None:
            self.changed = True
            self._note(f"block {name!r}", "dropped where its predicate is always-false")
            return None
        if _contains_loops_or_blocks(realize.block.body):
            self._note(f"block {name!r}", "guards inside this nested block are kept: nested blocks are not split")
        plan = RealizePlan(realize, kept, changed=len(kept) != len(original))
        for atom in kept:
            self._note(f"block {name!r}", f"condition {atom} kept under the mark: {self._why_kept(atom)}")
        binding = block_binding(realize)
        for if_stmt in block_if_statements(realize.block):
            atoms = self._atoms_of(if_stmt, if_stmt.condition)
            decided = self._decide(atoms, binding)
            if decided is None:
                plan.if_decisions[if_stmt] = "else"
            elif not decided:
                plan.if_decisions[if_stmt] = "then"
            else:
                plan.if_decisions[if_stmt] = decided
                for atom in decided:
                    self._note(f"block {name!r}", f"if {atom} kept under the mark: fuzzy on the current ranges")
                continue
            plan.changed = True
        if realize.block.init is None and not _statements_left(realize.block, plan.if_decisions):
            self.changed = True
            self._note(f"block {name!r}", "dropped where the if of its body is always-false")
            return None
        if plan.changed:
            self.changed = True
        return plan

    def _plan_opaque_block(self, realize: SBlockRealize):
        """An opaque block with marks inside: its body planned like a nest, the block rebuilt around it."""
        subject = f"block {realize.block.name_hint!r}"
        body = self.plan(realize.block.body)
        if body is None:
            self.changed = True
            self._note(subject, "dropped where no guarded point of its body runs")
            return None
        self._note(subject, "opaque block: its body planned like a loop nest (the marks inside split, the loops "
                            "around it decided there), the block rebuilt around it")
        return OpaqueBlockPlan(realize, body)

    def _why_kept(self, atom: Atom) -> str:
        if atom.linear is None:
            return "not an affine integer comparison (opaque: decided only by proof)"
        loop_vars = self.context.defined_inside()
        if atom.variables - loop_vars:
            names = ", ".join(sorted(v.name for v in atom.variables - loop_vars))
            return f"depends on symbolic {names}"
        return "fuzzy on the current ranges"

    def _plan_if(self, if_stmt: tirx.IfThenElse, mark: tirx.For | None):
        atoms = self._atoms_of(if_stmt, if_stmt.condition)
        kept = self._decide(atoms)
        else_case = if_stmt.else_case
        if kept is None:
            self.changed = True
            return self.plan(else_case, mark) if else_case is not None else None
        if not kept and atoms:
            self.changed = True
            return self.plan(if_stmt.then_case, mark)
        if len(kept) != len(atoms) and mark is not None:
            # Above the marks, dropping the atoms that always hold is no reason to rewrite a nest (a nest rewritten
            # anyway drops them): a guard chain's 'if a == 8' over [0, 9) would become 'if a >= 8' in a second run.
            self.changed = True
        if mark is not None:
            for atom in kept:
                self._note(f"mark {mark.loop_var.name}", f"if {atom} kept under the mark: {self._why_kept(atom)}")
        self._assumptions.extend(kept)
        try:
            then_plan = self.plan(if_stmt.then_case, mark)
        finally:
            del self._assumptions[len(self._assumptions) - len(kept) :]
        else_plan = self.plan(else_case, mark) if else_case is not None else None
        if then_plan is None and else_plan is None:
            return None
        return IfPlan(if_stmt, kept, then_plan, else_plan)
