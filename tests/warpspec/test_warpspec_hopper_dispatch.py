"""The Hopper GEMM for a symbolic M with the tile width rule's kernel for every M (`examples.hopper_gemm_dispatch`,
`tiling.hopper_block_n_intervals`).

The intervals are the rule, for every M up to `SYMBOLIC_M`. Without a GPU, on N = 256 with 4 SMs (three widths):
the dispatched function runs exactly the rule's case for every M in 0..1000 (none for 0), and so does the host
code TVM lowers it to (one kernel launch per case, under the case's condition); each kernel of the dispatched CUDA
source, in the event simulation, given the values the host computes for it, stores every C element once from the
right register for M at both ends of its interval; nvcc compiles the N = 4096 dispatch for sm_90a with the
registers of each width's kernel alone and no spills. On a GPU: M on both sides of every boundary of
4096 x 4096, against numpy."""

import functools
import re

import pytest
import tvm

from bench.bench_tails_cuda import HOPPER_PASSES, hopper_module
from tvm_tailsplit.cuda import SYMBOLIC_M, compile_cuda_source, cuda_source, cuda_target, executable_cuda_source
from tvm_tailsplit.testing import dispatched_labels, evaluate, host_after_packed_api, host_launches, host_values
from tvm_tailsplit.warpspec import WARP_SPECIALIZED_PIPELINE, examples
from tvm_tailsplit.warpspec.tiling import hopper_block_n, hopper_block_n_intervals

from .cuda_events import check_descriptor_encoder, gemm_rings, simulate_gemm, transpile

SMALL_N, SMALL_SMS, SIMULATED_K = 256, 4, 136  # three widths: 64 up to M = 128, 128 to 384, 256 above


@pytest.mark.parametrize(("n", "sms"), [(4096, 132), (SMALL_N, SMALL_SMS), (1000, 132), (4096, 16)])
def test_intervals_are_the_rule(n, sms):
    intervals = hopper_block_n_intervals(n, sms)
    assert intervals[0][0] == 1 and intervals[-1][1] is None
    for first, last, block_n in intervals:
        for m in range(first, SYMBOLIC_M + 1 if last is None else last + 1):
            assert hopper_block_n(m, n, sms) == block_n, m
    assert intervals[-1][2] == hopper_block_n(None, n, sms)
    assert [w for _, _, w in hopper_block_n_intervals(4096)] == [32, 64, 128, 256]


@functools.cache
def _small_dispatch() -> tvm.IRModule:
    return examples.hopper_gemm_dispatch(SMALL_N, None, HOPPER_PASSES, zero_fill_k=True, sms=SMALL_SMS)


def test_the_host_picks_the_rules_kernel_for_every_m():
    func = _small_dispatch()["main"]
    m = func.params[0].shape[0]
    labels = [f"n{w}" for _, _, w in hopper_block_n_intervals(SMALL_N, SMALL_SMS)]
    assert labels == ["n64", "n128", "n256"]
    for value in range(0, 1001):
        want = [] if value == 0 else [f"n{hopper_block_n(min(value, SYMBOLIC_M), SMALL_N, SMALL_SMS)}"]
        assert dispatched_labels(func, m, value, labels) == want, value


@functools.cache
def _small_build() -> tuple[tvm.tirx.PrimFunc, str]:
    """The host function of the small dispatch as TVM lowers it, and its CUDA source. TVM's common-subexpression
    elimination computes the M expressions the cases share once on the host, before the cases, and passes them to
    every kernel as arguments (`cse_v9`, ...)."""
    host, executable = host_after_packed_api(_small_dispatch(), cuda_target("sm_90a"), WARP_SPECIALIZED_PIPELINE)
    return host, executable_cuda_source(executable)


def test_the_lowered_host_launches_one_kernel_per_case():
    """The host code TVM lowers the dispatch to: each case's `if` launches its kernel alone, and for every M in
    0..1000 exactly the rule's width's kernel is launched (none for 0)."""
    host, _ = _small_build()
    launches = host_launches(host)
    assert [kernels for _, kernels in launches] == [["gemm_kernel"], ["gemm_kernel_1"], ["gemm_kernel_2"]]
    widths = [w for _, _, w in hopper_block_n_intervals(SMALL_N, SMALL_SMS)]
    for value in range(0, 1001):
        running = [kernels[0] for condition, kernels in launches if evaluate(condition, {"M": value})]
        index = widths.index(hopper_block_n(min(value, SYMBOLIC_M), SMALL_N, SMALL_SMS)) if value else None
        assert running == ([] if value == 0 else ["gemm_kernel" + (f"_{index}" if index else "")]), value


def _kernel(source: str, index: int) -> str:
    """The source from the definition of the `index`-th case's kernel (`gemm_kernel`, `gemm_kernel_1`, ...) on."""
    name = "gemm_kernel" + (f"_{index}" if index else "")
    return source[re.search(rf'extern "C" __global__ void __launch_bounds__\(\d+\) {name}\([^;{{]*\) {{', source)
                  .start():]


@pytest.mark.parametrize("case", range(3))
def test_each_kernel_in_the_event_simulation(case):
    """Each case's kernel of the one dispatched source, for M at both ends of its interval (and M = 500 above the
    last boundary): every C element stored once from the right register (K = 136: a zero-filled K tile)."""
    host, source = _small_build()
    check_descriptor_encoder(source)
    first, last, block_n = hopper_block_n_intervals(SMALL_N, SMALL_SMS)[case]
    kernel = transpile(_kernel(source, case))
    for m in (first, last if last is not None else 500):
        kernel.thread.__globals__.update(host_values(host, {"M": m, "K": SIMULATED_K}))  # cse_v9, ...
        grid = (-(-SMALL_N // block_n), -(-m // 128))
        assert simulate_gemm(kernel, m, SMALL_N, SIMULATED_K, grid, seed=m,
                             rings=gemm_rings(block_n=block_n)) == m * SMALL_N, (block_n, m)


@pytest.mark.nvcc
def test_nvcc_compiles_each_width_as_alone():
    source = cuda_source(examples.hopper_gemm_dispatch(4096, 4096, HOPPER_PASSES), "sm_90a",
                         tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    usages = {u.kernel: u for u in compile_cuda_source(source, "sm_90a")}
    assert len(usages) == 4
    for index, (_, _, block_n) in enumerate(hopper_block_n_intervals(4096)):
        usage = usages["gemm_kernel" + (f"_{index}" if index else "")]
        (alone,) = compile_cuda_source(cuda_source(hopper_module(None, 4096, 4096, block_n), "sm_90a",
                                                   tir_pipeline=WARP_SPECIALIZED_PIPELINE), "sm_90a")
        print(f"block_n {block_n}:", usage, "| alone:", alone.registers)
        assert usage.registers == alone.registers
        assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0


@pytest.mark.gpu
def test_hopper_dispatch_on_the_gpu():
    from .test_warpspec_hopper import _assert_gemm_on_the_gpu

    n = k = 4096
    executable = tvm.compile(examples.hopper_gemm_dispatch(n, k, HOPPER_PASSES), target=cuda_target("sm_90a"),
                             tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    boundaries = [first for first, _, _ in hopper_block_n_intervals(n)]
    for m in sorted({1, 16, 33, 1000, 2000} | set(boundaries) | {b - 1 for b in boundaries[1:]}):
        _assert_gemm_on_the_gpu(executable, m, n, k, seed=m)
