"""The ablation of WarpSpecialize on Hopper: the same tiles and stages without warp specialization.

Every warpgroup of the kernel is a consumer (one per warp role of the wgmma tiles); there is no producer
warpgroup. The pipeline loop's TMA loads are software-pipelined `stages - 1` iterations ahead and issued by thread
0, a multi-stage loop like TVM's software pipelining or CUTLASS's non-warp-specialized sm90 TMA kernels:

    prologue: for p < stages - 1 (and p < T): thread 0 arms full[p] with the batch's bytes and issues its copies
    for k in range(T):
        thread 0: if k + stages - 1 < T: when k >= 1 wait on empty[(k - 1) % stages] for phase (k - 1) // stages,
                  then arm full[(k + stages - 1) % stages] and issue iteration k + stages - 1's copies
        every thread: wait on full[k % stages] for phase k // stages; its warpgroup's wgmma tile (committed and
                      retired); arrive on empty[k % stages]

Barriers: full[s] expects one arrival plus the batch's bytes, empty[s] every thread. The fills before and the
stores after the loop are the consumers' own. Only who issues the copies and when differs from the specialized
kernel: here thread 0's warpgroup cannot prefetch before the slowest warpgroup has released the stage. The tiles,
rings, descriptors, fragments and tensor maps are those of `warpspec.hopper` (same emitters).
"""

from __future__ import annotations

from tvm import sym, tirx
from tvm.script import tirx as T

from ..ir_utils import substitute
from .analysis import analyze
from .codegen import _seq
from .hopper import WARPGROUP, _Hopper, _shared_address
from .tiles import tile_plan
from .tree import LoopNode, TaskNode, WarpSpecializeInputError

__all__ = ["unspecialized_hopper_kernel"]


def _renamer(task: TaskNode, loop: LoopNode, iteration: tirx.PrimExpr):
    """Rename a task's expressions to iteration `iteration` of `loop` (its block variables bound)."""
    loop_vars = {loop.var: iteration}
    mapping = {iv.var: substitute(value, loop_vars)
               for iv, value in zip(task.realize.block.iter_vars, task.realize.iter_values, strict=True)}
    return lambda node: substitute(substitute(node, loop_vars), mapping)


def unspecialized_hopper_kernel(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The ablation kernel of `func` (a kernel `WarpSpecialize("cuda", hopper=True)` accepts, with one pipeline loop
    holding the TMA loads and the wgmma tiles): see the module doc. Compile it for `sm_90a` with
    `WARP_SPECIALIZED_PIPELINE`."""
    analysis = analyze(func)
    tree = analysis.tree
    tiles = tile_plan(tree)
    loops = [node for node in tree.children if isinstance(node, LoopNode)]
    if len(loops) != 1 or not all(isinstance(child, TaskNode) for child in loops[0].children):
        raise WarpSpecializeInputError("the ablation needs one pipeline loop of tasks (TMA loads and wgmma tiles)")
    loop = loops[0]
    loads = [task for task in loop.children if task.name in tiles.loads]
    mmas = [task for task in loop.children if task.name in tiles.mmas]
    if not loads or len(loads) + len(mmas) != len(loop.children):
        raise WarpSpecializeInputError(
            f"the ablation's pipeline loop '{loop.var.name}' must hold TMA loads and wgmma tiles only")
    outside = [task for task in tree.children if isinstance(task, TaskNode)]
    if any(task.name not in tiles.fragment_tasks for task in outside):
        raise WarpSpecializeInputError("the ablation's tasks outside the pipeline loop must be fragment fills/stores")
    stages = {int(tiles.loads[task.name].ring.shape[0]) for task in loads}
    if len(stages) != 1:
        raise WarpSpecializeInputError(f"the rings of the ablation's TMA loads have different stages {stages}")
    (stages,) = stages
    analyzer = sym.Analyzer()
    probe = tirx.Var("k", "int32")
    for task in loads:
        stage = _renamer(task, loop, probe)(tiles.loads[task.name].stage)
        if not analyzer.can_prove_equal(stage, tirx.floormod(probe, stages)):
            raise WarpSpecializeInputError(f"TMA load '{task.name}' does not write stage {loop.var.name} % {stages}")
    consumers = sorted({task.role for task in mmas} | {task.role for task in outside})
    bands = {(t.m, t.n) for t in tiles.mmas.values()}
    if len(bands) != 1:
        raise WarpSpecializeInputError(f"the ablation's wgmma tiles have different shapes {sorted(bands)}")
    state = _Hopper(analysis.protocol, tiles, roles=consumers, barriers=2 * stages, shared_registers=True)
    thread, trips = state.thread, loop.extent
    batch_bytes = sum(tiles.loads[task.name].bytes for task in loads)

    def full(iteration):
        return tirx.floormod(iteration, stages)

    def empty(iteration):
        return stages + tirx.floormod(iteration, stages)

    def wait(barrier, iteration):
        return tirx.Evaluate(T.cuda.mbarrier_wait(_shared_address(state.bars, [barrier]),
                                                  tirx.floormod(tirx.floordiv(iteration, stages), 2)))

    def issue(iteration):
        arm = tirx.Evaluate(T.ptx.mbarrier.arrive.expect_tx.shared.b64(
            _shared_address(state.bars, [full(iteration)]), tirx.IntImm("uint32", batch_bytes)))
        copies = [state.tma_copy(tiles.loads[task.name], _renamer(task, loop, iteration), full(iteration), 0)
                  for task in loads]
        return [tirx.IfThenElse(thread == 0, arm, None), *copies]

    def in_role(role, stmts):
        offset = state.offset(role)
        return tirx.IfThenElse(tirx.And(offset <= thread, thread < offset + WARPGROUP), _seq(stmts), None)

    prologue_var = tirx.Var("p", "int32")
    prologue = tirx.For(prologue_var, 0, stages - 1, tirx.ForKind.SERIAL,
                        tirx.IfThenElse(prologue_var < trips, _seq(issue(prologue_var)), None))
    k = tirx.Var("k", "int32")
    ahead = k + stages - 1
    refill = _seq([tirx.IfThenElse(tirx.And(thread == 0, k >= 1), wait(empty(k - 1), k - 1), None),
                   *issue(ahead)])
    steps = [tirx.IfThenElse(ahead < trips, refill, None), wait(full(k), k)]
    for task in mmas:
        steps.append(in_role(task.role, state.wgmma(task, tiles.mmas[task.name], _renamer(task, loop, k))))
    steps.append(tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(_shared_address(state.bars, [empty(k)]))))
    main = tirx.For(k, 0, trips, tirx.ForKind.SERIAL, _seq(steps))
    before, after = [], []
    for task in outside:
        stmt = in_role(task.role, [state.fragment_task(task, tiles.fragment_tasks[task.name], lambda e: e)])
        (before if tree.children.index(task) < tree.children.index(loop) else after).append(stmt)
    program = _seq([prologue, *before, main, *after])
    threads = WARPGROUP * len(consumers)
    return state.kernel([1] * stages + [threads] * stages, program, threads, [])
