"""`analyze(func)`: every stage of WarpSpecialize's analysis, in the order data flows.

schedule tree → CDFG (producers, consumers, control and data dependences) → CDRFG (plus resource dependences over
buffer ranges) → reduced graph (redundant dependences removed) → channel plan (channels, stages, phases) →
protocol (the per-warp-role programs with acquire/commit/wait/release operations). Each stage is a pure function
of the previous one; this module only wires them together and keeps every intermediate result printable.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from .channels import ChannelPlan, allocate_channels
from .graphs import (
    FlowGraph,
    control_data_flow_graph,
    control_data_resource_flow_graph,
    eliminate_redundant,
)
from .protocol import Protocol, build_protocol
from .tree import ScheduleTree, build_schedule_tree

__all__ = ["Analysis", "analyze"]


@dataclass(frozen=True)
class Analysis:
    """The intermediate results of the WarpSpecialize analysis of one kernel."""

    tree: ScheduleTree
    cdfg: FlowGraph
    cdrfg: FlowGraph
    reduced: FlowGraph
    plan: ChannelPlan
    protocol: Protocol

    def describe(self) -> str:
        return "\n".join([
            "schedule tree:", self.tree.describe(),
            "CDRFG before redundancy elimination:", self.cdrfg.describe(),
            "after redundancy elimination:", self.reduced.describe(),
            "channels:", self.plan.describe(),
            "per-warp programs:", self.protocol.describe(),
        ])

    def to_dot(self) -> str:
        """The CDRFG as graphviz text, redundant edges dotted."""
        return self.reduced.to_dot()


def analyze(func: tirx.PrimFunc, max_instances: int = 4096) -> Analysis:
    """Run every analysis stage on a scheduled kernel with `warp_role` blocks (see `warpspec.tree` for the form)."""
    tree = build_schedule_tree(func)
    cdfg = control_data_flow_graph(tree, max_instances)
    cdrfg = control_data_resource_flow_graph(cdfg)
    reduced = eliminate_redundant(cdrfg)
    plan = allocate_channels(reduced)
    return Analysis(tree, cdfg, cdrfg, reduced, plan, build_protocol(plan))
