"""Sync channels: from the reduced dependences to numbered channels with stages and phases.

Algorithm.

1. **Group** the reduced edges by (producer task, consumer task, instance distance `d`), where `d` is the
   consumer's instance index minus the producer's. A group is the uniform rule "instance `i` of the source
   signals instance `i + d` of the destination", which the per-warp programs implement with one guarded
   operation per task. Groups are made uniform: every pair `(i, i + d)` in range, or, where one of those pairs
   would point backwards in program order (a producer in an outer loop signalling the first iteration of an inner
   loop: a distance that changes from one outer iteration to the next), every pair between the group's first and
   last edge. Added edges are checked to go forward in program order (so they cannot create a deadlock); a rule
   whose own span points backwards (producer and consumer in different loop nests under a common loop) is
   rejected.
2. **Stages.** The edges of a group, in order, are `e_0, e_1, ...`. A group uses a ring of `stages` channels:
   edge `e_i` uses channel `base + i % stages` in phase `i // stages`. `stages` is the smallest `r` such that the
   destination of `e_i` happens before the source of `e_{i+r}` for every `i` (a channel is reused only after its
   previous use was consumed), so a waiter never sees a channel two phases ahead (no parity aliasing). For a
   producer/consumer ring over `k % 3` buffers both the data ("full") and the resource ("empty") groups get 3.
3. **Reuse of channel ids.** Data channels are numbered first, then resource channels. A single-stage group reuses
   an existing channel of the same kind and the same pair of warp roles when the last use of that channel happens
   before the group's first use (their lifetimes do not overlap); its phases then continue after the channel's
   earlier uses. Each use of a channel is one phase: the producer side arrives (*commit* for data, *release* for
   resource) and the consumer side waits on the phase parity (*wait* for data, *acquire* for resource).

For long or symbolic pipeline loops `warpspec.symbolic` produces the same groups without instances: `distance`,
`first`, `count` and `phase_offset` are then expressions of the trip counts (`PrimExpr`) and `edges` is empty.

On CUDA a channel is one mbarrier in shared memory whose expected arrival count is the number of threads of the
arriving warp role; on llvm it is an int32 phase counter updated with release/acquire atomics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

from .graphs import DATA, RESOURCE, Dependence, FlowGraph, ancestor_bitsets
from .tree import ScheduleTree, WarpSpecializeInputError

Count = int | tirx.Expr
"""An int, or an expression of symbolic trip counts."""

__all__ = ["ChannelGroup", "ChannelPlan", "allocate_channels"]


@dataclass(frozen=True)
class ChannelGroup:
    """The uniform dependences from one producer task to one consumer task, and the channels they use."""

    kind: str
    src_task: str
    dst_task: str
    src_role: int
    dst_role: int
    distance: Count
    first: Count
    count: Count
    stages: int
    base: int
    phase_offset: Count
    edges: tuple[tuple[int, int], ...] = field(repr=False)
    """Instance positions `(source, destination)` of `e_0, e_1, ...` (empty in a symbolic plan)."""

    def source_edge(self, index: Count) -> Count:
        """The number of the edge that source instance `index` signals; an edge of the group only when
        `0 <= edge < count`. Ints give ints; `PrimExpr`s (the generated code's loop indices) give the expression."""
        return index - self.first

    def destination_edge(self, index: Count) -> Count:
        """The number of the edge that destination instance `index` awaits (see `source_edge`)."""
        return index - self.first - self.distance

    def channel(self, edge: Count) -> Count:
        """The channel of edge `edge`: `base + edge % stages` (on a `PrimExpr`, `%` is `floormod`)."""
        return self.base + edge % self.stages

    def phase(self, edge: Count) -> Count:
        """The phase of its channel that edge `edge` uses: `phase_offset + edge // stages` (`floordiv`)."""
        return self.phase_offset + edge // self.stages

    @property
    def channels(self) -> tuple[int, ...]:
        """The channel ids of the group's ring, one per stage: `base .. base + stages - 1`."""
        return tuple(range(self.base, self.base + self.stages))


@dataclass(frozen=True)
class ChannelPlan:
    """All channel groups of a kernel; channels `0 .. channel_count - 1`.

    `graph` is the instance graph the groups were taken from, or None for a symbolic plan.
    """

    tree: ScheduleTree = field(repr=False)
    groups: tuple[ChannelGroup, ...]
    channel_count: int
    graph: FlowGraph | None = field(default=None, repr=False)
    min_trip_counts: tuple[tuple[str, int], ...] = ()
    """`(loop variable name, minimum)` for symbolic trip counts the plan holds only from a minimum on."""

    def channels_of_kind(self, kind: str) -> list[int]:
        """The channel ids used by the groups of dependence kind `kind` (`DATA` or `RESOURCE`), sorted."""
        return sorted({c for g in self.groups if g.kind == kind for c in g.channels})

    def arriving_role(self, channel: int) -> int:
        """The warp role that arrives on (signals) channel `channel`."""
        return next(g.src_role for g in self.groups if channel in g.channels)

    def assignment(self) -> dict[tuple[str, str], int]:
        """`(source name, destination name) -> channel` for every edge (plans over instances only)."""
        if self.graph is None:
            raise ValueError("a symbolic channel plan has no instances; use analyze(func, unroll=True)")
        names = self.graph.instances
        return {(names[s].name, names[d].name): g.channel(i)
                for g in self.groups for i, (s, d) in enumerate(g.edges)}

    def sync_operations_per_iteration(self) -> int:
        """Arrive plus wait operations for one instance of every task (two per group)."""
        return 2 * len(self.groups)

    def describe(self) -> str:
        """The channel count, the channels per kind, minimum trip counts and every group, as text."""
        lines = [f"{self.channel_count} channels: data {self.channels_of_kind(DATA)}, "
                 f"resource {self.channels_of_kind(RESOURCE)}"]
        lines += [f"  valid for at least {minimum} iterations of loop {name} (below that the llvm and CUDA kernels "
                  "run the pipeline sequentially, the Hopper kernel fails its assert)"
                  for name, minimum in self.min_trip_counts]
        for g in self.groups:
            lines.append(f"  {g.kind} {g.src_task} (role {g.src_role}) -> {g.dst_task} (role {g.dst_role}): "
                         f"distance {g.distance}, {g.count} edges, channels {list(g.channels)}, "
                         f"{g.stages} stage(s), first phase {g.phase_offset}")
        return "\n".join(lines)


@dataclass
class _ReusableChannel:
    """A single-stage channel and its uses so far (one phase each), for id reuse."""

    kind: str
    roles: tuple[int, int]
    channel: int
    uses: int = 0
    last_destination: int = -1


def _uniform_groups(graph: FlowGraph) -> list[dict]:
    instances = graph.instances
    position = {(i.task.name, i.index): i.position for i in instances}
    counts: dict[str, int] = {}
    for inst in instances:
        counts[inst.task.name] = counts.get(inst.task.name, 0) + 1
    grouped: dict[tuple[str, str, int], list[Dependence]] = {}
    for e in graph.edges:
        src, dst = instances[e.src], instances[e.dst]
        grouped.setdefault((src.task.name, dst.task.name, dst.index - src.index), []).append(e)
    def pairs_from(src_task: str, dst_task: str, d: int, first: int, count: int) -> tuple[tuple[int, int], ...]:
        return tuple((position[(src_task, s)], position[(dst_task, s + d)]) for s in range(first, first + count))

    def backward_pairs(pairs: tuple[tuple[int, int], ...]) -> list[tuple[str, str]]:
        return [(instances[a].name, instances[b].name) for a, b in pairs if a > b]

    groups = []
    for (src_task, dst_task, d), edges in grouped.items():
        first = max(0, -d)
        count = min(counts[src_task], counts[dst_task] - d) - first
        pairs = pairs_from(src_task, dst_task, d, first, count)
        backward = backward_pairs(pairs)
        if backward:  # the whole range would wait backwards: the span of the group's own edges
            sources = [instances[e.src].index for e in edges]
            first, count = min(sources), max(sources) - min(sources) + 1
            pairs = pairs_from(src_task, dst_task, d, first, count)
            backward = backward_pairs(pairs)
        if backward:
            raise WarpSpecializeInputError(
                f"the dependences from block '{src_task}' to block '{dst_task}' at instance distance {d} are not "
                f"uniform: the same rule would make {backward[0][1]} wait for the later {backward[0][0]}; put "
                "producer and consumer in the same loop nest"
            )
        groups.append({
            "kind": DATA if any(e.kind == DATA for e in edges) else RESOURCE,
            "src_task": src_task, "dst_task": dst_task,
            "src_role": instances[pairs[0][0]].role, "dst_role": instances[pairs[0][1]].role,
            "distance": d, "first": first, "count": count, "edges": pairs,
        })
    return groups


def allocate_channels(reduced: FlowGraph) -> ChannelPlan:
    """Group the reduced dependences, choose the stages of every group and number the channels."""
    groups = _uniform_groups(reduced)
    uniform_edges = [Dependence(s, d, g["kind"], ()) for g in groups for s, d in g["edges"]]
    ancestors = ancestor_bitsets(len(reduced.instances), reduced.program_order_predecessors(), uniform_edges)

    def happens_before(a: int, b: int) -> bool:
        return bool(ancestors[b] >> a & 1)

    for g in groups:
        pairs = g["edges"]
        g["stages"] = next(
            (r for r in range(1, len(pairs))
             if all(happens_before(pairs[i][1], pairs[i + r][0]) for i in range(len(pairs) - r))),
            max(1, len(pairs)),
        )
    finished: list[ChannelGroup] = []
    reusable: list[_ReusableChannel] = []
    next_channel = 0
    for kind in (DATA, RESOURCE):
        for g in sorted((g for g in groups if g["kind"] == kind), key=lambda g: g["edges"][0][1]):
            roles = (g["src_role"], g["dst_role"])
            channel = None
            if g["stages"] == 1:
                channel = next((c for c in reusable if c.kind == kind and c.roles == roles
                                and happens_before(c.last_destination, g["edges"][0][0])), None)
            if channel is not None:
                base, offset = channel.channel, channel.uses
            else:
                base, offset = next_channel, 0
                next_channel += g["stages"]
                if g["stages"] == 1:
                    channel = _ReusableChannel(kind, roles, base)
                    reusable.append(channel)
            if channel is not None:
                channel.uses += g["count"]
                channel.last_destination = g["edges"][-1][1]
            finished.append(ChannelGroup(base=base, phase_offset=offset, **g))
    return ChannelPlan(reduced.tree, tuple(finished), next_channel, reduced)
