"""Prime factorization, radix packing and the documented Rader/Bluestein rule."""

import math
import time

import pytest

from tvm_tailsplit.fft.factor import (
    Bluestein,
    Codelet,
    CooleyTukey,
    Rader,
    bluestein_length,
    breakdown,
    generator_powers,
    prime_algorithm,
    prime_factors,
    primitive_root,
    radices,
    smallest_smooth,
)
from tvm_tailsplit.fft.spec import FFTSpec


def test_prime_factors():
    assert prime_factors(1) == []
    assert prime_factors(360) == [2, 2, 2, 3, 3, 5]
    assert prime_factors(1009) == [1009]
    assert prime_factors(2**12 * 3) == [2] * 12 + [3]
    with pytest.raises(ValueError, match="n must be a positive integer"):
        prime_factors(0)


@pytest.mark.parametrize("p", [3, 5, 17, 97, 257, 1009])
def test_primitive_root_generates_the_group(p):
    g = primitive_root(p)
    assert sorted(pow(g, q, p) for q in range(p - 1)) == list(range(1, p))


def test_rader_when_p_minus_1_is_smooth_else_bluestein():
    # 1008 = 2^4·3^2·7, 256 = 2^8, 96 = 2^5·3: smooth for the default limit 32
    assert prime_algorithm(1009, 32) == "rader"
    assert prime_algorithm(257, 32) == "rader"
    assert prime_algorithm(97, 32) == "rader"
    # 82 = 2·41 and 106 = 2·53 have a prime factor above 32
    assert prime_algorithm(83, 32) == "bluestein"
    assert prime_algorithm(107, 32) == "bluestein"
    # the rule follows the limit: 1008 has the factor 7, above a limit of 5
    assert prime_algorithm(1009, 5) == "bluestein"
    with pytest.raises(ValueError, match="within the codelet limit"):
        prime_algorithm(31, 32)


def test_bluestein_length_is_smooth_and_long_enough():
    for n in (83, 107, 1009):
        m = bluestein_length(n)
        assert m >= 2 * n - 1 and max(prime_factors(m)) <= 7
        assert all(max(prime_factors(k)) > 7 for k in range(2 * n - 1, m))


def test_bluestein_length_of_large_primes_is_fast():
    # scanning up from 2n - 1 took 3.4 s for 100000007: the 7-smooth numbers near 2e8 are 3e5 apart on average
    start = time.perf_counter()
    assert bluestein_length(100000007) == 200037600 == 2**5 * 3**6 * 5**2 * 7**3
    assert bluestein_length(999999937) == 2000000000
    assert time.perf_counter() - start < 0.1


@pytest.mark.parametrize("largest_prime", [2, 3, 5, 7, 11, 13, 17])
def test_smallest_smooth_matches_a_scan(largest_prime):
    for target in [*range(1, 400), 65537, 1000003]:
        m = smallest_smooth(target, largest_prime)
        assert m >= target and max(prime_factors(m), default=1) <= largest_prime
        assert all(max(prime_factors(k)) > largest_prime for k in range(max(target, 2), m))


@pytest.mark.parametrize("n", [64, 1000, 4096, 65536, 12288, 360, 2 * 1009, 17 * 17])
def test_radices_fit_the_limit_and_multiply_to_n(n):
    parts = radices(n, 32)
    assert math.prod(parts) == n
    assert all(r <= 32 or prime_factors(r) == [r] for r in parts)
    if n & (n - 1) == 0:  # powers of two: the fewest passes of radix at most 32
        assert len(parts) == math.ceil(math.log2(n) / 5)


def test_radix_limit_below_the_codelet_limit():
    # sizes within the codelet limit stay one codelet; larger ones use radices within the radix limit
    assert radices(1024, 8) == [8, 4, 4, 8]  # the largest radix is the first pass
    assert radices(33, 8) == [3, 11]  # 11 is above the radix limit but within the codelet limit
    tree = breakdown(1024)
    assert (tree.left, tree.right.left) == (Codelet(8), Codelet(4))
    with pytest.raises(ValueError, match="radix_limit must be between 2 and codelet_limit=32"):
        breakdown(100, 32, 64)


def test_breakdown_shapes():
    assert breakdown(32) == Codelet(32)
    tree = breakdown(1024, 32, 32)
    assert isinstance(tree, CooleyTukey) and (tree.left, tree.right) == (Codelet(32), Codelet(32))
    rader = breakdown(1009)
    assert isinstance(rader, Rader) and rader.sub.n == 1008
    bluestein = breakdown(83)
    assert isinstance(bluestein, Bluestein) and bluestein.m == bluestein_length(83)
    mixed = breakdown(2 * 1009)
    assert isinstance(mixed, CooleyTukey) and isinstance(mixed.right, Rader)


@pytest.mark.parametrize("p", [3, 5, 7, 97, 1009, 65537])
def test_generator_powers_are_the_modular_powers(p):
    g = primitive_root(p)
    assert generator_powers(g, p).tolist() == [pow(g, q, p) for q in range(p - 1)]


def test_generator_powers_names_its_bound():
    # it said 'p must be below 3037000499', which it takes (3037000499² < 2^63), naming no function
    assert 3037000499**2 < 2**63 <= 3037000500**2
    with pytest.raises(ValueError, match=r"generator_powers: p must be at most 3037000499 \(p² within int64\), "
                                         r"got 3037000500"):
        generator_powers(2, 3037000500)


def test_rader_tables_of_a_large_prime_build_fast():
    # one modular exponentiation per element of the three Rader tables took 2.9 s of the 3.6 s of p = 786433
    # (p - 1 = 3·2^18); the powers are now two sequences of sqrt(p) terms and one vectorized product (0.6 s)
    spec = FFTSpec(786433)
    start = time.perf_counter()
    passes = spec.passes()
    assert time.perf_counter() - start < 2.0
    _, indices = passes.constants()
    g = primitive_root(786433)
    gather, scatter = indices[: 786432], indices[786432:]
    assert gather[:5].tolist() == [pow(g, q, 786433) for q in range(5)]
    assert scatter[-5:].tolist() == [pow(g, -r, 786433) for r in range(786427, 786432)]
