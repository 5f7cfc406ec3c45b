"""Transactions: the protocol rewritten for TMA producers (Hopper), a pure function of the protocol and the tiles.

On Hopper a TMA copy signals its completion to one mbarrier (`mbarrier::complete_tx::bytes`), not in the producer's
program order: the copies of one stage land in any order, after the producer has moved on. The channel protocol
derived for sequential producers (commit after the last copy; earlier copies ordered by program order) therefore
changes for the producer's **batch** of TMA loads: the TMA load tasks of one warp role that are siblings in one
loop body, with no synchronization between them other than acquires before the first and commits after the last
(and no release after any: a copy's reads of its source end only when the transaction completes).

* The data groups the batch commits (one per consumer task, e.g. one per consumer warpgroup) must agree on their
  rule (distance, first edge, edge count, stages, phase offset); they become **one transaction channel ring**:
  the first group keeps its channels, the other groups' consumers wait on the same channels (`SyncOp.signal`).
* The commit becomes one **transaction arrive** before the batch's first copy: `arrive.expect_tx` with the bytes
  of all the batch's copies (`tx_bytes`), issued by one thread; each copy completes its bytes on the same channel
  (`tx_copies`). The channel's arrival count is 1.
* Acquires (the consumers' releases of the stage) precede the first copy: those of later copies (a ring of fewer
  stages) move before it, since the batch's copies are issued together after one `expect_tx`; and the commits of
  earlier copies (a consumer reading only the first copy's ring) join the transaction, whose phase completes after
  all the batch's copies (the consumers come after the whole batch in the sequential program).

A batch whose commits cannot be merged (a release between its copies, consumers with different rules), or with a
release after its last copy (the copy reads its source asynchronously: the release would let the other role
overwrite it while the copy may still read it), is left as it is; the reason (naming the released ranges and their
tasks, or the differing rules) is logged and kept in `Protocol.unmerged`, and the Hopper code generator rejects the
kernel with it, naming the task (a TMA copy must signal exactly one channel).
"""

from __future__ import annotations

import dataclasses
import logging

from .graphs import DATA
from .protocol import ARRIVE, WAIT, Protocol, SyncOp
from .tiles import TilePlan
from .tree import LoopNode, TaskNode, region_text

__all__ = ["transaction_protocol"]

logger = logging.getLogger("tvm_tailsplit.warpspec")


def _batches(nodes, tiles: TilePlan) -> list[list[TaskNode]]:
    """Runs of TMA load tasks of one warp role among the siblings `nodes`, recursively."""
    batches: list[list[TaskNode]] = []
    run: list[TaskNode] = []
    for node in nodes:
        if isinstance(node, TaskNode) and node.name in tiles.loads and (not run or run[-1].role == node.role):
            run.append(node)
            continue
        if run:
            batches.append(run)
        run = [node] if isinstance(node, TaskNode) and node.name in tiles.loads else []
        if isinstance(node, LoopNode):
            batches += _batches(node.children, tiles)
    if run:
        batches.append(run)
    return batches


def _release_text(protocol: Protocol, task: str, op: SyncOp) -> str:
    """`op`, an arrive after copy `task` other than a commit, as text: the ranges it releases and to whom."""
    tasks = {t.name: t for t in protocol.tree.tasks()}
    src, dst = tasks[task], tasks[op.group.dst_task]
    written = {region.buffer.name for region in dst.writes}
    ranges = [region_text(region) for region in src.reads + src.writes if region.buffer.name in written]
    return (f"{task} releases {', '.join(ranges) or 'what it touches'} to {dst.name} (warp role {dst.role}, "
            f"channels {list(op.group.channels)}, which then writes it)")


def _rule(op: SyncOp) -> tuple:
    g = op.group
    return (str(g.distance), str(g.first), str(g.count), g.stages, str(g.phase_offset))


def transaction_protocol(protocol: Protocol, tiles: TilePlan) -> Protocol:
    """`protocol` with every TMA batch's commits (the TMA loads of `tiles`, the kernel's `tile_plan`) turned into
    one transaction arrive (see the module doc)."""
    ops = {task: list(task_ops) for task, task_ops in protocol.ops.items()}
    unmerged = dict(protocol.unmerged)
    for batch in _batches(protocol.tree.children, tiles):
        names = [task.name for task in batch]
        # the arrives on data channels after each copy (those of the last copy whenever it runs)
        commits = [op for name in names for op in ops.get(name, []) if op.action == ARRIVE and op.group.kind == DATA
                   and (name == names[-1] or not op.before_task)]
        # a release after any copy, the last included: the copy still reads its source when the release runs
        releases = [(name, op) for name in names for op in ops.get(name, [])
                    if not op.before_task and op.group.kind != DATA]
        reason = None
        if releases:
            reason = "; ".join(_release_text(protocol, name, op) for name, op in releases) + (
                " right after issuing its copy: a TMA copy reads its source after its thread has moved on, so "
                "nothing it reads may be released before the batch's transaction completes")
        elif not commits:
            reason = "no task of another warp role reads what the batch's copies write"
        elif len({_rule(op) for op in commits}) != 1:
            reason = "its consumers' channel rules (distance, first edge, count, stages, phase offset) differ: " + (
                ", ".join(f"{op.group.src_task} -> {op.group.dst_task} {_rule(op)}" for op in commits))
        if reason is not None:
            logger.info("WarpSpecialize: TMA batch %s kept as it is: %s", names, reason)
            unmerged.update({name: f"its batch {names} was kept as it is: {reason}" for name in names})
            continue
        # the acquires of later copies (a ring of fewer stages than the first copy's) move before the first copy:
        # the batch's copies are armed together, so each waits for the stages of all (the siblings share their loops
        # and so their instance numbers)
        hoisted = [op for name in names[1:] for op in ops.get(name, []) if op.before_task]
        for name in names[1:]:
            ops[name] = [op for op in ops.get(name, []) if not op.before_task]
        first = ops.setdefault(names[0], [])
        ops[names[0]] = [op for op in first if op.before_task] + hoisted + [op for op in first if not op.before_task]
        primary = commits[0].group
        copies = tuple((name, tiles.loads[name].bytes) for name in names)
        arrive = SyncOp(ARRIVE, primary, before_task=True, tx_bytes=sum(size for _, size in copies),
                        tx_copies=copies)
        for name in names:  # an earlier copy's commits too: its consumers wait for the batch's transaction
            ops[name] = [op for op in ops.get(name, []) if op not in commits]
        first = ops.setdefault(names[0], [])
        first.insert(len([op for op in first if op.before_task]), arrive)
        merged = {op.group for op in commits[1:]}
        for task, task_ops in ops.items():
            ops[task] = [dataclasses.replace(op, group=dataclasses.replace(op.group, base=primary.base),
                                             signal=primary)
                         if op.action == WAIT and op.group in merged else op for op in task_ops]
    return dataclasses.replace(protocol, ops={task: tuple(task_ops) for task, task_ops in ops.items()},
                               unmerged=unmerged)
