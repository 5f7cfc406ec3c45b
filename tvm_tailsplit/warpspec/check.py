"""Interleaving checker for the generated protocol (verification without a GPU).

Algorithm.

1. **Unroll** every warp role's program over the (small) trip counts (a symbolic protocol is first instantiated at
   the window trip counts of its analysis) into a list of steps: the task instances of
   the role in program order, each surrounded by its active synchronization operations with concrete channel and
   parity (exactly what the generated code computes).
2. **Match** every wait with the arrive that should satisfy it: the arrives on one channel come from one warp role
   in program order, and the k-th arrive completes phase k. A wait with no matching arrive, or whose matching
   arrive is on another channel (its phases then count other arrives), is reported and orders nothing.
3. **Explore** all interleavings of the roles as a search over states (one program counter per role, resting only
   on synchronization steps: the task and retirement steps between them neither wait nor arrive, so their
   interleavings change nothing; the channels' completed-phase counts follow from the counters). A wait passes
   when the parity of the channel's completed phase count differs from its parity, as `mbarrier.test_wait.parity`
   does. Reported: **deadlocks** (a reachable
   state in which no role can move and not all have finished), **parity aliasing** (a wait that can pass in a phase
   other than the one it waits for, or is reached when its channel is two or more phases ahead), and **leftover
   arrivals** at exit (phases nobody waited for). A search stopped by `max_states` is reported as incomplete.
   A **transaction** arrive (Hopper: `arrive.expect_tx` armed before TMA copies) completes its phase only when its
   copies have delivered the armed byte count: its step sits after the copy task at which the delivered bytes
   reach it, so a count that is too small lets consumers pass before the last copy (a race) and one that is too
   large never completes (a deadlock); a count different from the copies' bytes is also reported directly.
   A task **in flight** `D` deep (`Protocol.in_flight`, wgmma groups, see `warpspec.retirement`) is issued at its
   step and **retired** by a retirement step after it: the role's pending in-flight instances but the `D` issued
   last (`wgmma.wait_group D`), and after the last instance of each run of its loop all of them (the drain's
   `wait_group 0`), followed by the drain's lagged releases (the operations after the task at the indices past
   that instance; within a run, a lagged operation is active from the run's iteration `lag` on, as in the
   generated code).
   An arrive that signals an instance still in flight (a stage released while a wgmma may still read it) is
   reported as a **release in flight**.
   **Happens-before proof.** The states grow as the product of the roles' slack (a producer feeding six
   consumers through four stages: over two million states, a minute of Python), so before exploring, a
   well-formed protocol (every wait matched with an arrive on its own channel, each channel arrived on by one role
   in program order, no edge arrived twice, happens-before acyclic) is decided exactly without interleaving: a
   wait for phase `k` is reached with the channel's completed count anywhere in `[lo, hi]` (`lo`: the arrives that
   happen before the step preceding it, `hi`: the arrives that do not happen after it) as long as every earlier
   wait passed in its own phase, so it is correct iff `k <= lo`, `hi <= k + 1` and its parity is `k & 1`; then
   every execution follows happens-before, and an acyclic happens-before cannot deadlock. A protocol so proven is
   still explored, but only up to `PROVEN_EXPLORATION_STATES` states (the rest adds nothing); a protocol the
   proof does not cover, or finds at fault, is explored up to `max_states` (the proof's own issues are added when
   that search stops early).
4. **Races on buffer ranges.** When every wait passes in its own phase, happens-before is program order plus
   arrive(k) → wait(k). Every pair of conflicting instances of different roles (overlapping ranges, one writes) must
   be ordered as in the sequential program: the earlier instance's end (its step, or the step that retires it when
   in flight) must happen before the later one's step; otherwise the checker reports a consumer reading before
   the producer's arrival, or a producer writing a range before the consumer released it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

from ..ir_utils import require_bools, require_sizes
from .analysis import analyze
from .graphs import Instance, boxes_overlap
from .hopper import hopper_protocol
from .protocol import ARRIVE, WAIT, Protocol, SyncOp
from .tiles import tile_plan

__all__ = ["CheckReport", "Issue", "Step", "check", "check_protocol", "role_programs"]

DEADLOCK = "deadlock"
RACE = "race"
PARITY_ALIASING = "parity aliasing"
LEFTOVER = "leftover arrivals"
MISSING_ARRIVE = "missing arrive"
INCOMPLETE = "exploration incomplete"
TRANSACTION = "transaction bytes"
IN_FLIGHT = "release in flight"

PROVEN_EXPLORATION_STATES = 50_000
"""How many states `check` still explores of a protocol the happens-before proof has shown safe."""


@dataclass(frozen=True)
class Issue:
    kind: str
    message: str


@dataclass
class CheckReport:
    """The outcome of `check`: issues found, and how much was explored."""

    issues: list[Issue] = field(default_factory=list)
    states: int = 0
    steps_per_role: dict[int, int] = field(default_factory=dict)
    proven: bool = False
    """True when the happens-before proof showed the protocol safe (whether or not its exploration finished)."""
    exhausted: bool = True
    """False when the exploration stopped at its state bound (for a proven protocol, without an issue)."""

    @property
    def ok(self) -> bool:
        """True when the exploration found no issue."""
        return not self.issues

    def kinds(self) -> set[str]:
        """The kinds of the issues found (`"deadlock"`, `"race"`, ...)."""
        return {issue.kind for issue in self.issues}

    def describe(self) -> str:
        """The states explored, the steps per warp role, and the issues found (or that the protocol is safe)."""
        head = (f"explored {self.states} states; steps per warp role "
                + ", ".join(f"{r}: {n}" for r, n in sorted(self.steps_per_role.items())))
        if self.proven and not self.exhausted:
            head += (" (exploration stopped there: the happens-before proof covers every interleaving, see "
                     "warpspec.check)")
        if self.ok:
            return head + "\nprotocol is safe: no deadlock, race, parity aliasing or leftover arrival"
        return head + "\n" + "\n".join(f"{issue.kind}: {issue.message}" for issue in self.issues)


@dataclass(frozen=True)
class Step:
    """One step of a warp role's program (`role_programs`): running a task instance, a synchronization operation
    on a channel with its parity, or the retirement of in-flight wgmma instances."""

    instance: Instance
    op: SyncOp | None = None
    channel: int = -1
    parity: int = 0
    edge: int = -1
    source: str = ""
    retired: tuple[int, ...] = ()
    """A retirement step: the positions of the in-flight instances whose reads it completes."""

    @property
    def runs_task(self) -> bool:
        return self.op is None and not self.retired

    def describe(self) -> str:
        if self.retired:
            return f"retire in-flight instances {list(self.retired)} after {self.instance.name}"
        if self.op is None:
            return f"run {self.instance.name}"
        return f"{self.op.verb} on channel {self.channel} (parity {self.parity}) at {self.instance.name}"


def role_programs(protocol: Protocol) -> dict[int, list[Step]]:
    """The program of every warp role as `check` explores it: its steps (tasks, synchronization operations with
    their channels and parities, retirements of in-flight wgmma instances) in program order."""
    programs: dict[int, list[Step]] = {role: [] for role in protocol.tree.roles}

    instances = protocol.plan.graph.instances
    extents = {loop.var.name: loop.extent for loop in protocol.tree.loops()}

    def run_iteration(inst: Instance) -> int:
        """The iteration of the loop directly around `inst` (a run of it ends at its last iteration)."""
        return inst.iteration[-1] if inst.iteration else 0

    def run_ends(inst: Instance) -> bool:
        loops = inst.task.loops
        return not loops or run_iteration(inst) == extents[loops[-1].loop_var.name] - 1

    def sync_steps(inst: Instance, ops: list[SyncOp], index: int | None = None) -> list[Step]:
        """The active operations of `ops` at instance `inst` (evaluated at `index`, default its own; a lagged
        operation at its own index only from the run's iteration `lag` on)."""
        steps = []
        for op in ops:
            if index is None and run_iteration(inst) < op.lag:
                continue
            edge = op.edge(inst.index if index is None else index)
            if edge is not None:
                # a modified group may count more edges than it has instance pairs: such an edge signals no one
                source = (instances[op.group.edges[edge][0]].name if edge < len(op.group.edges)
                          else f"{op.group.src_task} (edge {edge} of {len(op.group.edges)})")
                steps.append(Step(inst, op, op.group.channel(edge), op.parity(edge), edge, source))
        return steps

    # A transaction arrive completes its phase when its copies have delivered `tx_bytes`: its step is placed after
    # the copy task at which the delivered bytes first reach the count (never, if they do not).
    pending: dict[int, list[tuple[Step, int, dict[str, int]]]] = {role: [] for role in programs}
    issued: dict[int, list[int]] = {role: [] for role in programs}  # in-flight instance positions, oldest first
    for inst in protocol.plan.graph.instances:
        program = programs[inst.role]
        for step in sync_steps(inst, protocol.before(inst.task.name)):
            if step.op.tx_copies:
                pending[inst.role].append((step, step.op.tx_bytes, dict(step.op.tx_copies)))
            else:
                program.append(step)
        program.append(Step(inst))
        waiting = []
        for step, remaining, copies in pending[inst.role]:
            if step.instance.index == inst.index and inst.task.name in copies:
                remaining -= copies.pop(inst.task.name)
                if remaining <= 0:
                    program.append(step)
                    continue
            waiting.append((step, remaining, copies))
        pending[inst.role] = waiting
        depth = protocol.in_flight.get(inst.task.name, 0)
        if depth:
            flight = issued[inst.role]
            flight.append(inst.position)
            retired, issued[inst.role] = flight[:-depth], flight[-depth:]
            if retired:
                program.append(Step(inst, retired=tuple(retired)))
        program += sync_steps(inst, protocol.after(inst.task.name))
        if depth and run_ends(inst):  # the drain after each run: wait_group 0, then the lagged releases
            program.append(Step(inst, retired=tuple(issued[inst.role])))
            issued[inst.role] = []
            for op in protocol.after(inst.task.name):
                for extra in range(1, op.lag + 1):
                    program += sync_steps(inst, [op], inst.index + extra)
    return programs


def _in_flight_issues(protocol: Protocol, programs: dict[int, list[Step]]) -> list[str]:
    """Arrives that signal an instance which is still in flight in its role's program."""
    instances = protocol.plan.graph.instances
    messages = []
    for steps in programs.values():
        flying: set[int] = set()
        for step in steps:
            if step.runs_task and step.instance.task.name in protocol.in_flight:
                flying.add(step.instance.position)
            flying -= set(step.retired)
            if step.op is not None and step.op.action == ARRIVE and step.edge < len(step.op.group.edges):
                source = step.op.group.edges[step.edge][0]
                if source in flying:
                    messages.append(f"{step.describe()} signals {instances[source].name} while its reads are in "
                                    "flight (not yet retired)")
    return messages


def _transaction_issues(protocol: Protocol) -> list[str]:
    """Transaction arrives whose byte count differs from the bytes of the copies that complete on them."""
    messages = []
    for task, ops in protocol.ops.items():
        for op in ops:
            delivered = sum(size for _, size in op.tx_copies)
            if op.tx_copies and delivered != op.tx_bytes:
                effect = ("the phase completes before the copies land" if delivered > op.tx_bytes
                          else "the phase never completes")
                messages.append(f"arrive.expect_tx before {task} on channels {list(op.group.channels)} expects "
                                f"{op.tx_bytes} bytes but its copies {[name for name, _ in op.tx_copies]} deliver "
                                f"{delivered}: {effect}")
    return messages


def _key(step: Step) -> tuple[str, str, int, int]:
    """The edge a synchronization step handles: its group (tasks and distance: two groups may join the same pair
    of tasks at different distances) and the edge's number in it."""
    group = step.op.signalling_group
    return (group.src_task, group.dst_task, group.distance, step.edge)


def check_protocol(protocol: Protocol, max_states: int = 2_000_000) -> CheckReport:
    """Explore the interleavings of the protocol's per-warp programs and report what can go wrong.

    The protocol must be over explicit instances (see `Analysis.small_protocol` for symbolic ones). A well-formed
    protocol is first decided by the happens-before proof (see the module's docstring); `max_states` bounds the
    exploration of the others (beyond it: an "exploration incomplete" issue).
    """
    (max_states,) = require_sizes("check_protocol", max_states=max_states)
    if protocol.plan.graph is None:
        raise ValueError("check needs a protocol over explicit instances; a symbolic protocol is checked through "
                         "Analysis.small_protocol()")
    programs = role_programs(protocol)
    roles = sorted(programs)
    report = CheckReport(steps_per_role={r: len(programs[r]) for r in roles})
    found: set[tuple[str, str]] = set()

    def issue(kind: str, message: str) -> None:
        if (kind, message) not in found:
            found.add((kind, message))
            report.issues.append(Issue(kind, message))

    for message in _transaction_issues(protocol):
        issue(TRANSACTION, message)
    for message in _in_flight_issues(protocol, programs):
        issue(IN_FLIGHT, message)
    # channels past the plan's (a modified protocol) are explored as channels nobody else uses
    channel_count = max([protocol.plan.channel_count]
                        + [max(op.group.channels, default=-1) + 1 for ops in protocol.ops.values() for op in ops])
    phase_of_arrive: dict[tuple[str, str, int], int] = {}
    channel_of_arrive: dict[tuple[str, str, int], int] = {}
    arrive_roles: dict[int, set[int]] = {}
    completed_prefix: dict[int, list[tuple[int, ...]]] = {}
    arrived_twice = False
    for role in roles:
        counts = [0] * channel_count
        prefix = [tuple(counts)]
        for step in programs[role]:
            if step.op is not None and step.op.action == ARRIVE:
                arrived_twice |= _key(step) in phase_of_arrive
                phase_of_arrive[_key(step)] = counts[step.channel]
                channel_of_arrive[_key(step)] = step.channel
                counts[step.channel] += 1
                arrive_roles.setdefault(step.channel, set()).add(role)
            prefix.append(tuple(counts))
        completed_prefix[role] = prefix
    for channel, arriving in arrive_roles.items():
        if len(arriving) > 1:
            issue(PARITY_ALIASING, f"channel {channel} receives arrivals from warp roles {sorted(arriving)}; "
                                   "its phases have no single order")
    intended: dict[tuple[int, int], int] = {}
    waits_per_channel = [0] * channel_count
    unmatched = False
    for role in roles:
        for pc, step in enumerate(programs[role]):
            if step.op is None or step.op.action != WAIT:
                continue
            waits_per_channel[step.channel] += 1
            phase = phase_of_arrive.get(_key(step))
            if phase is None:
                unmatched = True
                issue(MISSING_ARRIVE, f"{step.describe()} waits for {step.op.group.src_task} -> "
                                      f"{step.op.group.dst_task} edge {step.edge}, which nobody signals")
            elif channel_of_arrive[_key(step)] != step.channel:
                # its phases are counted by another channel's arrives: the edge's arrive orders nothing for it
                unmatched = True
                issue(MISSING_ARRIVE, f"{step.describe()} waits for {step.op.group.src_task} -> "
                                      f"{step.op.group.dst_task} edge {step.edge}, which is signalled on channel "
                                      f"{channel_of_arrive[_key(step)]}")
            else:
                intended[(role, pc)] = phase

    order = _HappensBefore(programs, roles, intended)
    proof: list[tuple[str, str]] | None = None
    if not (unmatched or arrived_twice or order.cyclic
            or any(len(arriving) > 1 for arriving in arrive_roles.values())):
        proof = _prove(order, intended)
        report.proven = not proof and not report.issues
    bound = min(max_states, PROVEN_EXPLORATION_STATES) if report.proven else max_states
    report.exhausted = _explore(programs, roles, completed_prefix, intended, channel_count, bound, report,
                                issue, report.proven)
    if proof and not report.exhausted:
        for kind, message in proof:
            issue(kind, message)
    final = [sum(completed_prefix[r][-1][c] for r in roles) for c in range(channel_count)]
    for channel in range(channel_count):
        if final[channel] > waits_per_channel[channel]:
            issue(LEFTOVER, f"channel {channel}: {final[channel]} phases completed, "
                            f"{waits_per_channel[channel]} awaited")
    if order.cyclic:
        issue(DEADLOCK, "the waits form a cycle with the arrives that satisfy them")
    else:
        _races(order, issue)
    return report


def _early_pass(step: Step, done: int, phase: int) -> list[tuple[str, str]]:
    """The issues of a wait for phase `phase` that passes after `done` completed phases (as `_explore` words
    them)."""
    found = [(PARITY_ALIASING, f"{step.describe()} passes after {done} completed phases while waiting for phase "
                               f"{phase}")]
    if done < phase + 1:
        found.append((RACE, f"{step.instance.name} can start before {step.source}'s arrival "
                            f"({step.op.verb} on channel {step.channel} passes early)"))
    return found


def _explore(programs, roles, completed_prefix, intended, channel_count, max_states, report, issue,
             proven: bool = False) -> bool:
    """Search the interleavings; False when the search stopped at `max_states` (reported as incomplete unless the
    protocol is `proven`)."""
    # A role's program counter rests only on synchronization steps (or its end): the other steps (tasks,
    # retirements) neither wait nor arrive, so interleaving them changes no channel and blocks no role.
    ends = tuple(len(programs[r]) for r in roles)
    rest: list[list[int]] = []
    for i, role in enumerate(roles):
        at = [ends[i]] * (ends[i] + 1)
        for pc in reversed(range(ends[i])):
            at[pc] = pc if programs[role][pc].op is not None else at[pc + 1]
        rest.append(at)
    start = tuple(rest[i][0] for i in range(len(roles)))
    deadlocks, first_deadlock = 0, ""
    seen = {start}
    stack = [start]
    exhausted = True
    while stack:
        state = stack.pop()
        completed = [sum(completed_prefix[r][state[i]][c] for i, r in enumerate(roles))
                     for c in range(channel_count)]
        moves = []
        for i, role in enumerate(roles):
            pc = state[i]
            if pc == ends[i]:
                continue
            step = programs[role][pc]
            if step.op is not None and step.op.action == WAIT:
                done = completed[step.channel]
                phase = intended.get((role, pc))
                if phase is not None and done >= phase + 2:
                    issue(PARITY_ALIASING, f"{step.describe()} waits for phase {phase} but the channel has "
                                           f"completed {done} phases")
                if (done & 1) == step.parity:
                    continue
                if phase is not None and done != phase + 1:
                    for kind, message in _early_pass(step, done, phase):
                        issue(kind, message)
            moves.append(state[:i] + (rest[i][pc + 1],) + state[i + 1:])
        if not moves and state != ends:
            deadlocks += 1
            if deadlocks == 1:
                first_deadlock = "; ".join(
                    f"role {r}: " + (programs[r][state[i]].describe() if state[i] < ends[i] else "finished")
                    for i, r in enumerate(roles))
        for nxt in moves:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
        if len(seen) > max_states:
            exhausted = False
            if not proven:
                issue(INCOMPLETE, f"exploration stopped after {max_states} states; use smaller trip counts")
            break
    if deadlocks:
        issue(DEADLOCK, f"{deadlocks} reachable state(s) where no warp role can move, e.g. {first_deadlock}")
    report.states = len(seen)
    return exhausted


class _HappensBefore:
    """Happens-before over every step of the programs: program order plus each matched arrive -> wait."""

    def __init__(self, programs: dict[int, list[Step]], roles: list[int], intended: dict[tuple[int, int], int]):
        self.programs = programs
        self.nodes = [(r, pc) for r in roles for pc in range(len(programs[r]))]
        self.index = {node: n for n, node in enumerate(self.nodes)}
        predecessors: list[list[int]] = [[] for _ in self.nodes]
        self.arrive_at: dict[tuple[str, str, int], int] = {}
        for r in roles:
            for pc, step in enumerate(programs[r]):
                if pc:
                    predecessors[self.index[(r, pc)]].append(self.index[(r, pc - 1)])
                if step.op is not None and step.op.action == ARRIVE:
                    self.arrive_at[_key(step)] = self.index[(r, pc)]
        for r in roles:
            for pc, step in enumerate(programs[r]):
                if (r, pc) in intended:
                    predecessors[self.index[(r, pc)]].append(self.arrive_at[_key(step)])
        order, indegree = [], [0] * len(self.nodes)
        successors: list[list[int]] = [[] for _ in self.nodes]
        for n, preds in enumerate(predecessors):
            for p in preds:
                successors[p].append(n)
                indegree[n] += 1
        ready = [n for n in range(len(self.nodes)) if indegree[n] == 0]
        while ready:
            n = ready.pop()
            order.append(n)
            for s in successors[n]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
        self.cyclic = len(order) != len(self.nodes)
        self.ancestors = [0] * len(self.nodes)  # bit p of ancestors[n]: step p happens before step n
        for n in order:
            for p in predecessors[n]:
                self.ancestors[n] |= self.ancestors[p] | (1 << p)

    def before(self, a: int, b: int) -> bool:
        """Step number `a` happens before step number `b`."""
        return bool(self.ancestors[b] >> a & 1)


def _prove(order: _HappensBefore, intended: dict[tuple[int, int], int]) -> list[tuple[str, str]]:
    """The issues of the matched waits of a well-formed, acyclic protocol (none: it is safe). The completed count
    of a wait's channel when its role reaches it ranges over `[lo, hi]` while every earlier wait passes in its own
    phase (see the module's docstring); the wait is correct iff it blocks below its phase and passes at it."""
    arrives: dict[int, list[int]] = {}  # per channel, the arrive steps in program order (one role arrives)
    for n, (r, pc) in enumerate(order.nodes):
        step = order.programs[r][pc]
        if step.op is not None and step.op.action == ARRIVE:
            arrives.setdefault(step.channel, []).append(n)
    found: list[tuple[str, str]] = []
    for (r, pc), phase in intended.items():
        step = order.programs[r][pc]
        wait = order.index[(r, pc)]
        channel = arrives[step.channel]
        lo = sum(1 for a in channel if pc and (a == wait - 1 or order.before(a, wait - 1)))
        hi = sum(1 for a in channel if not order.before(wait, a))
        if hi >= phase + 2:
            found.append((PARITY_ALIASING, f"{step.describe()} waits for phase {phase}, but the channel can "
                                           f"have completed {hi} phases when it is reached"))
        if ((phase + 1) & 1) == step.parity:  # it blocks when its phase completes, until the next one (if any)
            found.append((DEADLOCK, f"{step.describe()} waits for phase {phase}, but its parity keeps it blocked "
                                    f"after {phase + 1} completed phases"))
        for done in range(lo, min(hi, phase + 1) + 1):
            if (done & 1) != step.parity and done != phase + 1:
                found += _early_pass(step, done, phase)
                break
    return found


def _races(order: _HappensBefore, issue) -> None:
    """Check every conflicting pair of task instances of different roles against happens-before."""
    programs, index = order.programs, order.index
    roles = sorted(programs)
    task_node = {step.instance.position: index[(r, pc)]
                 for r in roles for pc, step in enumerate(programs[r]) if step.runs_task}
    end_node = dict(task_node)  # where an instance's accesses are complete: its step, or its retirement
    for r in roles:
        for pc, step in enumerate(programs[r]):
            for position in step.retired:
                end_node[position] = index[(r, pc)]
    instances = sorted((programs[r][pc].instance for r in roles for pc in range(len(programs[r]))
                        if programs[r][pc].runs_task), key=lambda inst: inst.position)
    for j, later in enumerate(instances):
        for earlier in instances[:j]:
            if earlier.role == later.role or order.before(end_node[earlier.position], task_node[later.position]):
                continue
            conflict = _conflict(earlier, later)
            if conflict is not None:
                issue(RACE, conflict)


def _conflict(earlier: Instance, later: Instance) -> str | None:
    for wb, wbox in earlier.writes:
        for rb, rbox in later.reads:
            if wb == rb and boxes_overlap(wbox, rbox):
                return (f"consumer {later.name} can read {rb}{list(rbox)} before producer {earlier.name}'s "
                        "arrival")
    for rb, rbox in earlier.reads + earlier.writes:
        for wb, wbox in later.writes:
            if wb == rb and boxes_overlap(wbox, rbox):
                return (f"producer {later.name} can write {wb}{list(wbox)} before {earlier.name} released it")
    return None


def check(kernel: tirx.PrimFunc | Protocol, max_instances: int = 4096, max_states: int = 2_000_000,
          hopper: bool = False) -> CheckReport:
    """Check the protocol WarpSpecialize generates for `kernel` (or a given, possibly modified, protocol).

    A kernel with long or symbolic trip counts is checked at the small window trip counts of its symbolic analysis
    (`Analysis.small_protocol`). `max_instances` is `analyze`'s (a kernel only); `max_states` bounds the
    interleavings explored of a protocol the happens-before proof does not cover (see the module's docstring):
    beyond it the report has an "exploration incomplete" issue; a proven protocol is explored up to
    `PROVEN_EXPLORATION_STATES` states at most, with no such issue (`CheckReport.proven`, `.exhausted`). Both
    bounds must be positive ints (else a ValueError naming the bound). `hopper=True` (a kernel only) checks the
    protocol that `WarpSpecialize("cuda", hopper=True)` generates instead: TMA transactions and wgmma groups in
    flight (`hopper.hopper_protocol`); without it a Hopper kernel's generic protocol is checked.
    """
    max_instances, max_states = require_sizes("check", max_instances=max_instances, max_states=max_states)
    require_bools("check", hopper=hopper)
    if isinstance(kernel, Protocol):
        if hopper:
            raise ValueError("check: hopper=True takes a kernel; a protocol is checked as given (build a Hopper "
                             "protocol with warpspec.hopper.hopper_protocol)")
        protocol = kernel
    else:
        analysis = analyze(kernel, max_instances=max_instances)
        protocol = analysis.small_protocol()
        if hopper:
            protocol = hopper_protocol(protocol, tile_plan(analysis.tree))
    return check_protocol(protocol, max_states)
