"""The generic CUDA form run thread by thread on the CPU (`cuda_threads`): every thread of a CTA interleaved in
random orders, against the sequential program on llvm (no GPU here)."""

import dataclasses

import numpy as np
import pytest
import tvm

from tvm_tailsplit.testing import cuda_schedule_for_llvm
from tvm_tailsplit.warpspec import WarpSpecialize, analyze, examples
from tvm_tailsplit.warpspec.codegen import generate
from tvm_tailsplit.warpspec.protocol import WAIT

from .cuda_threads import Deadlock, simulate
from .test_warpspec_cuda import (
    _dependent_bodies_kernel,
    _local_accumulator_kernel,
    _sliding_window_kernel,
    _staged_reversal_kernel,
)

KERNELS = {
    "streaming": (lambda: examples.streaming_kernel(tiles=5, tile=8, stages=2), {0: 32, 1: 64}),
    "seed": (examples.seed_example, {0: 32, 1: 64}),
    "gemm_two_compute_roles": (lambda: examples.gemm_kernel(16, 16, 48, 16, 16, 16, stages=2, compute_roles=2),
                               {0: 32, 1: 32, 2: 32}),
    "gemm_ragged": (lambda: examples.gemm_kernel(12, 16, 48, 16, 16, 16, stages=2), {0: 32, 1: 64}),
    "persistent": (lambda: examples.symbolic_k_gemm_kernel(32, 16, 16, 16, 16, 2, 1, ctas=1), {0: 32, 1: 64}),
    # bodies strided over a role's threads or not, a role's barrier, a per-thread accumulator (test_warpspec_cuda)
    "dependent_bodies": (_dependent_bodies_kernel, {0: 32, 1: 64}),
    "staged_reversal": (_staged_reversal_kernel, {0: 32, 1: 64}),
    "local_accumulator": (_local_accumulator_kernel, {0: 32, 1: 64}),
}


def _inputs(func: tvm.tirx.PrimFunc, rng: np.random.Generator, symbolic: int = 32) -> list[np.ndarray]:
    shapes = [tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else symbolic for d in p.shape) for p in func.params]
    return [rng.integers(-2, 3, shape).astype(p.dtype) for shape, p in zip(shapes, func.params, strict=True)]


def _sequential(func: tvm.tirx.PrimFunc, arrays: list[np.ndarray]) -> list[np.ndarray]:
    executable = tvm.compile(cuda_schedule_for_llvm(tvm.IRModule({"main": func})), target="llvm")
    tensors = [tvm.runtime.tensor(a.copy()) for a in arrays]
    executable["main"](*tensors)
    return [t.numpy() for t in tensors]


@pytest.mark.parametrize("named_barriers", [False, True])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_cuda_form_computes_what_the_sequential_program_does(name, named_barriers):
    build, threads = KERNELS[name]
    func = build()
    specialized = WarpSpecialize("cuda", threads_per_role=threads, named_barriers=named_barriers)(
        tvm.IRModule({"main": func}))["main"]
    arrays = _inputs(func, np.random.default_rng(0))
    expected = _sequential(func, arrays)
    for seed in range(2):
        results = [a.copy() for a in arrays]
        simulate(specialized, results, seed)
        for param, got, want in zip(func.params, results, expected, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-3, err_msg=f"{name}: {param.name}, seed {seed}")


def test_a_window_moving_by_one_element_keeps_each_elements_last_value():
    # D[t + i] strided over 64 threads: without the role's barrier between instances (fixed in codegen,
    # `_moves_elements_between_lanes`) a lagging warp stored an older instance's value last in every run.
    x = np.arange(4 * 64, dtype="float32").reshape(4, 64)
    expected = np.zeros(67, "float32")
    for t in range(4):
        expected[t:t + 64] = x[t]
    specialized = WarpSpecialize("cuda", threads_per_role={0: 64, 1: 32})(
        tvm.IRModule({"main": _sliding_window_kernel()}))["main"]
    for seed in range(5):
        arrays = [x.copy(), np.zeros(67, "float32"), np.zeros(4, "float32")]
        simulate(specialized, arrays, seed)
        np.testing.assert_array_equal(arrays[1], expected)


def test_the_simulation_catches_a_dropped_wait_and_a_wrong_parity():
    func = examples.streaming_kernel(tiles=5, tile=8, stages=2)
    protocol = analyze(func).protocol
    arrays = _inputs(func, np.random.default_rng(1))
    expected = _sequential(func, arrays)
    dropped = protocol.replace_ops("compute", [op for op in protocol.ops["compute"] if op.action != WAIT])
    flipped = protocol.replace_ops("compute", [dataclasses.replace(op, parity_flip=op.action == WAIT)
                                               for op in protocol.ops["compute"]])
    for broken in (dropped, flipped):
        kernel = generate(broken, "cuda", {0: 32, 1: 64})
        wrong = 0
        for seed in range(2):
            results = [a.copy() for a in arrays]
            try:
                simulate(kernel, results, seed)
            except (Deadlock, RuntimeError):
                wrong += 1
                continue
            wrong += not np.array_equal(results[1], expected[1])
        assert wrong


@pytest.mark.parametrize("k", [0, 16, 48])
def test_a_symbolic_reduction_length_from_zero_on(k):
    # at K = 0 the kernel runs its sequential fallback (the stores wait for a last K step that does not exist)
    func = examples.symbolic_k_gemm_kernel(16, 16, 16, 16, 16, 2, 1)
    specialized = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64})(tvm.IRModule({"main": func}))["main"]
    arrays = _inputs(func, np.random.default_rng(k), symbolic=k)
    expected = _sequential(func, arrays)
    simulate(specialized, arrays, seed=k)
    np.testing.assert_allclose(arrays[2], expected[2], atol=1e-3)
