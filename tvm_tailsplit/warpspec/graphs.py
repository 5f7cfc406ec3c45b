"""Control-data flow graph (CDFG) and control-data-resource flow graph (CDRFG) over buffer ranges.

Vocabulary. A *task instance* is one execution of a warp-role block for concrete values of its enclosing pipeline
loops. It is a *producer* of the ranges it writes and a *consumer* of the ranges it reads. Instances of one warp
role run in program order (*control dependences*). Instances of different roles run concurrently and need
synchronization:

* a **data dependence** producer → consumer: the consumer reads a range whose last writer before it (in the
  sequential program) is the producer on another warp role (computed per element: the consumer's range is
  covered by walking the earlier writers backwards, each writer taking the part it wrote last);
* a **resource dependence** consumer → later producer: for every other warp role, the first later instance on that
  role that writes a range overlapping what the consumer holds (reads, or writes: write-after-write is the same
  hazard). The consumer holds its whole range until it releases it, so only the *first* overlapping producer of
  each role waits; later producers of that role are ordered after it by program order. This is range-level, not
  whole-buffer, and multi-buffering (a stage index such as `k % 3`) follows from the ranges: the producer of
  stage `s` at iteration `k + 3` depends on the consumer of iteration `k`.

This module works on explicit instances: the loops are unrolled (constant trip counts, at most `max_instances`
instances); the grid loops are fixed at 0 (CTAs are independent). The synchronization of the first CTA orders
the instances that conflict in every CTA when these conflict in the first too: the regions of a buffer that tasks
of two warp roles share move together with the grid loop variables, or lie apart in every CTA but the first;
`require_grid_invariance` proves this with `tvm.sym` and rejects the kernel otherwise (e.g. a consumer reading
`S[b * 8:b * 8 + 8]` of a shared buffer its producers fill at fixed offsets). The CDFG holds the data dependences;
the CDRFG adds the resource dependences. It serves small kernels (the seed example, tests, `check`, `to_dot`) and the
bounded windows from which `warpspec.symbolic` derives the dependences of long or symbolic pipeline loops as
rules (producer task, consumer task, iteration distance) without unrolling them.

**Redundancy elimination**: all edges go forward in the sequential program order, so the graph of program order plus
synchronization edges is a DAG whose topological order is that order. A data or resource edge u → v is redundant
when u already reaches v through another predecessor of v (program order or another edge): the dependence is then
implied when v arrives. Ancestor sets are bitsets computed once in topological order; because the graph is a DAG,
removing every such edge at once preserves reachability (the transitive reduction).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import tvm
from tvm import sym, tirx

from ..ir_utils import substitute, uses_var
from .tree import Region, ScheduleTree, TaskNode, WarpSpecializeInputError, region_text

__all__ = [
    "DATA",
    "RESOURCE",
    "Dependence",
    "ancestor_bitsets",
    "boxes_overlap",
    "FlowGraph",
    "Instance",
    "control_data_flow_graph",
    "control_data_resource_flow_graph",
    "eliminate_redundant",
    "evaluate_index",
    "regions_disjoint",
    "require_grid_invariance",
    "unroll_instances",
]

DATA = "data"
RESOURCE = "resource"

Box = tuple[tuple[int, int], ...]
"""A buffer range as half-open `[lo, hi)` intervals per dimension."""

_BINARY = {
    tirx.Add: lambda a, b: a + b,
    tirx.Sub: lambda a, b: a - b,
    tirx.Mul: lambda a, b: a * b,
    tirx.FloorDiv: lambda a, b: a // b,
    tirx.FloorMod: lambda a, b: a % b,
    tirx.Min: min,
    tirx.Max: max,
}


def evaluate_index(expr: tirx.PrimExpr | int, env: dict[str, int]) -> int:
    """Evaluate an integer index expression of loop variables (`env` maps variable names to values)."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        if expr.name not in env:
            raise WarpSpecializeInputError(f"index variable '{expr.name}' is not a pipeline or grid loop variable")
        return env[expr.name]
    if isinstance(expr, tirx.Cast):
        return evaluate_index(expr.value, env)
    for node_type, op in _BINARY.items():
        if isinstance(expr, node_type):
            return op(evaluate_index(expr.a, env), evaluate_index(expr.b, env))
    if isinstance(expr, tirx.Div | tirx.Mod):
        a, b = evaluate_index(expr.a, env), evaluate_index(expr.b, env)
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return quotient if isinstance(expr, tirx.Div) else a - quotient * b
    raise WarpSpecializeInputError(f"cannot evaluate the index expression {expr} ({type(expr).__name__})")


@dataclass(frozen=True)
class Instance:
    """One execution of a task: `index` counts the task's instances in program order."""

    position: int
    task: TaskNode = field(compare=False, repr=False)
    index: int
    iteration: tuple[int, ...]
    reads: tuple[tuple[str, Box], ...] = field(compare=False, repr=False)
    writes: tuple[tuple[str, Box], ...] = field(compare=False, repr=False)

    @property
    def role(self) -> int:
        return self.task.role

    @property
    def name(self) -> str:
        if not self.iteration:
            return self.task.name
        return f"{self.task.name}[{','.join(str(i) for i in self.iteration)}]"


@dataclass(frozen=True)
class Dependence:
    """A synchronization edge between instances on different warp roles (positions in program order)."""

    src: int
    dst: int
    kind: str
    buffers: tuple[str, ...]


def _box(region: Region, env: dict[str, int]) -> Box:
    return tuple(
        (evaluate_index(lo, env), evaluate_index(lo, env) + evaluate_index(ext, env)) for lo, ext in region.bounds
    )


def _task_box(task: TaskNode, region: Region, env: dict[str, int]) -> Box:
    """`_box` of a region of `task`; an index it cannot evaluate is an error naming the block and the region."""
    try:
        return _box(region, env)
    except WarpSpecializeInputError as err:
        raise WarpSpecializeInputError(
            f"block '{task.name}' (warp role {task.role}), region {region_text(region)}: {err}; the regions of a "
            "task may use only the pipeline and grid loop variables") from err


def boxes_overlap(a: Box, b: Box) -> bool:
    return all(alo < bhi and blo < ahi for (alo, ahi), (blo, bhi) in zip(a, b, strict=True))


def _subtract(a: Box, b: Box) -> list[Box]:
    """`a` minus `b` as disjoint boxes."""
    if not boxes_overlap(a, b):
        return [a]
    pieces: list[Box] = []
    rest = list(a)
    for dim, ((lo, hi), (blo, bhi)) in enumerate(zip(a, b, strict=True)):
        if lo < blo:
            pieces.append(tuple(rest[:dim]) + ((lo, blo),) + tuple(rest[dim + 1:]))
        if bhi < hi:
            pieces.append(tuple(rest[:dim]) + ((bhi, hi),) + tuple(rest[dim + 1:]))
        rest[dim] = (max(lo, blo), min(hi, bhi))
    return pieces


def regions_disjoint(a: Region, b: Region, analyzer: sym.Analyzer) -> bool:
    """True when `tvm.sym` proves the two ranges of one buffer disjoint: in one dimension one range ends before the
    other begins, or both lie in aligned blocks of `e1 + e2` elements (their constant extents) at disjoint
    offsets."""
    for (alo, aext), (blo, bext) in zip(a.bounds, b.bounds, strict=True):
        if analyzer.can_prove(alo + aext <= blo) or analyzer.can_prove(blo + bext <= alo):
            return True
        if isinstance(aext, tirx.IntImm) and isinstance(bext, tirx.IntImm):
            block = int(aext) + int(bext)
            aoff, boff = tirx.floormod(alo, block), tirx.floormod(blo, block)
            if (analyzer.can_prove(aoff + aext <= boff) and analyzer.can_prove(boff + bext <= block)) or (
                    analyzer.can_prove(boff + bext <= aoff) and analyzer.can_prove(aoff + aext <= block)):
                return True
    return False


def _moves_together(a: Region, b: Region, zero: dict, analyzer: sym.Analyzer) -> bool:
    """True when `tvm.sym` proves that the grid loop variables (`zero` maps them to 0) shift the two ranges by one
    vector and change no extent: then they overlap in a CTA as they do in the first."""
    for (alo, aext), (blo, bext) in zip(a.bounds, b.bounds, strict=True):
        if not all(analyzer.can_prove(ext == substitute(ext, zero)) for ext in (aext, bext)):
            return False
        if not analyzer.can_prove(alo - substitute(alo, zero) == blo - substitute(blo, zero)):
            return False
    return True


def require_grid_invariance(tree: ScheduleTree) -> None:
    """Raise `WarpSpecializeInputError` unless the instances that conflict in a CTA conflict in the first too (then
    the synchronization derived for the first orders them in every CTA; module doc): for each pair of tasks of
    different warp roles and each pair of their regions of one buffer, one of them written, that uses a grid loop
    variable, `tvm.sym` proves, for any iterations of the tasks' loops, that the grid loop variables move both by
    one vector (extents unchanged), or that they are disjoint in every CTA, or in every CTA but the first (a grid
    loop variable at least 1)."""
    grid = [loop.loop_var for loop in tree.grid_loops]
    if not grid:
        return
    zero = {var: tirx.IntImm(var.ty.dtype, 0) for var in grid}
    fresh: dict[str, dict] = {side: {loop.var: tirx.Var(f"{loop.var.name}_{side}", loop.var.ty)
                                     for loop in tree.loops()} for side in ("a", "b")}

    def analyzer_with(later: tirx.Var | None) -> sym.Analyzer:
        """The grid loop variables in their ranges (`later` from 1 on) and the loop variables unbounded."""
        analyzer = sym.Analyzer()
        for loop in tree.grid_loops:
            low = 1 if later is not None and loop.loop_var.same_as(later) else loop.min
            analyzer.bind(loop.loop_var, tvm.ir.Range(low, loop.min + loop.extent))
        for mapping in fresh.values():
            for var in mapping.values():
                analyzer.bind(var, tvm.ir.Range(0, 1 << 30))
        return analyzer

    whole = analyzer_with(None)
    later_ctas = [analyzer_with(loop.loop_var) for loop in tree.grid_loops
                  if not (isinstance(loop.extent, tirx.IntImm) and int(loop.extent) <= 1)]

    def on_grid(region: Region) -> bool:
        return any(uses_var(e, var) for bound in region.bounds for e in bound for var in grid)

    tasks = tree.tasks()
    for n, task in enumerate(tasks):
        for other in tasks[n + 1:]:
            if other.role == task.role:
                continue
            pairs = [(w, r, "writes", "reads") for w in task.writes for r in other.reads]
            pairs += [(w, r, "writes", "writes") for w in task.writes for r in other.writes]
            pairs += [(r, w, "reads", "writes") for r in task.reads for w in other.writes]
            for x, y, x_verb, y_verb in pairs:
                if not x.buffer.same_as(y.buffer) or not (on_grid(x) or on_grid(y)):
                    continue
                x_any, y_any = x.substituted(fresh["a"]), y.substituted(fresh["b"])
                if (_moves_together(x_any, y_any, zero, whole) or regions_disjoint(x_any, y_any, whole)
                        or all(regions_disjoint(x_any, y_any, analyzer) for analyzer in later_ctas)):
                    continue
                raise WarpSpecializeInputError(
                    f"block '{task.name}' (warp role {task.role}) {x_verb} {region_text(x)} and block "
                    f"'{other.name}' (warp role {other.role}) {y_verb} {region_text(y)}: the grid loop variables "
                    f"({', '.join(var.name for var in grid)}) move these ranges of {x.buffer.name} relative to each "
                    "other, so they may overlap in a CTA where they do not in the first; WarpSpecialize derives "
                    "one synchronization for every CTA from the first (grid loop variables at 0), so the regions "
                    "of a buffer that several warp roles share must move together with the grid loop variables "
                    "(by one offset, extents unchanged), or be disjoint in every CTA (but the first)")


def unroll_instances(tree: ScheduleTree, max_instances: int = 4096) -> list[Instance]:
    """All task instances of one grid iteration (grid loop variables fixed at 0), in sequential program order."""
    env: dict[str, int] = {loop.loop_var.name: 0 for loop in tree.grid_loops}
    counts: dict[str, int] = {}
    instances: list[Instance] = []

    def visit(node) -> None:
        if isinstance(node, TaskNode):
            if len(instances) >= max_instances:
                loops = ", ".join(f"'{loop.loop_var.name}'" for loop in node.loops) or "none"
                raise WarpSpecializeInputError(
                    f"more than {max_instances} task instances (task '{node.name}', loops {loops}): reduce the "
                    "pipeline trip counts for the unrolled analysis"
                )
            index = counts.get(node.name, 0)
            counts[node.name] = index + 1
            iteration = tuple(env[loop.loop_var.name] for loop in node.loops)
            reads = tuple((r.buffer.name, _task_box(node, r, env)) for r in node.reads)
            writes = tuple((w.buffer.name, _task_box(node, w, env)) for w in node.writes)
            instances.append(Instance(len(instances), node, index, iteration, reads, writes))
            return
        if not node.constant:
            raise WarpSpecializeInputError(
                f"loop '{node.var.name}' has the symbolic trip count {node.extent} and cannot be unrolled into "
                "instances; analyze it symbolically (analyze(func) without unroll=True)")
        for value in range(node.extent):
            env[node.var.name] = value
            for child in node.children:
                visit(child)
        env.pop(node.var.name, None)

    for child in tree.children:
        visit(child)
    return instances


@dataclass(frozen=True)
class FlowGraph:
    """Instances in program order with their data and resource dependences (edges between warp roles).

    `removed` holds the edges dropped by redundancy elimination (empty before it).
    """

    tree: ScheduleTree = field(repr=False)
    instances: tuple[Instance, ...]
    edges: tuple[Dependence, ...]
    removed: tuple[Dependence, ...] = ()

    def of_kind(self, kind: str) -> list[Dependence]:
        """The edges of dependence kind `kind` (`DATA` or `RESOURCE`), in edge order."""
        return [e for e in self.edges if e.kind == kind]

    def edge_names(self, kind: str | None = None) -> list[tuple[str, str]]:
        """`(producer/consumer name, name)` pairs of the edges (optionally of one kind), in edge order."""
        return [(self.instances[e.src].name, self.instances[e.dst].name)
                for e in self.edges if kind is None or e.kind == kind]

    def program_order_predecessors(self) -> list[int | None]:
        """For every instance, the previous instance of the same warp role (control dependence), or None."""
        last: dict[int, int] = {}
        previous: list[int | None] = []
        for inst in self.instances:
            previous.append(last.get(inst.role))
            last[inst.role] = inst.position
        return previous

    def describe(self) -> str:
        """The data and resource dependences as `producer->consumer` names, one line per kind."""
        lines = []
        for kind in (DATA, RESOURCE):
            names = [f"{a}->{b}" for a, b in self.edge_names(kind)]
            lines.append(f"{kind} dependences ({len(names)}): {', '.join(names) or '-'}")
        if self.removed:
            names = [f"{self.instances[e.src].name}->{self.instances[e.dst].name}" for e in self.removed]
            lines.append(f"redundant, removed ({len(names)}): {', '.join(names)}")
        return "\n".join(lines)

    def to_dot(self, name: str = "cdrfg") -> str:
        """Graphviz text of a digraph called `name`: one cluster per warp role, program order solid grey, data blue,
        resource red dashed, removed (redundant) edges dotted grey."""
        lines = [f"digraph {name} {{", "  rankdir=TB;", "  node [shape=box, fontsize=10];"]
        for role in sorted({i.role for i in self.instances}):
            lines.append(f"  subgraph cluster_role{role} {{ label=\"warp role {role}\";")
            lines += [f"    n{i.position} [label=\"{i.name}\"];" for i in self.instances if i.role == role]
            lines.append("  }")
        for position, previous in enumerate(self.program_order_predecessors()):
            if previous is not None:
                lines.append(f"  n{previous} -> n{position} [color=grey];")
        style = {DATA: "color=blue", RESOURCE: "color=red, style=dashed"}
        for e in self.edges:
            lines.append(f"  n{e.src} -> n{e.dst} [{style[e.kind]}, label=\"{','.join(e.buffers)}\"];")
        for e in self.removed:
            lines.append(f"  n{e.src} -> n{e.dst} [color=grey, style=dotted];")
        lines.append("}")
        return "\n".join(lines)


def ancestor_bitsets(count: int, previous: list[int | None], edges: Iterable[Dependence]) -> list[int]:
    """Per instance, the bitset of instances that happen before it through program order (`previous`) and
    `edges`; all edges must go forward in program order (the DAG's topological order)."""
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for e in edges:
        predecessors[e.dst].append(e.src)
    for position, prev in enumerate(previous):
        if prev is not None:
            predecessors[position].append(prev)
    ancestors = [0] * count
    for position in range(count):
        bits = 0
        for p in predecessors[position]:
            if p >= position:
                raise ValueError("synchronization edges must go forward in program order")
            bits |= ancestors[p] | (1 << p)
        ancestors[position] = bits
    return ancestors


def _merge(edges: Iterator[tuple[int, int, str, str]]) -> tuple[Dependence, ...]:
    """Merge edges with the same endpoints and kind, collecting their buffers."""
    merged: dict[tuple[int, int, str], list[str]] = {}
    for src, dst, kind, buffer in edges:
        buffers = merged.setdefault((src, dst, kind), [])
        if buffer not in buffers:
            buffers.append(buffer)
    ordered = sorted(merged.items(), key=lambda item: (item[0][1], item[0][0], item[0][2]))
    return tuple(Dependence(src, dst, kind, tuple(bufs)) for (src, dst, kind), bufs in ordered)


def control_data_flow_graph(tree: ScheduleTree, max_instances: int = 4096) -> FlowGraph:
    """Instances with control dependences (program order per role) and data dependences producer → consumer."""
    instances = unroll_instances(tree, max_instances)
    writers: dict[str, list[Instance]] = {}
    for inst in instances:
        for buffer, _ in inst.writes:
            writers.setdefault(buffer, []).append(inst)

    def data_edges() -> Iterator[tuple[int, int, str, str]]:
        for consumer in instances:
            for buffer, box in consumer.reads:
                uncovered = [box]
                for producer in reversed(writers.get(buffer, [])):
                    if producer.position >= consumer.position:
                        continue
                    for wbuffer, wbox in producer.writes:
                        if wbuffer != buffer or not any(boxes_overlap(u, wbox) for u in uncovered):
                            continue
                        if producer.role != consumer.role:
                            yield producer.position, consumer.position, DATA, buffer
                        uncovered = [piece for u in uncovered for piece in _subtract(u, wbox)]
                    if not uncovered:
                        break

    return FlowGraph(tree, tuple(instances), _merge(data_edges()))


def control_data_resource_flow_graph(cdfg: FlowGraph) -> FlowGraph:
    """Add the resource dependences consumer → first later overlapping producer of every other warp role."""
    instances = cdfg.instances
    roles = sorted({i.role for i in instances})

    def resource_edges() -> Iterator[tuple[int, int, str, str]]:
        for holder in instances:
            for buffer, box in holder.reads + holder.writes:
                for role in roles:
                    if role == holder.role:
                        continue
                    for later in instances[holder.position + 1:]:
                        if later.role != role:
                            continue
                        if any(wb == buffer and boxes_overlap(box, wbox) for wb, wbox in later.writes):
                            yield holder.position, later.position, RESOURCE, buffer
                            break

    return FlowGraph(cdfg.tree, instances, cdfg.edges + _merge(resource_edges()))


def eliminate_redundant(graph: FlowGraph) -> FlowGraph:
    """Drop every data or resource edge implied through program order and the other edges (see module doc)."""
    previous = graph.program_order_predecessors()
    ancestors = ancestor_bitsets(len(graph.instances), previous, graph.edges)
    incoming: dict[int, list[Dependence]] = {}
    for e in graph.edges:
        incoming.setdefault(e.dst, []).append(e)
    kept: list[Dependence] = []
    removed: list[Dependence] = []
    for e in graph.edges:
        others = [d.src for d in incoming[e.dst] if d.src != e.src]
        if previous[e.dst] is not None:
            others.append(previous[e.dst])
        reach = 0
        for p in others:
            reach |= ancestors[p] | (1 << p)
        (removed if reach >> e.src & 1 else kept).append(e)
    return FlowGraph(graph.tree, graph.instances, tuple(kept), graph.removed + tuple(removed))
