"""The Hopper GEMM's tile widths (`examples.hopper_gemm_kernel(block_n=...)`, 256, 128, 64, 32) and their rule
(`warpspec.tiling.hopper_block_n`).

Checked per width: the untransformed kernel's meaning on llvm (threads serialized, canary-guarded outputs), TailSplit
+ WarpSpecialize (with the model check) for sm_90a through nvcc (no spills, no ptxas performance note: `setmaxnreg`
only where `hopper.rebalances_registers`), the event simulation of the generated CUDA on a ragged shape, a
symbolic-M one and its persistent form, and the `gpu` test on an H100 for decode-like and large M.
"""

import functools

import numpy as np
import pytest
import tvm

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, cuda_target
from tvm_tailsplit.testing import run_with_guarded_output, threads_as_serial_loops
from tvm_tailsplit.warpspec import WARP_SPECIALIZED_PIPELINE, examples
from tvm_tailsplit.warpspec.hopper import PRODUCER_REGISTERS, consumer_registers
from tvm_tailsplit.warpspec.tiling import HOPPER_BLOCK_N, hopper_block_n, hopper_ctas

from .cuda_events import check_descriptor_encoder, gemm_rings, simulate_gemm, transpile
from .test_warpspec_ragged import _operands, _specialized


@pytest.mark.parametrize("m,n,expected", [
    (1, 4096, 32), (16, 4096, 32), (33, 4096, 32), (127, 4096, 32), (128, 4096, 32),  # 128 CTAs of 32 columns
    (129, 4096, 64),  # 2 x 64 = 128 CTAs
    (4000, 4000, 256), (1000, 4096, 256),  # 32 x 16 = 512 and 8 x 16 = 128 CTAs fill 132 SMs
    (None, 4096, 256),  # tiled as SYMBOLIC_M = 1024 rows: 8 x 16 CTAs
    (127, 255, 32), (8, 8, 32),  # nothing fills: the most CTAs (8), then the narrowest of equals
])
def test_tile_width_rule(m, n, expected):
    assert hopper_block_n(m, n, sms=132) == expected


def test_tile_width_rule_fills_the_gpu_with_the_widest_tile():
    assert hopper_ctas(1000, 4096, 256) == 128 and hopper_ctas(1, 4096, 32) == 128
    assert hopper_block_n(1000, 4096, sms=264) == 128  # 256 CTAs of 128 columns fill twice the SMs
    assert hopper_block_n(4000, 4000, sms=1) == max(HOPPER_BLOCK_N)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        hopper_block_n(1, 0)


def test_tile_width_rule_takes_numpy_sizes():
    # it refused them ('m must be a positive int, got np.int64(1000)') while the kernels' builders take them
    assert hopper_block_n(np.int64(1000), np.int32(4096), sms=np.int64(264)) == 128


@pytest.mark.parametrize("block_n", [64, 32])
def test_narrow_tiles_mean_a_times_b_transposed(block_n):
    """Ragged in rows, columns and K (a zero-filled K tile), and a symbolic M for two M; threads serialized."""
    for m in (200, None):
        n, k = 100, 136
        func = examples.hopper_gemm_kernel(m, n, k, block_n=block_n, zero_fill_k=True)
        executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
        for rows in (200,) if m else (1, 129):
            a, b = _operands(rows, n, k, seed=rows + block_n, b_transposed=True)
            out = run_with_guarded_output(executable, [a, b], (rows, n))
            np.testing.assert_allclose(out, a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3,
                                       err_msg=f"block_n {block_n}, M {rows}")


@functools.cache
def _source(m: int | None, n: int, block_n: int, ctas: int | None = None) -> str:
    func = examples.hopper_gemm_kernel(m, n, None, block_n=block_n, zero_fill_k=True, ctas=ctas)
    mod = _specialized(func, "cuda", True, hopper=True, debug_check=True)
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


@pytest.mark.nvcc
@pytest.mark.parametrize("block_n", HOPPER_BLOCK_N)
def test_nvcc_compiles_each_tile_width_for_sm_90a(block_n):
    source = _source(200, 300, block_n)
    kernel = source[source.index('extern "C" __global__'):]
    assert f"m64n{block_n}k16" in kernel and f"(uint){(128 + block_n) * 64 * 2})" in kernel  # one expect_tx
    assert f"float acc_r1_ptr[{block_n // 2}];" in kernel  # the fragment: block_n / 2 registers per thread
    rebalanced = block_n >= 128  # a fragment of block_n / 2 >= 64 registers per thread
    assert ("setmaxnreg_inc_sync_aligned_u32_232" in kernel) == rebalanced
    assert ("setmaxnreg_dec_sync_aligned_u32_40" in kernel) == rebalanced
    (usage,) = compile_cuda_source(source, "sm_90a")
    print("hopper gemm block_n", block_n, usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0 and usage.performance_losses == ()
    if rebalanced:  # the CTA's pool at launch holds what setmaxnreg.inc asks for
        assert usage.registers * 384 >= 128 * (PRODUCER_REGISTERS + 2 * consumer_registers(2))


# (M of the kernel, n, ctas, M simulated): ragged; a symbolic M; the persistent form of a symbolic M, 3 CTAs over
# 2 x ceildiv(500, block_n) tiles
SIMULATED = {"ragged": (200, 300, None, 200), "symbolic_m": (None, 300, None, 65), "persistent": (None, 500, 3, 200)}


@pytest.mark.parametrize("block_n", HOPPER_BLOCK_N)
@pytest.mark.parametrize("form", SIMULATED)
def test_each_tile_width_in_the_event_simulation(form, block_n):
    """K = 136 (two K tiles and a zero-filled one): every C element stored once from the right register."""
    m, n, ctas, rows = SIMULATED[form]
    k = 136
    source = _source(m, n, block_n, ctas)
    check_descriptor_encoder(source)
    grid = (ctas, 1) if ctas else (-(-n // block_n), -(-rows // 128))
    stored = simulate_gemm(transpile(source), rows, n, k, grid, seed=block_n, rings=gemm_rings(block_n=block_n))
    assert stored == rows * n


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [128, 64, 32])
def test_narrow_tiles_on_the_gpu(block_n):
    """One TailSplit + WarpSpecialize kernel of symbolic M per width, for M in 1, 33, 1000 (x 4096 x 4096), and its
    persistent form (the CTAs of M = 1000's tiles on an H100)."""
    from .test_warpspec_hopper import _assert_gemm_on_the_gpu

    n, k = 4096, 4096
    for ctas in (None, examples.persistent_ctas(hopper_ctas(1000, n, block_n))):
        mod = _specialized(examples.hopper_gemm_kernel(None, n, k, block_n=block_n, ctas=ctas), "cuda", True,
                           hopper=True)
        executable = tvm.compile(mod, target=cuda_target("sm_90a"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
        for m in (1, 33, 1000):
            _assert_gemm_on_the_gpu(executable, m, n, k, seed=m + block_n)
