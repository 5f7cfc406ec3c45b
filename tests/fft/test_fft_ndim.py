"""n-D FFTs (plan_nd): graphs of 1-D plans against numpy.fft.fftn / rfftn / irfftn, memory derived before running."""

import math

import numpy as np
import pytest

from tvm_tailsplit.fft import plan
from tvm_tailsplit.fft.ndim import plan_nd
from tvm_tailsplit.fft.tuning import PARALLEL_TASKS
from tvm_tailsplit.testing import guarded_array

from .fft_reference import random_complex, random_real, relative_error, tolerance

C2C_CASES = [
    ((16,), (0,)),
    ((8, 12), (0, 1)),
    ((8, 12), (1, 0)),
    ((7, 11), (0,)),
    ((3, 5, 8), (1,)),
    ((4, 6, 8), (2, 0, 1)),
    ((5, 7, 3), (2, 0)),
    ((2, 3, 5, 4), (3, 1)),
    ((2, 3, 4, 5), (0, 1, 2, 3)),
    ((13, 1, 6), (0, 1)),
]


def _guarded_output(plan_, dtype):
    guarded = guarded_array(plan_.output_shape, dtype)
    return guarded, guarded.array


@pytest.mark.parametrize("shape,axes", C2C_CASES, ids=str)
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_c2c_matches_numpy(shape, axes, direction):
    p = plan_nd(shape, axes, "c2c", direction)
    x = random_complex(shape, "complex64", seed=len(shape))
    guarded, out = _guarded_output(p, "complex64")
    result = p(x, out=out)
    guarded.check_canaries("out")
    numpy_fn = np.fft.fftn if direction == "forward" else np.fft.ifftn
    reference = numpy_fn(x.astype(np.complex128), axes=axes)
    assert result is out and result.shape == reference.shape
    assert relative_error(result, reference) <= tolerance(math.prod(shape[a] for a in axes), "complex64")


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_norms_and_dtypes(norm, dtype):
    shape, axes = (6, 5, 4), (0, 2)
    x = random_complex(shape, dtype, seed=3)
    n = math.prod(shape[a] for a in axes)
    forward = plan_nd(shape, axes, "c2c", "forward", norm, dtype)(x)
    assert relative_error(forward, np.fft.fftn(x.astype(np.complex128), axes=axes, norm=norm)) <= tolerance(n, dtype)
    backward = plan_nd(shape, axes, "c2c", "backward", norm, dtype)(x)
    assert relative_error(backward, np.fft.ifftn(x.astype(np.complex128), axes=axes, norm=norm)) <= \
        tolerance(n, dtype)


@pytest.mark.parametrize("shape,axes", [((10,), (0,)), ((4, 6, 10), (0, 2)), ((4, 6, 10), (2, 0)),
                                        ((5, 9, 7), (1, 0)), ((3, 8, 2, 6), (3, 1, 2)), ((6, 7), (0, 1))], ids=str)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_r2c_matches_rfftn(shape, axes, dtype):
    real = "float32" if dtype == "complex64" else "float64"
    x = random_real(shape, real, seed=1)
    p = plan_nd(shape, axes, "r2c", dtype=dtype)
    guarded, out = _guarded_output(p, dtype)
    result = p(x, out=out)
    guarded.check_canaries("out")
    reference = np.fft.rfftn(x.astype(np.float64), axes=axes)
    assert p.output_shape == reference.shape and result.dtype == np.dtype(dtype)
    assert relative_error(result, reference) <= tolerance(math.prod(shape[a] for a in axes), dtype)


@pytest.mark.parametrize("shape,axes,last_size", [((4, 6, 6), (1, 2), None), ((4, 6, 6), (2, 1), 11),
                                                  ((5, 3, 4), (0,), 9), ((3, 4, 5, 2), (3, 0, 2), None)], ids=str)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_c2r_matches_irfftn(shape, axes, last_size, norm):
    x = random_complex(shape, "complex128", seed=2)
    p = plan_nd(shape, axes, "c2r", norm=norm, dtype="complex128", last_size=last_size)
    sizes = [shape[a] for a in axes[:-1]] + [p.nodes[-1].n]
    reference = np.fft.irfftn(x, s=sizes, axes=axes, norm=norm)
    guarded, out = _guarded_output(p, "float64")
    result = p(x, out=out)
    guarded.check_canaries("out")
    assert p.output_shape == reference.shape and result.dtype == np.float64
    assert relative_error(result, reference) <= tolerance(math.prod(sizes), "complex128")


def test_input_is_not_modified_and_in_place_c2c():
    x = random_complex((6, 10, 4), "complex64", seed=5)
    copy = x.copy()
    p = plan_nd(x.shape, (1, 0, 2), "c2c")
    reference = p(x)
    assert np.array_equal(x, copy)
    assert p(x, out=x) is x and np.array_equal(x, reference)


def _tasks(one_d_plan) -> int:
    """The schedule's rule for the parallel tasks of a lane-group loop (schedule.schedule_llvm)."""
    groups = one_d_plan.batch // one_d_plan.lanes
    return max(d for d in range(1, min(groups, PARALLEL_TASKS) + 1) if groups % d == 0) if groups > 1 else 1


@pytest.mark.parametrize("shape,axes,kind,intermediates", [
    # every intermediate result is live while the next node writes its own: two storages from three nodes on
    ((4, 5, 6), (0, 1, 2), "c2c", [4 * 5 * 6 * 8, 4 * 5 * 6 * 8]),
    # four nodes: the third result reuses the first one's storage
    ((3, 4, 5, 6), (0, 1, 2, 3), "c2c", [3 * 4 * 5 * 6 * 8, 3 * 4 * 5 * 6 * 8]),
    ((64, 100), (0, 1), "c2c", [64 * 100 * 8]),
    ((64, 100), (0,), "c2c", []),
    ((12, 40), (0, 1), "r2c", [12 * 21 * 8]),
])
def test_workspace_is_the_planned_storage_plus_the_largest_scratch(shape, axes, kind, intermediates):
    p = plan_nd(shape, axes, kind)
    assert sorted(p.storage_bytes) == sorted(intermediates)
    scratch = max(node.plan.workspace_bytes * _tasks(node.plan) for node in p.nodes)
    assert p.workspace_bytes == sum(intermediates) + scratch
    assert f"workspace {p.workspace_bytes} bytes" in p.describe()


def test_describe_names_nodes_plans_and_dependences():
    p = plan_nd((8, 9, 10), (1, 2), "c2c")
    text = p.describe()
    assert "node 0: c2c n=9 along axis 1, view (A, N, B) = (8, 9, 10)" in text
    assert "node 1: c2c n=10 along axis 2" in text and "reads node 0" in text
    assert "1-D plan: breakdown" in text
    assert p.nodes[0].plan is plan(9, 80, "c2c")


def test_plans_are_cached_on_validated_arguments():
    first = plan_nd((4, 6), (1, 0), "c2c")
    assert plan_nd([np.int64(4), 6], [1, np.int32(0)], "c2c", "forward", "backward", np.complex64) is first


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(shape=(4, 0), axes=(0,), kind="c2c"), ValueError, r"shape\[1\]"),
    (dict(shape="44", axes=(0,), kind="c2c"), TypeError, "shape"),
    (dict(shape=(4, 4), axes=(2,), kind="c2c"), ValueError, "axes"),
    (dict(shape=(4, 4), axes=(1, 1), kind="c2c"), ValueError, "distinct"),
    (dict(shape=(4, 4), axes=(), kind="c2c"), ValueError, "axes"),
    (dict(shape=(4, 4), axes=(-1,), kind="c2c"), ValueError, r"axes\[0\]"),
    (dict(shape=(4, 4), axes=(0.5,), kind="c2c"), TypeError, r"axes\[0\]"),
    (dict(shape=(4, 4), axes=(0,), kind="dct"), ValueError, "kind"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", norm="none"), ValueError, "norm"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", dtype="float16"), ValueError, "dtype"),
    (dict(shape=(4, 4), axes=(0,), kind="r2c", direction="backward"), ValueError, "direction"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", last_size=6), ValueError, "last_size"),
    (dict(shape=(4, 4), axes=(0,), kind="c2r", last_size=9), ValueError, "last_size"),
    (dict(shape=(4, 1), axes=(1,), kind="c2r"), ValueError, "last_size"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", target="opencl"), ValueError, "target"),
])
def test_bad_arguments_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        plan_nd(**kwargs)


def test_bad_call_arguments():
    p = plan_nd((4, 6), (0, 1), "c2c")
    with pytest.raises(ValueError, match="x must be complex64"):
        p(np.zeros((4, 6), np.complex128))
    with pytest.raises(ValueError, match="x has shape"):
        p(np.zeros((6, 4), np.complex64))
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        p(np.zeros((6, 4), np.complex64).T)
    with pytest.raises(TypeError, match="x must be a numpy array"):
        p([[0j] * 6] * 4)
    with pytest.raises(ValueError, match="out has shape"):
        p(np.zeros((4, 6), np.complex64), out=np.zeros((4, 7), np.complex64))
    x = np.zeros((8, 6), np.complex64)
    with pytest.raises(ValueError, match="out overlaps x"):
        p(x[:4], out=x[2:6])
    readonly = np.zeros((4, 6), np.complex64)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writable"):
        p(np.zeros((4, 6), np.complex64), out=readonly)
    assert np.array_equal(p(readonly), np.zeros((4, 6), np.complex64))  # a read-only input is fine
