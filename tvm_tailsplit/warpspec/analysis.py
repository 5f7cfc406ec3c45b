"""`analyze(func)`: every stage of WarpSpecialize's analysis, in the order data flows.

schedule tree → CDFG (producers, consumers, control and data dependences) → CDRFG (plus resource dependences over
buffer ranges) → reduced graph (redundant dependences removed) → channel plan (channels, stages, phases) →
protocol (the per-warp-role programs with acquire/commit/wait/release operations). Each stage is a pure function
of the previous one; this module only wires them together and keeps every intermediate result printable.

Two ways to get the channel plan, chosen per kernel:

* **unrolled** (small kernels: every trip count constant and at most `SMALL_INSTANCES` and `max_instances` task
  instances, or `unroll=True`): the graphs over explicit instances of `warpspec.graphs`, then `allocate_channels`;
* **symbolic** (long or symbolic trip counts, or `unroll=False`): `warpspec.symbolic` derives the same channel
  groups as rules per (producer task, consumer task, iteration distance) from bounded windows of iterations and
  proves them for every iteration; the graphs over instances are then not built (`cdfg`, `cdrfg` and `reduced`
  are None) and the plan's counts are expressions of the trip counts. If the symbolic derivation fails, a kernel
  with constant trip counts and at most `max_instances` instances is unrolled; otherwise the error names the loop.

`check` and the pass's debug mode explore `small_protocol()`: the protocol itself when unrolled, else the symbolic
protocol instantiated at the window trip counts; for Hopper (`check(func, hopper=True)`, `WarpSpecialize(...,
hopper=True, debug_check=True)`) its `hopper.hopper_protocol` (transactions, groups in flight).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tvm import tirx

from ..ir_utils import require_sizes
from .channels import ChannelPlan, allocate_channels
from .graphs import (
    FlowGraph,
    control_data_flow_graph,
    control_data_resource_flow_graph,
    eliminate_redundant,
    require_grid_invariance,
)
from .protocol import Protocol, build_protocol
from .symbolic import SymbolicAnalysisError, SymbolicPlan, count_instances, symbolic_plan
from .tree import ScheduleTree, build_schedule_tree

__all__ = ["SMALL_INSTANCES", "Analysis", "analyze"]

logger = logging.getLogger("tvm_tailsplit.warpspec")

SMALL_INSTANCES = 256
"""Kernels with at most this many task instances (and constant trip counts) are unrolled by default."""


@dataclass(frozen=True)
class Analysis:
    """The intermediate results of the WarpSpecialize analysis of one kernel.

    The instance graphs (`cdfg`, `cdrfg`, `reduced`) exist when the kernel was unrolled; `symbolic` holds the rules
    when it was analyzed symbolically. `plan` and `protocol` always exist.
    """

    tree: ScheduleTree
    cdfg: FlowGraph | None
    cdrfg: FlowGraph | None
    reduced: FlowGraph | None
    plan: ChannelPlan
    protocol: Protocol
    symbolic: SymbolicPlan | None = None

    def describe(self) -> str:
        """Every stage as text: the schedule tree, the graphs before and after redundancy elimination, the
        symbolic rules, the channels and the per-warp programs."""
        parts = ["schedule tree:", self.tree.describe()]
        if self.cdrfg is not None and self.reduced is not None:
            parts += ["CDRFG before redundancy elimination:", self.cdrfg.describe(),
                      "after redundancy elimination:", self.reduced.describe()]
        if self.symbolic is not None:
            parts += ["symbolic rules:", self.symbolic.describe()]
        parts += ["channels:", self.plan.describe(), "per-warp programs:", self.protocol.describe()]
        return "\n".join(parts)

    def to_dot(self) -> str:
        """The CDRFG as graphviz text, redundant edges dotted (unrolled analyses only)."""
        if self.reduced is None:
            raise ValueError("the kernel was analyzed symbolically and has no instance graph; draw a smaller trip "
                             "count or use analyze(func, unroll=True)")
        return self.reduced.to_dot()

    def small_protocol(self) -> Protocol:
        """The protocol over explicit instances: `protocol` when unrolled, else the symbolic protocol instantiated
        at the window trip counts (what `check` explores)."""
        if self.symbolic is None:
            return self.protocol
        return build_protocol(self.symbolic.instantiate(self.symbolic.window_counts()))


def _unrolled(tree: ScheduleTree, max_instances: int) -> Analysis:
    cdfg = control_data_flow_graph(tree, max_instances)
    cdrfg = control_data_resource_flow_graph(cdfg)
    reduced = eliminate_redundant(cdrfg)
    plan = allocate_channels(reduced)
    return Analysis(tree, cdfg, cdrfg, reduced, plan, build_protocol(plan))


def analyze(func: tirx.PrimFunc, unroll: bool | None = None, max_instances: int = 4096) -> Analysis:
    """Run every analysis stage on `func`, a scheduled kernel (a PrimFunc) with `warp_role` blocks (see
    `warpspec.tree` for the form).

    `unroll`: None chooses (unrolled when small, see the module doc), True forces the instance graphs (constant
    trip counts, at most `max_instances` instances), False the symbolic analysis. An `unroll` other than None, True or
    False is a TypeError, a `max_instances` other than a positive int a ValueError naming it.
    """
    (max_instances,) = require_sizes("analyze", max_instances=max_instances)
    if unroll is not None and not isinstance(unroll, bool):
        raise TypeError(f"analyze: unroll must be None, True or False, got {type(unroll).__name__} {unroll!r}")
    tree = build_schedule_tree(func)
    require_grid_invariance(tree)
    instances = count_instances(tree)
    if unroll is None:
        unroll = instances is not None and instances <= min(SMALL_INSTANCES, max_instances)
    if unroll:
        return _unrolled(tree, max_instances)
    try:
        symbolic = symbolic_plan(tree)
    except SymbolicAnalysisError as error:
        if instances is None or instances > max_instances:
            raise
        logger.info("WarpSpecialize: symbolic analysis failed (%s); unrolling the %d task instances", error,
                    instances)
        return _unrolled(tree, max_instances)
    plan = symbolic.channel_plan()
    return Analysis(tree, None, None, None, plan, build_protocol(plan), symbolic)
