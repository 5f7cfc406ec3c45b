"""Thread-level CPU simulation of WarpSpecialize's generic CUDA form (`WarpSpecialize("cuda")`, not Hopper).

`simulate(func, arrays, seed)` interprets the specialized PrimFunc as the pass returns it (before TVM's lowering):
the grid loops (`blockIdx.*`, one CTA after the other) around the `threadIdx.x` loop. Every thread of a CTA is a
Python generator over the TIR (`For` with its step, `IfThenElse`, `While`, `SeqStmt`, `BufferStore`, `Evaluate`,
and the blocks of the sequential fallback below a minimum trip count), and the threads run interleaved in a seeded
random order, a thread running on for a random number of steps (1 to 300), so that one warp can lag far behind
another. Modelled: `shared` buffers per CTA, `local` buffers per thread, the
parameters (numpy arrays, modified in place), mbarriers (`init` with an arrival count, `arrive`,
`test_wait.parity` of the phase in progress), named barriers (`bar.sync` blocks until the count of `bar.arrive` and
`bar.sync` arrivals is reached, `bar.arrive` does not) and `__syncthreads` (barrier 0, every thread).
Memory is sequentially consistent; float32 arithmetic is rounded after every operation. An index outside its
buffer raises `IndexError`, every live thread waiting forever `Deadlock`, an mbarrier or named barrier left with
part of its arrivals at the end `RuntimeError`. Anything else in the TIR raises
`NotImplementedError` naming it.

Limits: random interleavings, not all of them (a pass is evidence, a wrong result a counterexample); no weak memory
ordering; the buffers' contents only, not timing.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np
import tvm
from tvm import tirx
from tvm.s_tir import SBlockRealize

__all__ = ["Deadlock", "simulate"]

SPINS_BEFORE_DEADLOCK = 20_000
"""Failed `test_wait`s in a row (no thread making progress in between) taken as a deadlock."""

_BINARY = {
    tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
    tirx.FloorDiv: lambda a, b: a // b, tirx.FloorMod: lambda a, b: a % b, tirx.Min: min, tirx.Max: max,
    tirx.EQ: lambda a, b: a == b, tirx.NE: lambda a, b: a != b, tirx.LT: lambda a, b: a < b,
    tirx.LE: lambda a, b: a <= b, tirx.GT: lambda a, b: a > b, tirx.GE: lambda a, b: a >= b,
    tirx.And: lambda a, b: bool(a) and bool(b), tirx.Or: lambda a, b: bool(a) or bool(b),
}

PROGRESS = "progress"
SPIN = "spin"


class Deadlock(RuntimeError):
    """Every live thread waits on a barrier that nothing can complete."""


def _float32(value: float) -> float:
    return float(np.float32(value))


class _Cta:
    """The memory and barriers of one CTA, and the interpreter of its threads."""

    def __init__(self, params: dict[str, np.ndarray], threads: int):
        self.memory = dict(params)
        self.local: dict[tuple[int, str], np.ndarray] = {}
        self.mbarriers: dict[int, list[int]] = {}  # channel -> [count, pending arrivals, completed phases]
        self.threads = threads

    def array(self, buffer: tirx.Buffer, env: dict) -> np.ndarray:
        local = buffer.scope().startswith("local")
        store, key = (self.local, (env["tx"], buffer.name)) if local else (self.memory, buffer.name)
        if key not in store:  # an allocated buffer (the parameters are given)
            dtype = "int64" if "int" in str(buffer.dtype) else str(buffer.dtype)
            store[key] = np.zeros([int(d) for d in buffer.shape], dtype)
        return store[key]

    def value(self, expr, env: dict):
        if isinstance(expr, tirx.IntImm):
            return int(expr.value)
        if isinstance(expr, tirx.FloatImm):
            return float(expr.value)
        if isinstance(expr, tirx.Var):
            return env[expr]
        if isinstance(expr, tvm.ir.TensorLoad):
            return self._element(expr.source, expr.indices, env)[()]
        operation = _BINARY.get(type(expr))
        if operation is not None:
            result = operation(self.value(expr.a, env), self.value(expr.b, env))
            return _float32(result) if isinstance(result, float) and "float32" in str(expr.ty) else result
        if isinstance(expr, tirx.Not):
            return not self.value(expr.a, env)
        if isinstance(expr, tirx.Cast):
            result = self.value(expr.value, env)
            return _float32(result) if "float" in str(expr.ty) else int(result)
        if isinstance(expr, tirx.Select):
            return self.value(expr.true_value if self.value(expr.condition, env) else expr.false_value, env)
        if isinstance(expr, tvm.ir.Call) and expr.op.name in ("tirx.if_then_else", "prim.if_then_else"):
            return self.value(expr.args[1] if self.value(expr.args[0], env) else expr.args[2], env)
        raise NotImplementedError(f"{type(expr).__name__} {expr}")

    def _element(self, buffer: tirx.Buffer, indices, env: dict) -> _View:
        """One element of `buffer`, checked to lie inside it."""
        array = self.array(buffer, env)
        index = tuple(self.value(i, env) for i in indices)
        if any(not 0 <= i < size for i, size in zip(index, array.shape, strict=True)):
            raise IndexError(f"{buffer.name}{list(index)} is outside its shape {array.shape}")
        return _View(array, index)

    def channel(self, address, env: dict) -> int:
        """`c` of `cvta(address_of(channels[c]))`."""
        while address.op.name != "tirx.address_of":
            address = address.args[0]
        return self.value(address.args[0].indices[0], env)

    def run(self, stmt, env: dict) -> Iterator:
        """Interpret `stmt` for one thread: yields PROGRESS (a store, an arrive, a passed wait), SPIN (a failed
        test_wait) or ("bar", id, count, "sync" | "arrive")."""
        if isinstance(stmt, tirx.SeqStmt):
            for part in stmt.seq:
                yield from self.run(part, env)
        elif isinstance(stmt, tirx.For):
            start = self.value(stmt.min, env)
            step = 1 if stmt.step is None else self.value(stmt.step, env)
            for value in range(start, start + self.value(stmt.extent, env), step):
                env[stmt.loop_var] = value
                yield from self.run(stmt.body, env)
        elif isinstance(stmt, tirx.IfThenElse):
            if self.value(stmt.condition, env):
                yield from self.run(stmt.then_case, env)
            elif stmt.else_case is not None:
                yield from self.run(stmt.else_case, env)
        elif isinstance(stmt, tirx.While):
            while self.value(stmt.condition, env):
                yield from self.run(stmt.body, env)
        elif isinstance(stmt, tirx.BufferStore):
            element = self._element(stmt.buffer, stmt.indices, env)
            value = self.value(stmt.value, env)
            yield PROGRESS
            element.set(value)
        elif isinstance(stmt, SBlockRealize) and stmt.block.init is None:  # the sequential fallback's blocks
            if self.value(stmt.predicate, env):
                env.update({iv.var: self.value(value, env)
                            for iv, value in zip(stmt.block.iter_vars, stmt.iter_values, strict=True)})
                yield from self.run(stmt.block.body, env)
        elif isinstance(stmt, tirx.Evaluate):
            if not isinstance(stmt.value, tirx.IntImm):
                yield from self._call(stmt.value, env)
        else:
            raise NotImplementedError(type(stmt).__name__)

    def _call(self, call: tvm.ir.Call, env: dict) -> Iterator:
        name = call.op.name
        words = [a.value for a in call.args if isinstance(a, tvm.ir.StringImm)]
        if name == "tirx.cuda.cta_sync":
            yield ("bar", 0, self.threads, "sync")
        elif name == "tirx.buffer_data":  # a buffer's pointer, evaluated for nothing (it keeps the buffer whole)
            return
        elif name.startswith("tirx.ptx.mbarrier") and "init" in words:
            count = self.value(call.args[1], env)
            self.mbarriers[self.channel(call.args[0], env)] = [count, count, 0]
        elif name.startswith("tirx.ptx.mbarrier") and "arrive" in words:
            yield PROGRESS
            barrier = self.mbarriers[self.channel(call.args[0], env)]
            barrier[1] -= 1
            if barrier[1] == 0:
                barrier[1] = barrier[0]
                barrier[2] += 1
        elif name.startswith("tirx.ptx.mbarrier") and "test_wait" in words:
            barrier = self.mbarriers[self.channel(call.args[1], env)]
            passed = (barrier[2] & 1) != self.value(call.args[2], env)
            self._element(call.args[0].source, call.args[0].indices, env).set(int(passed))
            yield PROGRESS if passed else SPIN
        elif name.startswith("tirx.ptx.bar"):
            yield ("bar", self.value(call.args[0], env), self.value(call.args[1], env),
                   "sync" if "sync" in words else "arrive")
        else:
            raise NotImplementedError(f"{name} {words}")


class _View:
    """One element of an array, read with `[()]` and written with `set`."""

    def __init__(self, array: np.ndarray, index: tuple[int, ...]):
        self.array, self.index = array, index

    def __getitem__(self, _):
        value = self.array[self.index]
        return float(value) if self.array.dtype.kind == "f" else int(value)

    def set(self, value) -> None:
        self.array[self.index] = value


def simulate(func: tirx.PrimFunc, arrays: list[np.ndarray], seed: int = 0) -> None:
    """Run `func` (WarpSpecialize's CUDA form) on `arrays`, one per parameter, in a random interleaving."""
    rng = random.Random(seed)
    params = {p.name: a for p, a in zip(func.params, arrays, strict=True)}
    sizes = {d: size for p, a in zip(func.params, arrays, strict=True)
             for d, size in zip(p.shape, a.shape, strict=True) if isinstance(d, tirx.Var)}
    body = func.body.block.body
    probe = _Cta(params, 0)
    while isinstance(body, tirx.SeqStmt) and isinstance(body.seq[0], tirx.AssertStmt):  # the input's checks
        check = body.seq[0]
        if not probe.value(check.condition, dict(sizes)):
            raise RuntimeError(f"assert failed: {check.message_parts[0].value if check.message_parts else ''}")
        body = body.seq[1] if len(body.seq) == 2 else tirx.SeqStmt(list(body.seq[1:]))
    grid = []
    while isinstance(body, tirx.For) and body.thread_binding.thread_tag.startswith("blockIdx"):
        grid.append(body)
        body = body.body
    if body.thread_binding.thread_tag != "threadIdx.x":
        raise NotImplementedError(f"expected the threadIdx.x loop, got {body.loop_var}")
    for point in itertools.product(*[range(probe.value(loop.extent, dict(sizes))) for loop in grid]):
        cta = _Cta(params, probe.value(body.extent, dict(sizes)))
        programs = {}
        for tx in range(cta.threads):
            env = {**sizes, body.loop_var: tx, "tx": tx, **dict(zip([g.loop_var for g in grid], point, strict=True))}
            programs[tx] = cta.run(body.body, env)
        _interleave(cta, programs, rng)


def _interleave(cta: _Cta, programs: dict[int, Iterator], rng: random.Random) -> None:
    blocked: dict[int, tuple[int, int]] = {}  # thread -> (named barrier, its generation when the thread synced)
    bars: dict[int, list[int]] = {}  # named barrier -> [arrivals, generation, count]
    live = set(programs)
    spins, current, budget = 0, None, 0
    while live:
        runnable = sorted(live - set(blocked))
        if not runnable:
            raise Deadlock(f"threads {sorted(blocked)} wait on named barriers that never complete")
        if current not in runnable or budget <= 0:
            current, budget = rng.choice(runnable), rng.choice([1, 3, 10, 50, 300])
        budget -= 1
        event = next(programs[current], None)
        if event is None:
            live.discard(current)
            continue
        if event == SPIN:
            spins, budget = spins + 1, min(budget, 2)
            if spins > SPINS_BEFORE_DEADLOCK:
                raise Deadlock("every live thread spins on an mbarrier phase that never completes")
            continue
        spins = 0
        if event == PROGRESS:
            continue
        _, barrier, count, kind = event
        state = bars.setdefault(barrier, [0, 0, count])
        if state[2] != count:
            raise RuntimeError(f"named barrier {barrier} used with the counts {state[2]} and {count}")
        state[0] += 1
        if state[0] == count:
            state[0], state[1] = 0, state[1] + 1
            for thread, (waited, generation) in list(blocked.items()):
                if waited == barrier and generation == state[1] - 1:
                    del blocked[thread]
        elif kind == "sync":
            blocked[current] = (barrier, state[1])
    partial = [b for b, state in bars.items() if state[0]] + [c for c, m in cta.mbarriers.items() if m[1] != m[0]]
    if partial:
        raise RuntimeError(f"barriers {partial} left with part of their arrivals")
