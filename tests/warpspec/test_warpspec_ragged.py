"""Ragged outputs (M or N not a multiple of the tile): guarded loads and stores, split by TailSplit, specialized.

The example GEMMs cover `ceildiv(m, block_m) x ceildiv(n, block_n)` tiles; their edge loads are guarded by the
operands' bounds (TMA's zero fill on Hopper) and their stores by the output's under a mark. Checked: the tile
analysis (TMA loads and fragment stores of store trees), the meaning on llvm (the untransformed kernel with threads
serialized, and the warp-specialized one with its roles as concurrent threads, with and without TailSplit, against
numpy over many shapes), TailSplit's effect (main tiles store without a condition), nvcc for sm_90a. The event
simulation of the Hopper forms is in `test_warpspec_hopper_events.py`; the `gpu` tests in `test_warpspec_hopper.py`.
"""

import collections
import os
import re

os.environ.setdefault("TVM_NUM_THREADS", str(max(2, os.cpu_count() or 2)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm import tirx  # noqa: E402
from tvm.s_tir import SBlock  # noqa: E402

from tvm_tailsplit import MARK_KEY, TailSplit  # noqa: E402
from tvm_tailsplit.cuda import compile_cuda_source, cuda_ptx, cuda_source  # noqa: E402
from tvm_tailsplit.testing import guarded_array, run_with_guarded_output, threads_as_serial_loops  # noqa: E402
from tvm_tailsplit.warpspec import (  # noqa: E402
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    examples,
    tile_plan,
)
from tvm_tailsplit.warpspec.codegen import load_libatomic, require_concurrent_threads  # noqa: E402
from tvm_tailsplit.warpspec.tiles import FRAGMENT_STORE_MARK, pairs_columns  # noqa: E402

A_BYTES, B_BYTES = 128 * 64 * 2, 256 * 64 * 2


def _specialized(func: tirx.PrimFunc, target: str, tail_split: bool, **options) -> tvm.IRModule:
    passes = ([TailSplit(strategy="partial")] if tail_split else []) + [WarpSpecialize(target, **options)]
    return tvm.transform.Sequential(passes)(tvm.IRModule({"main": func}))


def _operands(m: int, n: int, k: int, seed: int, b_transposed: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = guarded_array((m, k), "float16").array
    b = guarded_array((n, k) if b_transposed else (k, n), "float16").array
    a[:] = rng.standard_normal(a.shape)
    b[:] = rng.standard_normal(b.shape)
    return a, b


def test_ragged_hopper_gemm_has_tma_loads_and_fragment_store_trees():
    func = examples.hopper_gemm_kernel(200, 300, 136, zero_fill_k=True)
    plan = tile_plan(analyze(func).tree)
    # the bounds guards of the edge tiles are TMA's zero fill: the boxes and their transaction bytes do not change
    assert {name: load.bytes for name, load in plan.loads.items()} == {"load_A": A_BYTES, "load_B": B_BYTES}
    stores = {name: (t.row0, t.m, t.n) for name, t in plan.fragment_tasks.items() if t.store is not None}
    assert stores == {"store_top": (0, 64, 256), "store_bottom": (64, 64, 256)}
    assert plan.fragments == {"acc"}
    marks = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda loop: marks.append(loop.annotations.get(MARK_KEY))))
    assert marks.count(FRAGMENT_STORE_MARK) == 2
    # a divisible shape keeps the unguarded, unmarked stores
    regular = examples.hopper_gemm_kernel(256, 512, 128)
    assert FRAGMENT_STORE_MARK not in regular.script() and "if_then_else" not in regular.script()


@pytest.mark.parametrize("m,n,k", [(200, 300, 136), (1, 8, 64), (129, 257, 64)])
def test_ragged_hopper_example_means_a_times_b_transposed(m, n, k):
    func = examples.hopper_gemm_kernel(m, n, k, zero_fill_k=k % 64 != 0)
    executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    a, b = _operands(m, n, k, seed=m, b_transposed=True)
    out = run_with_guarded_output(executable, [a, b], (m, n))
    np.testing.assert_allclose(out, a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3)


# shapes around the 16 x 16 tiles: below one tile, one tile and a row or column more, several tiles and a tail
RAGGED_SHAPES = [(1, 1), (5, 16), (16, 9), (17, 31), (40, 23), (33, 48)]


@pytest.mark.parametrize("tail_split", [False, True], ids=["guarded", "tailsplit"])
def test_warp_specialized_ragged_gemm_on_llvm_matches_numpy(tail_split):
    load_libatomic()
    require_concurrent_threads(2)
    k = 48
    for m, n in RAGGED_SHAPES:
        func = examples.gemm_kernel(m=m, n=n, k=k, block_m=16, block_n=16, block_k=16, stages=2)
        executable = tvm.compile(_specialized(func, "llvm", tail_split, debug_check=True), target="llvm")
        a, b = _operands(m, n, k, seed=m * 100 + n, b_transposed=False)
        reference = a.astype("float32") @ b.astype("float32")
        for _ in range(3):
            np.testing.assert_allclose(run_with_guarded_output(executable, [a, b], (m, n)), reference,
                                       rtol=1e-5, atol=1e-4, err_msg=f"{m}x{n}x{k}")


def _ragged_hopper_sources(tail_split: bool, ctas: int | None = None) -> str:
    func = examples.hopper_gemm_kernel(200, 300, None, zero_fill_k=True, ctas=ctas)
    mod = _specialized(func, "cuda", tail_split, hopper=True, debug_check=True)
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


@pytest.mark.nvcc
@pytest.mark.parametrize("tail_split", [False, True], ids=["guarded", "tailsplit"])
def test_nvcc_compiles_the_ragged_hopper_gemm_for_sm_90a(tail_split):
    (usage,) = compile_cuda_source(_ragged_hopper_sources(tail_split), "sm_90a")
    print("ragged hopper gemm", "tailsplit" if tail_split else "guarded", usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0 and usage.performance_losses == ()


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(200, 300, 136), (1000, 4096, 4096), (4000, 4000, 4000), (1, 8, 64),
                                   (127, 4095, 1000)])
def test_ragged_hopper_gemm_on_the_gpu(m, n, k):
    """TailSplit + WarpSpecialize, the persistent form and the ablation on ragged outputs, against numpy."""
    from tvm_tailsplit.warpspec.ablation import unspecialized_hopper_kernel

    from .test_warpspec_hopper import _assert_gemm_on_the_gpu

    tiles = -(-m // 128) * -(-n // 256)
    for ctas in (None, examples.persistent_ctas(tiles)):
        func = examples.hopper_gemm_kernel(m, n, k, zero_fill_k=k % 64 != 0, ctas=ctas)
        _assert_gemm_on_the_gpu(_specialized(func, "cuda", True, hopper=True), m, n, k, seed=3)
    split = TailSplit(strategy="partial")(tvm.IRModule({"main": examples.hopper_gemm_kernel(
        m, n, k, zero_fill_k=k % 64 != 0)}))
    _assert_gemm_on_the_gpu(unspecialized_hopper_kernel(split["main"]), m, n, k, seed=4)


def _c_store_guards(stmt, guards=()) -> list[set[str]]:
    """For each store into `C` in `stmt`, the names of the variables of the conditions around it (but the warp
    role dispatch, `threadIdx.x < constant`)."""
    if isinstance(stmt, tirx.BufferStore):
        return [{v.name for g in guards for v in tirx.analysis.undefined_vars(g)}] if stmt.buffer.name == "C" else []
    if isinstance(stmt, tirx.IfThenElse):
        condition = stmt.condition
        dispatch = (isinstance(condition, tirx.LT) and isinstance(condition.a, tirx.Var)
                    and isinstance(condition.b, tirx.IntImm))
        inner = guards if dispatch else (*guards, condition)
        return _c_store_guards(stmt.then_case, inner) + (
            [] if stmt.else_case is None else _c_store_guards(stmt.else_case, inner))
    if isinstance(stmt, tirx.SeqStmt):
        return [g for s in stmt.seq for g in _c_store_guards(s, guards)]
    for field in ("block", "body"):
        if hasattr(stmt, field) and isinstance(getattr(stmt, field), tirx.Stmt | tvm.s_tir.SBlock):
            return _c_store_guards(getattr(stmt, field), guards)
    return []


def test_tailsplit_leaves_the_main_tiles_stores_condition_free():
    """200 x 300 on 128 x 256 tiles. Guarded: each band's 4 stores of the fragment layout (an unrolled loop over its
    column blocks) carry the element's bounds (the thread index). TailSplit decides the tiles above the mark: the
    main tile of each band (top: bx = 0; bottom: by = 0, bx = 0) stores without a condition of the element; the
    tail tiles only their rows and columns inside C (rows < 8, columns < 44), in register pairs (2 vector stores
    per tile case)."""
    func = examples.hopper_gemm_kernel(200, 300, None, zero_fill_k=True)
    guarded = _c_store_guards(_specialized(func, "cuda", False, hopper=True)["main"].body)
    assert len(guarded) == 8 and all("tx" in names for names in guarded)
    split = _c_store_guards(_specialized(func, "cuda", True, hopper=True)["main"].body)
    assert len(split) == 2 * (2 + 4)  # top: 2 tile cases (bx), bottom: 4 (by, bx)
    condition_free = [names for names in split if "tx" not in names and "column_block" not in names]
    assert len(condition_free) == 4 and all(names <= {"by", "bx"} for names in condition_free)


def _store_instructions(func: tirx.PrimFunc, tail_split: bool) -> collections.Counter:
    mod = _specialized(func, "cuda", tail_split, hopper=True)
    ptx = cuda_ptx(cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE), "sm_90a")
    return collections.Counter(re.findall(r"\bst\.global[.\w]*", ptx))


@pytest.mark.nvcc
def test_register_pairs_are_stored_with_one_vector_store():
    """wgmma's fragment holds columns `j, j + 1` in consecutive registers: 64 `st.global.v2.f32` per consumer
    warpgroup of a 64 x 256 band (whole 32-byte sectors per warp) where the columns allow it: a divisible output,
    a ragged one after TailSplit when its rows have an even length; scalar stores for odd rows (a pair would be
    misaligned) and for the per-element guards left without TailSplit."""
    assert _store_instructions(examples.hopper_gemm_kernel(256, 512, None), False) == {"st.global.v2.f32": 128}
    ragged = examples.hopper_gemm_kernel(200, 300, None, zero_fill_k=True)
    assert set(_store_instructions(ragged, True)) == {"st.global.v2.f32"}
    assert set(_store_instructions(ragged, False)) == {"st.global.f32"}
    odd = examples.hopper_gemm_kernel(200, 301, None, zero_fill_k=True)
    assert set(_store_instructions(odd, True)) == {"st.global.f32"}


@pytest.mark.parametrize("columns,index,guarded,expected", [
    (300, lambda j, by, bx: (by, bx * 256 + j), False, True),
    (301, lambda j, by, bx: (by, bx * 256 + j), False, False),        # odd rows: a pair is misaligned
    (300, lambda j, by, bx: (by, bx * 256 + j + 1), False, False),    # odd base column
    (300, lambda j, by, bx: (j, bx * 256 + j), False, False),         # the column in another index
    (300, lambda j, by, bx: (by, bx * 256 + 2 * j), False, False),    # not adjacent columns
    (300, lambda j, by, bx: (by, bx * 256 + j), True, False),         # a guard per element
])
def test_pairs_columns(columns, index, guarded, expected):
    out = tirx.decl_buffer((300, columns), "float32", "C")
    acc = tirx.decl_buffer((64, 256), "float32", "acc", scope="shared")
    j, by, bx = (tirx.Var(name, "int32") for name in ("j", "by", "bx"))
    leaf = tirx.BufferStore(out, tirx.BufferLoad(acc, [0, j]), list(index(j, by, bx)))
    if guarded:
        leaf = tirx.IfThenElse(bx * 256 + j < columns, leaf, None)
    assert pairs_columns(leaf, tirx.For(j, 0, 256, tirx.ForKind.SERIAL, leaf)) is expected
    # a column loop cut at an odd end splits a pair
    assert not pairs_columns(leaf, tirx.For(j, 0, 43, tirx.ForKind.SERIAL, leaf))


def _with_store_top(func: tirx.PrimFunc, make_body) -> tirx.PrimFunc:
    """`func` whose `store_top` block body is `make_body(i, j, row, col, leaf)`: band loop variables `i`, `j`, the
    output row and column expressions and the plain store of the example (`C[row, col] = acc[i, j]`)."""
    stores = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, stores.append))
    (leaf,) = [s for s in stores if s.buffer.name == "C" and "64" not in str(s.value.indices[0])]
    i, j = leaf.value.indices
    row, col = leaf.indices

    def replace(block):
        if block.name_hint != "store_top":
            return block
        return SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, make_body(i, j, row, col, leaf),
                      block.init, block.alloc_buffers, block.match_buffers, block.annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (SBlock, replace), order="post"))


def _loop(var, lo, extent, body, mark=False):
    return tirx.For(var, lo, extent, tirx.ForKind.SERIAL, body, None,
                    {MARK_KEY: FRAGMENT_STORE_MARK} if mark else None)


STORE_TREES = {
    # the row guard between the band loops, the column guard under them
    "row guard between the loops": (lambda i, j, row, col, leaf: _loop(i, 0, 64, tirx.IfThenElse(
        row < 200, _loop(j, 0, 256, tirx.IfThenElse(col < 300, leaf, None)), None)), lambda r, c: True),
    # two leaves over rows [0, 24) and [24, 64)
    "two row ranges": (lambda i, j, row, col, leaf: tirx.SeqStmt([
        _loop(i, 0, 24, _loop(j, 0, 256, tirx.IfThenElse(tirx.And(row < 200, col < 300), leaf, None))),
        _loop(i, 24, 40, _loop(j, 0, 256, tirx.IfThenElse(tirx.And(row < 200, col < 300), leaf, None)))]),
        lambda r, c: True),
    # TailSplit cuts the marked loops past the band's start and rebases them (`acc[i + 2, j]`, `acc[i, j + 2]`)
    "rows from 2, through TailSplit": (lambda i, j, row, col, leaf: _loop(i, 0, 64, _loop(j, 0, 256, tirx.IfThenElse(
        tirx.And(tirx.And(row < 200, col < 300), i >= 2), leaf, None)), mark=True),
        lambda r, c: r % 128 >= 2),
    "columns from 2, through TailSplit": (lambda i, j, row, col, leaf: _loop(i, 0, 64, _loop(j, 0, 256, tirx.IfThenElse(
        tirx.And(tirx.And(row < 200, col < 300), j >= 2), leaf, None)), mark=True),
        lambda r, c: c % 256 >= 2 or r % 128 >= 64),
}


@pytest.mark.parametrize("name", STORE_TREES)
def test_store_trees_are_lowered_to_the_right_registers(name):
    """Other store trees of `store_top` (rows 0..63 of each 128-row tile): each C element its tree writes (and no
    other) is stored once, from the register holding its products, in the event simulation of the Hopper code."""
    from .cuda_events import simulate_gemm, transpile

    make_body, stored = STORE_TREES[name]
    func = _with_store_top(examples.hopper_gemm_kernel(200, 300, None, zero_fill_k=True), make_body)
    mod = _specialized(func, "cuda", "TailSplit" in name, hopper=True, debug_check=True)
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    simulate_gemm(transpile(source), 200, 300, 136, (2, 2), seed=7, stored=stored)


@pytest.mark.parametrize("make_body", [
    lambda i, j, row, col, leaf: _loop(j, 0, 256, _loop(i, 0, 64, leaf)),  # the column loop outside
    lambda i, j, row, col, leaf: _loop(i, 0, 64, tirx.SeqStmt([              # a Bind between the band loops
        tirx.Bind(tirx.Var("r", "int32"), row), _loop(j, 0, 256, leaf)])),
])
def test_store_trees_the_hopper_lowering_cannot_map_are_refused(make_body):
    func = _with_store_top(examples.hopper_gemm_kernel(256, 512, None), make_body)
    with pytest.raises(WarpSpecializeInputError, match="'store_top' touches the accumulator 'acc'"):
        tile_plan(analyze(func).tree)
