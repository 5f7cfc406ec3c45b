"""Shared helpers of the FFT tests: random data and the issue's relative L2 error bounds."""

import math

import numpy as np


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
