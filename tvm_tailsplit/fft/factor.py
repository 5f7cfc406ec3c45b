"""Factorization of the transform size and the breakdown that the plan follows.

Algorithm: prime-factorize `n`. A size within the codelet limit becomes one codelet (a straight-line DFT
derived symbolically). A larger size is split by the Cooley-Tukey rule
`DFT_km = (DFT_k ⊗ I_m) · T^km_m · (I_k ⊗ DFT_m) · L^km_k` into radices, each one pass over memory, and the
breakdown is `CT(r_1, CT(r_2, ... r_s))`. The prime factors up to the radix limit are packed into the fewest
radices within that limit, balanced so that they are as equal as possible, in descending order except the
largest, which comes last: the last radix is the first pass over memory, and it is the innermost loop of
the pass after it, which a transform vectorized inside (`schedule`) needs to be a multiple of the vector
width. A prime between the radix limit and the codelet limit is a radix of its own. The default limits are
`tuning.CODELET_LIMIT` and `tuning.RADIX_LIMIT` (a radix limit below the codelet limit: more passes of small
codelets beat fewer passes of codelets whose temporaries no longer fit the vector registers). A prime factor above the
codelet limit is a radix of its own and is computed by one of two convolution algorithms, chosen by this
rule:

* **Rader** when `p - 1` is smooth (every prime factor of `p - 1` is within the codelet limit): the DFT of
  size `p` becomes a cyclic convolution of length `p - 1`, computed by two smooth transforms of size `p - 1`.
* **Bluestein** otherwise: the DFT becomes a linear convolution embedded in a cyclic one of the smallest
  length `m ≥ 2p - 1` whose prime factors are all at most `min(7, codelet limit)` (7 is
  `tuning.BLUESTEIN_LARGEST_PRIME`), computed by two smooth
  transforms of size `m`. Every prime factor of `m` is then a codelet, so that the recursion ends for any
  limits (with a codelet limit below 7, a 7-smooth `m` could contain `p` again: 14 = 2·7 for p = 7).

Termination: every node's children are smaller transforms or codelets: the radices of a composite size are
below it, Rader's `p - 1` factors into codelets, and Bluestein's `m` factors into codelets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .tuning import BLUESTEIN_LARGEST_PRIME, CODELET_LIMIT, RADIX_LIMIT

__all__ = [
    "Bluestein",
    "Breakdown",
    "Codelet",
    "CooleyTukey",
    "Rader",
    "bluestein_length",
    "breakdown",
    "chain",
    "generator_powers",
    "odd_smooth",
    "prime_algorithm",
    "prime_factors",
    "primitive_root",
    "radices",
    "smallest_smooth",
]


def prime_factors(n: int) -> list[int]:
    """Prime factors of `n` in ascending order, with multiplicity (`[]` for 1)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    factors = []
    divisor = 2
    while divisor * divisor <= n:
        while n % divisor == 0:
            factors.append(divisor)
            n //= divisor
        divisor += 1
    if n > 1:
        factors.append(n)
    return factors


def primitive_root(p: int) -> int:
    """The smallest generator of the multiplicative group modulo the prime `p`."""
    if prime_factors(p) != [p]:
        raise ValueError(f"p must be prime, got {p}")
    if p == 2:
        return 1
    distinct = set(prime_factors(p - 1))
    for g in range(2, p):
        if all(pow(g, (p - 1) // q, p) != 1 for q in distinct):
            return g
    raise ValueError(f"no primitive root modulo {p}")


def generator_powers(g: int, p: int) -> np.ndarray:
    """`g^q mod p` for every q < p - 1, as int64: the order in which Rader's permutation visits the residues.

    By blocks of b ≈ sqrt(p) exponents, `g^(b·i + j) = g^(b·i)·g^j mod p`: two short sequences and one vectorized
    product (below p² < 2^63), instead of one modular exponentiation per element (2.9 s of `pow` for the three
    tables of p = 786433)."""
    if p * p >= 2**63:
        raise ValueError(f"generator_powers: p must be at most {math.isqrt(2**63 - 1)} (p² within int64), got {p}")
    block = math.isqrt(p - 1) + 1

    def sequence(step: int, count: int) -> np.ndarray:
        values, value = np.empty(count, np.int64), 1
        for i in range(count):
            values[i] = value
            value = value * step % p
        return values

    low = sequence(g % p, block)
    high = sequence(pow(g, block, p), -(-(p - 1) // block))
    return (high[:, None] * low[None, :] % p).reshape(-1)[: p - 1]


def prime_algorithm(p: int, codelet_limit: int) -> str:
    """The algorithm for a prime above the codelet limit: "rader" if `p - 1` is smooth, else "bluestein"."""
    if p <= codelet_limit:
        raise ValueError(f"p={p} is within the codelet limit {codelet_limit}; it is a codelet")
    return "rader" if max(prime_factors(p - 1)) <= codelet_limit else "bluestein"


def bluestein_length(n: int, largest_prime: int = BLUESTEIN_LARGEST_PRIME) -> int:
    """The smallest `m ≥ 2n - 1` whose prime factors are all at most `largest_prime` (at least 2): the Bluestein
    convolution length (`smallest_smooth`)."""
    return smallest_smooth(2 * n - 1, largest_prime)


# up to this largest prime the smooth numbers are enumerated; above it they are dense enough to scan for
_ENUMERATED_LARGEST_PRIME = 13


def smallest_smooth(target: int, largest_prime: int) -> int:
    """The smallest `m ≥ target` whose prime factors are all at most `largest_prime` (at least 2).

    Up to `_ENUMERATED_LARGEST_PRIME` (the Bluestein lengths), each odd smooth number below `2·target` with the
    smallest power of two that brings it to the target (`odd_smooth`: a few hundred numbers near 2e8, where
    scanning from the target took seconds: the 7-smooth numbers there are 3e5 apart on average); above it, the numbers
    from the target on, each divided by the primes up to `largest_prime`."""
    if largest_prime < 2:
        raise ValueError(f"largest_prime must be at least 2, got {largest_prime}")
    if target <= 1:
        return 1
    primes = [p for p in range(3, largest_prime + 1, 2) if prime_factors(p) == [p]]
    if largest_prime <= _ENUMERATED_LARGEST_PRIME:
        return min(odd << (-(-target // odd) - 1).bit_length() for odd in odd_smooth(2 * target, primes))
    m = target
    while True:
        rest = m
        for p in [2, *primes]:
            while rest % p == 0:
                rest //= p
        if rest == 1:
            return m
        m += 1


def odd_smooth(limit: int, primes: Sequence[int]) -> list[int]:
    """The products of the odd `primes` (with any multiplicity, 1 included) up to `limit`, in ascending order."""
    products = [1]
    for p in primes:
        grown = []
        for q in products:
            while q <= limit:
                grown.append(q)
                q *= p
        products = grown
    return sorted(products)


def radices(n: int, radix_limit: int) -> list[int]:
    """Split `n` into the fewest balanced radices within `radix_limit`, descending but for the largest one,
    which comes last (the chain's first pass); larger primes are radices of their own (in ascending order
    after the packed ones).

    Largest last: 1024 = 8·4·4·8 instead of 8·8·4·4 runs its second pass in 8-float vectors instead of 4
    (measured in bench/results/fft_tuning.md)."""
    factors = prime_factors(n)
    small = [p for p in factors if p <= radix_limit]
    packed: list[int] = []
    if small:
        bins = 1
        while True:
            candidate = _pack(sorted(small, reverse=True), bins, radix_limit)
            if candidate is not None:
                packed = candidate
                break
            bins += 1
    ordered = sorted(packed, reverse=True)
    return ordered[1:] + ordered[:1] + [p for p in factors if p > radix_limit]


def _pack(factors: list[int], bins: int, limit: int) -> list[int] | None:
    """Greedy balanced packing: each factor goes to the smallest bin that still fits; None if one does not."""
    products = [1] * bins
    for p in factors:
        fitting = [i for i in range(bins) if products[i] * p <= limit]
        if not fitting:
            return None
        smallest = min(fitting, key=lambda i: products[i])
        products[smallest] *= p
    return [q for q in products if q > 1]


@dataclass(frozen=True)
class Codelet:
    """A leaf: DFT of size `n` computed by one derived straight-line codelet."""

    n: int


@dataclass(frozen=True)
class CooleyTukey:
    """`DFT_n = (DFT_k ⊗ I_m) · T^n_m · (I_k ⊗ DFT_m) · L^n_k` with `left` of size k and `right` of size m."""

    n: int
    left: Breakdown
    right: Breakdown


@dataclass(frozen=True)
class Rader:
    """Prime `n`: cyclic convolution of length n-1 through two transforms of size n-1 (`sub`)."""

    n: int
    generator: int
    sub: Breakdown


@dataclass(frozen=True)
class Bluestein:
    """Any `n`: chirp multiplication and a cyclic convolution of length `m` through transforms of size m."""

    n: int
    m: int
    sub: Breakdown


Breakdown = Codelet | CooleyTukey | Rader | Bluestein


def breakdown(n: int, codelet_limit: int = CODELET_LIMIT, radix_limit: int = RADIX_LIMIT) -> Breakdown:
    """The breakdown tree the plan follows for a DFT of size `n` (see the module docstring for the rule)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    if codelet_limit < 2:
        raise ValueError(f"codelet_limit must be at least 2, got {codelet_limit}")
    if not 2 <= radix_limit <= codelet_limit:
        raise ValueError(f"radix_limit must be between 2 and codelet_limit={codelet_limit}, got {radix_limit}")
    if n <= codelet_limit:
        return Codelet(n)
    parts = radices(n, radix_limit)
    if len(parts) == 1:
        (p,) = parts
        if prime_algorithm(p, codelet_limit) == "rader":
            return Rader(p, primitive_root(p), breakdown(p - 1, codelet_limit, radix_limit))
        m = bluestein_length(p, min(BLUESTEIN_LARGEST_PRIME, codelet_limit))
        return Bluestein(p, m, breakdown(m, codelet_limit, radix_limit))
    return chain(parts, codelet_limit, radix_limit)


def chain(parts: list[int], codelet_limit: int = CODELET_LIMIT, radix_limit: int = RADIX_LIMIT) -> Breakdown:
    """The Cooley-Tukey chain `CT(parts[0], CT(parts[1], ...))` of the radices `parts` in this order (the last is
    the first pass over memory), each radix broken down by `breakdown`."""
    head = breakdown(parts[0], codelet_limit, radix_limit)
    if len(parts) == 1:
        return head
    rest = chain(parts[1:], codelet_limit, radix_limit)
    return CooleyTukey(head.n * rest.n, head, rest)
