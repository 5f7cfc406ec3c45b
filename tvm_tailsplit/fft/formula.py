"""The matrix-sequence formula of a DFT: a tree of structured sparse matrices.

Leaves are operands: identity `I_n`, stride permutation `L^n_k`, twiddle diagonal `T^n_m` and `DFT_n`; inner
nodes are operators: Kronecker product `⊗` and matrix product `·`. The Cooley-Tukey rule builds
`DFT_km = (DFT_k ⊗ I_m) · T^km_m · (I_k ⊗ DFT_m) · L^km_k`. A formula prints as text (`str(formula)`) and
evaluates to its dense matrix (`dense(sign)`) so that every factorization can be checked against the DFT
matrix for small sizes. The sign is the exponent sign: -1 for the forward transform, +1 for the backward one.

Conventions (the same ones the plan's index maps use):
* `L^n_k` gathers at stride k: `(L^n_k x)[i·m + j] = x[j·k + i]` for `i < k`, `j < m = n/k`;
* `T^n_m` is diagonal with entry `ω_n^(i·j)` at position `i·m + j`, where `ω_n = exp(sign·2πi/n)`.
Twiddle factors come from `unit_roots`: the angle reduced to the first octant [0, π/4] by the symmetries of
the circle (exact, in integers) and its cosine and sine evaluated in long double, so that each float64
value is correctly rounded (within half a unit in the last place; exact on multiples of π/4).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .factor import Bluestein, Breakdown, Codelet, CooleyTukey, Rader

__all__ = [
    "DFT",
    "Formula",
    "Identity",
    "Kronecker",
    "Product",
    "StridePermutation",
    "Twiddle",
    "cooley_tukey",
    "dft_matrix",
    "formula_of",
    "unit_root",
    "unit_roots",
]

# 2π in long double (64 significant bits on x86, 113 on aarch64 Linux, plain float64 where long double is double)
_TWO_PI = 2 * np.longdouble("3.14159265358979323846264338327950288")


def unit_roots(exponents, n: int, sign: int) -> np.ndarray:
    """`exp(sign·2πi·t/n)` for every integer t of `exponents` (any shape), in complex128, correctly rounded where
    long double is wider than float64.

    Each angle 2π·t/n is reduced to the first octant in exact integer arithmetic (FFTW's `real_cexp`): with
    m = 4t out of 4n, reflect across π (sine negated), take off a quarter turn (cos, sin = -sin, cos) and reflect
    across π/4 (cos and sin swapped). The reduced angle is at most π/4, where cos and sin are well conditioned, and
    they are evaluated in long double. A half-turn reduction in float64 (angles up to π) erred by up to ~5 units of
    2^-53 (sin near π loses the angle's absolute error), which doubled the error of some float64 transforms."""
    m = 4 * (np.asarray(exponents, np.int64) % n)
    reflected = m > 4 * n - m
    m = np.where(reflected, 4 * n - m, m)
    turned = m > n
    m = np.where(turned, m - n, m)
    swapped = m > n - m
    m = np.where(swapped, n - m, m)
    theta = _TWO_PI * m.astype(np.longdouble) / (4 * n)
    cos, sin = np.cos(theta).astype(np.float64), np.sin(theta).astype(np.float64)
    cos, sin = np.where(swapped, sin, cos), np.where(swapped, cos, sin)
    cos, sin = np.where(turned, -sin, cos), np.where(turned, cos, sin)
    sin = np.where(reflected, -sin, sin)
    # + 0.0: no negative zeros (exact roots such as -i have the real part +0.0)
    return (cos + 0.0) + 1j * (sign * sin + 0.0)


def unit_root(t: int, n: int, sign: int) -> tuple[float, float]:
    """`exp(sign·2πi·t/n)` as (real, imag) in float64 (`unit_roots` of one exponent)."""
    root = complex(unit_roots(t, n, sign))
    return root.real, root.imag


def dft_matrix(n: int, sign: int) -> np.ndarray:
    """The dense DFT matrix `[ω_n^(j·k)]` in complex128."""
    exponents = np.arange(n)
    return unit_roots(np.outer(exponents, exponents), n, sign)


class Formula(ABC):
    """A node of the formula tree; `size` is the matrix dimension."""

    size: int

    @abstractmethod
    def dense(self, sign: int) -> np.ndarray:
        """The dense complex128 matrix for exponent sign `sign`."""


@dataclass(frozen=True)
class Identity(Formula):
    size: int

    def __str__(self) -> str:
        return f"I_{self.size}"

    def dense(self, sign: int) -> np.ndarray:
        return np.eye(self.size, dtype=np.complex128)


@dataclass(frozen=True)
class StridePermutation(Formula):
    """`L^size_stride`: gathers the input at stride `stride`."""

    size: int
    stride: int

    def __str__(self) -> str:
        return f"L^{self.size}_{self.stride}"

    def dense(self, sign: int) -> np.ndarray:
        k, m = self.stride, self.size // self.stride
        matrix = np.zeros((self.size, self.size), np.complex128)
        for i in range(k):
            for j in range(m):
                matrix[i * m + j, j * k + i] = 1.0
        return matrix

    def source(self, position: int) -> int:
        """Input index read by output `position`."""
        m = self.size // self.stride
        return (position % m) * self.stride + position // m


@dataclass(frozen=True)
class Twiddle(Formula):
    """`T^size_m`: diagonal of twiddle factors `ω_size^(i·j)` at position `i·m + j`."""

    size: int
    m: int

    def __str__(self) -> str:
        return f"T^{self.size}_{self.m}"

    def exponent(self, position: int) -> int:
        return (position // self.m) * (position % self.m)

    def dense(self, sign: int) -> np.ndarray:
        diagonal = unit_roots([self.exponent(p) for p in range(self.size)], self.size, sign)
        return np.diag(diagonal)


@dataclass(frozen=True)
class DFT(Formula):
    """`DFT_size`; `method` names how a leaf above the codelet limit is computed ("rader", "bluestein")."""

    size: int
    method: str = ""

    def __str__(self) -> str:
        return f"DFT_{self.size}" + (f"[{self.method}]" if self.method else "")

    def dense(self, sign: int) -> np.ndarray:
        return dft_matrix(self.size, sign)


@dataclass(frozen=True)
class Kronecker(Formula):
    left: Formula
    right: Formula

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.left.size * self.right.size

    def __str__(self) -> str:
        def operand(f: Formula) -> str:
            return f"({f})" if isinstance(f, Product) else str(f)

        return f"({operand(self.left)} ⊗ {operand(self.right)})"

    def dense(self, sign: int) -> np.ndarray:
        return np.kron(self.left.dense(sign), self.right.dense(sign))


@dataclass(frozen=True)
class Product(Formula):
    factors: tuple[Formula, ...]

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.factors[0].size

    def __str__(self) -> str:
        return " · ".join(str(f) for f in self.factors)

    def dense(self, sign: int) -> np.ndarray:
        result = self.factors[-1].dense(sign)
        for factor in reversed(self.factors[:-1]):
            result = factor.dense(sign) @ result
        return result


def cooley_tukey(left: Formula, right: Formula) -> Product:
    """`DFT_km = (DFT_k ⊗ I_m) · T^km_m · (I_k ⊗ DFT_m) · L^km_k` with `left` = DFT_k, `right` = DFT_m."""
    k, m = left.size, right.size
    n = k * m
    return Product((Kronecker(left, Identity(m)), Twiddle(n, m), Kronecker(Identity(k), right),
                    StridePermutation(n, k)))


def formula_of(tree: Breakdown) -> Formula:
    """The formula of a plan's breakdown tree; codelet and convolution leaves stay `DFT` leaves."""
    if isinstance(tree, Codelet):
        return DFT(tree.n)
    if isinstance(tree, CooleyTukey):
        return cooley_tukey(formula_of(tree.left), formula_of(tree.right))
    if isinstance(tree, Rader):
        return DFT(tree.n, "rader")
    if isinstance(tree, Bluestein):
        return DFT(tree.n, "bluestein")
    raise TypeError(f"not a breakdown node: {tree!r}")
