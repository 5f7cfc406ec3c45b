"""Dynamic splitting: symbolic bounds and conditions (``n`` known only at run time).

Each kernel is split, compiled once for llvm, and run against the untransformed kernel for every value of its
symbolic variables from -2 to three tiles + 3, on canary-guarded buffers (an access outside a buffer fails the
test). The range proofs the planner made are re-checked with a fresh analyzer and by evaluating them for
every value tested. After a full split the main tiles are condition-free copies with the tile's constant
extents, and the tails have their ``min``/``max`` bound above the mark.
"""

import itertools

import pytest
import tvm
from tvm import s_tir, sym, tirx
from tvm.ir import Range
from tvm.script import tirx as T

from tvm_tailsplit import MARK_KEY, TailSplit
from tvm_tailsplit.ir_utils import substitute
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.apply import split_function
from tvm_tailsplit.split.conditions import find_marks
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import assert_same_results


@T.prim_func(s_tir=True)
def scale_1d(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range((n + 15) // 16):
        for i_1 in T.serial(16, annotations={"pragma_emit_insn": "vmul16"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 16 + i_1)
                T.where(i_0 * 16 + i_1 < n)
                B[vi] = A[vi] * T.float32(2)


@T.prim_func(s_tir=True)
def window_1d(a: T.handle, b: T.handle, s: T.int32, n: T.int32):
    A = T.match_buffer(a, (48,), "float32")
    B = T.match_buffer(b, (48,), "float32")
    for i_0 in range(6):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(48, i_0 * 8 + i_1)
                T.where(s <= i_0 * 8 + i_1 and i_0 * 8 + i_1 < n)
                B[vi] = A[vi] + T.float32(1)


@T.prim_func(s_tir=True)
def tiles_2d(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (32, 32), "float32")
    B = T.match_buffer(b, (32, 32), "float32")
    for i_0, j_0 in T.grid((n + 7) // 8, (m + 7) // 8):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vadd8x8"}):
            for j_1 in range(8):
                with T.sblock("B"):
                    vi = T.axis.spatial(32, i_0 * 8 + i_1)
                    vj = T.axis.spatial(32, j_0 * 8 + j_1)
                    T.where(i_0 * 8 + i_1 < n and j_0 * 8 + j_1 < m)
                    B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func(s_tir=True)
def seed_if_a_plus_b(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, 6), "float32")
    C = T.match_buffer(c, (8, 6), "float32")
    for i in range(8):
        for j in T.serial(6, annotations={"pragma_emit_insn": "vcopy6"}):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                if vi + vj < n:
                    C[vi, vj] = A[vi, vj] * T.float32(3)


@T.prim_func(s_tir=True)
def nc1hwc0_symbolic_h(a: T.handle, b: T.handle, c: T.handle, h: T.int32):
    A = T.match_buffer(a, (2, 20, 4, 16), "float32")
    B = T.match_buffer(b, (2, 20, 4, 16), "float32")
    C = T.match_buffer(c, (2, 20, 4, 16), "float32")
    for c1, h_o in T.grid(2, (h + 7) // 8):
        for w in T.serial(4, annotations={"pragma_emit_insn": "vmuls"}):
            for h_i, c0 in T.grid(8, 16):
                with T.sblock("C"):
                    v0 = T.axis.spatial(2, c1)
                    v1 = T.axis.spatial(20, h_o * 8 + h_i)
                    v2, v3 = T.axis.remap("SS", [w, c0])
                    T.where(h_o * 8 + h_i < h)
                    C[v0, v1, v2, v3] = A[v0, v1, v2, v3] * B[v0, v1, v2, v3]


@T.prim_func(s_tir=True)
def bound_below_the_mark(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (6, 6), "float32")
    C = T.match_buffer(c, (6, 6), "float32")
    for i in T.serial(6, annotations={"pragma_emit_insn": "vtri"}):
        for j in range(6):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i + j < n)
                C[vi, vj] = A[vi, vj] - T.float32(1)


TILE = {"scale_1d": 16, "window_1d": 8, "tiles_2d": 8, "seed_if_a_plus_b": 6, "nc1hwc0_symbolic_h": 8,
        "bound_below_the_mark": 6}


def symbolic_values(tile: int) -> list[int]:
    """Every value from -2 to three tiles + 3: negative, 0, 1, below a tile, exact multiples, above."""
    return list(range(-2, 3 * tile + 4))


def values_for(func) -> list[dict]:
    name = func.attrs["global_symbol"]
    scalars = [p.name for p in func.params if isinstance(p.ty, tvm.ir.PrimType)]
    values = symbolic_values(TILE[name])
    if name == "nc1hwc0_symbolic_h":
        values = [v for v in values if v <= 20]  # the buffers hold h <= 20 rows
    if len(scalars) == 1:
        return [{scalars[0]: v} for v in values]
    return [dict(zip(scalars, pair, strict=True)) for pair in itertools.product(values, values)]


KERNELS = [scale_1d, window_1d, tiles_2d, seed_if_a_plus_b, nc1hwc0_symbolic_h, bound_below_the_mark]


def check_equivalent_for_every_value(func, strategy):
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    s_tir.analysis.verify_well_formed(after["main"])
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
    for scalars in values_for(func):
        assert_same_results(mod, after, scalar_args=scalars, trials=1, executables=executables)
    return after, reports[0]


@pytest.mark.parametrize("strategy", ["full", "partial"])
@pytest.mark.parametrize("func", KERNELS, ids=[f.attrs["global_symbol"] for f in KERNELS])
def test_symbolic_split_is_equivalent_for_every_value(func, strategy):
    after, report = check_equivalent_for_every_value(func, strategy)
    assert report.changed, str(report)
    assert analysis.conditions_under_marks(after) == 0, after.script()


@pytest.mark.parametrize("func", KERNELS, ids=[f.attrs["global_symbol"] for f in KERNELS])
def test_range_proofs_hold_independently(func):
    """Every proved piece is re-proved with a fresh analyzer, then evaluated for the tested values of the
    symbolic variables and every value of the other loop variables."""
    for strategy in ("full", "partial"):
        _, report = split_function(func, strategy=strategy)
        proofs = [proof for nest in report.nests for proof in nest.range_proofs]
        assert proofs, str(report)
        scalars = {p.name: p for p in func.params if isinstance(p.ty, tvm.ir.PrimType)}
        for proof in proofs:
            analyzer = sym.Analyzer()
            for var, (low, extent) in proof.ranges.items():
                analyzer.bind(var, Range.from_min_extent(low, extent))
            constraint = tirx.const(True, "bool")
            for var, (low, extent) in proof.ranges.items():
                constraint = tirx.And(constraint, tirx.And(low <= var, var < low + extent))
            with analyzer.constraint_scope(constraint):
                assert analyzer.can_prove(proof.claim, sym.ProofStrength.SYMBOLIC_BOUND), str(proof)
            for values in values_for(func):
                binding = {scalars[name]: tirx.const(value, "int32") for name, value in values.items()}
                assert_claim_for_every_loop_value(proof, binding)


def assert_claim_for_every_loop_value(proof, binding: dict) -> None:
    """Enumerate the loop variables of the proof's context (outermost first) and evaluate the claim."""
    analyzer = sym.Analyzer()
    loops = list(proof.ranges.items())

    def evaluate(expr, values):
        return analyzer.simplify(substitute(expr, values))

    def walk(index, values):
        if index == len(loops):
            claim = evaluate(proof.claim, values)
            assert isinstance(claim, tirx.IntImm) and claim.value, f"{proof} fails at {values}"
            return
        var, (low, extent) = loops[index]
        low_value, extent_value = evaluate(low, values), evaluate(extent, values)
        if not (isinstance(low_value, tirx.IntImm) and isinstance(extent_value, tirx.IntImm)):
            walk(index + 1, values)  # a range over variables below this one: the claim does not use it
            return
        for value in range(low_value.value, low_value.value + extent_value.value):
            walk(index + 1, {**values, var: tirx.const(value, var.ty.dtype)})

    walk(0, dict(binding))


def test_main_tiles_are_condition_free_and_tails_bind_their_extent_above_the_mark():
    after = TailSplit(strategy="full")(tvm.IRModule({"main": scale_1d.with_attr("global_symbol", "main")}))
    marks = find_marks(after["main"])
    extents = [mark.loop.extent for mark in marks]
    assert any(isinstance(e, tirx.IntImm) and e.value == 16 for e in extents), after.script()
    script = after.script()
    assert "i_1_extent" in script and "T.min(16, n - i_0 * 16)" in script, script
    assert all(not mark.guards for mark in marks)


def test_nc1hwc0_tail_extent_of_a_loop_below_the_mark_is_hoisted_above_it():
    after = TailSplit(strategy="full")(tvm.IRModule({"main": nc1hwc0_symbolic_h.with_attr("global_symbol", "main")}))
    script = after.script()
    # The bound of h_i (below the mark on w) is computed above w, once per h_o.
    assert script.index("h_i_extent") < script.index('"pragma_emit_insn": "vmuls"}):\n', script.index("h_i_extent"))
    assert analysis.conditions_under_marks(after) == 0


def test_bound_depending_on_a_loop_below_the_mark_stays_in_the_loop_header():
    """j's bound n - i depends on the marked loop i itself, which the report called 'loops below the mark'; it now
    names the loop."""
    reports = []
    TailSplit(strategy="full", reports=reports)(tvm.IRModule({"main": bound_below_the_mark}))
    assert "computed in the loop header (it depends on loop i, at or below the mark)" in str(reports[0])


def test_symbolic_tail_tensorizes_its_main_tiles():
    """The main copies of the symbolic split have the shape of the instruction: ``sch.tensorize`` accepts them."""
    from tvm_tailsplit.split.examples import register_vector_scale_intrinsic

    intrinsic = register_vector_scale_intrinsic(16)
    after = TailSplit(strategy="full")(tvm.IRModule({"main": scale_1d.with_attr("global_symbol", "main")}))
    sch = s_tir.Schedule(after)
    main = [m for m in find_marks(after["main"]) if isinstance(m.loop.extent, tirx.IntImm)]
    assert len(main) == 1
    (block_name,) = main[0].blocks()
    loop = sch.get_loops(sch.get_sblock(block_name))[-1]
    sch.unannotate(loop, MARK_KEY)
    sch.tensorize(loop, intrinsic)
    tensorized = remove_marks(sch.mod)
    before = tvm.IRModule({"main": scale_1d.with_attr("global_symbol", "main")})
    executables = (tvm.compile(remove_marks(before), target="llvm"), tvm.compile(tensorized, target="llvm"))
    for n in symbolic_values(16):
        assert_same_results(before, tensorized, scalar_args={"n": n}, trials=1, executables=executables)


def test_unordered_split_points_become_guarded_cases_with_condition_free_main_tiles():
    """``s <= x < n``: the split points of ``s`` and ``n`` cannot be ordered, so the planner splits into guarded
    cases on their order (at most four); in the case with room for whole tiles the main copy has the constant
    extent 8 and no condition."""
    reports = []
    after = TailSplit(strategy="full", reports=reports)(tvm.IRModule({"main": window_1d}))
    text = str(reports[0])
    assert "guarded cases" in text
    assert text.count("guarded cases") <= 2
    marks = find_marks(after["main"])
    constant = [m for m in marks if isinstance(m.loop.extent, tirx.IntImm) and m.loop.extent.value == 8]
    assert constant and all(not m.guards for m in marks)
    assert len(marks) <= 4 * 3


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100])
def test_issued_instructions_of_the_symbolic_split(n):
    """One instruction per tile after the split (the tail's extent comes from its Bind above the mark),
    one per element before."""
    mod = tvm.IRModule({"main": scale_1d.with_attr("global_symbol", "main")})
    after = TailSplit()(mod)
    tiles = -(-n // 16)
    assert analysis.instruction_count(mod, symbolic_values={"n": n}).issued == 16 * tiles
    assert analysis.instruction_count(after, symbolic_values={"n": n}).issued == tiles


# Regressions found in review: a range of a loop that does not enclose a guard must not be assumed when the
# guard is decided; an inner loop's emptiness must not skip the statements beside it; a thread-bound loop's
# extent is the launch configuration and is never narrowed.


@T.prim_func(s_tir=True)
def sibling_nest_range(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "v8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(32, i_0 * 8 + i_1)
                T.where(i_0 * 8 + i_1 < n + 5)
                B[vi] = A[vi] * T.float32(2)
    for k in range(n - 20):  # non-empty only for n >= 21: says nothing about the nest above
        with T.sblock("C"):
            vk = T.axis.spatial(32, k)
            T.where(k < 32)
            B[vk] = B[vk] + T.float32(1)


@T.prim_func(s_tir=True)
def inner_loop_beside_a_block(a: T.handle, b: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (8,), "float32")
    B = T.match_buffer(b, (8,), "float32")
    C = T.match_buffer(c, (8, 8), "float32")
    for i in T.serial(8, annotations={"pragma_emit_insn": "v8"}):
        for j in range(8):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(j < n)
                C[vi, vj] = A[vi]
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)


@T.prim_func(s_tir=True)
def thread_bound_below_the_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, 32), "float32")
    B = T.match_buffer(b, (8, 32), "float32")
    for i in T.serial(8, annotations={"pragma_emit_insn": "v8"}):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("B"):
                vi, vt = T.axis.remap("SS", [i, tx])
                T.where(tx < n)
                B[vi, vt] = A[vi, vt] * T.float32(2)


@pytest.mark.parametrize("strategy", ["full", "partial", "auto"])
@pytest.mark.parametrize(
    "func, values",
    [(sibling_nest_range, range(-8, 41)), (inner_loop_beside_a_block, range(-3, 12))],
    ids=["sibling_nest_range", "inner_loop_beside_a_block"],
)
def test_review_regressions_stay_equivalent(func, values, strategy):
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    after = TailSplit(strategy=strategy)(mod)
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
    for n in values:
        assert_same_results(mod, after, scalar_args={"n": n}, trials=1, executables=executables)


def test_thread_bound_loop_below_the_mark_keeps_its_extent():
    reports = []
    after = TailSplit(reports=reports)(tvm.IRModule({"main": thread_bound_below_the_mark}))
    assert 'T.thread_binding(32, thread="threadIdx.x")' in after.script()
    assert "thread-bound loop's extent is the launch configuration" in str(reports[0])


@T.prim_func(s_tir=True)
def two_symbols_two_guards(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (8, 8), "float32")
    B = T.match_buffer(b, (8, 8), "float32")
    for i_0, j_0 in T.grid(2, 2):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v"}):
            for j_1 in range(4):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i_0 * 4 + i_1)
                    vj = T.axis.spatial(8, j_0 * 4 + j_1)
                    T.where(i_0 * 4 + i_1 + j_0 * 4 + j_1 < n + m and i_0 * 4 + i_1 - m < j_0 * 4 + j_1)
                    B[vi, vj] = A[vi, vj] * T.float32(2)


def test_the_split_does_not_depend_on_where_the_variables_live_in_memory():
    """Two parses of one source were split differently (12189 or 18340 characters of TVMScript, in one process,
    depending on the addresses of the parsed variables): the proofs assumed their ranges in the order of a set of
    variables. Every parse now gives the same split, which runs like the original."""
    mod = tvm.IRModule({"main": two_symbols_two_guards})
    first = TailSplit(strategy="partial")(mod)
    for _ in range(3):
        again = TailSplit(strategy="partial")(tvm.script.from_source(mod.script()))
        tvm.ir.assert_structural_equal(again, first, map_free_vars=True)
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(first), target="llvm"))
    for n, m in itertools.product(range(-2, 11, 3), range(-2, 11, 3)):
        assert_same_results(mod, first, {"n": n, "m": m}, trials=1, executables=executables)
