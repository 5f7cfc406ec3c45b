"""n-D FFTs (plan_nd): graphs of 1-D plans against numpy.fft.fftn / rfftn / irfftn, memory derived before running."""

import math
import pickle
import threading

import numpy as np
import pytest
import tvm_ffi

from tvm_tailsplit.cuda import compile_cuda_source
from tvm_tailsplit.fft import ndim, plan
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
    # c2c and r2c: the first node writes out, the others transform it in place: nothing to plan
    ((4, 5, 6), (0, 1, 2), "c2c", []),
    ((3, 4, 5, 6), (0, 1, 2, 3), "c2c", []),
    ((64, 100), (0,), "c2c", []),
    ((12, 40), (0, 1), "r2c", []),
    # c2r: the complex nodes work on one intermediate (the first writes it, the second works in place)
    ((6, 9, 5), (0, 1, 2), "c2r", [6 * 9 * 5 * 8]),
    ((64, 33), (0, 1), "c2r", [64 * 33 * 8]),
    ((8, 10), (1,), "c2r", []),
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
    assert "node 1: c2c n=10 along axis 2" in text and "reads node 0, writes in place" in text
    assert "reads the input x, writes out" in text
    assert "1-D plan: breakdown" in text
    # B = 10: lane groups of 2 transforms never span two rows of 10
    assert p.nodes[0].plan is plan(9, 80, "c2c", lanes=2)
    assert p.nodes[1].plan is plan(10, 72, "c2c")  # the last axis: the 1-D plan's own lanes


def test_plan_lanes_argument():
    assert plan(16, 32, lanes=8).lanes == 8
    assert plan(16, 4, lanes=8).lanes == 4  # at most the batch
    with pytest.raises(ValueError, match="lanes"):
        plan(16, 4, lanes=0)


def test_plans_are_cached_on_validated_arguments():
    first = plan_nd((4, 6), (1, 0), "c2c")
    assert plan_nd([np.int64(4), 6], [1, np.int32(0)], "c2c", "forward", "backward", np.complex64) is first
    assert plan_nd((4, 6), (-1, -2), "c2c") is first  # negative axes count from the end, as numpy's
    # shape and axes as numpy arrays, as numpy takes them (refused: "shape must be a sequence of integers")
    assert plan_nd(np.array([4, 6]), np.array([1, 0]), "c2c") is first
    for scalar in (np.array(4), np.array([[4, 6]])):
        with pytest.raises(TypeError, match="shape must be a sequence of integers"):
            plan_nd(scalar, (0,), "c2c")


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(shape=(4, 0), axes=(0,), kind="c2c"), ValueError, r"shape\[1\]"),
    (dict(shape="44", axes=(0,), kind="c2c"), TypeError, "shape"),
    (dict(shape=(4, 4), axes=(2,), kind="c2c"), ValueError, "axes"),
    (dict(shape=(4, 4), axes=(1, 1), kind="c2c"), ValueError, "distinct"),
    (dict(shape=(4, 4), axes=(), kind="c2c"), ValueError, "axes"),
    (dict(shape=(4, 4), axes=(-3,), kind="c2c"), ValueError, r"axes \(-3,\) must lie in \[-2, 2\)"),
    (dict(shape=(4, 4), axes=(1, -1), kind="c2c"), ValueError, "distinct"),
    (dict(shape=(4, 4), axes=(0.5,), kind="c2c"), TypeError, r"axes\[0\]"),
    (dict(shape=(4, 4), axes=(0,), kind="dct"), ValueError, "kind"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", norm="none"), ValueError, "norm"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", dtype="float16"), ValueError, "dtype"),
    (dict(shape=(4, 4), axes=(0,), kind="r2c", direction="backward"), ValueError, "direction"),
    (dict(shape=(4, 4), axes=(0,), kind="c2c", last_size=6), ValueError, "last_size"),
    (dict(shape=(4, 4), axes=(0,), kind="c2r", last_size=9), ValueError, "last_size"),
    # the default 2·(m - 1) of one input point is none: said so ('last_size must be at least 1, got 0' blamed an
    # argument the caller never gave)
    (dict(shape=(4, 1), axes=(1,), kind="c2r"), ValueError,
     r"invalid number of data points \(0\): last_size defaults to 2·\(m - 1\) for the m = 1 complex points along "
     r"axis 1; .* \(give last_size\)"),
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


CUDA_GRAPHS = [
    dict(shape=(16, 64, 8), axes=(2, 0, 1), kind="c2c"),
    dict(shape=(12, 40), axes=(0, 1), kind="r2c"),
    dict(shape=(6, 9, 5), axes=(0, 2), kind="c2r", dtype="complex128", last_size=8),
]


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("params", CUDA_GRAPHS, ids=str)
def test_cuda_graph_compiles_with_nvcc(params, arch):
    p = plan_nd(target={"kind": "cuda", "arch": arch}, **params)
    source = p.cuda_source()
    kernels = [node.name for node in p.nodes]
    assert all(f"{name}_kernel" in source for name in kernels)
    usages = compile_cuda_source(source, arch)
    assert {usage.kernel for usage in usages} >= {f"{name}_kernel" for name in kernels}
    assert all(usage.spill_store_bytes == 0 for usage in usages)


@pytest.mark.parametrize("params", [*CUDA_GRAPHS, dict(shape=(4096, 64), axes=(0, 1), kind="c2c")], ids=str)
def test_cuda_graph_kernels_are_compiled_as_their_1d_plans(params):
    """Each node's kernel keeps its 1-D plan's barriers, one between passes: the graph was compiled with TVM's
    default pipeline, whose ThreadSync added barriers inside the passes (11 instead of 7 for the first graph; and
    its StorageRewrite merged scratch buffers of one pass, the race the 1-D plans avoid), and failed outright for
    4096 x 64 ("Cannot insert syncs inside condition")."""
    p = plan_nd(target={"kind": "cuda", "arch": "sm_90"}, **params)
    barriers = sum(node.plan.cuda_source("sm_90").count("__syncthreads") for node in p.nodes)
    assert p.cuda_source().count("__syncthreads") == barriers


@pytest.mark.nvcc
def test_cuda_graph_kernels_use_their_1d_plans_shared_memory():
    """StorageRewrite had halved the graph's shared scratch (merged buffers of one pass)."""
    p = plan_nd(target={"kind": "cuda", "arch": "sm_90"}, **CUDA_GRAPHS[0])
    graph = {usage.kernel: usage.shared_memory_bytes for usage in compile_cuda_source(p.cuda_source(), "sm_90")}
    for node in p.nodes:
        (alone,) = compile_cuda_source(node.plan.cuda_source("sm_90"), "sm_90")
        assert graph[f"{node.name}_kernel"] == alone.shared_memory_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("params", CUDA_GRAPHS, ids=str)
def test_cuda_graph_runs_against_numpy(params):
    p = plan_nd(target="cuda", **params)
    shape, axes, kind, dtype = params["shape"], params["axes"], params["kind"], params.get("dtype", "complex64")
    if kind == "r2c":
        x = random_real(shape, "float32" if dtype == "complex64" else "float64")
        reference = np.fft.rfftn(x.astype(np.float64), axes=axes)
    elif kind == "c2r":
        x = random_complex(shape, dtype)
        reference = np.fft.irfftn(x.astype(np.complex128), s=[shape[a] for a in axes[:-1]] + [p.nodes[-1].n],
                                  axes=axes)
    else:
        x = random_complex(shape, dtype)
        reference = np.fft.fftn(x.astype(np.complex128), axes=axes)
    assert relative_error(p(x), reference) <= tolerance(math.prod(shape), dtype)

def test_graphs_are_built_by_several_threads_at_once():
    # Relax's BlockBuilder keeps its scopes on one stack shared by all threads: two graphs built at once raised
    # AssertionError ("BlockBuilder.current() must be self"), e.g. fft.rfftn called from a thread pool
    graph = plan_nd((4, 6, 8), (0, 1, 2), "c2c")
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def build() -> None:
        start.wait()
        try:
            for _ in range(10):
                module = ndim._build_module(graph.nodes, graph._input_floats, graph._output_floats, graph.real_dtype)
                assert tvm_ffi.structural_equal(module, graph.relax_module)
        except BaseException as error:  # reported below, from the main thread
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_plans_are_called_by_several_threads_at_once():
    # a plan's Relax VM (its frames and program counter) served every thread: calls at once corrupted them
    # (InternalError "Check failed: reg < frame->register_file.size()"), e.g. fft.fftn and fft.irfftn of one shape
    # called from a thread pool
    # (the plans of test_graphs_are_built_by_several_threads_at_once and test_plans_pickle_as_their_arguments)
    graphs = [plan_nd((4, 6, 8), (0, 1, 2), "c2c"),
              plan_nd((4, 6, 5), (0, 2), "c2r", norm="ortho", dtype="complex128", last_size=9)]
    inputs = [(random_complex((4, 6, 8), "complex64", seed=seed), random_complex((4, 6, 5), "complex128", seed=seed))
              for seed in range(4)]
    references = [(np.fft.fftn(x.astype(np.complex128)), np.fft.irfftn(y, s=(4, 9), axes=(0, 2), norm="ortho"))
                  for x, y in inputs]
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def call(index: int) -> None:
        start.wait()
        try:
            for _ in range(200):
                for graph, x, reference in zip(graphs, inputs[index], references[index], strict=True):
                    assert relative_error(graph(x), reference) <= tolerance(x.size, graph.dtype)
        except BaseException as error:  # reported below, from the main thread
            errors.append(error)

    threads = [threading.Thread(target=call, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_plans_pickle_as_their_arguments():
    # it raised TVM's InternalError 'llvm is not binary serializable' (a plan holds its compiled module)
    for graph in (plan_nd((4, 6, 5), (0, 2), "c2r", norm="ortho", dtype="complex128", last_size=9),
                  plan_nd((4, 6, 8), (2, 1), "r2c")):
        copy = pickle.loads(pickle.dumps(graph))
        assert copy is graph                                # the same arguments: the process's cached plan
        assert repr(copy) == repr(graph) and copy.output_shape == graph.output_shape


def test_calling_a_cuda_nd_plan_without_a_gpu_says_so(monkeypatch):
    from tvm_tailsplit.fft import planner

    monkeypatch.setattr(planner, "gpu_available", lambda: False)
    p = plan_nd((4, 8), (0, 1), "c2c", target={"kind": "cuda", "arch": "sm_90"})
    with pytest.raises(RuntimeError, match="runs on a CUDA GPU"):
        p(np.zeros((4, 8), np.complex64))
