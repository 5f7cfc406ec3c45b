"""Mapping-cost model: the code length each strategy would emit, and the full / partial decision.

A full split copies every loop between the outermost split variable and the mark once per piece; a partial
split copies only the mark and the loops below it and decides outer variables with a guard chain above the
mark. The mapping cost of a strategy is the length of the code it emits, counted on its plan: one unit per
loop copy, guard-chain arm and ``if``, plus one per statement of each block copy. The counts grow with the
number of condition variables (each one split multiplies the pieces), the loop depth between the split
variables and the mark (the loops copied per piece), the sizes of the fuzzy intervals (each expanded point
is a piece) and the number of conditions (each adds split points). These features are reported with the
estimate so that a user can see why a strategy was chosen.

``strategy="auto"`` picks the full split when its cost is within ``max_mapping_cost`` and the partial split
otherwise. The decision depends only on the IR and the options, so it is deterministic.

The budget also bounds the planning time: unless the full split is forced, its planner stops as soon as the
code length of the sub-plans it has finished (a lower bound of the final length) exceeds ``max_mapping_cost``;
the estimate then reports that lower bound and that planning stopped, and the partial split is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from .conditions import guards_under, is_mark, loop_vars_in
from .intervals import RangeContext, Status, decompose_range
from .plan import FULL_SPLIT, PARTIAL_SPLIT, code_length

__all__ = ["MappingCost", "choose_strategy", "code_length", "nest_features"]


@dataclass(frozen=True)
class MappingCost:
    """The estimate for one loop nest: code length per strategy, its features, and the strategy chosen."""

    full_split: int
    partial_split: int
    condition_variables: tuple[str, ...]
    loop_depth: int
    fuzzy_interval_sizes: dict
    conditions: int
    max_mapping_cost: int
    chosen: str
    forced: bool = False
    full_split_stopped: bool = False  # planning of the full split stopped: ``full_split`` is a lower bound

    def __str__(self) -> str:
        fuzzy = ", ".join(f"{name}: {sizes}" for name, sizes in self.fuzzy_interval_sizes.items()) or "none"
        full = (f"more than {self.max_mapping_cost} (planning stopped at {self.full_split})"
                if self.full_split_stopped else str(self.full_split))
        return (
            f"mapping cost: full split {full}, partial split {self.partial_split} "
            f"(max_mapping_cost {self.max_mapping_cost}) -> {self.chosen} split"
            f"{' (forced by the strategy option)' if self.forced else ''}; condition variables "
            f"{', '.join(self.condition_variables) or 'none'}, loop depth {self.loop_depth}, fuzzy interval "
            f"sizes {fuzzy}, {self.conditions} conditions"
        )


def choose_strategy(full_split_cost: int, max_mapping_cost: int) -> str:
    """Full split when its code length is within ``max_mapping_cost``, else partial split."""
    return FULL_SPLIT if full_split_cost <= max_mapping_cost else PARTIAL_SPLIT


def _depth(stmt) -> int:
    if isinstance(stmt, tirx.For):
        return 1 + _depth(stmt.body)
    children = []
    if isinstance(stmt, tirx.SeqStmt):
        children = list(stmt.seq)
    elif isinstance(stmt, tirx.IfThenElse):
        children = [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
    elif hasattr(stmt, "block"):
        children = [stmt.block.body]
    return max((_depth(c) for c in children), default=0)


def nest_features(nest) -> tuple[tuple[str, ...], int, dict, int]:
    """Condition variables, loop depth, fuzzy interval sizes per variable and number of conditions."""
    loops = loop_vars_in(nest)
    marks = [loop for loop in loops if is_mark(loop)]
    atoms = []
    for mark in marks:
        for site in guards_under(mark):
            atoms.extend(a for a in site.atoms if a not in atoms)
    context = RangeContext()
    for loop in loops:
        context.bind(loop.loop_var, loop.min, loop.extent)
    condition_loops = [loop for loop in loops if any(loop.loop_var in a.variables for a in atoms)]
    fuzzy_sizes = {}
    for loop in condition_loops:
        constant = context.constant_range(loop.loop_var)
        if constant is None:
            continue
        related = [a for a in atoms if loop.loop_var in a.variables]
        sizes = [
            interval.size
            for interval in decompose_range(loop.loop_var, *constant, related, context)
            if interval.status is Status.FUZZY
        ]
        fuzzy_sizes[loop.loop_var.name] = sizes
    names = tuple(loop.loop_var.name for loop in condition_loops)
    return names, _depth(nest), fuzzy_sizes, len(atoms)
