"""Marks inside an opaque block (a task of a tile-level kernel: grid loops bound to ``blockIdx``, then per task a
``T.sblock`` without iter vars whose body holds the loops): TailSplit plans the block's body like a nest and
rebuilds the block around it. The thread-bound grid loops are decided by guard chains inside the block body;
the loops at and below the mark are cut to their always-true ranges (constant shapes) or intersected with
``min``/``max`` bounds (a symbolic shape).

Every transformed kernel is compiled for llvm (thread-bound loops run serially, ``threads_as_serial_loops``)
and run against the untransformed one on canary-guarded buffers: exhaustively over M, N in 1..40 for the
symbolic kernel (one compiled kernel per strategy), on a sample of constant shapes that covers every residue
class of the tiles' edges.
"""

import pytest
import tvm
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tvm_tailsplit import MARK_KEY, TailSplit
from tvm_tailsplit.ir_utils import drop_loop_annotation
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.apply import split_function
from tvm_tailsplit.split.conditions import loop_vars_in
from tvm_tailsplit.testing import assert_same_results, threads_as_serial_loops

STRATEGIES = ["partial", "full"]


@T.prim_func(s_tir=True)
def hopper_store(C: T.Buffer((200, 300), "float32")):
    acc = T.sblock_alloc_buffer((128, 256), scope="shared")
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            with T.sblock("store_top"):
                T.reads(acc[0:64, 0:256])
                T.writes(C[by * 128:by * 128 + 64, bx * 256:bx * 256 + 256])
                T.sblock_attr({"warp_role": 1})
                for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                    for j in range(256):
                        if by * 128 + i < 200 and bx * 256 + j < 300:
                            C[by * 128 + i, bx * 256 + j] = acc[i, j]
            with T.sblock("store_bottom"):
                T.reads(acc[64:128, 0:256])
                T.writes(C[by * 128 + 64:by * 128 + 128, bx * 256:bx * 256 + 256])
                T.sblock_attr({"warp_role": 2})
                for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                    for j in range(256):
                        if by * 128 + 64 + i < 200 and bx * 256 + j < 300:
                            C[by * 128 + 64 + i, bx * 256 + j] = acc[64 + i, j]


@T.prim_func(s_tir=True)
def hopper_store_partial(C: T.Buffer((200, 300), "float32")):
    acc = T.sblock_alloc_buffer((128, 256), scope="shared")
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            with T.sblock("store_top"):
                T.reads(acc[0:64, 0:256])
                T.writes(C[by * 128:by * 128 + 64, bx * 256:bx * 256 + 256])
                T.sblock_attr({"warp_role": 1})
                if bx == 0:
                    for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                        for j in range(256):
                            C[by * 128 + i, bx * 256 + j] = acc[i, j]
                if bx == 1:
                    for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                        for j in range(44):
                            C[by * 128 + i, bx * 256 + j] = acc[i, j]
            with T.sblock("store_bottom"):
                T.reads(acc[64:128, 0:256])
                T.writes(C[by * 128 + 64:by * 128 + 128, bx * 256:bx * 256 + 256])
                T.sblock_attr({"warp_role": 2})
                if by == 0:
                    if bx == 0:
                        for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                            for j in range(256):
                                C[by * 128 + 64 + i, bx * 256 + j] = acc[64 + i, j]
                    if bx == 1:
                        for i in T.serial(64, annotations={"pragma_emit_insn": "fragment_store"}):
                            for j in range(44):
                                C[by * 128 + 64 + i, bx * 256 + j] = acc[64 + i, j]
                if by == 1:
                    if bx == 0:
                        for i in T.serial(8, annotations={"pragma_emit_insn": "fragment_store"}):
                            for j in range(256):
                                C[by * 128 + 64 + i, bx * 256 + j] = acc[64 + i, j]
                    if bx == 1:
                        for i in T.serial(8, annotations={"pragma_emit_insn": "fragment_store"}):
                            for j in range(44):
                                C[by * 128 + 64 + i, bx * 256 + j] = acc[64 + i, j]


def tile_store(m, n, bm: int = 16, bn: int = 8) -> tirx.PrimFunc:
    """The store tasks of a tiled kernel writing C (m x n) from a tile A (bm x bn) in two half-tile tasks; the
    value written depends on the tile, so that a tile stored at the wrong place shows. ``m`` / ``n`` are
    integers or ``tirx.Var``s (symbolic shapes)."""
    half = bm // 2

    @T.prim_func(s_tir=True)
    def func(a: T.handle, c: T.handle):
        A = T.match_buffer(a, (bm, bn), "float32")
        C = T.match_buffer(c, (m, n), "float32")
        for by in T.thread_binding((m + bm - 1) // bm, thread="blockIdx.y"):
            for bx in T.thread_binding((n + bn - 1) // bn, thread="blockIdx.x"):
                with T.sblock("store_top"):
                    T.reads(A[0:half, 0:bn])
                    T.writes(C[by * bm:by * bm + half, bx * bn:bx * bn + bn])
                    T.sblock_attr({"warp_role": 1})
                    for i in T.serial(half, annotations={"pragma_emit_insn": "fragment_store"}):
                        for j in range(bn):
                            if by * bm + i < m and bx * bn + j < n:
                                C[by * bm + i, bx * bn + j] = A[i, j] + T.Cast("float32", by * 100 + bx)
                with T.sblock("store_bottom"):
                    T.reads(A[half:bm, 0:bn])
                    T.writes(C[by * bm + half:by * bm + bm, bx * bn:bx * bn + bn])
                    T.sblock_attr({"warp_role": 2})
                    for i in T.serial(half, annotations={"pragma_emit_insn": "fragment_store"}):
                        for j in range(bn):
                            if by * bm + half + i < m and bx * bn + j < n:
                                C[by * bm + half + i, bx * bn + j] = A[half + i, j] + T.Cast("float32", by * 100 + bx)

    return func


@T.prim_func(s_tir=True)
def store_with_scratch(A: T.Buffer((16, 8), "float32"), C: T.Buffer((13, 8), "float32")):
    for by in range(2):
        with T.sblock("store"):
            T.reads(A[0:16, 0:8])
            T.writes(C[by * 8:by * 8 + 8, 0:8])
            row = T.sblock_alloc_buffer((8,), "float32")
            for i in T.serial(8, annotations={"pragma_emit_insn": "fragment_store"}):
                for j in range(8):
                    row[j] = A[by * 8 + i, j]
                for j in range(8):
                    if by * 8 + i < 13:
                        C[by * 8 + i, j] = row[j]


def _script_body(func) -> str:
    """The printed function below its ``def`` line (the parser gives a thread binding an iter var of its own,
    TailSplit's copies the loop's variable: the same program, printed alike, not structurally equal)."""
    script = func.script()
    return script[script.index("def "):].split("\n", 1)[1]


def _split(func, strategy: str, serial_grid: bool):
    """TailSplit on ``func`` (its grid loops made serial first when ``serial_grid``), both versions runnable on
    llvm (thread-bound loops serial)."""
    before = threads_as_serial_loops(tvm.IRModule({"main": func}))
    after = TailSplit(strategy=strategy)(before if serial_grid else tvm.IRModule({"main": func}))
    after = threads_as_serial_loops(after)
    s_tir.analysis.verify_well_formed(after["main"])
    return before, after


def test_partial_split_of_the_hopper_store_tasks():
    after, report = split_function(hopper_store, strategy="partial")
    assert _script_body(after) == _script_body(hopper_store_partial)
    notes = [str(n) for n in report.nests[0].notes]
    assert "loop by: decided by a guard chain above mark i: 0, 1" in notes
    assert any(n.startswith("block 'store_top': opaque block: its body planned like a loop nest") for n in notes)
    assert any(n.startswith("block 'store_bottom': opaque block: its body planned like a loop nest") for n in notes)


def test_full_split_decides_thread_bound_loops_by_guard_chains():
    after, _ = split_function(hopper_store, strategy="full")
    assert analysis.conditions_under_marks(after) == 0
    loops = {loop.loop_var.name: loop for loop in loop_vars_in(after.body)}
    assert loops["by"].kind == tirx.ForKind.THREAD_BINDING and loops["bx"].kind == tirx.ForKind.THREAD_BINDING
    assert sum(1 for loop in loop_vars_in(after.body) if loop.loop_var.name in ("by", "bx")) == 2
    assert _script_body(after) == _script_body(hopper_store_partial)


SHAPES = [(m, n) for m in (1, 8, 9, 17, 31, 40) for n in (1, 8, 13)]  # every kind of edge of 16 x 8 tiles


@pytest.mark.parametrize("serial_grid", [False, True], ids=["thread-bound", "serial"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_constant_shapes_run_like_the_original(strategy, serial_grid):
    for m, n in SHAPES:
        before, after = _split(tile_store(m, n), strategy, serial_grid)
        assert analysis.conditions_under_marks(after) == 0, after.script()
        assert_same_results(before, after, trials=1)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("symbolic", ["M", "MN"])
def test_symbolic_shapes_run_like_the_original_for_every_size(strategy, symbolic):
    m = tirx.Var("M", "int32")
    n = tirx.Var("N", "int32") if symbolic == "MN" else 13
    before, after = _split(tile_store(m, n), strategy, serial_grid=False)
    assert analysis.conditions_under_marks(after) == 0, after.script()
    assert "i_extent" in after["main"].script()  # the min/max intersection, bound above the mark
    executables = tuple(tvm.compile(drop_loop_annotation(mod, MARK_KEY), target="llvm") for mod in (before, after))
    for size_m in range(1, 41):
        for size_n in range(1, 41) if symbolic == "MN" else [13]:
            assert_same_results(before, after, {"M": size_m, "N": size_n}, trials=1, executables=executables)


def test_a_block_with_buffers_keeps_its_marks_and_says_why():
    mod = tvm.IRModule({"main": store_with_scratch})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    tvm.ir.assert_structural_equal(after["main"], store_with_scratch)
    assert "block 'store': marks inside a nested block are left unchanged" in str(reports[0])
    assert_same_results(mod, after)
