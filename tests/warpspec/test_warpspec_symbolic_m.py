"""A symbolic row count M (issue #15's decode-like rows): one compiled GEMM for every M.

`examples.hopper_gemm_kernel(m=None, ...)` / `gemm_kernel(m=None, ...)`: A is M x K and C is M x n with `M` a buffer
dimension, the grid `ceildiv(M, block_m)` rows of tiles, loads and stores always guarded by M (stores marked).
Checked: the untransformed kernel's meaning on llvm (threads serialized, one module for many M), TailSplit +
WarpSpecialize on the generic llvm form (roles as concurrent threads) and the Hopper form (nvcc for sm_90a, the
event simulation over the grid of each M, the `gpu` test on an H100). The persistent form (`ctas`) keeps a constant
CTA count for every M: CTAs past a small M's tiles run none.
"""

import functools
import os

os.environ.setdefault("TVM_NUM_THREADS", str(max(2, os.cpu_count() or 2)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tvm  # noqa: E402

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source  # noqa: E402
from tvm_tailsplit.ir_utils import substitute  # noqa: E402
from tvm_tailsplit.testing import run_with_guarded_output, threads_as_serial_loops  # noqa: E402
from tvm_tailsplit.warpspec import WARP_SPECIALIZED_PIPELINE, examples  # noqa: E402
from tvm_tailsplit.warpspec.codegen import load_libatomic, require_concurrent_threads  # noqa: E402

from .cuda_events import COVERAGE, KernelFault, check_descriptor_encoder, simulate_gemm, transpile  # noqa: E402
from .test_warpspec_ragged import _operands, _specialized  # noqa: E402

# below one 128-row tile, one tile and a row more or less, several tiles and a tail
M_VALUES = (1, 2, 63, 64, 65, 127, 128, 129, 200, 300)


def test_symbolic_m_kernel_has_a_symbolic_grid_and_marked_guarded_stores():
    func = examples.hopper_gemm_kernel(None, 512, 128)
    (a, _, c) = func.params
    assert isinstance(a.shape[0], tvm.tirx.Var) and a.shape[0].same_as(c.shape[0]) and int(a.shape[1]) == 128
    script = func.script()
    assert "T.thread_binding((M + 127) // 128, thread=\"blockIdx.y\")" in script
    assert script.count("< M") == 3  # the A loads and the two bands' stores; B and K are not ragged
    with pytest.raises(ValueError, match="ctas must be at least 1, got 0"):
        examples.hopper_gemm_kernel(None, 512, 128, ctas=0)


@pytest.mark.parametrize("ctas", [None, 3], ids=["grid", "persistent"])
def test_symbolic_m_hopper_example_means_a_times_b_transposed_for_every_m(ctas):
    """One llvm module (threads serialized) for every M, against numpy; outputs canary-guarded. Persistent: 3 CTAs
    whatever the tile count (2 tiles for M <= 128: CTA 2 runs none)."""
    n, k = 300, 136
    func = examples.hopper_gemm_kernel(None, n, k, zero_fill_k=True, ctas=ctas)
    executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    for m in M_VALUES:
        a, b = _operands(m, n, k, seed=m, b_transposed=True)
        out = run_with_guarded_output(executable, [a, b], (m, n))
        np.testing.assert_allclose(out, a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3,
                                   err_msg=f"M = {m}")


def test_symbolic_m_warp_specialized_gemm_on_llvm_matches_numpy():
    """TailSplit + WarpSpecialize('llvm') of the 16 x 16-tile GEMM: one module, the roles as concurrent threads."""
    load_libatomic()
    require_concurrent_threads(2)
    n, k = 40, 48
    func = examples.gemm_kernel(m=None, n=n, k=k, block_m=16, block_n=16, block_k=16, stages=2)
    executable = tvm.compile(_specialized(func, "llvm", True, debug_check=True), target="llvm")
    for m in (1, 15, 16, 17, 33, 64, 65):
        a, b = _operands(m, n, k, seed=m, b_transposed=False)
        np.testing.assert_allclose(run_with_guarded_output(executable, [a, b], (m, n)),
                                   a.astype("float32") @ b.astype("float32"), rtol=1e-5, atol=1e-4,
                                   err_msg=f"M = {m}")


@functools.cache
def _hopper_source(n: int, k: int | None, ctas: int | None = None) -> str:
    func = examples.hopper_gemm_kernel(None, n, k, zero_fill_k=k is None, ctas=ctas)
    mod = _specialized(func, "cuda", True, hopper=True, debug_check=True)
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


@pytest.mark.nvcc
@pytest.mark.parametrize("ctas", [None, 132], ids=["grid", "persistent"])
def test_nvcc_compiles_the_symbolic_m_hopper_gemm_for_sm_90a(ctas):
    (usage,) = compile_cuda_source(_hopper_source(4096, None, ctas), "sm_90a")
    print("symbolic M hopper gemm (TailSplit + WarpSpecialize)", "persistent" if ctas else "grid", usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0 and usage.performance_losses == ()


@pytest.mark.parametrize("ctas", [None, 3], ids=["grid", "persistent"])
@pytest.mark.parametrize("m", [1, 65, 200])
def test_symbolic_m_hopper_kernel_in_the_event_simulation(m, ctas):
    """One generated kernel, M set at run time: the grid of ceildiv(M, 128) x ceildiv(300, 256) CTAs (or 3
    persistent CTAs over its 2 or 4 tiles) stores every C element once from the right register (K = 136: two K
    tiles and a zero-filled one)."""
    n, k = 300, 136
    source = _hopper_source(n, None, ctas)
    check_descriptor_encoder(source)
    grid = (ctas, 1) if ctas else (-(-n // 256), -(-m // 128))
    assert simulate_gemm(transpile(source), m, n, k, grid, seed=m) == m * n


def _host_launch_conditions(func: tvm.tirx.PrimFunc) -> dict[str, list]:
    """The conditions of the ifs around each `cuTensorMapEncodeTiled` call (by source buffer) and around the grid
    (`"launch"`: the outermost `blockIdx` loop) of a specialized kernel (`tvm_thread_invariant` unwrapped)."""
    found: dict[str, list] = {}

    def visit(stmt, conditions):
        if isinstance(stmt, tvm.tirx.IfThenElse):
            condition = stmt.condition
            if isinstance(condition, tvm.ir.Call) and condition.op.name == "tirx.tvm_thread_invariant":
                condition = condition.args[0]
            visit(stmt.then_case, [*conditions, condition])
            if stmt.else_case is not None:
                visit(stmt.else_case, [*conditions, tvm.tirx.Not(condition)])
        elif isinstance(stmt, tvm.tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, conditions)
        elif isinstance(stmt, tvm.s_tir.SBlockRealize):
            visit(stmt.block.body, conditions)
        elif isinstance(stmt, tvm.tirx.For) and stmt.thread_binding is not None:
            found.setdefault("launch", conditions)
        elif isinstance(stmt, tvm.tirx.Evaluate) and "cuTensorMapEncodeTiled" in str(stmt.value):
            found[stmt.value.args[4].args[0].name] = conditions

    visit(func.body, [])
    return found


@pytest.mark.parametrize("form", ["mbarriers", "named_barriers", "hopper"])
def test_an_empty_grid_launches_nothing(form):
    """M = 0: the grid's ceildiv(M, block_m) rows of tiles are none, which TVM launches as one row of CTAs
    (`ir_utils.launched_extent`), running every role once; on Hopper, A's tensor map of 0 rows was encoded before
    the launch, which `cuTensorMapEncodeTiled` rejects (globalDim must be non-zero: the call failed on a GPU for an
    empty batch). The launch and the encodings are under the grid's `extent > 0`: at M = 0 neither happens (as in
    the sequential program, which runs no iteration of the empty grid loop), at M = 1 both do."""
    if form == "hopper":
        func = examples.hopper_gemm_kernel(None, 300, 136, zero_fill_k=True)
        mod = _specialized(func, "cuda", True, hopper=True)
    else:
        func = examples.gemm_kernel(m=None, n=40, k=48, block_m=16, block_n=16, block_k=16, stages=2)
        mod = _specialized(func, "cuda", True, named_barriers=form == "named_barriers")
    lowered = mod["main"]
    (m,) = {dim for dim in lowered.params[0].shape if isinstance(dim, tvm.tirx.Var)}
    found = _host_launch_conditions(lowered)
    assert set(found) == ({"launch", "A", "B"} if form == "hopper" else {"launch"})
    analyzer = tvm.sym.Analyzer()
    for what, conditions in found.items():
        for value, launched in ((0, False), (1, True), (129, True)):
            holds = [bool(analyzer.simplify(substitute(c, {m: tvm.tirx.IntImm("int32", value)})))
                     for c in conditions]
            assert all(holds) is launched, f"{what} at M = {value}"


@pytest.mark.gpu
def test_symbolic_m_hopper_gemm_on_the_gpu():
    """One compiled TailSplit + WarpSpecialize kernel for M in 1, 16, 33, 127, 1000 (x 4096 x 4096), and one
    persistent kernel (the CTAs of M = 1000's 128 tiles on an H100) for the same M."""
    from tvm_tailsplit.cuda import cuda_target

    from .test_warpspec_hopper import _assert_gemm_on_the_gpu

    n, k = 4096, 4096
    for ctas in (None, examples.persistent_ctas(-(-1000 // 128) * (n // 256))):
        mod = _specialized(examples.hopper_gemm_kernel(None, n, k, ctas=ctas), "cuda", True, hopper=True)
        executable = tvm.compile(mod, target=cuda_target("sm_90a"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
        for m in (0, 1, 16, 33, 127, 1000):  # M = 0: nothing launched (an empty grid)
            _assert_gemm_on_the_gpu(executable, m, n, k, seed=m)


def test_a_main_tile_test_off_by_a_tile_is_a_coverage_fault():
    """TailSplit's test of the top band's main tiles (`by <= (M - 64) // 128`, no condition on the stores) widened to
    `by <= (M + 63) // 128`: for M = 1 the band's main case runs as well as its tail case (row 0 stored twice)."""
    source = _hopper_source(300, None)
    main_test = "if (((int)blockIdx.y) <= ((M - 64) >> 7)) {"
    assert source.count(main_test) == 1
    widened = source.replace(main_test, "if (((int)blockIdx.y) <= ((M + 63) >> 7)) {")
    with pytest.raises(KernelFault, match="stored 2 times") as fault:
        simulate_gemm(transpile(widened), 1, 300, 136, (2, 1), seed=0)
    assert fault.value.kind == COVERAGE
