"""Hardening of TailSplit (issue #12): code that TVM's default pipeline compiles correctly in every context,
valid input that once crashed the pass, output that once failed to compile, and a bound on planning time.

Every kernel is compiled with TVM's default pipeline (``tvm.compile(mod, target="llvm")``) and run against
the untransformed kernel on canary-guarded buffers, for every value of its symbolic variables in -3..50.
"""

import time

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import assert_same_results

STRATEGIES = ["full", "partial", "auto"]
SYMBOLIC_VALUES = range(-3, 51)


def compiled_pair(before: tvm.IRModule, after: tvm.IRModule) -> tuple:
    """Both modules compiled once with TVM's default pipeline (marks removed: they only name instructions)."""
    return tvm.compile(remove_marks(before), target="llvm"), tvm.compile(remove_marks(after), target="llvm")


def assert_same_for_every_value(before: tvm.IRModule, after: tvm.IRModule, name: str = "n",
                                values=SYMBOLIC_VALUES) -> None:
    executables = compiled_pair(before, after)
    for value in values:
        assert_same_results(before, after, {name: value}, trials=1, executables=executables)


# -- 1. TVM's HoistIfThenElse and the guards TailSplit emits ---------------------------------------------------


@T.prim_func(s_tir=True)
def guard_in_then_branch(B: T.Buffer((8,), "float32"), n: T.int32):
    for i in range(8):
        if i < 4:
            if 0 < n:
                B[i] = T.float32(1)
        else:
            B[i] = T.float32(2)


def test_tvm_hoist_if_then_else_hoists_a_guard_out_of_one_branch_of_an_if_else():
    """TVM 0.27's bug, on its own (no TailSplit): ``HoistIfThenElse`` (``src/s_tir/transform/hoist_expression.cc``)
    runs in the default TIR pipeline under every configuration (its only option, ``s_tir.HoistIfThenElse``'s
    ``support_block_scope_hoisting``, concerns thread variables). Its collector hoists an ``if`` above the
    outermost loop its condition does not use, stopping only at loops whose body holds a sequence of
    statements; it does not stop at an enclosing if/else. ``if 0 < n`` (no ``else``) in the then-branch of
    ``if i < 4`` becomes ``if 0 < n: for i in range(8): ...``, so for ``n <= 0`` the else-branch (rows 4-7)
    never runs. Expected for ``n = 0``: ``[0, 0, 0, 0, 2, 2, 2, 2]``; TVM leaves rows 4-7 unwritten.

    TailSplit emits such guards (``if j_extent > 0`` above a mark, guard-chain arms), so a kept if/else whose
    branches hold one is emitted as two disjoint ``if``s (``rewrite.py``). If this test starts failing, TVM
    fixed the bug (the disjoint form stays correct either way)."""
    executable = tvm.compile(tvm.IRModule({"main": guard_in_then_branch}), target="llvm")
    result = tvm.runtime.tensor(np.zeros(8, "float32"))
    executable["main"](result, 0)
    np.testing.assert_array_equal(result.numpy(), np.zeros(8, "float32"))  # the else-branch never ran
    executable["main"](result, 1)
    np.testing.assert_array_equal(result.numpy(), [1, 1, 1, 1, 2, 2, 2, 2])


@T.prim_func(s_tir=True)
def mark_in_then_branch(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, 16), "float32")
    B = T.match_buffer(b, (8, 16), "float32")
    for i in range(8):
        if i < 4:
            for j in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.where(j < n)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
        else:
            for j in range(16):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] + T.float32(2)


@T.prim_func(s_tir=True)
def mark_in_else_branch_with_loads(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, 16), "float32")
    B = T.match_buffer(b, (8, 16), "float32")
    for i in range(8):
        for k in range(2):
            if B[i, k] < T.float32(0):
                for j in range(16):
                    with T.sblock("C"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        B[vi, vj] = T.abs(A[vi, vj]) + T.float32(1)
            else:
                for j in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
                    with T.sblock("B"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.where(j < n)
                        B[vi, vj] = A[vi, vj] * T.float32(-3)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kernel", [mark_in_then_branch, mark_in_else_branch_with_loads])
def test_symbolic_guards_in_a_branch_of_an_if_else_compile_correctly(kernel, strategy):
    mod = tvm.IRModule({"main": kernel})
    after = TailSplit(strategy=strategy)(mod)
    assert after["main"].script() != mod["main"].script()
    assert_same_for_every_value(mod, after)


@T.prim_func(s_tir=True)
def tiles_in_then_branch(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i_0 in range(4):
        for j in range(8):
            if j < 5:
                for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
                    with T.sblock("B"):
                        vi = T.axis.spatial(16, i_0 * 4 + i_1)
                        vj = T.axis.spatial(8, j)
                        T.where(10 <= i_0 * 4 + i_1 and i_0 * 4 + i_1 < 12)
                        B[vi, vj] = A[vi, vj] * T.float32(2)
            else:
                for i_1 in range(4):
                    with T.sblock("C"):
                        vi = T.axis.spatial(16, i_0 * 4 + i_1)
                        vj = T.axis.spatial(8, j)
                        B[vi, vj] = A[vi, vj] + T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_guard_chain_in_a_branch_of_an_if_else_compiles_correctly(strategy):
    """The partial split decides ``i_0`` by a guard chain above the mark with one arm, ``if i_0 == 2`` (no
    other tile runs the block); TVM would hoist it above ``for j`` and skip the else-branch for ``i_0 != 2``."""
    mod = tvm.IRModule({"main": tiles_in_then_branch})
    after = TailSplit(strategy=strategy)(mod)
    assert after["main"].script() != mod["main"].script()
    assert_same_results(mod, after, trials=1, executables=compiled_pair(mod, after))


# -- 2. Loops whose extent depends on an enclosing loop ------------------------------------------------------


@T.prim_func(s_tir=True)
def triangle_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (16, 16), "float32")
    B = T.match_buffer(b, (16, 16), "float32")
    for i in range(16):
        for j in T.serial(i + 1, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(j < n)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func(s_tir=True)
def triangle_below_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (16, 16), "float32")
    B = T.match_buffer(b, (16, 16), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
            for j in T.serial(i_0 * 4 + i_1 + 1):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i_0 * 4 + i_1)
                    vj = T.axis.spatial(16, j)
                    T.where(i_0 * 4 + i_1 < n and j < 11)
                    B[vi, vj] = A[vi, vj] - T.float32(1)


@T.prim_func(s_tir=True)
def triangle_tiles(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (16, 16), "float32")
    B = T.match_buffer(b, (16, 16), "float32")
    for i in range(16):
        for j_0 in range(i // 4 + 1):
            for j_1 in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i)
                    vj = T.axis.spatial(16, j_0 * 4 + j_1)
                    T.where(j_0 * 4 + j_1 <= i and i < n)
                    B[vi, vj] = A[vi, vj] * T.float32(3)


@T.prim_func(s_tir=True)
def triangle_tiles_static(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i_0, i_1 in T.grid(4, 4):
        for j_0 in range(i_0 + 1):
            for j_1 in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i_0 * 4 + i_1)
                    vj = T.axis.spatial(16, j_0 * 4 + j_1)
                    T.where(j_0 * 4 + j_1 <= i_0 * 4 + i_1 and i_0 * 4 + i_1 < 14)
                    B[vi, vj] = A[vi, vj] + T.float32(3)


@T.prim_func(s_tir=True)
def nested_triangles(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (16, 16, 16), "float32")
    B = T.match_buffer(b, (16, 16, 16), "float32")
    for i_0 in range((n + 3) // 4):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
            for j in range(i_0 * 4 + i_1 + 1):
                for k in range(j + 1):
                    with T.sblock("B"):
                        vi = T.axis.spatial(16, i_0 * 4 + i_1)
                        vj, vk = T.axis.remap("SS", [j, k])
                        T.where(i_0 * 4 + i_1 < n and i_0 * 4 + i_1 - k * 2 >= 3)
                        B[vi, vj, vk] = A[vi, vj, vk] + T.float32(7)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kernel", [triangle_mark, triangle_below_mark, triangle_tiles, nested_triangles])
def test_extent_depending_on_an_enclosing_loop_splits_correctly(kernel, strategy):
    mod = tvm.IRModule({"main": kernel})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    tvm.s_tir.analysis.verify_well_formed(after["main"])
    assert reports[0].nests
    assert_same_for_every_value(mod, after, values=range(-3, 17))  # the buffers hold 16 rows


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_static_extent_depending_on_an_enclosing_loop_splits_correctly(strategy):
    mod = tvm.IRModule({"main": triangle_tiles_static})
    after = TailSplit(strategy=strategy)(mod)
    tvm.s_tir.analysis.verify_well_formed(after["main"])
    assert after["main"].script() != mod["main"].script()
    assert_same_results(mod, after, trials=1, executables=compiled_pair(mod, after))


# -- 3. Vectorized and unrolled loops get a symbolic extent only as serial copies ---------------------------------


@T.prim_func(s_tir=True)
def vectorized_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range((n + 15) // 16):
        for i_1 in T.vectorized(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 16 + i_1)
                T.where(i_0 * 16 + i_1 < n)
                B[vi] = A[vi] * T.float32(2)


@T.prim_func(s_tir=True)
def vectorized_and_unrolled_below_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, 64), "float32")
    B = T.match_buffer(b, (8, 64), "float32")
    for j_0 in range((n + 7) // 8):
        for i in T.serial(8, annotations={"pragma_emit_insn": "tile8x8"}):
            for j_1 in T.unroll(2):
                for j_2 in T.vectorized(4):
                    with T.sblock("B"):
                        vi = T.axis.spatial(8, i)
                        vj = T.axis.spatial(64, j_0 * 8 + j_1 * 4 + j_2)
                        T.where(j_0 * 8 + j_1 * 4 + j_2 < n)
                        B[vi, vj] = A[vi, vj] + T.float32(5)


@T.prim_func(s_tir=True)
def unrolled_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range((n + 3) // 4):
        for i_1 in T.unroll(4, annotations={"pragma_emit_insn": "v4"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 4 + i_1)
                T.where(i_0 * 4 + i_1 < n)
                B[vi] = A[vi] - T.float32(2)


def loop_kinds(func) -> list[str]:
    """``name:KIND:const`` or ``name:KIND:expr`` (extent constant or not) for every loop of ``func``."""
    kinds = []

    def visit(loop) -> None:
        extent = "const" if isinstance(loop.extent, tvm.tirx.IntImm) else "expr"
        kinds.append(f"{loop.loop_var.name}:{tvm.tirx.ForKind(loop.kind).name}:{extent}")

    tvm_ffi.structural_walk(func.body, (tvm.tirx.For, visit))
    return kinds


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kernel", [vectorized_mark, vectorized_and_unrolled_below_mark, unrolled_mark])
def test_vectorized_and_unrolled_loops_keep_constant_extents_and_compile(kernel, strategy):
    mod = tvm.IRModule({"main": kernel})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    kinds = loop_kinds(after["main"])
    assert not [k for k in kinds if k.endswith(("VECTORIZED:expr", "UNROLLED:expr"))], kinds
    kind = "UNROLLED" if kernel is unrolled_mark else "VECTORIZED"
    assert [k for k in kinds if f"{kind}:const" in k], kinds  # the main tiles keep their kind
    how = "unrolls" if kernel is unrolled_mark else "vectorizes"
    assert f"is serial: TVM {how} only loops of constant extent" in str(reports[0])
    assert_same_for_every_value(mod, after, values=range(-3, 51 if kernel is vectorized_mark else 65))


# -- 4. The mapping-cost budget bounds the planning time ---------------------------------------------------------


@T.prim_func(s_tir=True)
def five_loops_two_marks(A: T.Buffer((16, 16, 16, 16), "float32"), B: T.Buffer((16, 16, 16, 16), "float32"),
                         C: T.Buffer((16, 16, 16, 16), "float32")):
    for a, b, c in T.grid(16, 16, 16):
        for d in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                va, vb, vc, vd = T.axis.remap("SSSS", [a, b, c, d])
                T.where(a + d < 17 and c + d < 19)
                B[va, vb, vc, vd] = A[va, vb, vc, vd] * T.float32(2)
        for e in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("C"):
                va, vb, vc, ve = T.axis.remap("SSSS", [a, b, c, e])
                T.where(b + e < 18)
                C[va, vb, vc, ve] = A[va, vb, vc, ve] + T.float32(2)


def test_auto_stops_planning_the_full_split_once_it_passes_the_budget():
    """Guards on all five loops: the full split copies both marks for every piece of a, b and c (code length
    19,335, about 9 s to plan); the partial split decides each mark's variables by its own guard chain (854).
    With ``auto`` the full split's planning stops at the budget and the partial split is emitted."""
    mod = tvm.IRModule({"main": five_loops_two_marks})
    reports = []
    start = time.perf_counter()
    after = TailSplit(strategy="auto", reports=reports)(mod)
    elapsed = time.perf_counter() - start
    cost = reports[0].nests[0].cost
    assert cost.full_split_stopped and 256 < cost.full_split < 300, cost
    assert cost.chosen == "partial" and reports[0].nests[0].strategy == "partial"
    assert "full split more than 256 (planning stopped at" in str(reports[0])
    assert elapsed < 5, f"TailSplit took {elapsed:.1f} s"
    assert_same_results(mod, after, trials=1)


# -- 5. TVM's CanonicalizeLoop and loops whose bounds use an enclosing loop ---------------------------------------


@T.prim_func(s_tir=True)
def inner_start_after_outer_start(B: T.Buffer((10, 12), "float32")):
    for i in range(2, 8):
        for j in range(3, T.min(12, i + 5)):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.float32(-1)


def test_tvm_canonicalize_loop_misses_the_outer_shift_in_an_inner_loop_bound():
    """TVM 0.27's bug, on its own (no TailSplit): ``s_tir.CanonicalizeLoop`` (always in the default pipeline,
    ``src/s_tir/transform/canonicalize_loop.cc``) rewrites ``for i in range(2, 8)`` to ``range(6)`` with
    ``i -> i + 2`` in the body, but a loop that it canonicalizes too (a start other than 0 or a step) takes its new
    extent and offset from its bounds *before* that substitution: ``range(3, T.min(12, i + 5))`` becomes
    ``range(T.min(12, i + 5) - 3)`` over the new ``i``, two iterations short. If this test starts failing, TVM
    fixed the bug (the rebased copies TailSplit emits stay correct either way)."""
    executable = tvm.compile(tvm.IRModule({"main": inner_start_after_outer_start}), target="llvm")
    result = tvm.runtime.tensor(np.zeros((10, 12), "float32"))
    executable["main"](result)
    expected = np.zeros((10, 12), "float32")
    for i in range(2, 8):
        expected[i, 3 : min(12, i + 5)] = -1
    assert (result.numpy() != expected).sum() == 12


@T.prim_func(s_tir=True)
def triangle_above_the_mark(A: T.Buffer((8, 12, 4), "float32"), B: T.Buffer((8, 12, 4), "float32")):
    for i in range(8):
        for j in range(T.min(12, i + 5)):
            for k in T.serial(4, annotations={"pragma_emit_insn": "v4"}):
                with T.sblock("B"):
                    vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                    T.where(i >= 2 and j >= 3)
                    B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)


@T.prim_func(s_tir=True)
def stepped_loop_under_a_split_loop(A: T.Buffer((10, 8), "float32"), B: T.Buffer((10, 8), "float32")):
    for i in range(8):
        for j in T.serial(0, T.min(8, i + 3), step=3, annotations={"pragma_emit_insn": "v4"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i >= 2)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kernel", [triangle_above_the_mark, stepped_loop_under_a_split_loop])
def test_copies_whose_variable_bounds_an_inner_loop_start_at_0(kernel, strategy):
    """The full split emitted ``for i in range(2, 8): for j in range(3, i + 5)`` (and, for a stepped inner loop,
    ``for i in range(2, 8): for j in T.serial(0, T.min(8, i + 3), step=3)``), which TVM's CanonicalizeLoop
    miscompiles (above). A copy of a loop whose variable bounds an inner loop, or whose own ends use an enclosing
    loop, now starts at 0 (its variable offset in the body), as copies below a mark do."""
    mod = tvm.IRModule({"main": kernel})
    after = TailSplit(strategy=strategy)(mod)
    assert after["main"].script() != mod["main"].script()
    assert_same_results(mod, after, trials=1, executables=compiled_pair(mod, after))


@T.prim_func(s_tir=True)
def unrolled_rows_under_a_split_loop(a: T.handle, c: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (40,), "float32")
    C = T.match_buffer(c, (6, 40), "float32")
    for i_0 in range(5):
        for r in T.unroll(6):
            for i_1 in T.serial(8, annotations={"pragma_emit_insn": "v8"}):
                with T.sblock("C"):
                    vr = T.axis.spatial(6, r)
                    vi = T.axis.spatial(40, i_0 * 8 + i_1)
                    T.where(r < m and i_0 * 8 + i_1 < n)
                    C[vr, vi] = A[vi] + T.float32(1)


def test_a_serial_copy_is_reported_once():
    """Every copy of the split loop i_0 holds a copy of r of extent T.max(0, T.min(6, m)), each made serial, and the
    report said so once per copy (the same line twice); it now says it once."""
    mod = tvm.IRModule({"main": unrolled_rows_under_a_split_loop})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    lines = str(reports[0]).splitlines()
    serial = [line for line in lines if "is serial: TVM unrolls only loops of constant extent" in line]
    assert len(serial) == 1, lines
    executables = compiled_pair(mod, after)
    for n in range(-1, 42, 5):
        for m in (0, 1, 4, 6, 7):
            assert_same_results(mod, after, {"n": n, "m": m}, trials=1, executables=executables)
