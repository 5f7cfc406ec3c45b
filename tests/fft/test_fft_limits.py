"""Planner limits: any codelet/radix limits give a finite breakdown whose plan matches numpy (regression: a
codelet limit below 7 made Bluestein's 7-smooth length contain the prime again, 7 -> 14 = 2·7 -> 7 ...)."""

import numpy as np
import pytest

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft.factor import Bluestein, Codelet, CooleyTukey, Rader, breakdown
from tvm_tailsplit.fft.tuning import MAX_CODELET_LIMIT
from tvm_tailsplit.fft.variants import Variant

from .fft_reference import random_complex, relative_error, tolerance

SMALL_LIMITS = [(2, 2), (3, 2), (3, 3), (4, 2), (4, 4), (5, 3), (6, 6), (7, 2), (8, 8)]


def _check_tree(node, codelet_limit: int) -> int:
    """Checks that every node is consistent and every leaf within the codelet limit; returns the tree depth."""
    if isinstance(node, Codelet):
        assert node.n <= codelet_limit
        return 1
    if isinstance(node, CooleyTukey):
        assert node.left.n * node.right.n == node.n and node.left.n < node.n and node.right.n < node.n
        return 1 + max(_check_tree(node.left, codelet_limit), _check_tree(node.right, codelet_limit))
    if isinstance(node, Rader):
        assert node.sub.n == node.n - 1
        return 1 + _check_tree(node.sub, codelet_limit)
    assert isinstance(node, Bluestein) and node.m >= 2 * node.n - 1 and node.sub.n == node.m
    return 1 + _check_tree(node.sub, codelet_limit)


@pytest.mark.parametrize(("codelet_limit", "radix_limit"), SMALL_LIMITS)
def test_every_size_has_a_finite_breakdown_for_small_limits(codelet_limit, radix_limit):
    for n in list(range(1, 400)) + [1009, 1366, 2 * 1009, 4099]:
        _check_tree(breakdown(n, codelet_limit, radix_limit), codelet_limit)


@pytest.mark.parametrize("n", [7, 97, 83, 1366])
def test_issue_sizes_plan_with_the_smallest_limits(n):
    plan = tfft.plan(n, 2, codelet_limit=2, radix_limit=2, dtype="complex128")
    x = random_complex((2, n), "complex128", seed=n)
    assert relative_error(plan(x), np.fft.fft(x)) <= 4 * tolerance(n, "complex128")


@pytest.mark.parametrize(("codelet_limit", "radix_limit"), [(3, 2), (5, 3), (6, 6)])
@pytest.mark.parametrize("n", [7, 11, 13, 14, 23, 49])
def test_small_limits_match_numpy(n, codelet_limit, radix_limit):
    plan = tfft.plan(n, 3, codelet_limit=codelet_limit, radix_limit=radix_limit)
    x = random_complex((3, n), "complex64", seed=n)
    assert relative_error(plan(x), np.fft.fft(x.astype(np.complex128))) <= 4 * tolerance(n, "complex64")


def test_limits_out_of_range_name_the_limit():
    with pytest.raises(ValueError, match="codelet_limit must be at least 2"):
        tfft.plan(7, codelet_limit=1)
    # a limit of 1024 derived and compiled a 1009-point dense codelet for an hour; the bound is refused at once
    with pytest.raises(ValueError, match=f"codelet_limit must be at most {MAX_CODELET_LIMIT}, got 1024"):
        tfft.plan(1009, codelet_limit=1024)
    with pytest.raises(ValueError, match=f"codelet_limit must be at most {MAX_CODELET_LIMIT}"):
        Variant(MAX_CODELET_LIMIT + 1, 8, 4, 4, 1, 1, 0)
    assert Variant(MAX_CODELET_LIMIT, 8, 4, 4, 1, 1, 0).codelet_limit == MAX_CODELET_LIMIT
    with pytest.raises(ValueError, match="radix_limit must be at most codelet_limit=4"):
        tfft.plan(7, codelet_limit=4, radix_limit=8)


def test_variant_takes_numpy_flags_as_bools():
    # a numpy bool was refused ('Variant: kernel_per_pass must be a bool, got bool True'); it is stored as a bool
    variant = Variant(16, 8, 4, 4, 1, 1, 0, kernel_per_pass=np.True_, stage_input=np.bool_(False))
    assert variant.kernel_per_pass is True and variant.stage_input is False
    assert variant == Variant(16, 8, 4, 4, 1, 1, 0, kernel_per_pass=True)


@pytest.mark.parametrize("entry", ["plan", "te_fft"])
def test_constant_tables_beyond_32_bit_indices_are_refused_naming_n(monkeypatch, entry):
    # a Bluestein size's constant tables hold about 5n complex values (chirp, kernel, the twiddles of m >= 2n - 1
    # points): from n ≈ 2.1e8 on they reach beyond the operator's int32 indices while its input, output and scratch
    # do not, and TVM stopped the build with "Literal value ... exceeds range of int32". Here the limit is lowered
    # instead of building 20 GB of tables: n = 83 has 166 input floats, 336 scratch floats and 1286 table floats
    from tvm import te

    from tvm_tailsplit.fft import planner
    from tvm_tailsplit.fft import spec as spec_module

    monkeypatch.setattr(spec_module, "MAX_BUFFER_FLOATS", 1000)
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE", "0")  # (a plan of the disk cache is not checked again)
    planner._cached_plan.cache_clear()  # nor one an earlier test of this process built under the real limit
    build = {"plan": lambda: tfft.plan(83),
             "te_fft": lambda: tfft.te_fft(te.placeholder((1, 83, 2), "float32", name="X"))}[entry]
    with pytest.raises(ValueError, match=r"n=83: the operator's constant tables would hold 1286 values; .*32-bit"):
        build()


def test_a_layout_beyond_32_bit_indices_says_whether_parts_would_fit():
    # one transform beyond the operator's int32 indices was told to "transform the batch in parts"
    with pytest.raises(ValueError, match=r"one transform of 2147483659 elements at stride 1 already reaches beyond "
                                         r"it: this size and stride cannot be built"):
        tfft.plan(2**31 + 11)
    # a batch beyond them is told how many transforms fit: 1048575 of 2048 floats (the limit is 2^31 - 1)
    with pytest.raises(ValueError, match=r"transform the batch in parts of at most 1048575$"):
        tfft.plan(1024, 2**21)
