"""The generated protocol: per-warp-role programs as data, read by both the code generator and the checker.

Each warp role runs the pipeline tree restricted to its own tasks (the partition of the graph by warp id). Around
every task the protocol places guarded synchronization operations, one per channel group the task takes part in,
in the CUTLASS-like vocabulary:

* before a consumer task: **wait** for the producer's data (data channel; the consumer waits on the phase parity);
* before a producer task: **acquire** the range from the consumers that still hold it (resource channel);
* after a producer task: **commit** the data (arrive on the data channel);
* after a consumer task: **release** the range (arrive on the resource channel).

An operation of a group is active in instance `index` of its task when that instance is the source (arrive) or the
destination (wait) of one of the group's edges; the channel is `base + edge % stages` and the awaited parity is
`phase & 1` with `phase = phase_offset + edge // stages`. A task may run **in flight** (`Protocol.in_flight`, Hopper's
wgmma tiles, see `warpspec.retirement`): its instance `i` completes only when a later wait retires it, and its
releases are deferred (`SyncOp.lag`): placed after instance `i`, they release instance `i - lag`. `parity_flip`
exists so that tests can plant a wrong parity and show that `check` catches it; the generator never sets it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .channels import ChannelGroup, ChannelPlan, Count
from .graphs import DATA
from .tree import ScheduleTree

__all__ = ["ARRIVE", "WAIT", "Protocol", "SyncOp", "build_protocol"]

WAIT = "wait"
ARRIVE = "arrive"


@dataclass(frozen=True)
class SyncOp:
    """One synchronization operation attached to a task: before it (`wait`) or after it (`arrive`)."""

    action: str
    group: ChannelGroup
    before_task: bool
    parity_flip: bool = False
    tx_bytes: int = 0
    """A transaction arrive (Hopper): the byte count armed with `arrive.expect_tx`; the phase completes when the
    copies of `tx_copies` have delivered that many bytes (see `warpspec.transactions`)."""
    tx_copies: tuple[tuple[str, int], ...] = ()
    """The TMA load tasks (name, bytes) of the same instance whose copies complete on this operation's channel."""
    signal: ChannelGroup | None = None
    """The group whose arrive completes this wait, when another group's channels carry it (merged transactions)."""
    lag: int = 0
    """A deferred release: placed after instance `index` of its task, it handles the edge of instance
    `index - lag` (see `warpspec.retirement`)."""

    @property
    def verb(self) -> str:
        """acquire / commit / wait / release."""
        if self.action == WAIT:
            return "wait" if self.group.kind == DATA else "acquire"
        return "commit" if self.group.kind == DATA else "release"

    def edge_number(self, index: Count) -> Count:
        """The number of the group's edge this operation handles in instance `index` of its task, whether or not
        it is an edge of the group (int, or `PrimExpr` for the generated code)."""
        if self.action == WAIT:
            return self.group.destination_edge(index)
        return self.group.source_edge(index - self.lag)

    def edge(self, index: int) -> int | None:
        """The group's edge this operation handles in instance `index` of its task, or None (inactive)."""
        edge = self.edge_number(index)
        return edge if 0 <= edge < self.group.count else None

    def parity(self, edge: Count) -> Count:
        """The parity a wait for edge `edge` waits on: `(phase + parity_flip) % 2` (ints or `PrimExpr`s)."""
        return (self.group.phase(edge) + int(self.parity_flip)) % 2

    @property
    def signalling_group(self) -> ChannelGroup:
        """The group whose arrive completes this operation's phase."""
        return self.signal or self.group

    def describe(self) -> str:
        """The operation as text: verb, channels, the edge it serves, transaction bytes and lag."""
        g = self.group
        text = f"{self.verb} channels {list(g.channels)} ({g.src_task} -> {g.dst_task}, distance {g.distance})"
        if self.tx_copies:
            text += f", expect_tx {self.tx_bytes} bytes from {', '.join(name for name, _ in self.tx_copies)}"
        if self.lag:
            text += f", of the instance {self.lag} earlier (deferred)"
        return text


@dataclass(frozen=True)
class Protocol:
    """The per-warp programs: the tree, the channel plan and the operations around every task."""

    tree: ScheduleTree
    plan: ChannelPlan
    ops: dict[str, tuple[SyncOp, ...]]
    in_flight: dict[str, int] = field(default_factory=dict)
    """Tasks whose instances stay in flight after they are issued, with their depth `D`: instance `i` is retired
    (its reads done) by the wait after instance `i + D`, or by the drain after its loop (see
    `warpspec.retirement`)."""
    unmerged: dict[str, str] = field(default_factory=dict)
    """TMA load tasks whose batch `warpspec.transactions` left as it is, with the reason (the Hopper code
    generator refuses them with it)."""

    def before(self, task: str) -> list[SyncOp]:
        """The operations of `task` that run before its body (acquires and waits)."""
        return [op for op in self.ops.get(task, ()) if op.before_task]

    def after(self, task: str) -> list[SyncOp]:
        """The operations of `task` that run after its body (commits and releases)."""
        return [op for op in self.ops.get(task, ()) if not op.before_task]

    def replace_ops(self, task: str, ops: list[SyncOp]) -> Protocol:
        """A copy with the operations of `task` replaced by `ops` (used to plant bugs in tests)."""
        return dataclasses.replace(self, ops={**self.ops, task: tuple(ops)})

    def describe(self) -> str:
        """The per-warp programs as text: for each warp role, its tasks with the operations around them."""
        lines = []
        for role in self.tree.roles:
            lines.append(f"warp role {role}:")
            for task in self.tree.tasks():
                if task.role != role:
                    continue
                lines += [f"  {op.describe()}" for op in self.before(task.name)]
                depth = self.in_flight.get(task.name)
                lines.append(f"  run {task.name}" + (f" ({depth} in flight)" if depth else ""))
                lines += [f"  {op.describe()}" for op in self.after(task.name)]
        return "\n".join(lines)


def build_protocol(plan: ChannelPlan) -> Protocol:
    """Attach a wait before the destination task and an arrive after the source task of every group."""
    ops: dict[str, list[SyncOp]] = {}
    for group in plan.groups:
        ops.setdefault(group.dst_task, []).append(SyncOp(WAIT, group, before_task=True))
        ops.setdefault(group.src_task, []).append(SyncOp(ARRIVE, group, before_task=False))
    ordered = {task: tuple(sorted(task_ops, key=lambda op: (not op.before_task, op.group.base)))
               for task, task_ops in ops.items()}
    return Protocol(plan.tree, plan, ordered)
