"""Schedule tree: the loops and warp-role blocks of a scheduled kernel, in program order.

Algorithm. Walk the body of the root block once. Outermost loops bound to `blockIdx.*` are *grid loops*: every
iteration of them (a CTA on CUDA) runs the whole producer/consumer pipeline independently, so they are recorded
apart and take no part in the analysis. Below them, the *pipeline* is a tree whose inner nodes are serial loops
(constant or symbolic trip counts) and whose leaves are *tasks*: blocks annotated with `warp_role` (the producers
and consumers of the pipeline; a block is a producer of what it writes and a consumer of what it reads). The read
and write regions of every task are rewritten from the block's iteration variables to the enclosing loop
variables, so each task instance (one per loop iteration) has concrete buffer ranges once the loop variables are
known.

Accepted input form (anything else is rejected with `WarpSpecializeInputError` naming the block or statement):

* a `PrimFunc` with `T.sblock` blocks (`@T.prim_func(s_tir=True)`), whose root block may allocate buffers
  (typically the multi-buffered shared rings indexed by a stage such as `k % 3`) and carries no `warp_role`;
* the root block's body is zero or more nested loops bound to `blockIdx.x/y/z` (each the only statement of its
  parent), then the pipeline;
* the pipeline is a sequence of serial `for` loops with constant start 0, and block realizes; an extent is a
  constant or, for a loop at the top of the pipeline or directly in one (a persistent nest, see
  `warpspec.symbolic`), an expression of the kernel's scalar parameters and buffer dimensions (a symbolic trip
  count, analyzed by `warpspec.symbolic`); a loop at the top may also use the grid loop variables (a trip count
  per CTA, e.g. the tiles of one CTA of a persistent kernel);
* every block in the pipeline carries the annotation `warp_role` (a non-negative int), has a true predicate, no
  `init`, no buffer allocation and no match buffers, no loop bound to a thread or parallel and no thread barrier
  (`THREAD_BARRIER_OPS`) in its body (the pass gives each warp role its threads and synchronizes them itself), and
  is not nested in another annotated block; its read and
  write regions bound everything it touches (the analysis derives the synchronization from them; each access
  region that TVM's block access analysis detects in the body must provably lie within them, see
  `check_declared_regions`);
* the names of the pipeline loop variables are distinct, and so are the names of the task blocks;
* the regions of a buffer that tasks of two warp roles share move together with the grid loop variables, or lie
  apart in every CTA but the first (the synchronization is derived for the first CTA; checked by
  `graphs.require_grid_invariance` when `analyze` runs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.s_tir import SBlock, SBlockRealize

from ..ir_utils import has_unit_step, substitute

WARP_ROLE = "warp_role"
THREAD_BARRIER_OPS = ("tirx.tvm_storage_sync", "tirx.cuda.cta_sync")
"""Thread barriers (`__syncthreads`, `__syncwarp`): a task runs on some threads only, so it must not call them."""

__all__ = [
    "WARP_ROLE",
    "LoopNode",
    "Region",
    "ScheduleTree",
    "TaskNode",
    "WarpSpecializeInputError",
    "build_schedule_tree",
    "check_declared_regions",
    "region_text",
]


class WarpSpecializeInputError(ValueError):
    """The kernel is not in the form WarpSpecialize accepts (see `tvm_tailsplit.warpspec.tree`)."""


@dataclass(frozen=True)
class Region:
    """A buffer range read or written by a task, as `(min, extent)` expressions of the pipeline loop variables."""

    buffer: tirx.Buffer
    bounds: tuple[tuple[tirx.Expr, tirx.Expr], ...]

    def substituted(self, mapping: dict) -> Region:
        """This range with the variables of `mapping` replaced (`ir_utils.substitute`) in every bound."""
        return Region(self.buffer, tuple((substitute(lo, mapping), substitute(ext, mapping))
                                         for lo, ext in self.bounds))


@dataclass(frozen=True)
class TaskNode:
    """A warp-role block: one producer/consumer per iteration of its enclosing pipeline loops."""

    name: str
    role: int
    realize: SBlockRealize
    reads: tuple[Region, ...]
    writes: tuple[Region, ...]
    loops: tuple[tirx.For, ...] = field(default=(), compare=False)
    """The enclosing pipeline loops, outermost first."""

    def describe(self, indent: str = "") -> str:
        reads = ", ".join(region_text(r) for r in self.reads)
        writes = ", ".join(region_text(r) for r in self.writes)
        return f"{indent}task {self.name} (warp role {self.role}) reads [{reads}] writes [{writes}]"


@dataclass(frozen=True)
class LoopNode:
    """A serial pipeline loop `for var in range(extent)`; `extent` is an int or a symbolic `PrimExpr`."""

    loop: tirx.For
    extent: int | tirx.Expr
    children: tuple[TreeNode, ...]

    @property
    def var(self) -> tirx.Var:
        return self.loop.loop_var

    @property
    def constant(self) -> bool:
        """True when the trip count is a known int."""
        return isinstance(self.extent, int)

    def describe(self, indent: str = "") -> str:
        lines = [f"{indent}for {self.var.name} in range({self.extent}):"]
        lines += [child.describe(indent + "  ") for child in self.children]
        return "\n".join(lines)


TreeNode = LoopNode | TaskNode


@dataclass(frozen=True)
class ScheduleTree:
    """The pipeline of a kernel: its leading run-time checks (`asserts`, which every generated form keeps before
    everything else), grid loops, then a tree of serial loops and warp-role tasks."""

    func: tirx.PrimFunc
    root_block: SBlock
    grid_loops: tuple[tirx.For, ...]
    children: tuple[TreeNode, ...]
    asserts: tuple[tirx.Stmt, ...] = ()

    @property
    def pipeline(self) -> tirx.Stmt:
        """The input's statement inside the grid loops (the root block's body when there are none)."""
        return self.grid_loops[-1].body if self.grid_loops else _after_asserts(self.root_block.body)[1]

    def loops(self) -> list[LoopNode]:
        """The pipeline loops in program order (outer loops before the loops they contain)."""
        found: list[LoopNode] = []

        def visit(node: TreeNode) -> None:
            if isinstance(node, LoopNode):
                found.append(node)
                for child in node.children:
                    visit(child)

        for child in self.children:
            visit(child)
        return found

    def tasks(self) -> list[TaskNode]:
        """The tasks in program order."""
        found: list[TaskNode] = []

        def visit(node: TreeNode) -> None:
            if isinstance(node, TaskNode):
                found.append(node)
            else:
                for child in node.children:
                    visit(child)

        for child in self.children:
            visit(child)
        return found

    def with_trip_counts(self, counts: dict[str, int]) -> ScheduleTree:
        """The same tree with the trip counts of the loops named in `counts` (by loop variable) replaced: the
        windows of `warpspec.symbolic` and the small instantiations that `check` explores. A replaced symbolic trip
        count is replaced in the task regions too (e.g. the running step `tt * (K // 64) + ko` of a persistent
        nest)."""
        replaced = [(loop.extent, counts[loop.var.name]) for loop in self.loops()
                    if not loop.constant and loop.var.name in counts]

        def rebuild(node: TreeNode) -> TreeNode:
            if isinstance(node, TaskNode):
                return _with_extents(node, replaced) if replaced else node
            children = tuple(rebuild(child) for child in node.children)
            return LoopNode(node.loop, counts.get(node.var.name, node.extent), children)

        return ScheduleTree(self.func, self.root_block, self.grid_loops,
                            tuple(rebuild(child) for child in self.children), self.asserts)

    @property
    def roles(self) -> tuple[int, ...]:
        """The warp roles, sorted."""
        return tuple(sorted({task.role for task in self.tasks()}))

    def describe(self) -> str:
        """The schedule tree as indented text: grid loops, pipeline loops and tasks (role, regions)."""
        lines = [f"grid loop {loop.loop_var.name} ({loop.thread_binding.thread_tag}) x {loop.extent}"
                 for loop in self.grid_loops]
        lines += [child.describe() for child in self.children]
        return "\n".join(lines)


def _with_extents(task: TaskNode, replaced: list[tuple[tirx.Expr, int]]) -> TaskNode:
    """`task` with every sub-expression of its regions equal to a replaced trip count expression (after
    simplification by `tvm.sym`) replaced."""
    analyzer = sym.Analyzer()
    simplified = [(analyzer.simplify(extent), count) for extent, count in replaced]

    def replace(expr):
        for extent, count in simplified:
            if type(expr) is type(extent) and tvm_ffi.structural_equal(analyzer.simplify(expr), extent):
                return tirx.IntImm(extent.ty.dtype, count)
        return expr

    def region(r: Region) -> Region:
        bounds = tuple(tuple(tvm_ffi.structural_map(e, [(type(x), replace) for x, _ in simplified], order="pre")
                             for e in bound) for bound in r.bounds)
        return Region(r.buffer, bounds)

    return TaskNode(task.name, task.role, task.realize, tuple(region(r) for r in task.reads),
                    tuple(region(w) for w in task.writes), task.loops)


def region_text(region: Region) -> str:
    """`region` as `buffer[lo:hi, ...]` (the ends simplified), for messages and descriptions."""
    analyzer = sym.Analyzer()
    dims = ", ".join(f"{lo}:{analyzer.simplify(lo + ext)}" for lo, ext in region.bounds)
    return f"{region.buffer.name}[{dims}]"


def _task(realize: SBlockRealize, loops: tuple[tirx.For, ...]) -> TaskNode:
    block = realize.block
    name = block.name_hint
    if WARP_ROLE not in block.annotations:
        raise WarpSpecializeInputError(
            f"block '{name}' in the pipeline has no '{WARP_ROLE}' annotation; annotate every block between the "
            f"pipeline loops with sch.annotate(block, '{WARP_ROLE}', role)"
        )
    role = block.annotations[WARP_ROLE]
    if isinstance(role, tirx.IntImm) and role.ty.dtype == "bool":
        role = bool(role.value)
    if not isinstance(role, int | tirx.IntImm) or isinstance(role, bool) or int(role) < 0:
        raise WarpSpecializeInputError(f"block '{name}': '{WARP_ROLE}' must be a non-negative int, got {role!r}")
    if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate) == 1):
        raise WarpSpecializeInputError(f"block '{name}' has a predicate ({realize.predicate}); tasks must be "
                                       "unconditional")
    if block.init is not None or len(block.alloc_buffers) or len(block.match_buffers):
        raise WarpSpecializeInputError(f"block '{name}' has an init, buffer allocations or match buffers; "
                                       "tasks must not")

    def visit_inner(inner: SBlock | tirx.For):
        if WARP_ROLE in inner.annotations:
            kind = "block" if isinstance(inner, SBlock) else "loop"
            return tvm_ffi.VisitInterrupt(f"{kind} '{inner.name_hint if kind == 'block' else inner.loop_var.name}'")
        return None

    nested = tvm_ffi.structural_walk(block.body, [(SBlock, visit_inner), (tirx.For, visit_inner)])
    if nested is not None:
        raise WarpSpecializeInputError(f"{nested.value} with '{WARP_ROLE}' is nested in block '{name}'")

    def spread(loop: tirx.For):
        if loop.kind in (tirx.ForKind.THREAD_BINDING, tirx.ForKind.PARALLEL):
            how = (f"bound to {loop.thread_binding.thread_tag}" if loop.kind == tirx.ForKind.THREAD_BINDING
                   else "marked parallel")
            return tvm_ffi.VisitInterrupt(f"loop '{loop.loop_var.name}' {how}")
        return None

    def barrier(call: tvm.ir.Call):
        name = getattr(call.op, "name", "")
        return tvm_ffi.VisitInterrupt(name) if name in THREAD_BARRIER_OPS else None

    called = tvm_ffi.structural_walk(block.body, (tvm.ir.Call, barrier))
    if called is not None:
        raise WarpSpecializeInputError(
            f"block '{name}' calls the thread barrier {called.value}; only some threads run a task (one warp role, "
            "or its first thread), so a barrier that waits for the block's or the warp's other threads never "
            "completes: WarpSpecialize synchronizes the roles (channels) and the threads of a role (its named "
            "barrier) itself, remove it")
    spread_loop = tvm_ffi.structural_walk(block.body, (tirx.For, spread))
    if spread_loop is not None:
        raise WarpSpecializeInputError(
            f"block '{name}' has the {spread_loop.value}; WarpSpecialize gives each warp role its own threads (CUDA: "
            "threads_per_role, over which it spreads a task's independent loops; llvm: one CPU thread per role): "
            "leave the loops of a task serial")
    mapping = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values, strict=True)}

    def region(buffer_region) -> Region:
        bounds = tuple((substitute(r.min, mapping), substitute(r.extent, mapping)) for r in buffer_region.region)
        return Region(buffer_region.source, bounds)

    return TaskNode(name, int(role), realize, tuple(region(r) for r in block.reads),
                    tuple(region(w) for w in block.writes), loops)


def _terms(expr: tirx.PrimExpr, kind: type) -> list[tirx.PrimExpr]:
    """The operands of a tree of `kind` (`tirx.Min` or `tirx.Max`) nodes, a constant added to the tree added to
    each of them and a positive constant factor multiplying each of them (TVM's simplifier factors it out of two
    strided accesses): `max(max(a, b), 1) + 1` gives `a + 1, b + 1, 2`, `min(a, b + 1) * 4` gives `a * 4,
    (b + 1) * 4`."""
    if isinstance(expr, kind):
        return _terms(expr.a, kind) + _terms(expr.b, kind)
    if isinstance(expr, tirx.Add) and isinstance(expr.b, tirx.IntImm):
        inner = _terms(expr.a, kind)
        if len(inner) > 1:
            return [term + expr.b for term in inner]
    if isinstance(expr, tirx.Mul) and isinstance(expr.b, tirx.IntImm) and int(expr.b) > 0:
        inner = _terms(expr.a, kind)
        if len(inner) > 1:
            return [term * expr.b for term in inner]
    return [expr]


def _covers(analyzer: sym.Analyzer, declared: list, accessed) -> bool:
    """True when `accessed` provably lies within the hull of the `declared` regions of its buffer: its `min` (and
    end), a min (max) of terms as TVM's access analysis unites several accesses, is at least (at most) the least
    (greatest) declared bound, each of its terms compared with each declared bound (`tvm.sym` does not reorder
    nested mins and maxes)."""
    for dim, access in enumerate(accessed.region):
        lows = [d.region[dim].min for d in declared]
        highs = [d.region[dim].min + d.region[dim].extent for d in declared]
        lo, hi = functools.reduce(tirx.min, lows), functools.reduce(tirx.max, highs)
        start, end = access.min, analyzer.simplify(access.min + access.extent)
        if not (analyzer.can_prove(lo <= start)
                or all(any(analyzer.can_prove(low <= term) for low in lows) for term in _terms(start, tirx.Min))):
            return False
        if not (analyzer.can_prove(end <= hi)
                or all(any(analyzer.can_prove(term <= high) for high in highs) for term in _terms(end, tirx.Max))):
            return False
    return True


def check_declared_regions(block: SBlock, buffers: dict, loops: tuple[tirx.For, ...] = ()) -> None:
    """Raise `WarpSpecializeInputError` when the body of `block` accesses a buffer outside the regions the block
    declares (`T.reads` / `T.writes`), as far as TVM's block access analysis
    (`s_tir.analysis.get_sblock_read_write_region`) and `tvm.sym` can tell.

    The analysis derives the synchronization from the declared regions only, so an understated region would give
    a racy program. A detected region must provably lie within the hull of the declared regions of its buffer
    (read regions within the reads, write regions within the writes; an opaque access counts as both), with the
    block's iteration variables in their domains and the variables the body binds (`Bind`, e.g. TailSplit's
    `min` extents of a tail tile's loops) at their values, and the variables of `loops` (the loops around the
    block, which its regions may use directly) in their ranges. `buffers` maps the buffers visible to the block to
    themselves.
    """
    detected_reads, detected_writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
    analyzer = sym.Analyzer()
    for loop in loops:
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    for iter_var in block.iter_vars:
        analyzer.bind(iter_var.var, iter_var.dom)
    tvm_ffi.structural_walk(block.body, (tirx.Bind, lambda bind: analyzer.bind(bind.var, bind.value)))
    for kind, detected, declared in (("reads", detected_reads, block.reads), ("writes", detected_writes, block.writes)):
        for accessed in detected:
            same = [d for d in declared if d.source.same_as(accessed.source)]
            if same and _covers(analyzer, same, accessed):
                continue
            stated = ", ".join(str(d) for d in same) if same else "nothing"
            raise WarpSpecializeInputError(
                f"block '{block.name_hint}' {kind} {accessed} in its body but declares {stated} for buffer "
                f"'{accessed.source.name}' in T.{kind}; WarpSpecialize derives the synchronization from the declared "
                f"regions, so declare every access (T.{kind}({accessed}) or wider)")


def _statements(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [s for part in stmt.seq for s in _statements(part)]
    return [stmt]


def _require_kernel_scalars(extent: tirx.Expr, name: str, outer: tuple[tirx.Var, ...],
                            loops: tuple[tirx.For, ...]) -> None:
    """The symbolic extent of a nested loop may use the kernel's scalar parameters and buffer dimensions, not the
    grid loops nor the pipeline loops around it (a triangular nest)."""

    def find(candidates: tuple[tirx.Var, ...]) -> str | None:
        def hit(v):
            return tvm_ffi.VisitInterrupt(v.name) if any(v.same_as(c) for c in candidates) else None

        found = tvm_ffi.structural_walk(extent, (tirx.Var, hit))
        return None if found is None else found.value

    grid = find(outer)
    if grid is not None:
        raise WarpSpecializeInputError(f"the extent {extent} of loop '{name}' uses the grid loop variable "
                                       f"'{grid}'; only a loop at the top of the pipeline may have a trip "
                                       "count per CTA")
    pipeline = find(tuple(loop.loop_var for loop in loops))
    if pipeline is not None:
        raise WarpSpecializeInputError(f"the extent {extent} of loop '{name}' uses the variable of the pipeline "
                                       f"loop '{pipeline}' around it; the trip count of a loop in the pipeline may "
                                       "not change with the iterations of an enclosing loop (a triangular nest): "
                                       "give it a constant or an expression of the kernel's parameters")


def _pipeline(stmt, loops: tuple[tirx.For, ...], loop_names: set[str], where: str,
              outer: tuple[tirx.Var, ...]) -> tuple[TreeNode, ...]:
    nodes: list[TreeNode] = []
    for s in _statements(stmt):
        if isinstance(s, SBlockRealize):
            nodes.append(_task(s, loops))
        elif isinstance(s, tirx.For):
            name = s.loop_var.name
            if WARP_ROLE in s.annotations:
                raise WarpSpecializeInputError(
                    f"loop '{name}' {where} carries '{WARP_ROLE}'; warp roles mark blocks: make the loop a block "
                    f"(sch.blockize(loop)) and annotate that with sch.annotate(block, '{WARP_ROLE}', role)")
            tag = s.thread_binding.thread_tag if s.thread_binding is not None else ""
            if tag.startswith("blockIdx."):
                raise WarpSpecializeInputError(
                    f"loop '{name}' {where} is bound to {tag}; grid loops must enclose the whole pipeline: the "
                    "outermost loops of the root block (after its asserts), each the only statement of its parent, "
                    "so move the statements beside it into it")
            if s.kind != tirx.ForKind.SERIAL:
                raise WarpSpecializeInputError(f"loop '{name}' {where} is {tirx.ForKind(s.kind).name.lower()}; "
                                               "pipeline loops must be serial")
            if not has_unit_step(s):
                raise WarpSpecializeInputError(f"loop '{name}' {where} has the step {s.step}; pipeline loops must "
                                               "have step 1")
            if not (isinstance(s.min, tirx.IntImm) and int(s.min) == 0):
                raise WarpSpecializeInputError(f"loop '{name}' {where} must start at 0")
            if not isinstance(s.extent, tirx.IntImm):
                if len(loops) > 1:
                    raise WarpSpecializeInputError(
                        f"loop '{name}' {where} has the symbolic extent {s.extent}; only loops at the top of the "
                        "pipeline or directly in one may have a symbolic trip count")
                if loops:
                    _require_kernel_scalars(s.extent, name, outer, loops)
            if name in loop_names:
                raise WarpSpecializeInputError(f"loop variable name '{name}' {where} is used twice; rename it")
            loop_names.add(name)
            children = _pipeline(s.body, (*loops, s), loop_names, f"inside loop '{name}'", outer)
            extent = int(s.extent) if isinstance(s.extent, tirx.IntImm) else s.extent
            nodes.append(LoopNode(s, extent, children))
        elif isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.IntImm):
            continue
        else:
            raise WarpSpecializeInputError(
                f"unsupported statement {type(s).__name__} {where}; the pipeline holds only serial loops and "
                f"blocks annotated with '{WARP_ROLE}'"
            )
    return tuple(nodes)


def _after_asserts(stmt: tirx.Stmt) -> tuple[tuple[tirx.Stmt, ...], tirx.Stmt]:
    """The `AssertStmt`s leading `stmt` (the input's own run-time checks) and the statement after them."""
    asserts: list[tirx.Stmt] = []
    while isinstance(stmt, tirx.SeqStmt) and isinstance(stmt.seq[0], tirx.AssertStmt):
        asserts.append(stmt.seq[0])
        rest = list(stmt.seq[1:])
        stmt = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
    return tuple(asserts), stmt


def build_schedule_tree(func: tirx.PrimFunc) -> ScheduleTree:
    """Build the schedule tree of `func`, or raise `WarpSpecializeInputError` naming the offending part (a
    `TypeError` when `func` is not a PrimFunc)."""
    if not isinstance(func, tirx.PrimFunc):
        hint = " (pass one of its functions, e.g. mod['main'])" if isinstance(func, tvm.IRModule) else ""
        raise TypeError(f"the kernel must be a tvm.tirx.PrimFunc, got {type(func).__name__}{hint}")
    body = func.body
    if not (isinstance(body, SBlockRealize) and body.block.name_hint == "root"):
        raise WarpSpecializeInputError("the kernel must be an s_tir function with a root block "
                                       "(@T.prim_func(s_tir=True))")
    root = body.block
    if WARP_ROLE in root.annotations:
        raise WarpSpecializeInputError(
            f"the root block carries '{WARP_ROLE}' (a mark there applies to no task); annotate each block of the "
            f"pipeline with its warp role instead: sch.annotate(block, '{WARP_ROLE}', role)")
    asserts, stmt = _after_asserts(root.body)
    grid: list[tirx.For] = []
    while (isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.THREAD_BINDING
           and stmt.thread_binding is not None and stmt.thread_binding.thread_tag.startswith("blockIdx.")):
        grid.append(stmt)
        stmt = stmt.body
    children = _pipeline(stmt, (), set(), "in the pipeline", tuple(loop.loop_var for loop in grid))
    tree = ScheduleTree(func, root, tuple(grid), children, asserts)
    if not tree.tasks():
        raise WarpSpecializeInputError(f"no block annotated with '{WARP_ROLE}' found in the pipeline")
    names = [task.name for task in tree.tasks()]
    repeated = next((name for n, name in enumerate(names) if name in names[:n]), None)
    if repeated is not None:
        raise WarpSpecializeInputError(f"two blocks of the pipeline are named '{repeated}'; the synchronization is "
                                       "attached to tasks by name, so rename one")
    buffers = {buffer: buffer for buffer in (*func.params, *root.alloc_buffers)
               if not isinstance(buffer.ty, tvm.ir.PrimType)}
    for task in tree.tasks():
        check_declared_regions(task.realize.block, buffers, (*grid, *task.loops))
    return tree
