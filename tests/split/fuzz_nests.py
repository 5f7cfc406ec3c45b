"""Random scheduled loop nests with ``pragma_emit_insn`` marks, for the TailSplit fuzzer (test-only support).

Algorithm: ``random_case(seed)`` draws everything from ``numpy.random.default_rng(seed)``, so case ``i`` is the
same program on every machine. It

1. picks a *kind*: one element-wise block, a reduction (``T.init``, int32 so that any summation order gives the
   same result), two blocks in one nest (a producer and a consumer reading what the producer wrote in the same
   iteration of the shared loops), or two nests (the second reads the first's output);
2. picks the dimensions: static extents 1..20 or the scalar parameter ``n`` (buffers are ``CAPACITY`` long
   along a symbolic dimension, so that ``n`` from -3 to 50 stays inside them); some static loops run with a
   step of 2 or 3 (``T.serial(0, 12, step=2)``; drawn from a generator of their own, so that the rest of a case
   is what it was before steps were drawn);
3. writes the program as TVMScript text: random conditions (affine comparisons, ``//``, ``%``, ``T.min``,
   ``T.max``, conjunctions, disjunctions, comparisons with ``n``) as ``T.where`` predicates, block ``if``s and
   loop ``if``s between two loops, each with or without ``else``; reads are wrapped in ``%`` or clamped so that
   they stay inside the input;
4. schedules every block with ``s_tir.Schedule``: splits (non-dividing factors give ``T.where``; a split of
   ``n`` gives a tile; a loop with a step is not split: TVM's split ignores the step), reorders,
   ``decompose_reduction``, thread bindings (``blockIdx.x``/``threadIdx.x``), ``vectorize`` (constant extents
   only) and ``unroll`` (constant extents); at most ``MAX_LOOPS`` loops per block; a primitive the schedule
   refuses is left out;
5. marks a random loop of every block that is not thread-bound (sometimes a second, deeper one: nested marks).

The writes of every block are injective in its spatial iterators and the programs have no cross-iteration
dependence, so any correct split computes exactly what the original computes. ``features(mod)`` reads back from
the IR which of the features the fuzzer must cover a module has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import SBlock, SBlockRealize

from tvm_tailsplit import MARK_KEY
from tvm_tailsplit.ir_utils import has_unit_step
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import threads_as_serial_loops

__all__ = ["ALL_FEATURES", "CAPACITY", "MARK_VALUE", "FuzzCase", "features", "random_case", "runnable"]

CAPACITY = 50
"""Buffer length along a dimension of extent ``n``; ``n`` runs up to this value."""
N_RANGE = range(-3, CAPACITY + 1)
MARK_VALUE = "vinsn"
MAX_LOOPS = 6
"""Splits stop when a block has this many loops (TailSplit's planning time grows steeply with the depth)."""

ALL_FEATURES = frozenset({
    "where", "block_if", "block_if_else", "loop_if", "loop_if_else", "and", "or", "floordiv", "floormod", "min",
    "max", "reduction", "two_blocks", "nested_marks", "thread_binding", "symbolic", "vectorized", "unrolled",
    "dependent_extent", "stepped",
})
STEP_CHANCE = 0.15
"""The chance that a static loop of the source runs with a step of 2 or 3."""


@dataclass(frozen=True)
class FuzzCase:
    """One generated program: the module (function ``main``), the TVMScript text it was parsed from, and the
    values of ``n`` to run it with (none for a static program)."""

    seed: int
    mod: tvm.IRModule
    source: str
    n_values: tuple[int, ...]

    @property
    def symbolic(self) -> bool:
        return bool(self.n_values)

    def scalar_args(self, n: int | None) -> dict:
        return {} if n is None else {"n": n}


def runnable(mod: tvm.IRModule) -> tvm.IRModule:
    """What llvm compiles: thread-bound loops as serial loops, marks removed."""
    return remove_marks(threads_as_serial_loops(mod))


@dataclass
class _Dim:
    loop: str  # loop variable in the source
    var: str  # block iterator
    domain: str  # the block iterator's domain: "12" or "n"
    size: int  # buffer length along this dimension
    reduce: bool = False
    extent: str = ""  # the loop's extent when it is not the domain: "T.min(12, i + 2)" (depends on loop i)
    step: int = 1

    @property
    def loop_extent(self) -> str:
        return self.extent or self.domain

    @property
    def header(self) -> str:
        """The loop's header: ``for i in range(12):`` or ``for i in T.serial(0, 12, step=2):``."""
        if self.step == 1:
            return f"for {self.loop} in range({self.loop_extent}):"
        return f"for {self.loop} in T.serial(0, {self.loop_extent}, step={self.step}):"


class _Writer:
    """Random expressions and TVMScript text for one case."""

    def __init__(self, rng: np.random.Generator, symbolic: bool, steps: np.random.Generator):
        self.rng = rng
        self.symbolic = symbolic
        self.steps = steps  # loop steps only (see the module docstring)
        self.lines: list[str] = []

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options):
        return options[int(self.rng.integers(0, len(options)))]

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    # --- expressions -------------------------------------------------------------------------------------
    def linear(self, names: list[str], nonnegative: bool = False) -> str:
        terms = []
        for name in names:
            coefficient = int(self.rng.integers(0 if nonnegative else -2, 4))
            if coefficient == 1:
                terms.append(name)
            elif coefficient:
                terms.append(f"{name} * {coefficient}")
        if not terms:
            terms.append(self.pick(names))
        constant = int(self.rng.integers(0 if nonnegative else -3, 6))
        text = " + ".join(terms)
        return f"{text} + {constant}" if constant > 0 else f"{text} - {-constant}" if constant < 0 else text

    def bound(self) -> str:
        constant = int(self.rng.integers(0, 14))
        if not (self.symbolic and self.chance(0.6)):
            return str(constant)
        offset = int(self.rng.integers(-3, 4))
        shift = f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else ""
        return self.pick([f"n{shift}", f"n{shift}", f"n // 2{shift}", f"T.min(n, {constant})",
                          f"T.max(n - {abs(offset)}, {constant})"])

    def atom(self, names: list[str]) -> str:
        shape = self.pick(["compare", "compare", "floordiv", "floormod", "min", "max"])
        op = self.pick(["<", "<=", ">", ">=", "==", "!="] if shape == "floormod" else ["<", "<=", ">", ">="])
        if shape == "compare":
            return f"{self.linear(names)} {op} {self.bound()}"
        if shape == "floordiv":
            return f"({self.linear(names)}) // {int(self.rng.integers(2, 5))} {op} {self.bound()}"
        if shape == "floormod":
            modulus = int(self.rng.integers(2, 5))
            return f"({self.linear(names)}) % {modulus} {op} {int(self.rng.integers(0, modulus))}"
        function = "T.min" if shape == "min" else "T.max"
        return f"{function}({self.linear(names)}, {self.linear(names)}) {op} {self.bound()}"

    def condition(self, names: list[str]) -> str:
        shape = self.pick(["atom", "atom", "and", "or", "and_or"])
        if shape == "atom":
            return self.atom(names)
        if shape == "and":
            return f"{self.atom(names)} and {self.atom(names)}"
        if shape == "or":
            return f"{self.atom(names)} or {self.atom(names)}"
        return f"{self.atom(names)} and ({self.atom(names)} or {self.atom(names)})"

    def index(self, dims: list[_Dim], size: int) -> str:
        """An in-bounds index of a dimension of length ``size`` computed from the block iterators. Numerators are
        non-negative: TVM 0.27's llvm build drops or shifts the constant of a buffer index such as
        ``B[(2 - p) % 50]`` (it loads ``B[(-p) % 50]``), which would make the reference itself wrong."""
        names = [d.var for d in dims]
        numerator = self.linear(names, nonnegative=True)
        shape = self.pick(["mod", "mod", "clamp", "div"])
        if shape == "mod":
            return f"({numerator}) % {size}"
        if shape == "clamp":
            return f"T.min({numerator}, {size - 1})"
        return f"({numerator}) // {int(self.rng.integers(2, 4))} % {size}"

    def value(self, dtype: str, load: str, dims: list[_Dim]) -> str:
        scale, offset = int(self.rng.integers(-3, 4)), int(self.rng.integers(-5, 6))
        if dtype == "float32":
            return f"{load} * T.float32({scale}) + T.float32({offset})"
        return f"{load} * {scale} + {self.pick([d.var for d in dims])} + {offset}"

    def load(self, buffer: str, sizes: list[int], dims: list[_Dim], direct: bool) -> str:
        if direct:
            return f"{buffer}[{', '.join(d.var for d in dims)}]"
        return f"{buffer}[{', '.join(self.index(dims, size) for size in sizes)}]"

    # --- statements --------------------------------------------------------------------------------------
    def block(self, depth: int, name: str, dims: list[_Dim], store: str, dtype: str, load_of, else_branch: bool,
              init: str | None = None) -> None:
        """A block over ``dims`` (bound to their loops) storing ``store[spatial]`` = a value of ``load_of()``."""
        self.emit(depth, f'with T.sblock("{name}"):')
        for d in dims:
            axis = "reduce" if d.reduce else "spatial"
            self.emit(depth + 1, f"{d.var} = T.axis.{axis}({d.domain}, {d.loop})")
        if self.chance(0.45):
            self.emit(depth + 1, f"T.where({self.condition([d.loop for d in dims])})")
        spatial = [d for d in dims if not d.reduce]
        target = f"{store}[{', '.join(d.var for d in spatial)}]"
        if init is not None:
            self.emit(depth + 1, "with T.init():")
            self.emit(depth + 2, f"{target} = {init}")
        if init is not None:
            update = f"{target} + {load_of()}"
            fallback = f"{target} - {load_of()}"
        else:
            update = self.value(dtype, load_of(), dims)
            fallback = self.pick([self.value(dtype, load_of(), dims),
                                  "T.float32(-7)" if dtype == "float32" else "-7"])
        if self.chance(0.4):
            self.emit(depth + 1, f"if {self.condition([d.var for d in dims])}:")
            self.emit(depth + 2, f"{target} = {update}")
            if else_branch and self.chance(0.5):
                self.emit(depth + 1, "else:")
                self.emit(depth + 2, f"{target} = {fallback}")
        else:
            self.emit(depth + 1, f"{target} = {update}")

    def nest(self, depth: int, dims: list[_Dim], emit_body, loop_if_ok: bool, else_body=None) -> None:
        """Loops over ``dims`` around ``emit_body(depth)``, sometimes with an ``if`` between two loops (whose
        ``else``, when ``else_body`` is given, runs ``else_body`` over the remaining loops)."""
        if_level = int(self.rng.integers(0, len(dims) - 1)) if loop_if_ok and len(dims) > 1 and self.chance(0.5) else -1
        for level, d in enumerate(dims):
            self.emit(depth, d.header)
            depth += 1
            if level == if_level:
                self.emit(depth, f"if {self.condition([e.loop for e in dims[: level + 1]])}:")
                inner = dims[level + 1 :]
                self._loops(depth + 1, inner, emit_body)
                if else_body is not None and self.chance(0.75):
                    self.emit(depth, "else:")
                    self._loops(depth + 1, inner, else_body)
                return
        emit_body(depth)

    def _loops(self, depth: int, dims: list[_Dim], emit_body) -> None:
        for d in dims:
            self.emit(depth, d.header)
            depth += 1
        emit_body(depth)


def _dims(writer: _Writer, count: int, names: str, reduce_last: bool = False) -> list[_Dim]:
    dims = []
    for position in range(count):
        symbolic = writer.symbolic and writer.chance(0.5 if position else 0.7)
        extent = "n" if symbolic else str(int(writer.rng.integers(1, 21)))
        name = names[position]
        dims.append(_Dim(name, f"v{name}", extent, CAPACITY if symbolic else int(extent),
                         reduce=reduce_last and position == count - 1))
    if writer.symbolic and not any(d.domain == "n" for d in dims):
        dims[0] = _Dim(dims[0].loop, dims[0].var, "n", CAPACITY, dims[0].reduce)
    for outer, inner in zip(dims, dims[1:], strict=False):
        if writer.chance(0.3):  # a triangular loop: its extent depends on the enclosing loop
            inner.extent = f"T.min({inner.domain}, {outer.loop} + {int(writer.rng.integers(1, 5))})"
    for d in dims:
        if d.domain != "n" and writer.steps.random() < STEP_CHANCE:
            d.step = int(writer.steps.integers(2, 4))
    return dims


def _source(writer: _Writer, kind: str) -> str:
    """The TVMScript of a random program of ``kind``."""
    rng = writer.rng
    dtype = "int32" if kind == "reduction" else writer.pick(["int32", "float32"])
    buffers: dict[str, tuple[list[int], str]] = {}
    body: list[str] = []
    writer.lines = body

    if kind == "reduction":
        dims = _dims(writer, int(rng.integers(1, 3)) + 1, "ijk", reduce_last=True)
        dims[-1].var, dims[-1].loop = "vk", "k"
        buffers["A"] = ([d.size for d in dims], dtype)
        buffers["C"] = ([d.size for d in dims[:-1]], dtype)
        load = lambda: writer.load("A", buffers["A"][0], dims, writer.chance(0.5))  # noqa: E731
        writer.nest(1, dims, lambda depth: writer.block(depth, "C", dims, "C", dtype, load, True, init="0"),
                    loop_if_ok=True)
    elif kind == "two_blocks":
        outer = _dims(writer, int(rng.integers(1, 3)), "ij")
        inner = _dims(writer, 1, "k")
        inner_consumer = [_Dim("kc", "vk", inner[0].domain, inner[0].size, step=inner[0].step)]
        shape = [d.size for d in outer + inner]
        buffers["A"] = (shape, dtype)
        buffers["B"] = (shape, dtype)
        buffers["C"] = (shape, dtype)

        def both(depth):
            producer_dims, consumer_dims = outer + inner, outer + inner_consumer
            writer._loops(depth, inner, lambda d: writer.block(
                d, "B", producer_dims, "B", dtype, lambda: writer.load("A", shape, producer_dims, False), True))
            writer._loops(depth, inner_consumer, lambda d: writer.block(
                d, "C", consumer_dims, "C", dtype, lambda: writer.load("B", shape, consumer_dims, True), True))

        writer.nest(1, outer, both, loop_if_ok=True)
    else:
        dims = _dims(writer, int(rng.integers(1, 4)), "ijl")
        shape = [d.size for d in dims]
        buffers["A"] = (shape, dtype)
        buffers["B"] = (shape, dtype)
        load = lambda: writer.load("A", shape, dims, writer.chance(0.4))  # noqa: E731

        def else_block(depth):
            writer.block(depth, "B_else", dims, "B", dtype, load, False)

        writer.nest(1, dims, lambda depth: writer.block(depth, "B", dims, "B", dtype, load, True),
                    loop_if_ok=True, else_body=else_block)
        if kind == "two_nests":
            second = _dims(writer, len(dims), "pqr")
            second = [_Dim(s.loop, s.var, d.domain, d.size) for s, d in zip(second, dims, strict=True)]
            buffers["C"] = (shape, dtype)
            writer.nest(1, second, lambda depth: writer.block(
                depth, "C", second, "C", dtype, lambda: writer.load("B", shape, second, writer.chance(0.5)), True),
                loop_if_ok=True)

    params = [f'{name}: T.Buffer(({", ".join(map(str, shape))},), "{dt}")' for name, (shape, dt) in buffers.items()]
    if writer.symbolic:
        params.append("n: T.int32")
    header = ["@T.prim_func(s_tir=True)", f"def main({', '.join(params)}):", '    T.func_attr({"tirx.noalias": True})']
    return "\n".join(header + body) + "\n"


def _constant_extent(sch: s_tir.Schedule, loop) -> int | None:
    extent = sch.get(loop).extent
    return int(extent.value) if isinstance(extent, tirx.IntImm) else None


def _schedule_block(sch: s_tir.Schedule, writer: _Writer, name: str, threads: bool, tiles: list[int]) -> None:
    def attempt(primitive, *args, **kwargs):
        try:
            return primitive(*args, **kwargs)
        except (s_tir.ScheduleError, tvm.error.InternalError, ValueError):
            return None

    block = sch.get_sblock(name)
    for loop in sch.get_loops(block):
        # Blocks sharing loops (two blocks, an else block) see the loops the first one split: stop at MAX_LOOPS.
        # TVM's split ignores a loop's step (it tiles every value of the range): stepped loops are not split.
        if not writer.chance(0.55) or len(sch.get_loops(block)) >= MAX_LOOPS or not has_unit_step(sch.get(loop)):
            continue
        symbolic = _constant_extent(sch, loop) is None
        factors = [None, int(writer.rng.integers(2, 9))]
        if writer.chance(0.15):
            factors = [None, int(writer.rng.integers(2, 4)), int(writer.rng.integers(2, 5))]
        if attempt(sch.split, loop, factors) is not None and symbolic:
            tiles.append(int(np.prod(factors[1:])))
    loops = sch.get_loops(block)
    if len(loops) > 1 and writer.chance(0.3):
        attempt(sch.reorder, *[loops[i] for i in writer.rng.permutation(len(loops))])
    if sch.get(block).init is not None and writer.chance(0.3):
        loops = sch.get_loops(block)
        attempt(sch.decompose_reduction, block, loops[int(writer.rng.integers(0, len(loops)))])
    loops = sch.get_loops(block)
    bound = 0
    if threads and len(loops) > 1:
        for loop, thread in zip(loops[:2], ("blockIdx.x", "threadIdx.x"), strict=False):
            if sch.get(loop).kind == tirx.ForKind.SERIAL and attempt(sch.bind, loop, thread) is not None:
                bound += 1
            else:
                break
    free = [loop for loop in sch.get_loops(block)[bound:] if sch.get(loop).kind == tirx.ForKind.SERIAL]
    vectorized = any(sch.get(loop).kind == tirx.ForKind.VECTORIZED for loop in sch.get_loops(block))
    if free and not vectorized and writer.chance(0.35):
        innermost = free[-1]
        extent = _constant_extent(sch, innermost)
        if extent is not None and 1 < extent <= 16:
            attempt(sch.vectorize, innermost)
    free = [loop for loop in sch.get_loops(block)[bound:] if sch.get(loop).kind == tirx.ForKind.SERIAL]
    free = [loop for loop in free if _constant_extent(sch, loop) is not None]
    if free and writer.chance(0.3):
        attempt(sch.unroll, free[int(writer.rng.integers(0, len(free)))])
    markable = [loop for loop in sch.get_loops(block)
                if sch.get(loop).kind != tirx.ForKind.THREAD_BINDING and MARK_KEY not in sch.get(loop).annotations]
    if not markable or not writer.chance(0.9):
        return
    first = int(writer.rng.integers(0, len(markable)))
    sch.annotate(markable[first], MARK_KEY, MARK_VALUE)
    if first + 1 < len(markable) and writer.chance(0.25):
        sch.annotate(markable[int(writer.rng.integers(first + 1, len(markable)))], MARK_KEY, MARK_VALUE)


def random_case(seed: int) -> FuzzCase:
    """The case of ``seed``: a random scheduled, marked PrimFunc ``main`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    writer = _Writer(rng, symbolic=bool(rng.random() < 0.5), steps=np.random.default_rng([seed, 1]))
    kind = writer.pick(["elementwise", "elementwise", "reduction", "two_blocks", "two_nests"])
    threads = writer.chance(0.25)
    source = _source(writer, kind)
    func = tvm.script.from_source("# from tvm.script import tirx as T\n" + source)
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    tiles: list[int] = []
    names = []
    tvm_ffi.structural_walk(func.body, (SBlock, lambda b: names.append(b.name_hint)))
    for name in names:
        if name != "root":
            _schedule_block(sch, writer, name, threads, tiles)
    mod = sch.mod
    s_tir.analysis.verify_well_formed(mod["main"])
    n_values: tuple[int, ...] = ()
    if writer.symbolic:
        n_values = tuple(sorted(set(N_RANGE) | {t + d for t in tiles for d in (-1, 0, 1) if t + d <= CAPACITY}))
    return FuzzCase(seed, mod, source, n_values)


def features(mod: tvm.IRModule) -> set[str]:
    """The features of ``ALL_FEATURES`` the module's ``main`` has, read from its IR."""
    func = mod["main"]
    found: set[str] = set()
    if any(isinstance(p.ty, tvm.ir.PrimType) for p in func.params):
        found.add("symbolic")
    expression_features = ((tirx.And, "and"), (tirx.Or, "or"), (tirx.FloorDiv, "floordiv"),
                           (tirx.FloorMod, "floormod"), (tirx.Min, "min"), (tirx.Max, "max"))

    def visit_expressions(node) -> None:
        for node_type, name in expression_features:
            tvm_ffi.structural_walk(node, (node_type, lambda _e, name=name: found.add(name)))

    enclosing_loops: list = []

    def visit(stmt, in_block: bool, under_mark: bool, blocks_in_nest: list) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                visit(child, in_block, under_mark, blocks_in_nest)
        elif isinstance(stmt, tirx.For):
            marked = MARK_KEY in stmt.annotations
            if marked and under_mark:
                found.add("nested_marks")
            kinds = {tirx.ForKind.THREAD_BINDING: "thread_binding", tirx.ForKind.VECTORIZED: "vectorized",
                     tirx.ForKind.UNROLLED: "unrolled"}
            if stmt.kind in kinds:
                found.add(kinds[stmt.kind])
            if not has_unit_step(stmt):
                found.add("stepped")
            visit_expressions(stmt.extent)
            in_extent: list = []
            tvm_ffi.structural_walk(stmt.extent, (tvm.ir.Var, in_extent.append))
            if any(v.same_as(loop) for v in in_extent for loop in enclosing_loops):
                found.add("dependent_extent")
            enclosing_loops.append(stmt.loop_var)
            visit(stmt.body, in_block, under_mark or marked, blocks_in_nest)
            enclosing_loops.pop()
        elif isinstance(stmt, tirx.IfThenElse):
            where = "block_if" if in_block else "loop_if"
            found.add(where + ("_else" if stmt.else_case is not None else ""))
            visit_expressions(stmt.condition)
            visit(stmt.then_case, in_block, under_mark, blocks_in_nest)
            if stmt.else_case is not None:
                visit(stmt.else_case, in_block, under_mark, blocks_in_nest)
        elif isinstance(stmt, SBlockRealize):
            if not (isinstance(stmt.predicate, tirx.IntImm) and stmt.predicate.value):
                found.add("where")
                visit_expressions(stmt.predicate)
            block = stmt.block
            blocks_in_nest.append(block.name_hint)
            if block.init is not None or any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
                found.add("reduction")
            visit(block.body, True, under_mark, blocks_in_nest)
        elif isinstance(stmt, tirx.BufferStore):
            visit_expressions(stmt.value)

    root = func.body.block.body
    for nest in root.seq if isinstance(root, tirx.SeqStmt) else [root]:
        blocks: list = []
        visit(nest, False, False, blocks)
        if len(blocks) > 1:
            found.add("two_blocks")
    return found
