"""Code generation: the protocol's per-warp-role programs as TIR, for llvm (CPU threads) and CUDA (mbarriers).

Rewriting only; every decision was made by the analyses. Each warp role's program is the pipeline tree restricted
to the role's tasks (fresh loop variables per role), each task's block inlined (its iteration variables replaced by
their bindings, and so are the blocks nested in it, e.g. by `blockize`) and surrounded by its guarded
operations. For instance `index` of a task (the linear index of its enclosing pipeline loops) and a group with
`first`, `distance`, `count`, `stages`, `base`, `phase_offset` (ints, or expressions of symbolic trip counts):
`edge = index - first` (minus `distance` on the waiting side), active when `0 <= edge < count`, channel
`base + edge % stages`, parity `(phase_offset + edge // stages) % 2`, computed by the same functions the checker
uses (`SyncOp.edge_number`, `ChannelGroup.channel`, `SyncOp.parity`) on TIR expressions. Guards that are always
true are dropped, and so are operations whose guard is never true. A task in flight (`Protocol.in_flight`, Hopper
only, see `warpspec.retirement`) is followed after its loop by the target's drain and its lagged releases at the
indices `T .. T + lag - 1` of a loop of `T` iterations (the instances the loop left unreleased); for a nested
loop (a persistent nest) after every run of it, the lagged releases inside it then guarded by `iteration >= lag`.
A symbolic trip count that the plan holds for only from a minimum on (a task after the loop waiting for its last
iteration) is tested inside the grid loops: below the minimum the input's pipeline runs as it is, sequentially (on
llvm on the calling thread, on CUDA on the first thread), its blocks renamed `*_sequential`; e.g. an "init, loop,
store" kernel at a trip count of 0. (The Hopper generator asserts the minimum instead.)

llvm: the roles are the iterations of a `T.parallel` loop, i.e. real concurrent threads of TVM's pool. A parallel
launch splits the loop over the pool's threads, so with fewer threads than roles some roles would run one after
another and the first wait would spin forever: the generated function therefore first asserts
`runtime.NumThreads() >= roles` (a packed call to TVM's runtime) and raises a RuntimeError saying how to get the
threads instead of hanging (`TVM_NUM_THREADS` >= roles before the first TVM call; the pool has at most one thread
per core).
A channel is an int32 phase counter: *commit* / *release* is `__atomic_fetch_add_4(&channel, 1, release)` and
*wait* / *acquire* spins until `(__atomic_load_4(&channel, acquire) & 1) != parity` (libatomic, through
`call_extern`; the generator loads it with `load_libatomic()`, since TVM's JIT aborts the process on a symbol it
cannot resolve). Grid loops become serial loops; every grid iteration resets the
channels and runs the roles in parallel. Optionally a random delay (`usleep(rand() % delay_us)`) precedes every
task, to shake the interleavings in tests.

CUDA: `threadIdx.x` spans the roles' threads in order (role r owns `threads_per_role[r]` consecutive threads). The
outermost loops of each task body whose variables index every store are fused and strided over the role's threads
when their iterations are independent (every buffer the body writes is stored and loaded at one index tuple, which
maps the loop variables one-to-one; statements of a sequence touch no buffer another one writes); any other body
runs on the role's first thread. A buffer of a thread-private scope (`local`: every CUDA thread has its own copy,
e.g. a scalar accumulator) keeps its sequential meaning only when one thread touches it: it must belong to one warp
role (a kernel sharing one between roles is rejected naming it), and every statement touching it runs on the
role's first thread (never strided, whose threads would each update their own copy). A channel is an
mbarrier in shared memory initialised by thread 0 with the arriving role's thread count; every thread of a role
arrives, and waits spin on `mbarrier.test_wait.parity` (available from sm_80, unlike `try_wait`). When a task writes
a buffer that a task of the same role touches, or reads a buffer that another task of its role writes, a named
barrier `bar.sync(1 + role, threads)` follows it so that the role's threads see each other's writes and no thread
overwrites what another still reads (named barrier ids are constants 1..15); so it does when two instances of a
task may store one element from different threads (`D[t + i]`), so that the later instance's value lands last.

CUDA, both carriers and the Hopper form: a grid loop whose extent may be 0 (a symbolic M) launches nothing there
(the host tests `extent > 0`): TVM would launch such a grid as one block, running every role once.

CUDA with `named_barriers=True`: channel `c` is named barrier `1 + roles + c`; the producer side arrives with
`bar.arrive(id, producer + consumer threads)` and the consumer side blocks in `bar.sync(id, same count)`. A named
barrier has no phase: the channel plan's stages guarantee that a channel is reused only after its previous use
was consumed. Channel ids that depend on the loop (`base + edge % stages`) are dispatched through a chain of ifs
so that every `bar` instruction has a constant id (an id in a register makes ptxas reserve all 16 barriers).
Roles + channels must fit in the 15 ids.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.script import tirx as T

from ..cuda import MAX_THREADS_PER_BLOCK, STATIC_SHARED_MEMORY_PER_BLOCK
from ..ir_utils import (
    buffer_bytes,
    has_unit_step,
    host_if,
    runtime_assert,
    substitute,
    suffix_block_names,
    uses_var,
    with_loop,
)
from .graphs import evaluate_index
from .protocol import WAIT, Protocol, SyncOp
from .tree import LoopNode, TaskNode, WarpSpecializeInputError

__all__ = [
    "LLVM_MEMORY_ORDER_ACQUIRE",
    "LLVM_MEMORY_ORDER_RELEASE",
    "generate",
    "load_libatomic",
    "require_concurrent_threads",
]

LLVM_MEMORY_ORDER_ACQUIRE = 2
LLVM_MEMORY_ORDER_RELEASE = 3
MAX_NAMED_BARRIER = 15


def load_libatomic() -> None:
    """Make libatomic's `__atomic_*` symbols visible to code compiled by TVM's llvm JIT (`WarpSpecialize("llvm")`
    does when it generates a kernel; a process that only loads a kernel generated elsewhere calls it itself)."""
    library = ctypes.util.find_library("atomic")
    if library is None:
        raise RuntimeError("libatomic is not installed; the llvm form of WarpSpecialize needs it for atomics")
    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)


def _thread_requirement(roles: int) -> str:
    return (f"WarpSpecialize: this kernel runs its {roles} warp roles as concurrent threads of TVM's CPU thread "
            f"pool and would wait forever with fewer; set the environment variable TVM_NUM_THREADS={roles} (or "
            f"more) before the first TVM call of the process (TVM's pool is created once, with at most one "
            f"thread per core, so the machine needs at least {roles} cores)")


def require_concurrent_threads(roles: int) -> None:
    """Raise `RuntimeError` unless TVM's CPU thread pool runs at least `roles` threads at once (else the llvm form
    would deadlock; the generated function checks the same when called).

    The pool is created at the first parallel launch (or this call) with `TVM_NUM_THREADS` threads (default: 1 on
    some machines), capped at the number of cores; set the variable before that.
    """
    threads = tvm.get_global_func("runtime.NumThreads")()
    if threads < roles:
        raise RuntimeError(f"{_thread_requirement(roles)}. TVM's pool runs {threads} thread(s); this machine has "
                           f"{os.cpu_count()} logical cores.")


def _seq(stmts: list) -> tirx.Stmt | None:
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return None
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _launched_when_nonempty(grid_loops: tuple[tirx.For, ...], launch: list[tirx.Stmt]) -> tirx.Stmt:
    """`launch` (a kernel's grid and what the host prepares for it), under `extent > 0` for every grid loop whose
    extent may be 0: the sequential program runs none of its iterations, but TVM launches a grid extent of 0 as 1
    (`ir_utils.launched_extent`), which would run the roles' programs once (and on Hopper encode a tensor map of
    an empty dimension, which `cuTensorMapEncodeTiled` rejects)."""
    analyzer = sym.Analyzer()
    maybe_empty = [loop.extent > 0 for loop in grid_loops if not analyzer.can_prove(loop.extent > 0)]
    body = _seq(launch)
    return host_if(functools.reduce(tirx.And, maybe_empty), body) if maybe_empty else body


def _inline_inner_blocks(stmt: tirx.Stmt) -> tirx.Stmt:
    """Replace the blocks nested in a task body (e.g. left by `blockize`) by their bodies with the iteration
    variables bound, guarded by their predicates; blocks with an init or buffers of their own stay."""

    def inline(realize: SBlockRealize) -> tirx.Stmt:
        block = realize.block
        if block.init is not None or len(block.alloc_buffers) or len(block.match_buffers):
            return realize
        body = substitute(block.body, dict(zip([iv.var for iv in block.iter_vars], realize.iter_values,
                                               strict=True)))
        if isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate) == 1:
            return body
        return tirx.IfThenElse(realize.predicate, body, None)

    return tvm_ffi.structural_map(stmt, (SBlockRealize, inline), order="post")


@dataclass(frozen=True)
class _TargetLowering:
    """How one target runs a task body and lowers a wait and an arrive (per role)."""

    task_body: Callable[[int, TaskNode, tirx.Stmt], list]
    wait: Callable[[SyncOp, tirx.PrimExpr, tirx.PrimExpr], tirx.Stmt]
    arrive: Callable[[SyncOp, tirx.PrimExpr], tirx.Stmt]
    tile_body: Callable[[TaskNode, Callable, tirx.PrimExpr], list | None] | None = None
    """Hopper: the statements of a tile task (given a renaming of its expressions into the role's loop variables
    and the task's instance index), or None for a generic task."""
    drain: Callable[[TaskNode], list] | None = None
    """Hopper: the statements after its loop that retire an in-flight task's last instances."""


class _RoleProgram:
    """Builds one warp role's program from the protocol."""

    def __init__(self, protocol: Protocol, role: int, lowering: _TargetLowering):
        self.protocol = protocol
        self.role = role
        self.lowering = lowering
        self.analyzer = sym.Analyzer()

    def build(self) -> tirx.Stmt | None:
        return self._nodes(self.protocol.tree.children, {}, tirx.IntImm("int32", 0))

    def _nodes(self, nodes, renamed: dict, index: tirx.PrimExpr) -> tirx.Stmt | None:
        """`index`: the linear index of the enclosing loops' iteration (instance index of a task directly inside)."""
        parts = []
        for node in nodes:
            if isinstance(node, LoopNode):
                var = tirx.Var(f"{node.var.name}_r{self.role}", node.var.ty)
                inner = {**renamed, node.var.name: var}
                self.analyzer.bind(var, tvm.ir.Range(0, node.extent))
                body = self._nodes(node.children, inner, self.analyzer.simplify(index * node.extent + var))
                if body is not None:
                    parts.append(tirx.For(var, 0, node.extent, tirx.ForKind.SERIAL, body))
                    parts += self._drains(node, index)
            elif node.role == self.role:
                parts.append(self._task(node, renamed, index))
        return _seq(parts)

    def _drains(self, loop: LoopNode, index: tirx.PrimExpr) -> list:
        """After `loop`: for each in-flight task of the role directly in it, the target's drain, then its lagged
        operations at the indices just past the loop's last iteration."""
        stmts = []
        for task in loop.children:
            if isinstance(task, TaskNode) and task.role == self.role and task.name in self.protocol.in_flight:
                stmts += self.lowering.drain(task)
                stmts += [self._sync(op, self.analyzer.simplify(index * loop.extent + loop.extent + extra))
                          for op in self.protocol.after(task.name) for extra in range(op.lag)]
        return stmts

    def _task(self, task: TaskNode, renamed: dict, index: tirx.PrimExpr) -> tirx.Stmt:
        loop_vars = {loop.loop_var: renamed[loop.loop_var.name] for loop in task.loops}
        block = task.realize.block
        mapping = {iv.var: substitute(value, loop_vars)
                   for iv, value in zip(block.iter_vars, task.realize.iter_values, strict=True)}
        def rename(node):
            return substitute(substitute(node, loop_vars), mapping)

        tile = None if self.lowering.tile_body is None else self.lowering.tile_body(task, rename, index)
        if tile is None:
            tile = self.lowering.task_body(self.role, task, _inline_inner_blocks(rename(block.body)))
        before = [self._sync(op, index) for op in self.protocol.before(task.name)]
        run = renamed[task.loops[-1].loop_var.name] if task.loops else index
        after = [self._sync(op, index, None if self.analyzer.can_prove(run == index) else run)
                 for op in self.protocol.after(task.name)]
        return _seq([*before, *tile, *after])

    def _sync(self, op: SyncOp, index: tirx.PrimExpr, run: tirx.PrimExpr | None = None) -> tirx.Stmt | None:
        """`op` at instance `index`; `run`: the iteration of the task's loop in its current run, when it is not
        the instance index (a nested loop), which a lagged operation needs to be at least its lag."""
        g = op.group
        simplify = self.analyzer.simplify
        edge = simplify(op.edge_number(index))
        guard = tirx.And(edge >= 0, edge < g.count)
        if op.lag and run is not None:
            guard = tirx.And(guard, run >= op.lag)
        if self.analyzer.can_prove(tirx.Not(guard)):
            return None
        channel = simplify(g.channel(edge))
        if op.action == WAIT:
            stmt = self.lowering.wait(op, channel, simplify(op.parity(edge)))
        else:
            stmt = self.lowering.arrive(op, channel)
        if self.analyzer.can_prove(guard):
            return stmt
        return tirx.IfThenElse(simplify(guard), stmt, None)


def _llvm_lowering(channels: tirx.Buffer, delay_us: int) -> _TargetLowering:
    def task_body(role: int, task: TaskNode, body: tirx.Stmt) -> list:
        if delay_us <= 0:
            return [body]
        pause = tirx.call_extern("int32", "usleep",
                                 tirx.floormod(tirx.call_extern("int32", "rand"), delay_us))
        return [tirx.Evaluate(pause), body]

    def wait(op: SyncOp, channel: tirx.PrimExpr, parity: tirx.PrimExpr) -> tirx.Stmt:
        address = tirx.address_of(tirx.BufferLoad(channels, [channel]))
        load = tirx.call_extern("int32", "__atomic_load_4", address, LLVM_MEMORY_ORDER_ACQUIRE)
        return tirx.While(tirx.bitwise_and(load, 1) == parity, tirx.Evaluate(0))

    def arrive(op: SyncOp, channel: tirx.PrimExpr) -> tirx.Stmt:
        address = tirx.address_of(tirx.BufferLoad(channels, [channel]))
        return tirx.Evaluate(tirx.call_extern("int32", "__atomic_fetch_add_4", address, 1,
                                              LLVM_MEMORY_ORDER_RELEASE))

    return _TargetLowering(task_body, wait, arrive)


def _generate_llvm(protocol: Protocol, delay_us: int) -> tirx.PrimFunc:
    tree = protocol.tree
    channels = tirx.decl_buffer((max(1, protocol.plan.channel_count),), "int32", "channels")
    lowering = _llvm_lowering(channels, delay_us)
    role_index = tirx.Var("role", "int32")
    dispatch = None
    for position, role in reversed(list(enumerate(tree.roles))):
        program = _RoleProgram(protocol, role, lowering).build()
        dispatch = tirx.IfThenElse(role_index == position, program, dispatch)
    channel = tirx.Var("channel", "int32")
    reset = tirx.For(channel, 0, channels.shape[0], tirx.ForKind.SERIAL,
                     tirx.BufferStore(channels, tirx.IntImm("int32", 0), [channel]))
    touches = _kept_whole(list(tree.root_block.alloc_buffers))  # outside the parallel loop: one copy for the roles
    parallel = tirx.For(role_index, 0, len(tree.roles), tirx.ForKind.PARALLEL, dispatch)
    body = _or_sequential(protocol, tirx.SeqStmt([reset, *touches, parallel]))
    for loop in reversed(tree.grid_loops):
        body = with_loop(loop, kind=tirx.ForKind.SERIAL, body=body, thread_binding=None)
    roles = len(tree.roles)
    if roles > 1:
        threads = tirx.call_packed("runtime.NumThreads")
        body = tirx.SeqStmt([runtime_assert(threads >= roles, _thread_requirement(roles)), body])
    return _with_root(protocol, body, [channels])


def _independent(stmt: tirx.Stmt) -> bool:
    """Whether distinct iterations of the loops of `stmt` touch distinct elements of what it writes, so that any
    of its loops that index every store may run on different threads: all stores and loads of a buffer it writes
    use one index tuple, and that tuple maps the loop variables it uses one-to-one (`tvm.sym.detect_iter_map`,
    bijective, over the loops' constant ranges). A variable bound inside `stmt` (a `Bind`) in such an index
    counts as dependent."""
    loops: dict = {}
    bound: list = []
    stores: list = []
    loads: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, lambda loop: loops.__setitem__(loop.loop_var, loop)),
                                   (tirx.Bind, lambda bind: bound.append(bind.var)),
                                   (tirx.BufferStore, stores.append), (tvm.ir.TensorLoad, loads.append)])
    indices: dict = {}
    for access in [*stores, *(load for load in loads if any(load.source.same_as(s.buffer) for s in stores))]:
        buffer = access.buffer if isinstance(access, tirx.BufferStore) else access.source
        key = next((b for b in indices if b.same_as(buffer)), buffer)
        if key in indices and not all(tvm_ffi.structural_equal(a, b)
                                      for a, b in zip(indices[key], access.indices, strict=True)):
            return False
        indices[key] = access.indices
    for index in indices.values():
        if any(uses_var(i, var) for i in index for var in bound):
            return False
        used = {var: loop for var, loop in loops.items() if any(uses_var(i, var) for i in index)}
        if not all(isinstance(loop.min, tirx.IntImm) and isinstance(loop.extent, tirx.IntImm)
                   for loop in used.values()):
            return False
        domain = {var: tvm.ir.Range.from_min_extent(loop.min, loop.extent) for var, loop in used.items()}
        if used and not _one_to_one(index, domain):
            return False
    return True


ENUMERATED_POINTS = 1 << 14
"""The most points of a constant domain `_one_to_one` evaluates one by one to check TVM's answer."""


def _one_to_one(indices, domain: dict) -> bool:
    """Whether `indices` take distinct values at distinct points of `domain` (loop variable -> range):
    `tvm.sym.detect_iter_map`, bijective, checked, because TVM 0.27's iter-map analysis merges floor-mods of one
    variable with different numerators (it calls `(t + 1) % 2 + t % 2` bijective over `t` in `[0, 2)`, where it is
    1 at both points; `iter_map_simplify` rewrites it to `(t + 1) % 2 * 2`). Where an index has two
    floor-divisions or floor-mods of different numerators over one variable (the form TVM gets wrong), every
    point is evaluated when the domain is constant, has at most `ENUMERATED_POINTS` points and its indices use its
    variables alone; otherwise such indices are not taken as one-to-one."""
    indices = list(indices)
    if not len(sym.detect_iter_map(indices, domain, True, "bijective").indices):
        return False
    divisions: list = []
    for index in indices:
        tvm_ffi.structural_walk(index, [(tirx.FloorMod, divisions.append), (tirx.FloorDiv, divisions.append)])
    if not any(not tvm_ffi.structural_equal(a.a, b.a) and any(uses_var(a.a, v) and uses_var(b.a, v) for v in domain)
               for position, a in enumerate(divisions) for b in divisions[position + 1:]):
        return True
    names = [var.name for var in domain]
    ranges = [(ranged.min, ranged.extent) for ranged in domain.values()]
    if not (all(isinstance(lo, tirx.IntImm) and isinstance(extent, tirx.IntImm) for lo, extent in ranges)
            and math.prod(int(extent.value) for _, extent in ranges) <= ENUMERATED_POINTS
            and len(set(names)) == len(names)):
        return False
    points = itertools.product(*(range(int(lo.value), int(lo.value + extent.value)) for lo, extent in ranges))
    try:
        values = [tuple(evaluate_index(index, dict(zip(names, point, strict=True))) for index in indices)
                  for point in points]
    except WarpSpecializeInputError:  # a variable outside the domain, or an expression it cannot evaluate
        return False
    return len(set(values)) == len(values)


def _thread_private(buffer: tirx.Buffer) -> bool:
    """Whether every CUDA thread has its own copy of `buffer` (a `local` scope)."""
    return buffer.scope().startswith("local")


def _kept_whole(buffers: list[tirx.Buffer]) -> list[tirx.Stmt]:
    """An opaque use of every buffer of `buffers` (its data pointer), placed before the roles' branches: TVM's
    `CompactBufferAllocation` then keeps the buffer whole, allocated once where the roles share it, instead of
    sizing it by the roles' accesses relaxed over their loops, which it cannot do for every stage index of a
    symbolic loop (`t // 2 % 2` left the roles' loop variables in the buffer's size: 'variable t_r0 has been used
    before definition')."""
    return [tirx.Evaluate(buffer.data) for buffer in buffers]


def _touches_thread_private(stmt: tirx.Stmt) -> bool:
    accessed: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda store: accessed.append(store.buffer)),
                                   (tvm.ir.TensorLoad, lambda load: accessed.append(load.source))])
    return any(_thread_private(buffer) for buffer in accessed)


def _require_thread_private_in_one_role(protocol: Protocol) -> None:
    """Reject a thread-private buffer that tasks of two warp roles access (each thread would see its own copy)."""
    roles: dict[str, dict[int, list[str]]] = {}
    for task in protocol.tree.tasks():
        for region in (*task.reads, *task.writes):
            if _thread_private(region.buffer):
                names = roles.setdefault(region.buffer.name, {}).setdefault(task.role, [])
                if task.name not in names:
                    names.append(task.name)
    for buffer, by_role in roles.items():
        if len(by_role) > 1:
            users = "; ".join(f"warp role {role}: {', '.join(names)}" for role, names in sorted(by_role.items()))
            raise WarpSpecializeInputError(
                f"buffer '{buffer}' has a thread-private scope (every CUDA thread has its own copy) but tasks of "
                f"several warp roles access it ({users}); the other roles would never see its values: allocate it "
                "in 'shared' scope")


def _require_static_shared_fits(buffers: list[tirx.Buffer]) -> None:
    """Reject `shared` buffers (each aligned to 64 bytes, as TVM declares them) beyond the static shared memory of
    a block: ptxas would refuse the kernel. Buffers of a symbolic shape are left to the compiler."""
    sizes = {}
    for buffer in buffers:
        if buffer.scope() != "shared" or not all(isinstance(d, tirx.IntImm) for d in buffer.shape):
            continue
        sizes[buffer.name] = -(-buffer_bytes(buffer) // 64) * 64
    total = sum(sizes.values())
    if total > STATIC_SHARED_MEMORY_PER_BLOCK:
        listed = ", ".join(f"{name} {size}" for name, size in sorted(sizes.items(), key=lambda item: -item[1]))
        raise WarpSpecializeInputError(
            f"the shared buffers of the CUDA kernel take {total} bytes ({listed}), more than the "
            f"{STATIC_SHARED_MEMORY_PER_BLOCK} bytes of static shared memory a thread block may declare (ptxas would "
            "refuse it); the generated kernel keeps every shared buffer of the root block whole, so index a buffer "
            "that each pipeline iteration refills by a ring stage (`t % stages`) rather than by the iteration")


def _distribute(stmt: tirx.Stmt, lane: tirx.PrimExpr, threads: int) -> tirx.Stmt:
    """Stride the independent outer loops of `stmt` over `threads` lanes (see module doc)."""
    if isinstance(stmt, tirx.SeqStmt):
        if _interfere(stmt.seq):
            return tirx.IfThenElse(lane == 0, stmt, None)
        return tirx.SeqStmt([_distribute(s, lane, threads) for s in stmt.seq])
    if _touches_thread_private(stmt):
        return tirx.IfThenElse(lane == 0, stmt, None)
    stores: list = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, stores.append))
    chain: list[tirx.For] = []
    node = stmt
    while (isinstance(node, tirx.For) and node.kind == tirx.ForKind.SERIAL and has_unit_step(node)
           and isinstance(node.extent, tirx.IntImm) and stores
           and all(any(uses_var(i, node.loop_var) for i in s.indices) for s in stores)):
        chain.append(node)
        node = node.body
    if not chain or not _independent(stmt):
        return tirx.IfThenElse(lane == 0, stmt, None)
    total = 1
    for loop in chain:
        total *= int(loop.extent)
    step = tirx.Var("step", "int32")
    flat = step * threads + lane
    mapping = {}
    stride = total
    for loop in chain:
        stride //= int(loop.extent)
        mapping[loop.loop_var] = loop.min + tirx.floormod(tirx.floordiv(flat, stride), int(loop.extent))
    body = substitute(node, mapping)
    if total % threads:
        body = tirx.IfThenElse(flat < total, body, None)
    return tirx.For(step, 0, (total + threads - 1) // threads, tirx.ForKind.SERIAL, body)


def _interfere(parts) -> bool:
    """Whether a statement of `parts` writes a buffer that another one touches (distributed one after the other
    without a barrier between them, their threads would race)."""
    touched = []
    for part in parts:
        stores: list = []
        loads: list = []
        tvm_ffi.structural_walk(part, [(tirx.BufferStore, stores.append), (tvm.ir.TensorLoad, loads.append)])
        written = {s.buffer.name for s in stores}
        touched.append((written, written | {load.source.name for load in loads}))
    return any(written & other for n, (written, _) in enumerate(touched)
               for m, (_, other) in enumerate(touched) if n != m)


def _moves_elements_between_lanes(task: TaskNode) -> bool:
    """Whether two instances of `task` may store one element from different threads of its role: some store index
    mixes a pipeline loop variable with a loop of the body (whose iterations are spread over the threads), and the
    stores do not write each element once over all instances (`tvm.sym.detect_iter_map`, bijective over the body's
    constant loops and the pipeline loops). E.g. `D[t + i]`: element 5 is thread 5's at t = 0 and thread 4's at
    t = 1. (`D[t * 64 + i]` and a ring's `R[t % 3, i]` keep every element on one thread.)"""
    pipeline = {loop.loop_var: loop for loop in task.loops}
    if not pipeline:
        return False
    block = task.realize.block
    body = _inline_inner_blocks(substitute(block.body, dict(zip([iv.var for iv in block.iter_vars],
                                                                task.realize.iter_values, strict=True))))
    loops: dict = {}
    stores: list = []
    tvm_ffi.structural_walk(body, [(tirx.For, lambda loop: loops.__setitem__(loop.loop_var, loop)),
                                   (tirx.BufferStore, stores.append)])
    for store in stores:
        if _thread_private(store.buffer):
            continue  # touched by the role's first thread only
        mixed = [i for i in store.indices
                 if any(uses_var(i, v) for v in pipeline) and any(uses_var(i, v) for v in loops)]
        if not mixed:
            continue
        used = {v: loop for v, loop in (*pipeline.items(), *loops.items())
                if any(uses_var(i, v) for i in store.indices)}
        if not all(isinstance(loop.extent, tirx.IntImm) and isinstance(loop.min, tirx.IntImm)
                   for v, loop in used.items() if v in loops):
            return True
        domain = {v: tvm.ir.Range.from_min_extent(loop.min, loop.extent) for v, loop in used.items()}
        if not _one_to_one(store.indices, domain):
            return True
    return False


def _shares_with_role(protocol: Protocol, task: TaskNode) -> bool:
    """True when a task of the same role reads what `task` writes, or another one writes what `task` writes or
    reads (`_shares_buffers_with_role`), or when its own instances store one element from different threads
    (`_moves_elements_between_lanes`: without a barrier a slow thread's older value could land last)."""
    return _moves_elements_between_lanes(task) or _shares_buffers_with_role(protocol, task)


def _shares_buffers_with_role(protocol: Protocol, task: TaskNode, private: frozenset[str] = frozenset()) -> bool:
    """True when a task of the same role reads what `task` writes, or another one writes what `task` writes or
    reads (its next instance must not overwrite what slower threads of `task` still read). Buffers named in
    `private` (each thread's own, e.g. Hopper's register fragments) are shared with no one."""
    written = {w.buffer.name for w in task.writes} - private
    read = {r.buffer.name for r in task.reads} - private
    for other in protocol.tree.tasks():
        if other.role != task.role:
            continue
        touched = {r.buffer.name for r in other.reads}
        if other.name != task.name:
            touched |= {w.buffer.name for w in other.writes}
            if read & {w.buffer.name for w in other.writes}:
                return True
        if written & touched:
            return True
    return False


def _constant_ids(channel: tirx.PrimExpr, channels: tuple[int, ...], emit: Callable[[int], tirx.Stmt]):
    """`emit(c)` for the channel `channel` evaluates to, as a chain of ifs so that every id is a constant."""
    if isinstance(channel, tirx.IntImm):
        return emit(int(channel))
    chain = emit(channels[-1])
    for c in reversed(channels[:-1]):
        chain = tirx.IfThenElse(channel == c, emit(c), chain)
    return chain


def _generate_cuda(protocol: Protocol, threads_per_role: dict[int, int], named_barriers: bool) -> tirx.PrimFunc:
    tree = protocol.tree
    plan = protocol.plan
    roles = tree.roles
    missing = [r for r in roles if r not in threads_per_role]
    if missing:
        raise WarpSpecializeInputError(f"threads_per_role has no entry for warp roles {missing}")
    _require_thread_private_in_one_role(protocol)
    # Named barrier ids: 1 + role index for the barriers inside a role, then one per channel if requested.
    first_channel_id = 1 + len(roles)
    needed = first_channel_id - 1 + (plan.channel_count if named_barriers else 0)
    if needed > MAX_NAMED_BARRIER:
        raise WarpSpecializeInputError(
            f"the kernel needs {needed} named barriers ({len(roles)} warp roles"
            + (f" + {plan.channel_count} channels" if named_barriers else "")
            + f"); CUDA has {MAX_NAMED_BARRIER} (ids 1..15)" + ("; use mbarrier channels" if named_barriers else ""))
    bars = tirx.decl_buffer((max(1, plan.channel_count),), "uint64", "channels", scope="shared")
    _require_static_shared_fits([*tree.root_block.alloc_buffers, bars])
    done = tirx.decl_buffer((1,), "uint32", "wait_done", scope="local")
    thread = tirx.Var("tx", "int32")
    offsets, total = {}, 0
    for role in roles:
        offsets[role] = total
        total += threads_per_role[role]
    if total > MAX_THREADS_PER_BLOCK:
        raise WarpSpecializeInputError(
            f"threads_per_role gives {total} threads to the warp roles {list(roles)} of one thread block; CUDA "
            f"runs at most {MAX_THREADS_PER_BLOCK} threads per block")

    def task_body(role: int, task: TaskNode, body: tirx.Stmt) -> list:
        threads = threads_per_role[role]
        stmts = [_distribute(body, thread - offsets[role], threads)]
        if _shares_with_role(protocol, task):
            stmts.append(tirx.Evaluate(T.ptx.bar.sync(1 + roles.index(role), threads)))
        return stmts

    def mbarrier_wait(op: SyncOp, channel: tirx.PrimExpr, parity: tirx.PrimExpr) -> tirx.Stmt:
        test = T.ptx.mbarrier.test_wait.parity.shared.b64(
            tirx.BufferLoad(done, [0]), tirx.address_of(tirx.BufferLoad(bars, [channel])),
            tirx.Cast("uint32", parity))
        return tirx.SeqStmt([
            tirx.BufferStore(done, tirx.IntImm("uint32", 0), [0]),
            tirx.While(tirx.BufferLoad(done, [0]) == tirx.IntImm("uint32", 0), tirx.Evaluate(test)),
        ])

    def mbarrier_arrive(op: SyncOp, channel: tirx.PrimExpr) -> tirx.Stmt:
        return tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(tirx.address_of(tirx.BufferLoad(bars, [channel]))))

    def participants(op: SyncOp) -> int:
        return threads_per_role[op.group.src_role] + threads_per_role[op.group.dst_role]

    def named_wait(op: SyncOp, channel: tirx.PrimExpr, parity: tirx.PrimExpr) -> tirx.Stmt:
        return _constant_ids(channel, op.group.channels, lambda c: tirx.Evaluate(
            T.ptx.bar.sync(first_channel_id + c, participants(op))))

    def named_arrive(op: SyncOp, channel: tirx.PrimExpr) -> tirx.Stmt:
        return _constant_ids(channel, op.group.channels, lambda c: tirx.Evaluate(
            T.ptx.bar.arrive(first_channel_id + c, participants(op))))

    if named_barriers:
        lowering = _TargetLowering(task_body, named_wait, named_arrive)
    else:
        lowering = _TargetLowering(task_body, mbarrier_wait, mbarrier_arrive)
    dispatch = None
    for role in reversed(roles):
        program = _RoleProgram(protocol, role, lowering).build()
        if dispatch is None:
            dispatch = program
        else:
            dispatch = tirx.IfThenElse(thread < offsets[role] + threads_per_role[role], program, dispatch)
    stmts = []
    if not named_barriers and plan.channel_count:
        # One loop per run of consecutive channels with the same arriving role (same expected arrival count).
        runs: list[list[int]] = []
        for c in range(plan.channel_count):
            if runs and plan.arriving_role(c) == plan.arriving_role(runs[-1][0]):
                runs[-1].append(c)
            else:
                runs.append([c])
        inits = []
        for run in runs:
            channel = tirx.Var("channel", "int32")
            init = tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(
                tirx.address_of(tirx.BufferLoad(bars, [channel])),
                tirx.IntImm("uint32", threads_per_role[plan.arriving_role(run[0])])))
            inits.append(tirx.For(channel, run[0], len(run), tirx.ForKind.SERIAL, init))
        stmts += [tirx.IfThenElse(thread == 0, _seq(inits), None), tirx.Evaluate(T.cuda.cta_sync())]
    stmts += _kept_whole([buffer for buffer in tree.root_block.alloc_buffers if not _thread_private(buffer)])
    stmts.append(dispatch)
    binding = tirx.IterVar(tvm.ir.Range(0, total), thread, tirx.IterVar.ThreadIndex, "threadIdx.x")
    body = tirx.For(thread, 0, total, tirx.ForKind.THREAD_BINDING, _or_sequential(protocol, _seq(stmts), thread),
                    thread_binding=binding)
    for loop in reversed(tree.grid_loops):
        body = with_loop(loop, body=body)
    return _with_root(protocol, _launched_when_nonempty(tree.grid_loops, [body]),
                      [] if named_barriers else [bars, done])


def _or_sequential(protocol: Protocol, specialized: tirx.Stmt, thread: tirx.Var | None = None) -> tirx.Stmt:
    """`specialized` where every symbolic trip count reaches the minimum the channel plan holds for; below it the
    input's pipeline, its blocks renamed `*_sequential` (on the first thread when `thread` is given)."""
    extents = {loop.var.name: loop.extent for loop in protocol.tree.loops()}
    below = [extents[name] < minimum for name, minimum in protocol.plan.min_trip_counts]
    if not below:
        return specialized
    sequential = suffix_block_names(protocol.tree.pipeline, "_sequential")
    if thread is not None:
        sequential = tirx.IfThenElse(thread == 0, sequential, None)
    return tirx.IfThenElse(functools.reduce(tirx.Or, below), sequential, specialized)


def _with_root(protocol: Protocol, body: tirx.Stmt, extra_buffers: list) -> tirx.PrimFunc:
    func, root = protocol.tree.func, protocol.tree.root_block
    new_root = SBlock([], [], [], "root", _seq([*protocol.tree.asserts, body]),
                      alloc_buffers=[*root.alloc_buffers, *extra_buffers])
    return func.with_body(SBlockRealize([], True, new_root))


def generate(protocol: Protocol, target_kind: str, threads_per_role: dict[int, int] | None = None,
             delay_us: int = 0, named_barriers: bool = False) -> tirx.PrimFunc:
    """The specialized kernel for `target_kind` ("llvm" or "cuda") implementing `protocol`.

    CUDA only: `threads_per_role` (default one warp per role); `named_barriers` carries the channels on named
    barriers (`bar.arrive` by the producer side, `bar.sync` by the consumer side) instead of mbarriers.
    llvm only: `delay_us`.
    """
    if protocol.in_flight:
        raise WarpSpecializeInputError(f"tasks {sorted(protocol.in_flight)} are in flight (wgmma groups); only the "
                                       "Hopper code generator lowers them")
    if target_kind == "llvm":
        load_libatomic()
        return _generate_llvm(protocol, delay_us)
    if target_kind == "cuda":
        return _generate_cuda(protocol, threads_per_role or {r: 32 for r in protocol.tree.roles}, named_barriers)
    raise WarpSpecializeInputError(f"WarpSpecialize supports the llvm and cuda targets, not '{target_kind}'")
