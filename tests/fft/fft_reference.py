"""Shared helpers of the FFT tests: random data and the issue's relative L2 error bounds."""

import math

import numpy as np
import tvm

from tvm_tailsplit.testing import cuda_schedule_for_llvm, guarded_array, to_tvm


def tolerance(n: int, dtype: str) -> float:
    """complex64: 2e-7·max(1, log2(n)/8); complex128: 1e-14·max(1, log2(n)/8)."""
    growth = max(1.0, math.log2(max(n, 1)) / 8)
    return (2e-7 if dtype in ("complex64", "float32") else 1e-14) * growth


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    scale = np.linalg.norm(reference)
    return float(np.linalg.norm(result.astype(np.complex128) - reference) / (scale if scale else 1.0))


def random_complex(shape, dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def random_real(shape, dtype: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def plan_input_and_reference(params: dict, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random input of the plan of `params` (`plan()` arguments n, batch, kind, dtype) as the operator's float
    array, and numpy.fft's result in complex128 (float64 for c2r)."""
    kind, n, batch = params.get("kind", "c2c"), params["n"], params["batch"]
    dtype = params.get("dtype", "complex64")
    real = "float32" if dtype == "complex64" else "float64"
    if kind == "c2c":
        x = random_complex((batch, n), dtype, seed)
        return x.view(real).reshape(batch, n, 2), np.fft.fft(x.astype(np.complex128))
    if kind == "r2c":
        x = random_real((batch, n), real, seed)
        return x, np.fft.rfft(x.astype(np.float64))
    x = random_complex((batch, n // 2 + 1), dtype, seed)
    return x.view(real).reshape(batch, n // 2 + 1, 2), np.fft.irfft(x.astype(np.complex128), n=n)


def run_cuda_plan_on_llvm(plan, x: np.ndarray) -> np.ndarray:
    """The CUDA plan's scheduled module run on llvm with its threads serialized, shared memory in global memory
    and its barriers dropped (`tvm_tailsplit.testing.cuda_schedule_for_llvm`), into an output surrounded by
    canaries (checked: no write outside it): its result as a complex array (a real one for c2r)."""
    executable = tvm.compile(cuda_schedule_for_llvm(plan.module), target="llvm")
    out = guarded_array(plan.output_shape, plan.real_dtype)
    out.array[:] = 0
    executable["main"](tvm.runtime.tensor(x), to_tvm(out.array), *[tvm.runtime.tensor(c) for c in plan._constants])
    out.check_canaries("output")
    result = out.array.copy()
    return result if plan.kind == "c2r" else result[..., 0] + 1j * result[..., 1]
