"""In-flight wgmma groups: the protocol with each consumer's release deferred past its next tiles (Hopper).

A wgmma tile is asynchronous: `wgmma.commit_group` closes the warpgroup's group of tensor-core instructions, which
reads its shared-memory operands until it **retires**, and `wgmma.wait_group N` returns once at most `N` of the
warpgroup's groups are pending. Retiring every tile at once (`wait_group 0`) before its *release* idles the tensor
cores while the warpgroup waits for its own group, releases the stage and waits for the next full stage. CUTLASS's
sm90 warp-specialized mainloop keeps `K_PIPE_MMAS` groups in flight instead (`warpgroup_wait<K_PIPE_MMAS>()`, then
`consumer_release` of the stage read `K_PIPE_MMAS` tiles earlier). This module derives the same from the protocol,
a pure function of the protocol and the tiles:

* A wgmma tile task gets the **in-flight depth** `D = WGMMA_IN_FLIGHT` when
  - the pipeline loop directly around it holds no other task of its warp role (nothing else of the role runs
    between its instances in one run of the loop),
  - every operation after it is a release (a resource arrive), and there is one;
  - the distance `d` of every such release group (instance `i + d` of the producer acquires what instance `i`
    releases; `d` is the ring's stages) is provably greater than `D`.
* Rewriting (`defer_releases`): instance `i` issues its group, waits with `wgmma.wait_group D` (the groups of
  instances `<= i - D` retired) and runs the releases of instance `i - D` (`SyncOp.lag = D`: the protocol's own
  guarded edge, channel formulas at index `i - D`). After the loop, the **drain**: `wgmma.wait_group 0` (before any
  later task of the role, e.g. the fragment stores), then the releases of the last `D` instances, i.e. the lagged
  operations at the indices `T .. T + D - 1` of a loop of `T` iterations (their guards drop the releases that no
  producer acquires). Lags and drains are per **run** of the loop: in a loop nested in another (the K loop of a
  persistent nest, whose instance index `tt * T + ko` runs on from run to run), the lagged operations are active
  from the run's iteration `D` on, and each run ends with its drain (the releases of its last `D` instances, which
  the producer acquires for the next tile's first steps).

**Why `d > D`.** The producer's instance `i + d` waits for the release of instance `i`, which now follows the issue
of instance `i + D`, which waits for the producer's instance `i + D` (its data). The waits form a cycle exactly
when `i + D >= i + d`, so `d <= D` deadlocks; with `d > D` the producer still runs `d - D` stages ahead of the
consumers' retirements. `warpspec.check` proves the result on the small protocol: a wgmma instance's reads stay
in flight until the wait that retires it, a release of an instance still in flight is reported, and its search
finds the deadlock of a depth the ring cannot hold.

A task that does not qualify keeps `wait_group 0` and its releases right after it; the reason is logged.
"""

from __future__ import annotations

import dataclasses
import logging

from tvm import sym, tirx

from ..ir_utils import require_sizes
from .graphs import RESOURCE
from .protocol import ARRIVE, Protocol
from .tiles import TilePlan
from .tree import LoopNode, TaskNode

__all__ = ["WGMMA_IN_FLIGHT", "defer_releases", "in_flight_protocol"]

logger = logging.getLogger("tvm_tailsplit.warpspec")

WGMMA_IN_FLIGHT = 1
"""Rule: one wgmma group in flight per consumer warpgroup while it waits for the next stage (CUTLASS's
`K_PIPE_MMAS`); its operands' stage is released one tile later, so a ring needs more than one stage."""


def _loop_of(task: TaskNode, nodes, parent: LoopNode | None = None) -> LoopNode | None:
    """The pipeline loop directly around `task` (None when none)."""
    for node in nodes:
        if node is task:
            return parent
        if isinstance(node, LoopNode):
            found = _loop_of(task, node.children, node)
            if found is not None:
                return found
    return None


def _tasks_under(loop: LoopNode) -> list[TaskNode]:
    tasks = []
    for node in loop.children:
        tasks += _tasks_under(node) if isinstance(node, LoopNode) else [node]
    return tasks


def _proved_greater(value: int | tirx.PrimExpr, bound: int) -> bool:
    if isinstance(value, int):
        return value > bound
    return sym.Analyzer().can_prove(value > bound)


def _unsafe(protocol: Protocol, task: TaskNode, depth: int) -> str | None:
    """Why the releases of `task` cannot be deferred by `depth` instances (None when they can)."""
    loop = _loop_of(task, protocol.tree.children)
    if loop is None:
        return "it is in no pipeline loop"
    others = [t.name for t in _tasks_under(loop) if t.role == task.role and t is not task]
    if others:
        return f"its warp role runs {others} in the same loop"
    after = protocol.after(task.name)
    if not after:
        return "no release follows it"
    commits = [op.describe() for op in after if op.action != ARRIVE or op.group.kind != RESOURCE]
    if commits:
        return f"operations other than releases follow it: {commits}"
    short = [op.describe() for op in after if not _proved_greater(op.group.distance, depth)]
    if short:
        return (f"a producer reacquires what it releases after a distance not provably greater than {depth} (the "
                f"ring needs more stages than groups in flight): {short}")
    return None


def defer_releases(protocol: Protocol, task: str, depth: int) -> Protocol:
    """`protocol` with `task` in flight `depth` instances deep and the releases after it lagging as many (the
    rewriting only; `in_flight_protocol` decides where it is safe)."""
    if task not in {t.name for t in protocol.tree.tasks()}:
        raise ValueError(f"defer_releases: task must name a task of the protocol, got {task!r}")
    (depth,) = require_sizes("defer_releases", depth=depth)
    ops = {**protocol.ops, task: tuple(dataclasses.replace(op, lag=depth) if not op.before_task else op
                                       for op in protocol.ops.get(task, ()))}
    return dataclasses.replace(protocol, ops=ops, in_flight={**protocol.in_flight, task: depth})


def in_flight_protocol(protocol: Protocol, tiles: TilePlan) -> Protocol:
    """`protocol` with every wgmma tile task (of `tiles`, the kernel's `tile_plan`) that qualifies kept
    `WGMMA_IN_FLIGHT` groups in flight (see the module doc); the others are left as they are and the reason is
    logged."""
    for task in protocol.tree.tasks():
        if task.name not in tiles.mmas:
            continue
        reason = _unsafe(protocol, task, WGMMA_IN_FLIGHT)
        if reason is not None:
            logger.info("WarpSpecialize: wgmma task '%s' retires its group before its release "
                        "(wgmma.wait_group 0): %s", task.name, reason)
            continue
        protocol = defer_releases(protocol, task.name, WGMMA_IN_FLIGHT)
    return protocol
