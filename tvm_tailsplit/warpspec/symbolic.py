"""Symbolic dependence analysis of pipeline loops with long or symbolic trip counts.

The instance graphs of `warpspec.graphs` grow with the trip counts. For a *long* pipeline loop (a symbolic trip
count, or a constant one beyond the windows below) the dependences are derived as rules instead: channel groups
(producer task, consumer task, iteration distance `d`, first instance, count, stages, channels, phase offset)
whose fields are affine in the trip counts. The cost depends on the loop's period and its tasks, not on its trip
count. Algorithm, for every long loop `L` with variable `k` and trip count `N`:

1. **Form.** `L` is at the top of the pipeline (not nested in another pipeline loop) and holds tasks only, and no
   region uses the variables of a symbolic trip count (only loop and grid variables). Tasks before and after it
   (prologue and epilogue tasks such as a GEMM's init and store) and short loops stay as they are.
2. **Period.** `P` is the lcm, over the divisions of an expression of `k` by a constant in the region bounds of L's
   tasks, of the constant times the period of its dividend (the stage index `k % S` of a ring gives `S`, two steps
   per stage `k // 2 % S` gives `2 S`; 1 if there is none). `tvm.sym` proves that replacing `k` by `k + P` shifts every
   region of L's tasks by a constant vector without changing its extents, and all regions of one buffer by the
   same vector. The overlap of two instances at distance `d` is then the same at `k` and `k + P` for every `d`
   (translation invariance): the dependence pattern of the interior iterations repeats with period `P`. Buffers
   that no task writes (read-only inputs) conflict with nothing: their regions are left out of both steps (e.g.
   `X[k]` and `X[0]` read by one task).
3. **Windows.** The exact instance analysis (data and resource dependences over ranges, redundancy elimination,
   channel allocation) runs on windows of `W`, `W + P` and `W + 2P` iterations of `L` (`W = 4P + 4`, widened to
   `2 d_max + 2P + 2` when a rule inside `L` spans `d_max` iterations), so that each window holds the prologue
   (first iterations, whose dependences have no source), at least one full period of the interior and the
   epilogue. The three channel plans must have the same groups (kind, tasks, roles, stages, channels) and fields
   (distance, first, count, phase offset) that grow linearly with the window; they extrapolate to
   `f(N) = f(W) + slope * (N - W)` (an int when `N` is a constant, a `PrimExpr` of the trip count otherwise).
4. **Proof of every rule.** For each group whose two tasks are in `L` (a constant distance), `tvm.sym` proves
   that the ranges of source instance `k` and destination instance `k + d` conflict (overlap on a buffer one of
   them writes) for every `k`, by a case split on the residue `r = k mod P` with `k = P q + r`, `q >= 0` symbolic.
5. **Small trip counts.** The rules instantiated at every trip count `n0 <= n < W + 3P` (every residue modulo `P`,
   including the trip counts where prologue and epilogue meet) must give exactly the synchronization edges of the
   exact analysis of `n` iterations, and every channel must be reused only after its previous use was consumed
   (happens-before through program order and the edges), in consecutive phases from a single warp role. `n0` is
   0 unless a rule crosses the loop's boundary (e.g. a task after the loop waiting for its last iteration, which
   does not exist when `n = 0`): then it is one more than the largest failing `n`, which must be below `W`, and the
   generated kernel tests `N >= n0` at run time (inside the grid loops, so `N` may be a trip count per CTA): below
   it the generic generators run the input's pipeline sequentially, and the Hopper generator asserts it (before
   the grid loops: there a trip count per CTA with `n0 > 0` is refused).

**Persistent nests.** A pipeline that is one loop `for tt in range(N_t)` (e.g. a persistent kernel's tiles; `N_t`
may differ per CTA) holding tasks (per-tile *prologue/epilogue* tasks, e.g. a GEMM's accumulator fill and stores)
and one loop `for ko in range(N_k)` of tasks (the K steps) is analyzed as one pipeline over the **running step**
`j = tt * N_k + ko`, the instance index of the inner tasks (what the generated code computes):

a. **Prologue and epilogue tasks take part in no dependence between warp roles.** For every such task and every
   task of another role, each pair of their regions on a buffer one of them writes is proved disjoint by
   `tvm.sym` for all iterations of both (independent loop variables): in one dimension one range ends before the
   other begins, or both lie in aligned blocks of `B = e1 + e2` elements (their extents) at disjoint offsets,
   `lo1 % B + e1 <= lo2 % B` (e.g. a GEMM's two bands of output rows in any two tiles). Their order with the
   inner tasks of their own role is program order.
b. **The flat pipeline.** The inner tasks become the tasks of one loop `j` of `N_t * N_k` iterations, their
   regions rewritten by `tt -> j // N_k`, `ko -> j % N_k` (simplified by `tvm.sym`; a ring stage
   `(tt * N_k + ko) % S` becomes `j % S`); regions of buffers that no task writes are dropped (they conflict with
   nothing). Steps 1-5 derive and prove its rules; their counts are expressions of `N_t * N_k`, so the producer's
   acquires run on into the next tile while the consumers run the epilogue.
c. The rules must hold from 0 iterations on (no run-time assert: `N_t` may be per CTA), and the rules
   instantiated at the small trip counts `(N_t, N_k)` of `window_counts` must give exactly the edges of the
   exact analysis of the nest (a cross-check of a and b).

Any failed step raises `SymbolicAnalysisError` naming the loop; `analyze` then unrolls the kernel if every trip
count is constant and small enough, and reports the error otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx

from ..ir_utils import substitute, uses_var
from .channels import ChannelGroup, ChannelPlan, allocate_channels
from .graphs import (
    Dependence,
    FlowGraph,
    ancestor_bitsets,
    control_data_flow_graph,
    control_data_resource_flow_graph,
    eliminate_redundant,
    regions_disjoint,
    unroll_instances,
)
from .tree import LoopNode, Region, ScheduleTree, TaskNode, WarpSpecializeInputError, region_text

__all__ = [
    "NEST_WINDOW_TILES",
    "Affine",
    "LongLoop",
    "PersistentNest",
    "SymbolicAnalysisError",
    "SymbolicGroup",
    "SymbolicPlan",
    "count_instances",
    "symbolic_plan",
]

_FIELDS = ("distance", "first", "count", "phase_offset")
NEST_WINDOW_TILES = 3
"""Rule: the small instantiation of a persistent nest runs 3 outer iterations (a first, a middle and a last tile),
each of `P + 2` inner steps when `N_k` is symbolic (`P` the ring's period: tiles start at different stages)."""
_DIVISIONS = (tirx.FloorMod, tirx.FloorDiv, tirx.Mod, tirx.Div)


class SymbolicAnalysisError(WarpSpecializeInputError):
    """A pipeline loop whose dependences could not be derived (or proved) symbolically."""


@dataclass(frozen=True)
class Affine:
    """`constant + sum(slope * trip count of loop)` over the long loops (by loop variable name)."""

    constant: int
    slopes: tuple[tuple[str, int], ...] = ()

    def at(self, counts: dict[str, int]) -> int:
        return self.constant + sum(slope * counts[name] for name, slope in self.slopes)

    def expr(self, extents: dict[str, int | tirx.Expr]) -> int | tirx.Expr:
        """The value for the given trip counts: an int when they are ints, else a simplified `PrimExpr`."""
        value = self.constant
        symbolic: list[tuple[int, tirx.Expr]] = []
        for name, slope in self.slopes:
            extent = extents[name]
            if isinstance(extent, int):
                value += slope * extent
            else:
                symbolic.append((slope, extent))
        if not symbolic:
            return value
        expr = tirx.IntImm(symbolic[0][1].ty.dtype, value)
        for slope, extent in symbolic:
            expr = expr + extent * slope
        return sym.Analyzer().simplify(expr)

    def describe(self) -> str:
        """E.g. `N_ko - 3`, where `N_ko` is the trip count of loop `ko`."""
        text = ""
        for name, slope in self.slopes:
            term = f"N_{name}" if abs(slope) == 1 else f"{abs(slope)}*N_{name}"
            text += (" - " if slope < 0 else " + ") + term if text else ("-" if slope < 0 else "") + term
        if self.constant or not text:
            text += f" {'-' if self.constant < 0 else '+'} {abs(self.constant)}" if text else str(self.constant)
        return text


@dataclass(frozen=True)
class LongLoop:
    """A pipeline loop analyzed symbolically: its period and window (see the module doc)."""

    node: LoopNode
    period: int
    window: int
    min_trip_count: int = 0
    """The smallest trip count for which the rules hold (step 5); the generated kernel asserts it at run time."""

    @property
    def name(self) -> str:
        return self.node.var.name


@dataclass(frozen=True)
class SymbolicGroup:
    """A channel group whose fields are affine in the trip counts of the long loops."""

    kind: str
    src_task: str
    dst_task: str
    src_role: int
    dst_role: int
    stages: int
    base: int
    distance: Affine
    first: Affine
    count: Affine
    phase_offset: Affine


@dataclass(frozen=True)
class PersistentNest:
    """A persistent nest (module doc): the outer and inner loop, analyzed as one loop over the running step."""

    outer: LoopNode
    inner: LoopNode
    flat: LoopNode
    """The loop over the running step `j = tt * N_k + ko` (`N_t * N_k` iterations) holding the inner tasks."""

    def flat_counts(self, counts: dict[str, int]) -> dict[str, int]:
        """The trip count of the flat loop for trip counts of the nest (a constant one may be left out)."""
        outer, inner = (counts.get(loop.var.name, loop.extent) for loop in (self.outer, self.inner))
        return {self.flat.var.name: outer * inner}


@dataclass(frozen=True)
class SymbolicPlan:
    """The channel groups of a kernel as rules over its long loops, valid for every trip count."""

    tree: ScheduleTree
    loops: tuple[LongLoop, ...]
    groups: tuple[SymbolicGroup, ...]
    channel_count: int
    nest: PersistentNest | None = None
    """For a persistent nest: `loops` are the flat loop's, `tree` the kernel's (see the module doc)."""

    def window_counts(self) -> dict[str, int]:
        """The window trip count of every long loop (a small instantiation for `check` and `to_dot`); for a
        persistent nest, `NEST_WINDOW_TILES` outer iterations of a few inner steps."""
        if self.nest is None:
            return {loop.name: loop.window for loop in self.loops}
        inner = self.nest.inner
        period = self.loops[0].period if self.loops else 1
        return {self.nest.outer.var.name: NEST_WINDOW_TILES,
                inner.var.name: inner.extent if inner.constant else period + 2}

    def _rule_counts(self, counts: dict[str, int]) -> dict[str, int]:
        return counts if self.nest is None else self.nest.flat_counts(counts)

    def channel_plan(self) -> ChannelPlan:
        """The plan for the kernel's own trip counts (symbolic fields where the trip counts are symbolic)."""
        extents = {loop.name: loop.node.extent for loop in self.loops}  # a persistent nest's: its flat loop
        groups = tuple(
            ChannelGroup(g.kind, g.src_task, g.dst_task, g.src_role, g.dst_role, g.distance.expr(extents),
                         g.first.expr(extents), g.count.expr(extents), g.stages, g.base,
                         g.phase_offset.expr(extents), ())
            for g in self.groups)
        minimums = tuple((loop.name, loop.min_trip_count) for loop in self.loops
                         if not loop.node.constant and loop.min_trip_count > 0)
        return ChannelPlan(self.tree, groups, self.channel_count, min_trip_counts=minimums)

    def instantiate(self, counts: dict[str, int]) -> ChannelPlan:
        """The plan over explicit instances for the given trip counts of the long loops (all of them; of both
        loops of a persistent nest)."""
        tree = self.tree.with_trip_counts(counts)
        counts = self._rule_counts(counts)
        instances = unroll_instances(tree)
        position = {(inst.task.name, inst.index): inst.position for inst in instances}
        groups: list[ChannelGroup] = []
        edges: list[Dependence] = []
        for g in self.groups:
            distance, first = g.distance.at(counts), g.first.at(counts)
            count = max(0, g.count.at(counts))
            pairs = []
            for source in range(first, first + count):
                src, dst = position.get((g.src_task, source)), position.get((g.dst_task, source + distance))
                if src is None or dst is None:
                    raise SymbolicAnalysisError(
                        f"the rule {g.src_task} -> {g.dst_task} (distance {distance}) names instance "
                        f"{source if src is None else source + distance}, which does not exist for trip counts "
                        f"{counts}")
                pairs.append((src, dst))
                edges.append(Dependence(src, dst, g.kind, ()))
            groups.append(ChannelGroup(g.kind, g.src_task, g.dst_task, g.src_role, g.dst_role, distance, first,
                                       count, g.stages, g.base, g.phase_offset.at(counts), tuple(pairs)))
        graph = FlowGraph(tree, tuple(instances), tuple(sorted(edges, key=lambda e: (e.dst, e.src))))
        return ChannelPlan(tree, tuple(groups), self.channel_count, graph)

    def describe(self) -> str:
        """The symbolic rules as text: the persistent nest, each long loop (period, window, minimum trip count)
        and each channel group's rules."""
        lines = []
        if self.nest is not None:
            outer, inner = self.nest.outer, self.nest.inner
            lines.append(f"persistent nest {outer.var.name} x {inner.var.name}: one pipeline over the running step "
                         f"{self.nest.flat.var.name} = {outer.var.name} * N_{inner.var.name} + {inner.var.name}, "
                         f"N_{self.nest.flat.var.name} = ({outer.extent}) * ({inner.extent})")
        lines += [f"long loop {loop.name} (trip count N_{loop.name} = {loop.node.extent}): period {loop.period}, "
                  f"window {loop.window}, rules hold from {loop.min_trip_count} iterations" for loop in self.loops]
        for g in self.groups:
            lines.append(f"  {g.kind} {g.src_task} -> {g.dst_task}: distance {g.distance.describe()}, first "
                         f"{g.first.describe()}, count {g.count.describe()}, {g.stages} stage(s) from channel "
                         f"{g.base}, first phase {g.phase_offset.describe()}")
        return "\n".join(lines)


def count_instances(tree: ScheduleTree) -> int | None:
    """The number of task instances of one grid iteration, or None when a trip count is symbolic."""

    def count(node) -> int | None:
        if isinstance(node, TaskNode):
            return 1
        inner = [count(child) for child in node.children]
        if not node.constant or None in inner:
            return None
        return node.extent * sum(inner)

    counts = [count(child) for child in tree.children]
    return None if None in counts else sum(counts)




def _regions(task: TaskNode) -> tuple[Region, ...]:
    return task.reads + task.writes


def _written(tree: ScheduleTree) -> set[str]:
    """The names of the buffers some task writes: the regions of the others (read-only inputs) conflict with
    nothing, so they take no part in the periodicity of the dependences."""
    return {w.buffer.name for task in tree.tasks() for w in task.writes}


def _divisor_lcm(loop: LoopNode, written: set[str]) -> int:
    """The period of the region bounds (of buffers in `written`) of the loop's tasks in the loop variable: the lcm,
    over the divisions of an expression of the variable by a constant, of that constant times the period of its
    dividend (the lcm for the divisions inside it, 1 without any): `t // 2 % 2` repeats every 4 iterations, not 2."""

    def period(expr) -> int:
        """The lcm of the periods of the divisions of the loop variable in `expr` (1 without any)."""
        periods = [1]

        def visit(node):
            if not (isinstance(node.b, tirx.IntImm) and int(node.b) != 0 and uses_var(node.a, loop.var)):
                return None
            periods.append(abs(int(node.b)) * period(node.a))
            return tvm_ffi.WalkResult.SKIP  # the divisions inside the dividend are in its period

        tvm_ffi.structural_walk(expr, [(kind, visit) for kind in _DIVISIONS], order="pre")
        return math.lcm(*periods)

    periods = [1]
    for task in loop.children:
        if isinstance(task, TaskNode):
            for region in _regions(task):
                if region.buffer.name not in written:
                    continue
                periods += [period(expr) for bound in region.bounds for expr in bound]
    return math.lcm(*periods)


def _prove_period(loop: LoopNode, period: int, written: set[str]) -> None:
    """Prove that `k -> k + period` shifts every region (of a buffer in `written`) of the loop's tasks by a constant
    vector per buffer."""
    analyzer = sym.Analyzer()
    k = loop.var
    shifted = {k: k + period}
    shifts: dict[str, tuple[int, ...]] = {}
    for task in loop.children:
        for region in _regions(task):
            if region.buffer.name not in written:
                continue
            shift = []
            for lo, extent in region.bounds:
                moved = analyzer.simplify(substitute(lo, shifted) - lo)
                grown = analyzer.simplify(substitute(extent, shifted) - extent)
                if not (isinstance(moved, tirx.IntImm) and isinstance(grown, tirx.IntImm) and int(grown) == 0):
                    raise SymbolicAnalysisError(
                        f"loop '{k.name}': cannot prove that the region of {region.buffer.name} in block "
                        f"'{task.name}' repeats every {period} iteration(s) up to a constant shift (bound {lo}, "
                        f"extent {extent})")
                shift.append(int(moved))
            previous = shifts.setdefault(region.buffer.name, tuple(shift))
            if previous != tuple(shift):
                raise SymbolicAnalysisError(
                    f"loop '{k.name}': the regions of {region.buffer.name} move by {previous} and {tuple(shift)} "
                    f"every {period} iteration(s); the dependence pattern is not periodic")


def _shared_between_roles(tree: ScheduleTree) -> set[str]:
    """The names of the buffers that some task writes and tasks of two warp roles touch: only their regions give
    dependences between warp roles (those of one role's buffers are program order)."""
    roles: dict[str, set[int]] = {}
    for task in tree.tasks():
        for region in _regions(task):
            roles.setdefault(region.buffer.name, set()).add(task.role)
    return {name for name in _written(tree) if len(roles[name]) > 1}


def _require_free_regions(tree: ScheduleTree, loop: LoopNode) -> None:
    """The windows change a symbolic trip count alone: no region may use the variables of its expression, except
    a grid loop variable in a region that takes part in no dependence between warp roles (a buffer that no task
    writes or one warp role alone touches, e.g. a CTA's own rows `X[b, t]` of an input with the trip count `b`):
    the instance analysis evaluates the grid loop variables at 0."""
    if loop.constant:
        return
    variables: list[tirx.Var] = []
    tvm_ffi.structural_walk(loop.extent, (tirx.Var, variables.append))
    grid = [grid_loop.loop_var for grid_loop in tree.grid_loops]
    shared = _shared_between_roles(tree)
    for task in tree.tasks():
        for region in _regions(task):
            for lo, extent in region.bounds:
                used = [v for v in variables if uses_var(lo, v) or uses_var(extent, v)]
                if not used or (region.buffer.name not in shared
                                and all(any(v.same_as(g) for g in grid) for v in used)):
                    continue
                raise SymbolicAnalysisError(
                    f"loop '{loop.var.name}': block '{task.name}' indexes {region.buffer.name} with '{used[0].name}', "
                    f"a variable of the loop's symbolic trip count {loop.extent}; index by the loop variables")


def _long_loops(tree: ScheduleTree) -> list[LongLoop]:
    found = []
    written = _written(tree)
    for node in tree.children:
        if not isinstance(node, LoopNode):
            continue
        period = _divisor_lcm(node, written)
        window = 4 * period + 4
        if node.constant and node.extent <= window + 3 * period:
            continue
        inner = [child.var.name for child in node.children if isinstance(child, LoopNode)]
        if inner:
            raise SymbolicAnalysisError(
                f"loop '{node.var.name}' (trip count {node.extent}) holds the loop '{inner[0]}'; the symbolic "
                "analysis needs the tasks of a long pipeline loop directly in its body")
        _require_free_regions(tree, node)
        _prove_period(node, period, written)
        found.append(LongLoop(node, period, window))
    return found


def _exact_plan(tree: ScheduleTree, counts: dict[str, int]) -> ChannelPlan:
    windowed = tree.with_trip_counts(counts)
    cdrfg = control_data_resource_flow_graph(control_data_flow_graph(windowed))
    return allocate_channels(eliminate_redundant(cdrfg))


def _signature(group: ChannelGroup) -> tuple:
    return (group.kind, group.src_task, group.dst_task, group.src_role, group.dst_role, group.stages, group.base)


def _inside(loop: LongLoop, tree: ScheduleTree, src_task: str, dst_task: str) -> bool:
    """True when both tasks are directly in `loop`."""
    tasks = {task.name: task for task in tree.tasks()}
    return all(len(tasks[name].loops) == 1 and tasks[name].loops[0].same_as(loop.node.loop)
               for name in (src_task, dst_task))


def _extrapolate(tree: ScheduleTree, loops: list[LongLoop]) -> tuple[tuple[SymbolicGroup, ...], int] | int:
    """The affine groups and the channel count (step 3), or the window needed when a rule inside a long loop spans
    more iterations than its window covers."""
    counts = {loop.name: loop.window for loop in loops}
    base = _exact_plan(tree, counts)
    needed = 0
    for loop in loops:
        spans = [abs(g.distance) for g in base.groups if _inside(loop, tree, g.src_task, g.dst_task)]
        if 2 * max(spans, default=0) + 2 * loop.period + 2 > loop.window:
            needed = max(needed, 2 * max(spans) + 2 * loop.period + 2)
    if needed:
        return needed
    slopes: list[dict[str, list[tuple[str, int]]]] = [{f: [] for f in _FIELDS} for _ in base.groups]
    for loop in loops:
        plans = [base] + [_exact_plan(tree, {**counts, loop.name: loop.window + step * loop.period})
                          for step in (1, 2)]
        if any(len(p.groups) != len(base.groups) or p.channel_count != base.channel_count
               or [_signature(g) for g in p.groups] != [_signature(g) for g in base.groups] for p in plans):
            stages = [[g.stages for g in p.groups] for p in plans]
            if len({len(row) for row in stages}) == 1 and stages[0] != stages[2]:
                raise SymbolicAnalysisError(
                    f"loop '{loop.name}': the stages of its channels grow with the trip count ({stages[0]} to "
                    f"{stages[2]}): nothing bounds how far the producers run ahead (no buffer range is reused), "
                    "so the channel count would too")
            raise SymbolicAnalysisError(
                f"loop '{loop.name}': the channel groups of windows of {loop.window}, "
                f"{loop.window + loop.period} and {loop.window + 2 * loop.period} iterations differ; the "
                "dependences do not follow a rule per iteration distance")
        for index, groups in enumerate(zip(*(p.groups for p in plans), strict=True)):
            for name in _FIELDS:
                v0, v1, v2 = (getattr(g, name) for g in groups)
                if v1 - v0 != v2 - v1 or (v1 - v0) % loop.period:
                    raise SymbolicAnalysisError(
                        f"loop '{loop.name}': the {name} of the rule {groups[0].src_task} -> {groups[0].dst_task} "
                        f"is {v0}, {v1}, {v2} in the three windows, not linear in the trip count")
                if v1 != v0:
                    slopes[index][name].append((loop.name, (v1 - v0) // loop.period))
    result = []
    for g, per_field in zip(base.groups, slopes, strict=True):
        fields = {}
        for name in _FIELDS:
            constant = getattr(g, name) - sum(slope * counts[loop] for loop, slope in per_field[name])
            fields[name] = Affine(constant, tuple(per_field[name]))
        result.append(SymbolicGroup(g.kind, g.src_task, g.dst_task, g.src_role, g.dst_role, g.stages, g.base,
                                    **fields))
    return tuple(result), base.channel_count


def _conflict_proved(a: TaskNode, b: TaskNode, mapping_a: dict, mapping_b: dict, analyzer: sym.Analyzer) -> bool:
    """True when `tvm.sym` proves that instance `a` (variables `mapping_a`) and `b` touch a common range that one
    of them writes."""
    pairs = [(w, r) for w in a.writes for r in _regions(b)] + [(r, w) for r in a.reads for w in b.writes]
    for x, y in pairs:
        if x.buffer.name != y.buffer.name:
            continue
        proved = True
        for (xlo, xext), (ylo, yext) in zip(x.bounds, y.bounds, strict=True):
            xlo, xext = substitute(xlo, mapping_a), substitute(xext, mapping_a)
            ylo, yext = substitute(ylo, mapping_b), substitute(yext, mapping_b)
            if not (analyzer.can_prove(xlo < ylo + yext) and analyzer.can_prove(ylo < xlo + xext)):
                proved = False
                break
        if proved:
            return True
    return False


def _prove_rules(tree: ScheduleTree, loops: list[LongLoop], groups: tuple[SymbolicGroup, ...]) -> None:
    """Step 4: every rule inside a long loop holds in every iteration."""
    tasks = {task.name: task for task in tree.tasks()}
    for loop in loops:
        k = loop.node.var
        for g in groups:
            if g.distance.slopes or g.first.slopes or not _inside(loop, tree, g.src_task, g.dst_task):
                continue
            src, dst = tasks[g.src_task], tasks[g.dst_task]
            distance = g.distance.constant
            analyzer = sym.Analyzer()
            q = tirx.Var("q", k.ty.dtype)
            analyzer.bind(q, tvm.ir.Range(0, 1 << 30))
            start = loop.period * -(-max(0, -distance, g.first.constant) // loop.period)
            for residue in range(loop.period):
                iteration = q * loop.period + (start + residue)
                if not _conflict_proved(src, dst, {k: iteration}, {k: iteration + distance}, analyzer):
                    raise SymbolicAnalysisError(
                        f"loop '{k.name}': cannot prove that {g.src_task}[k] and {g.dst_task}[k + {distance}] "
                        f"conflict for every k = {loop.period} q + {start + residue}")


def _channel_reuse_safe(plan: ChannelPlan) -> str | None:
    """Why a channel of `plan` (over instances) can be reused before its previous use was consumed, or None."""
    graph = plan.graph
    ancestors = ancestor_bitsets(len(graph.instances), graph.program_order_predecessors(), graph.edges)
    uses: dict[int, list[tuple[int, int, int, int]]] = {}
    for g in plan.groups:
        for edge, (src, dst) in enumerate(g.edges):
            uses.setdefault(g.channel(edge), []).append((g.phase(edge), src, dst, g.src_role))
    for channel, channel_uses in uses.items():
        channel_uses.sort()
        if [phase for phase, *_ in channel_uses] != list(range(len(channel_uses))):
            return f"channel {channel} is used in phases {[phase for phase, *_ in channel_uses]}"
        if len({role for *_, role in channel_uses}) > 1:
            return f"channel {channel} receives arrivals from several warp roles"
        for (_, _, dst, _), (_, src, _, _) in zip(channel_uses, channel_uses[1:], strict=False):
            if not ancestors[src] >> dst & 1:
                return (f"channel {channel} is reused by {graph.instances[src].name} before "
                        f"{graph.instances[dst].name} consumed its previous use")
    return None


def _mismatch(plan: SymbolicPlan, counts: dict[str, int]) -> str | None:
    """Why the rules instantiated at `counts` differ from the exact analysis or reuse a channel unsafely."""
    exact_plan = _exact_plan(plan.tree, counts)
    exact = {pair for g in exact_plan.groups for pair in g.edges}
    try:
        instantiated = plan.instantiate(counts)
    except SymbolicAnalysisError as error:
        return str(error)
    ruled = {pair for g in instantiated.groups for pair in g.edges}
    if ruled != exact:
        names = [instance.name for instance in exact_plan.graph.instances]
        only_exact, only_ruled = sorted(exact - ruled), sorted(ruled - exact)
        src, dst = (only_exact or only_ruled)[0]
        return (f"the rules give other dependences than the exact analysis: {names[src]} -> {names[dst]} is "
                f"{'only in the exact analysis' if only_exact else 'only in the rules'} (a dependence whose "
                "distance varies with a trip count, e.g. between two loops sharing one ring, whose stage at the "
                "second loop's start depends on the first loop's trip count modulo the ring's stages, has no rule)")
    return _channel_reuse_safe(instantiated)


def _validate_small(plan: SymbolicPlan) -> tuple[LongLoop, ...]:
    """Step 5: the loops with their minimum trip counts, from which on the rules match the exact analysis and
    reuse channels safely (checked down from the windows); below it they fail, which the kernel tests."""
    counts = plan.window_counts()
    checked = []
    for loop in plan.loops:
        windows = {loop.window + step * loop.period for step in range(3)}
        minimum = 0
        for n in reversed(range(loop.window + 3 * loop.period)):
            problem = None if n in windows else _mismatch(plan, {**counts, loop.name: n})
            if problem is None:
                continue
            if n >= loop.window:
                raise SymbolicAnalysisError(f"loop '{loop.name}', trip count {n}: {problem}")
            minimum = n + 1
            break
        checked.append(LongLoop(loop.node, loop.period, loop.window, minimum))
    return tuple(checked)


def _persistent_nest(tree: ScheduleTree) -> PersistentNest | None:
    """The persistent nest that is the whole pipeline of `tree`, or None (module doc)."""
    if len(tree.children) != 1 or not isinstance(tree.children[0], LoopNode):
        return None
    outer = tree.children[0]
    inner = [child for child in outer.children if isinstance(child, LoopNode)]
    if len(inner) != 1 or any(isinstance(child, LoopNode) for child in inner[0].children):
        return None
    inner = inner[0]
    analyzer = sym.Analyzer()
    step = tirx.Var(f"{outer.var.name}_{inner.var.name}", outer.var.ty)
    analyzer.bind(step, tvm.ir.Range(0, 1 << 30))
    outer_var, inner_var = outer.var, inner.var
    running = {outer_var: tirx.floordiv(step, inner.extent), inner_var: tirx.floormod(step, inner.extent)}
    written = _written(tree)

    def flat_regions(regions: tuple[Region, ...]) -> tuple[Region, ...]:
        return tuple(Region(r.buffer, tuple((analyzer.simplify(substitute(lo, running)),
                                             analyzer.simplify(substitute(ext, running))) for lo, ext in r.bounds))
                     for r in regions if r.buffer.name in written)

    extent = outer.extent * inner.extent
    if not isinstance(extent, int):
        extent = analyzer.simplify(extent)
    loop = tirx.For(step, 0, extent, tirx.ForKind.SERIAL, tirx.Evaluate(0))
    tasks = tuple(TaskNode(task.name, task.role, task.realize, flat_regions(task.reads), flat_regions(task.writes),
                           (loop,)) for task in inner.children)
    return PersistentNest(outer, inner, LoopNode(loop, extent, tasks))


def _prove_private_tile_tasks(tree: ScheduleTree, nest: PersistentNest) -> None:
    """Step a: the prologue and epilogue tasks of the nest conflict with no task of another warp role."""
    analyzer = sym.Analyzer()
    for loop in tree.grid_loops:
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    loops = {}
    for name, node in (("a", nest.outer), ("a", nest.inner), ("b", nest.outer), ("b", nest.inner)):
        var = tirx.Var(f"{node.var.name}_{name}", node.var.ty)
        analyzer.bind(var, tvm.ir.Range(0, 1 << 30))
        loops.setdefault(name, {})[node.var] = var
    for task in nest.outer.children:
        if not isinstance(task, TaskNode):
            continue
        for other in tree.tasks():
            if other.role == task.role:
                continue
            pairs = [(w, r) for w in task.writes for r in _regions(other)]
            pairs += [(r, w) for r in task.reads for w in other.writes]
            for x, y in pairs:
                if x.buffer.name != y.buffer.name:
                    continue
                if not regions_disjoint(x.substituted(loops["a"]), y.substituted(loops["b"]), analyzer):
                    raise SymbolicAnalysisError(
                        f"loop '{nest.outer.var.name}': cannot prove that block '{task.name}' (outside the loop "
                        f"'{nest.inner.var.name}') touches {x.buffer.name} apart from block '{other.name}' of warp "
                        f"role {other.role} in every iteration; a persistent nest synchronizes only the tasks of "
                        "its inner loop")


def _require_running_step_regions(nest: PersistentNest) -> None:
    """Step b needs the inner tasks' regions to be functions of the running step once the nest's variables are
    replaced by it: one that keeps a variable of a symbolic trip count (a ring indexed by `ko % S` with a symbolic
    `N_k`) is refused naming the user's loops and region, not the synthesized flat loop."""
    if nest.flat.constant:
        return
    variables: list[tirx.Var] = []
    tvm_ffi.structural_walk(nest.flat.extent, (tirx.Var, variables.append))
    outer, inner = nest.outer, nest.inner
    for task, flat in zip(inner.children, nest.flat.children, strict=True):
        for region in _regions(flat):
            used = next((v.name for v in variables for lo, ext in region.bounds if uses_var(lo, v) or uses_var(ext, v)),
                        None)
            if used is None:
                continue
            declared = next(r for r in _regions(task) if r.buffer.same_as(region.buffer))
            raise SymbolicAnalysisError(
                f"loop '{outer.var.name}': the persistent nest {outer.var.name} x {inner.var.name} is one pipeline "
                f"over the running step {outer.var.name} * {inner.extent} + {inner.var.name}, but block "
                f"'{task.name}' accesses {region_text(declared)}, which is no function of the running step (with "
                f"{outer.var.name} = step // {inner.extent} and {inner.var.name} = step % {inner.extent} it still "
                f"uses '{used}'); index a ring by the running step, e.g. "
                f"[({outer.var.name} * {inner.extent} + {inner.var.name}) % stages], and a per-tile buffer by "
                f"neither (accumulate into one tile and store it after loop '{inner.var.name}', as the example "
                "GEMMs do)")


def _persistent_plan(tree: ScheduleTree, nest: PersistentNest) -> SymbolicPlan:
    """Steps a-c for a persistent nest."""
    _prove_private_tile_tasks(tree, nest)
    _require_running_step_regions(nest)
    flat_tree = ScheduleTree(tree.func, tree.root_block, tree.grid_loops, (nest.flat,), tree.asserts)
    flat = _loop_plan(flat_tree)
    if any(loop.min_trip_count for loop in flat.loops):
        raise SymbolicAnalysisError(
            f"loop '{nest.outer.var.name}': the rules of the persistent nest hold only from "
            f"{flat.loops[0].min_trip_count} running steps on; a trip count per CTA cannot be asserted")
    plan = SymbolicPlan(tree, flat.loops, flat.groups, flat.channel_count, nest)
    counts = plan.window_counts()
    exact = sorted(pair for g in _exact_plan(tree, counts).groups for pair in g.edges)
    if sorted(pair for g in plan.instantiate(counts).groups for pair in g.edges) != exact:
        raise SymbolicAnalysisError(f"loop '{nest.outer.var.name}': the rules of the running step give other "
                                    f"dependences than the exact analysis of the nest at trip counts {counts}")
    return plan


def symbolic_plan(tree: ScheduleTree) -> SymbolicPlan:
    """The channel groups of `tree` as rules over its long loops (module doc); raises `SymbolicAnalysisError`."""
    nest = _persistent_nest(tree)
    if nest is not None:
        return _persistent_plan(tree, nest)
    for top in tree.children:  # `tree` accepts a symbolic trip count only at the top or directly in a top loop
        for node in top.children if isinstance(top, LoopNode) else ():
            if isinstance(node, LoopNode) and not node.constant:
                raise SymbolicAnalysisError(
                    f"loop '{node.var.name}' inside loop '{top.var.name}' has the symbolic trip count {node.extent}; "
                    "a symbolic loop in a loop is analyzed only as a persistent nest: the pipeline is one loop "
                    "holding tasks and exactly one loop of tasks")
    return _loop_plan(tree)


def _loop_plan(tree: ScheduleTree) -> SymbolicPlan:
    """Steps 1-5 for the long loops at the top of the pipeline."""
    loops = _long_loops(tree)
    result = _extrapolate(tree, loops)
    if isinstance(result, int):
        loops = [LongLoop(loop.node, loop.period, max(loop.window, result)) for loop in loops]
        result = _extrapolate(tree, loops)
        if isinstance(result, int):
            raise SymbolicAnalysisError(
                f"loop '{loops[0].name}': a dependence spans more iterations than the analysis window")
    groups, channel_count = result
    _prove_rules(tree, loops, groups)
    plan = SymbolicPlan(tree, tuple(loops), groups, channel_count)
    return SymbolicPlan(tree, _validate_small(plan), groups, channel_count)
