"""TailSplit on one PrimFunc: plan both strategies per loop nest, pick one by mapping cost, emit, verify.

Each top-level statement of the root block (of the body, in a function without blocks) is a *loop nest*.
A nest with marks is planned with the full split and, when ``strategy="auto"`` and the full split costs more
than ``max_mapping_cost``, with the partial split; the chosen plan is emitted (``rewrite.py``) and the function
checked with ``s_tir``'s well-formedness verifier. A nest whose plan changes nothing is left as it is. The
``SplitReport`` says, per nest, the marks, the mapping cost and the choice, and every note of the planner (what
was split, what was kept and why).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import SBlock, SBlockRealize

from ..ir_utils import annotations_as_pragma_attributes, pragma_attributes_as_annotations, require_prim_func
from .conditions import MARK_KEY, find_marks, is_mark, loop_invariant_symbols, loop_vars_in, marked_blocks
from .cost import MappingCost, choose_strategy, code_length, nest_features
from .plan import FULL_SPLIT, PARTIAL_SPLIT, Note, Planner, PlanTooLong, RangeProof
from .privatize import buffer_privacy, give_each_copy_its_buffer
from .rewrite import Emitter, is_temporary_block_name, unique_block_names

__all__ = ["NestReport", "SplitReport", "STRATEGIES", "nests_of", "plan_nest", "split_function", "validate_options"]

STRATEGIES = ("auto", FULL_SPLIT, PARTIAL_SPLIT)


@dataclass
class NestReport:
    """What TailSplit did to one loop nest."""

    index: int
    marks: list[str]
    cost: MappingCost
    strategy: str
    changed: bool
    notes: list[Note] = field(default_factory=list)
    range_proofs: list[RangeProof] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"nest {self.index}: marks {', '.join(self.marks)}"]
        lines.append(f"  {self.cost}")
        lines.append(f"  strategy: {self.strategy} split" + ("" if self.changed else " (nothing to split)"))
        lines.extend(f"  - {note}" for note in self.notes)
        lines.extend(f"  - proved: {proof}" for proof in self.range_proofs)
        return "\n".join(lines)


@dataclass
class SplitReport:
    """Per-function report of TailSplit."""

    function: str
    nests: list[NestReport] = field(default_factory=list)
    marked_blocks: list[str] = field(default_factory=list)  # blocks annotated with the mark: they mark nothing

    @property
    def changed(self) -> bool:
        """Whether any loop nest of the function was split."""
        return any(n.changed for n in self.nests)

    def __str__(self) -> str:
        misplaced = ""
        if self.marked_blocks:
            names = ", ".join(repr(name) for name in self.marked_blocks)
            misplaced = (f"block {names} carries {MARK_KEY}, which marks nothing there (a mark goes on the outermost "
                         "loop of the region its instruction covers)")
        if not self.nests:
            where = f" on loops; {misplaced}" if misplaced else ""
            return f"TailSplit {self.function}: no marks ({MARK_KEY}){where}, unchanged"
        return "\n".join([f"TailSplit {self.function}:"] + [str(n) for n in self.nests] +
                         ([f"  {misplaced}: ignored"] if misplaced else []))


def validate_options(strategy: str, max_mapping_cost: int, max_fuzzy_expansion: int) -> None:
    """Raise ``ValueError`` naming the option that is invalid."""
    if strategy not in STRATEGIES:
        raise ValueError(f"TailSplit: strategy must be one of {STRATEGIES}, got {strategy!r}")
    for name, value in (("max_mapping_cost", max_mapping_cost), ("max_fuzzy_expansion", max_fuzzy_expansion)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"TailSplit: {name} must be a positive integer, got {value!r}")


def _block_names(stmt) -> set[str]:
    names: set[str] = set()
    tvm_ffi.structural_walk(stmt, (SBlock, lambda b: names.add(b.name_hint)))
    return names


def plan_nest(
    func: tirx.PrimFunc, nest: tirx.Stmt, strategy: str, max_mapping_cost: int, max_fuzzy_expansion: int
) -> tuple[Planner, object, MappingCost]:
    """Plan one loop nest with both strategies: the chosen planner, its plan, and the mapping cost.

    Unless the full split is forced, its planning stops once its code length passes ``max_mapping_cost``
    (``PlanTooLong``): such a full split is never chosen, and a long one would take long to plan."""
    full_planner = Planner(func, FULL_SPLIT, max_fuzzy_expansion,
                           max_length=None if strategy == FULL_SPLIT else max_mapping_cost)
    try:
        full_plan = full_planner.plan(nest)
        full_length, full_stopped = code_length(full_plan), False
    except PlanTooLong as stop:
        full_plan, full_length, full_stopped = None, stop.length, True
    partial_planner = Planner(func, PARTIAL_SPLIT, max_fuzzy_expansion)
    partial_plan = partial_planner.plan(nest)
    partial_length = code_length(partial_plan)
    chosen = choose_strategy(full_length, max_mapping_cost) if strategy == "auto" else strategy
    variables, depth, fuzzy, conditions = nest_features(nest)
    cost = MappingCost(full_length, partial_length, variables, depth, fuzzy, conditions, max_mapping_cost,
                       chosen, forced=strategy != "auto", full_split_stopped=full_stopped)
    if chosen == PARTIAL_SPLIT:
        return partial_planner, partial_plan, cost
    return full_planner, full_plan, cost


def _privatize(func: tirx.PrimFunc, nests: list, body: tirx.Stmt, loop_copies: dict,
               report: SplitReport) -> tuple[tirx.Stmt, list]:
    """One buffer per copy of a split loop for the buffers private to its iterations (``privatize.py``); the
    decision for every buffer whose loop was copied goes to the report of the nest holding the loop."""
    alloc_buffers = list(func.body.block.alloc_buffers) if isinstance(func.body, SBlockRealize) else []
    for verdict in buffer_privacy(func):
        copies = loop_copies.get(verdict.loop.loop_var, [])
        if len(copies) < 2:
            continue
        loop_name = verdict.loop.loop_var.name
        if verdict.private:
            body, added = give_each_copy_its_buffer(body, verdict.buffer, copies)
            alloc_buffers.extend(added)
            text = (f"one buffer per copy of loop {loop_name} ({len(copies)} copies): each iteration writes what "
                    "it reads first, so TVM shrinks each buffer to the region of one iteration")
        else:
            text = f"shared by the {len(copies)} copies of loop {loop_name}: {verdict.reason}"
        note = Note(f"buffer {verdict.buffer.name}", text)
        holder = next(i for i, nest in enumerate(nests) if any(l.same_as(verdict.loop) for l in loop_vars_in(nest)))
        next(n for n in report.nests if n.index == holder).notes.append(note)
    return body, alloc_buffers


def nests_of(func: tirx.PrimFunc) -> list[tirx.Stmt]:
    """The top-level statements of the root block, or of the body of a function without one (the loop nests)."""
    body = func.body.block.body if isinstance(func.body, SBlockRealize) else func.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def split_function(
    func: tirx.PrimFunc,
    name: str = "main",
    strategy: str = "auto",
    max_mapping_cost: int = 256,
    max_fuzzy_expansion: int = 64,
) -> tuple[tirx.PrimFunc, SplitReport]:
    """Apply TailSplit to ``func``; returns the new function (``func`` itself when nothing changed) and a report.

    ``name`` names the function in the report; ``strategy``, ``max_mapping_cost`` and ``max_fuzzy_expansion`` are
    ``TailSplit``'s options. A function lowered past its blocks (TVM's ``LowerOpaqueBlock`` makes each mark a
    ``T.attr(loop_var, "pragma_emit_insn", value)`` above its loop) is split too, and its marks stay in that form."""
    require_prim_func(func, "split_function")
    validate_options(strategy, max_mapping_cost, max_fuzzy_expansion)
    annotated, lowered = pragma_attributes_as_annotations(func, MARK_KEY)
    with loop_invariant_symbols(annotated):  # (m + 15) // 16 is a symbol like m (conditions.loop_invariant_symbols)
        new_func, report = _split_function(annotated, name, strategy, max_mapping_cost, max_fuzzy_expansion)
    if not report.changed:
        return func, report
    return (annotations_as_pragma_attributes(new_func, MARK_KEY) if lowered else new_func), report


def _split_function(func: tirx.PrimFunc, name: str, strategy: str, max_mapping_cost: int,
                    max_fuzzy_expansion: int) -> tuple[tirx.PrimFunc, SplitReport]:
    report = SplitReport(name, marked_blocks=[block for block, _ in marked_blocks(func)])
    if not find_marks(func):
        return func, report
    nests = nests_of(func)
    emitter = Emitter()
    new_nests = []
    rewritten = []
    for index, nest in enumerate(nests):
        marks = [loop for loop in loop_vars_in(nest) if is_mark(loop)] if isinstance(nest, tirx.Stmt) else []
        if not marks:
            new_nests.append(nest)
            continue
        chosen_planner, chosen_plan, cost = plan_nest(func, nest, strategy, max_mapping_cost,
                                                      max_fuzzy_expansion)
        mark_names = [f"{m.loop_var.name} ({m.annotations['pragma_emit_insn']})" for m in marks]
        nest_report = NestReport(index, mark_names, cost, chosen_planner.strategy, chosen_planner.changed,
                                 list(chosen_planner.notes), list(chosen_planner.range_proofs))
        report.nests.append(nest_report)
        if not chosen_planner.changed:
            new_nests.append(nest)
            continue
        if chosen_plan is None:
            nest_report.notes.append(Note("nest", "removed: no guarded point of it ever runs"))
            continue
        new_nests.append(emitter.emit_nest(chosen_plan))
        nest_report.notes.extend(emitter.take_notes())
        rewritten.append(len(new_nests) - 1)
    if not report.changed:
        return func, report
    taken = {name for nest in new_nests for name in _block_names(nest) if not is_temporary_block_name(name)}
    new_nests = [
        unique_block_names(nest, emitter.block_copies, taken) if position in rewritten else nest
        for position, nest in enumerate(new_nests)
    ]
    if not new_nests:
        new_nests = [tirx.Evaluate(tirx.const(0, "int32"))]
    new_body = new_nests[0] if len(new_nests) == 1 else tirx.SeqStmt(new_nests)
    new_body, alloc_buffers = _privatize(func, nests, new_body, emitter.loop_copies, report)
    root = func.body
    if isinstance(root, SBlockRealize):
        block = root.block
        new_body = SBlockRealize(
            root.iter_values,
            root.predicate,
            SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, new_body, block.init,
                   alloc_buffers, block.match_buffers, block.annotations),
        )
    new_func = func.with_body(new_body)
    s_tir.analysis.verify_well_formed(new_func)
    return new_func, report
