"""The symbolic analysis of long and symbolic pipeline loops (`warpspec.symbolic`).

The rules derived from bounded windows must equal the unrolled analysis, hold for symbolic trip counts in the
llvm (run on threads) and CUDA (nvcc) code, cost the same whatever the trip count, and fail with errors naming
the loop when they cannot be derived or proved.
"""

import os

os.environ.setdefault("TVM_NUM_THREADS", str(max(2, os.cpu_count() or 2)))

import logging  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, cuda_target  # noqa: E402
from tvm_tailsplit.testing import guarded_array, run_guarded, run_with_guarded_output  # noqa: E402
from tvm_tailsplit.warpspec import (  # noqa: E402
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    check,
    examples,
    load_libatomic,
    require_concurrent_threads,
)
from tvm_tailsplit.warpspec.graphs import DATA, RESOURCE  # noqa: E402
from tvm_tailsplit.warpspec.symbolic import SymbolicAnalysisError  # noqa: E402

LARGE = {
    "streaming_2_stages": lambda: examples.streaming_kernel(tiles=200, tile=4, stages=2),
    "streaming_3_stages": lambda: examples.streaming_kernel(tiles=200, tile=4, stages=3),
    "gemm_2_stages": lambda: examples.gemm_kernel(k=16 * 100, block_k=16, stages=2),
    "gemm_3_stages": lambda: examples.gemm_kernel(k=16 * 100, block_k=16, stages=3),
    "gemm_two_compute_roles": lambda: examples.gemm_kernel(k=16 * 100, block_k=16, stages=3, compute_roles=2),
}


def _fields(plan):
    return plan.channel_count, [
        (g.kind, g.src_task, g.dst_task, g.src_role, g.dst_role, g.distance, g.first, g.count, g.stages, g.base,
         g.phase_offset) for g in plan.groups]


@pytest.mark.parametrize("name", sorted(LARGE))
def test_symbolic_rules_equal_the_unrolled_analysis(name):
    func = LARGE[name]()
    unrolled = analyze(func, unroll=True)
    symbolic = analyze(func, unroll=False)
    print(symbolic.symbolic.describe())
    assert unrolled.symbolic is None and unrolled.reduced is not None
    assert symbolic.symbolic is not None and symbolic.reduced is None
    assert _fields(symbolic.plan) == _fields(unrolled.plan)
    assert symbolic.protocol.describe() == unrolled.protocol.describe()
    # The default for a kernel of this size is the symbolic analysis.
    assert analyze(func).symbolic is not None


def test_symbolic_trip_count_rules_are_affine_in_the_trip_count():
    analysis = analyze(examples.symbolic_streaming_kernel(tile=16, stages=3))
    print(analysis.describe())
    (loop,) = analysis.symbolic.loops
    assert (loop.name, loop.period, loop.min_trip_count) == ("t", 3, 0)
    groups = {(g.kind, g.src_task, g.dst_task): g for g in analysis.plan.groups}
    full, empty = groups[(DATA, "load", "compute")], groups[(RESOURCE, "compute", "load")]
    assert (full.distance, full.first, full.stages, str(full.count)) == (0, 0, 3, "n // 16")
    assert (empty.distance, empty.first, empty.stages, str(empty.count)) == (3, 0, 3, "n // 16 - 3")
    assert analysis.plan.channel_count == 6
    assert "count N_t - 3" in analysis.symbolic.describe()


def test_analysis_time_does_not_grow_with_the_trip_count():
    timings = {}
    for tiles in (1024, 1 << 20):
        func = examples.streaming_kernel(tiles=tiles, tile=4, stages=3)
        start = time.perf_counter()
        analysis = analyze(func)
        timings[tiles] = time.perf_counter() - start
        counts = sorted(g.count for g in analysis.plan.groups)
        assert counts == [tiles - 3, tiles]
    start = time.perf_counter()
    analyze(examples.symbolic_k_gemm_kernel(stages=3))
    timings["symbolic K"] = time.perf_counter() - start
    print("analysis seconds per trip count:", {k: round(v, 3) for k, v in timings.items()})
    # 1024 times more iterations, same work: only the windows are unrolled.
    assert timings[1 << 20] < 3 * timings[1024] + 0.5


@pytest.fixture
def threads():
    load_libatomic()
    require_concurrent_threads(2)


@pytest.mark.parametrize("stages", [2, 3])
def test_symbolic_streaming_kernel_runs_on_threads_for_any_length(threads, stages):
    func = examples.symbolic_streaming_kernel(tile=16, stages=stages)
    fast = tvm.compile(WarpSpecialize("llvm", debug_check=True)(tvm.IRModule({"main": func})), target="llvm")
    delayed = tvm.compile(WarpSpecialize("llvm", delay_us=20)(tvm.IRModule({"main": func})), target="llvm")
    rng = np.random.default_rng(stages)
    # Fewer iterations than stages (prologue and epilogue meet), a few, and many.
    for tiles in (1, 2, 3, 5, 16, 2000):
        x = guarded_array((tiles * 16,), "float32").array
        x[:] = rng.standard_normal(tiles * 16)
        for executable in (fast, delayed) if tiles < 100 else (fast,):
            np.testing.assert_allclose(run_with_guarded_output(executable, [x], (tiles * 16,)), 2 * x + 1, rtol=1e-6)


def test_symbolic_k_gemm_runs_on_threads(threads):
    func = examples.symbolic_k_gemm_kernel(m=64, n=32, block_m=32, block_n=32, block_k=16, stages=3)
    executable = tvm.compile(WarpSpecialize("llvm", debug_check=True)(tvm.IRModule({"main": func})), target="llvm")
    rng = np.random.default_rng(5)
    for k in (16, 32, 48, 64, 16 * 37):
        a = guarded_array((64, k), "float16").array
        b = guarded_array((k, 32), "float16").array
        a[:] = rng.standard_normal((64, k))
        b[:] = rng.standard_normal((k, 32))
        reference = a.astype("float32") @ b.astype("float32")
        result = run_with_guarded_output(executable, [a, b], (64, 32))
        np.testing.assert_allclose(result, reference, rtol=1e-4, atol=1e-3)


SYMBOLIC_CUDA = {
    "symbolic_streaming": (lambda: examples.symbolic_streaming_kernel(tile=256, stages=3), {0: 32, 1: 128}),
    "symbolic_k_gemm": (lambda: examples.symbolic_k_gemm_kernel(256, 256, 64, 64, 32, stages=3), {0: 32, 1: 128}),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC_CUDA))
def test_symbolic_trip_count_in_cuda_source(name):
    build, threads_per_role = SYMBOLIC_CUDA[name]
    mod = WarpSpecialize("cuda", threads_per_role=threads_per_role, debug_check=True)(tvm.IRModule({"main": build()}))
    source = cuda_source(mod, "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    bound = "(n >> 8)" if name == "symbolic_streaming" else "(K >> 5)"
    assert bound in kernel  # the pipeline loops run to the symbolic trip count
    assert "mbarrier_init" in kernel and "test_wait_parity" in kernel


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(SYMBOLIC_CUDA))
def test_nvcc_compiles_symbolic_trip_count_kernels(name, arch):
    build, threads_per_role = SYMBOLIC_CUDA[name]
    mod = WarpSpecialize("cuda", threads_per_role=threads_per_role)(tvm.IRModule({"main": build()}))
    usages = compile_cuda_source(cuda_source(mod, arch, tir_pipeline=WARP_SPECIALIZED_PIPELINE), arch)
    for usage in usages:
        print(name, usage)
    assert len(usages) == 1 and usages[0].spill_store_bytes == 0


@T.prim_func(s_tir=True)
def _reduce_then_use(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n, 4), "float32")
    Y = T.match_buffer(y, (1,), "float32")
    acc = T.sblock_alloc_buffer((2,), "float32", scope="shared")
    for t in range(n):
        with T.sblock("partial"):
            T.reads(X[t, 0:4])
            T.writes(acc[t % 2])
            T.sblock_attr({"warp_role": 0})
            acc[t % 2] = X[t, 0] + X[t, 3]
    with T.sblock("total"):
        T.reads(acc[0:2])
        T.writes(Y[0])
        T.sblock_attr({"warp_role": 1})
        Y[0] = acc[0] + acc[1]


@T.prim_func(s_tir=True)
def _init_loop_store(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n, 4), "float32")
    Y = T.match_buffer(y, (4,), "float32")
    acc = T.sblock_alloc_buffer((4,), "float32", scope="shared")
    with T.sblock("init"):
        T.reads()
        T.writes(acc[0:4])
        T.sblock_attr({"warp_role": 1})
        for i in range(4):
            acc[i] = T.float32(0)
    for t in range(n):
        with T.sblock("accumulate"):
            T.reads(X[t, 0:4], acc[0:4])
            T.writes(acc[0:4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                acc[i] = acc[i] + X[t, i]
    with T.sblock("store"):
        T.reads(acc[0:4])
        T.writes(Y[0:4])
        T.sblock_attr({"warp_role": 0})
        for i in range(4):
            Y[i] = acc[i] * T.float32(2)


def test_rule_crossing_the_loop_end_falls_back_to_the_sequential_pipeline_below_its_minimum(threads):
    """``total`` (``store``) waits for the last iteration of the loop: a rule valid from one iteration on. At
    ``n = 0`` the kernel raised a ``RuntimeError``, though the program is correct there ("init, loop, store": the
    store reads the init). Below the minimum the input's pipeline now runs as it is."""
    analysis = analyze(_reduce_then_use)
    print(analysis.describe())
    # total waits for the last partial: distance 1 - n, which needs n >= 1.
    assert analysis.symbolic.loops[0].min_trip_count == 1
    assert analysis.plan.min_trip_counts == (("t", 1),)
    # the plan's text says what the kernels do below the minimum (it said "asserted at run time")
    assert ("valid for at least 1 iterations of loop t (below that the llvm and CUDA kernels run the pipeline "
            "sequentially, the Hopper kernel fails its assert)") in analysis.plan.describe()
    assert check(_reduce_then_use).ok
    executable = tvm.compile(WarpSpecialize("llvm", debug_check=True)(tvm.IRModule({"main": _reduce_then_use})),
                             target="llvm")
    for n in (2, 3, 9):
        x = np.arange(4 * n, dtype="float32").reshape(n, 4)
        out = tvm.runtime.empty((1,), "float32")
        executable["main"](tvm.runtime.tensor(x), out)
        last_two = [x[t, 0] + x[t, 3] for t in (n - 2, n - 1)]
        assert out.numpy()[0] == pytest.approx(sum(last_two))
    assert analyze(_init_loop_store).plan.min_trip_counts == (("t", 1),)
    mod = WarpSpecialize("llvm", debug_check=True, delay_us=5)(tvm.IRModule({"main": _init_loop_store}))
    executable = tvm.compile(mod, target="llvm")
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 5):
        x = rng.standard_normal((n, 4)).astype("float32")
        for _ in range(3):
            y = run_guarded(executable, mod["main"], [x, np.zeros(4, "float32")], {})[-1]
            np.testing.assert_allclose(y, 2 * x.sum(axis=0), rtol=1e-6, atol=1e-6)


def test_below_the_minimum_trip_count_the_cuda_kernel_runs_the_pipeline_on_one_thread():
    mod = WarpSpecialize("cuda", debug_check=True)(tvm.IRModule({"main": _init_loop_store}))
    executable = tvm.compile(mod, target=cuda_target("sm_80"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert "must run at least" not in executable.mod.inspect_source()  # the host module asserts nothing
    source = cuda_source(mod, "sm_80", WARP_SPECIALIZED_PIPELINE)
    assert "if (n < 1) {\n    if (((int)threadIdx.x) == 0) {" in source
    assert "for (int t_r1 = 0; t_r1 < n; ++t_r1)" in source
    print(compile_cuda_source(source, "sm_80"))


@pytest.mark.gpu
def test_init_loop_store_runs_on_the_gpu_at_every_trip_count():
    mod = WarpSpecialize("cuda", debug_check=True)(tvm.IRModule({"main": _init_loop_store}))
    device = tvm.cuda(0)
    arch = "sm_" + device.compute_version.replace(".", "")
    executable = tvm.compile(mod, target=cuda_target(arch), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 33):
        x = rng.standard_normal((n, 4)).astype("float32")
        y = tvm.runtime.empty((4,), "float32", device)
        executable["main"](tvm.runtime.tensor(x, device), y)
        np.testing.assert_allclose(y.numpy(), 2 * x.sum(axis=0), rtol=1e-5, atol=1e-5)


@T.prim_func(s_tir=True)
def _init_loop_store_per_cta(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n, 4), "float32")
    Y = T.match_buffer(y, (4,), "float32")
    acc = T.sblock_alloc_buffer((4,), "float32", scope="shared")
    for b in T.thread_binding(4, thread="blockIdx.x"):  # (CTAs add into Y: run on llvm, where the grid is serial)
        with T.sblock("init"):
            T.reads()
            T.writes(acc[0:4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                acc[i] = T.float32(0)
        for t in range(n - b):
            with T.sblock("accumulate"):
                T.reads(X[t, 0:4], acc[0:4])
                T.writes(acc[0:4])
                T.sblock_attr({"warp_role": 1})
                for i in range(4):
                    acc[i] = acc[i] + X[t, i]
        with T.sblock("store"):
            T.reads(acc[0:4], Y[0:4])
            T.writes(Y[0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                Y[i] = Y[i] + acc[i] * T.float32(2)


def test_a_minimum_trip_count_per_cta_is_tested_per_cta(threads):
    """A trip count of ``blockIdx.x`` (``n - b``: CTAs past ``n`` run no iteration) whose rules hold from one
    iteration on: the analysis refused it, since the minimum was asserted before the grid loops. It is now tested
    inside them: a CTA below it runs the input's pipeline sequentially."""
    assert analyze(_init_loop_store_per_cta).plan.min_trip_counts == (("t", 1),)
    mod = WarpSpecialize("llvm", debug_check=True, delay_us=5)(tvm.IRModule({"main": _init_loop_store_per_cta}))
    executable = tvm.compile(mod, target="llvm")
    rng = np.random.default_rng(7)
    for n in range(0, 7):
        x = rng.standard_normal((n, 4)).astype("float32")
        expected = sum(2 * x[: max(n - b, 0)].sum(axis=0) for b in range(4))
        y = run_guarded(executable, mod["main"], [x, np.zeros(4, "float32")], {})[-1]
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def _rows_per_cta(stages: int) -> tvm.tirx.PrimFunc:
    """CTA b sums its own first b rows `X[b, 0:b]` into `Y[b]`: a trip count per CTA (0 in CTA 0) with the CTA's
    rows of an input and its row of the output (one warp role stores it) indexed by the CTA."""

    @T.prim_func(s_tir=True)
    def kernel(X: T.Buffer((4, 4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
        ring = T.sblock_alloc_buffer((stages, 8), "float32", scope="shared")
        acc = T.sblock_alloc_buffer((8,), "float32", scope="shared")
        for b in T.thread_binding(4, thread="blockIdx.x"):
            with T.sblock("init"):
                T.reads()
                T.writes(acc[0:8])
                T.sblock_attr({"warp_role": 1})
                for i in range(8):
                    acc[i] = T.float32(0)
            for t in range(b):
                with T.sblock("load"):
                    T.reads(X[b, t, 0:8])
                    T.writes(ring[t % stages, 0:8])
                    T.sblock_attr({"warp_role": 0})
                    for i in range(8):
                        ring[t % stages, i] = X[b, t, i]
                with T.sblock("accumulate"):
                    T.reads(ring[t % stages, 0:8], acc[0:8])
                    T.writes(acc[0:8])
                    T.sblock_attr({"warp_role": 1})
                    for i in range(8):
                        acc[i] = acc[i] + ring[t % stages, i]
            with T.sblock("store"):
                T.reads(acc[0:8])
                T.writes(Y[b, 0:8])
                T.sblock_attr({"warp_role": 0})
                for i in range(8):
                    Y[b, i] = acc[i]

    return kernel


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_trip_count_per_cta_with_the_ctas_own_rows_runs_in_every_cta(threads, stages):
    # before: "loop 't': block 'load' indexes X with 'b', a variable of the loop's symbolic trip count b", though
    # X is read-only and Y written by one warp role: neither takes part in a dependence between the roles
    func = _rows_per_cta(stages)
    assert analyze(func).plan.min_trip_counts == (("t", 1),)  # CTA 0 (no row) runs the pipeline sequentially
    mod = WarpSpecialize("llvm", debug_check=True, delay_us=5)(tvm.IRModule({"main": func}))
    executable = tvm.compile(mod, target="llvm")
    rng = np.random.default_rng(stages)
    for _ in range(3):
        x = rng.standard_normal((4, 4, 8)).astype("float32")
        y = run_guarded(executable, mod["main"], [x, np.full((4, 8), 9, "float32")], {})[-1]
        np.testing.assert_allclose(y, np.stack([x[b, :b].sum(axis=0) for b in range(4)]), rtol=1e-5, atol=1e-6)


def test_a_trip_count_per_cta_still_refuses_a_shared_ring_indexed_by_the_cta():
    # (each CTA its own stages of the ring: they move with the grid, but the windows replace the trip count b)
    @T.prim_func(s_tir=True)
    def kernel(X: T.Buffer((4, 4, 8), "float32"), Y: T.Buffer((4, 4, 8), "float32")):
        ring = T.sblock_alloc_buffer((8, 8), "float32", scope="shared")
        for b in T.thread_binding(4, thread="blockIdx.x"):
            for t in range(b):
                with T.sblock("load"):
                    T.reads(X[b, t, 0:8])
                    T.writes(ring[b * 2 + t % 2, 0:8])
                    T.sblock_attr({"warp_role": 0})
                    for i in range(8):
                        ring[b * 2 + t % 2, i] = X[b, t, i]
                with T.sblock("copy"):
                    T.reads(ring[b * 2 + t % 2, 0:8])
                    T.writes(Y[b, t, 0:8])
                    T.sblock_attr({"warp_role": 1})
                    for i in range(8):
                        Y[b, t, i] = ring[b * 2 + t % 2, i]

    with pytest.raises(WarpSpecializeInputError, match="loop 't': block 'load' indexes ring with 'b'"):
        analyze(kernel)


@T.prim_func(s_tir=True)
def _prologue_loop_then_symbolic_loop(x: T.handle, y: T.handle, w: T.handle, z: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n, 4), "float32")
    Y = T.match_buffer(y, (n, 4), "float32")
    W = T.match_buffer(w, (3,), "float32")
    Z = T.match_buffer(z, (3,), "float32")
    ring = T.sblock_alloc_buffer((2, 4), "float32", scope="shared")
    for s in range(3):
        with T.sblock("warm"):
            T.reads(W[s])
            T.writes(ring[s % 2, 0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                ring[s % 2, i] = W[s]
        with T.sblock("warm_use"):
            T.reads(ring[s % 2, 0:4])
            T.writes(Z[s])
            T.sblock_attr({"warp_role": 1})
            Z[s] = ring[s % 2, 3] - T.float32(1)
    for t in range(n):
        with T.sblock("load"):
            T.reads(X[t, 0:4])
            T.writes(ring[t % 2, 0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                ring[t % 2, i] = X[t, i]
        with T.sblock("use"):
            T.reads(ring[t % 2, 0:4])
            T.writes(Y[t, 0:4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                Y[t, i] = ring[t % 2, i] * T.float32(3)


def test_short_prologue_loop_before_a_symbolic_loop(threads):
    analysis = analyze(_prologue_loop_then_symbolic_loop)
    print(analysis.describe())
    # warm_use[2] hands stage 0 to load[0]: a rule from the prologue into the loop, valid from one iteration on.
    rules = {(g.src_task, g.dst_task): g for g in analysis.plan.groups}
    assert rules[("warm_use", "load")].distance == -2 and rules[("use", "load")].distance == 2
    assert analysis.plan.min_trip_counts == (("t", 1),)
    specialize = WarpSpecialize("llvm", debug_check=True, delay_us=10)
    mod = specialize(tvm.IRModule({"main": _prologue_loop_then_symbolic_loop}))
    executable = tvm.compile(mod, target="llvm")
    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 7):
        x = rng.standard_normal((n, 4)).astype("float32")
        w = rng.standard_normal(3).astype("float32")
        for _ in range(3):
            y, z = tvm.runtime.empty((n, 4), "float32"), tvm.runtime.empty((3,), "float32")
            executable["main"](tvm.runtime.tensor(x), y, tvm.runtime.tensor(w), z)
            np.testing.assert_allclose(y.numpy(), 3 * x, rtol=1e-6)
            np.testing.assert_allclose(z.numpy(), w - 1, rtol=1e-6)


@T.prim_func(s_tir=True)
def _indexed_by_the_trip_count(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n * 4 + 1,), "float32")
    Y = T.match_buffer(y, (n * 4,), "float32")
    for t in range(n):
        with T.sblock("copy"):
            T.reads(X[n * 4 - t * 4 - 4:n * 4 - t * 4])
            T.writes(Y[t * 4:t * 4 + 4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                Y[t * 4 + i] = X[n * 4 - t * 4 - 4 + i]


def test_regions_using_the_trip_count_variable_are_rejected_naming_the_loop():
    with pytest.raises(WarpSpecializeInputError, match="loop 't': block 'copy' indexes X with 'n'"):
        analyze(_indexed_by_the_trip_count)


@T.prim_func(s_tir=True)
def _no_ring(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n,), "float32")
    Y = T.match_buffer(y, (n,), "float32")
    staging = T.sblock_alloc_buffer((n,), "float32", scope="shared")
    for t in range(n // 4):
        with T.sblock("load"):
            T.reads(X[t * 4:t * 4 + 4])
            T.writes(staging[t * 4:t * 4 + 4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                staging[t * 4 + i] = X[t * 4 + i]
        with T.sblock("use"):
            T.reads(staging[t * 4:t * 4 + 4])
            T.writes(Y[t * 4:t * 4 + 4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                Y[t * 4 + i] = staging[t * 4 + i]


@T.prim_func(s_tir=True)
def _square_stage(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n * 4,), "float32")
    Y = T.match_buffer(y, (n * 4,), "float32")
    ring = T.sblock_alloc_buffer((3, 4), "float32", scope="shared")
    for t in range(n):
        with T.sblock("load"):
            T.reads(X[t * 4:t * 4 + 4])
            T.writes(ring[t * t % 3, 0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                ring[t * t % 3, i] = X[t * 4 + i]
        with T.sblock("use"):
            T.reads(ring[t * t % 3, 0:4])
            T.writes(Y[t * 4:t * 4 + 4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                Y[t * 4 + i] = ring[t * t % 3, i]


def test_unbounded_run_ahead_is_rejected_naming_the_loop():
    with pytest.raises(WarpSpecializeInputError, match="loop 't'.*stages of its channels grow"):
        analyze(_no_ring)


def test_unprovable_period_is_rejected_naming_the_loop():
    with pytest.raises(WarpSpecializeInputError, match="loop 't': cannot prove that the region of ring"):
        analyze(_square_stage)


def _two_steps_per_stage(stages: int) -> tvm.tirx.PrimFunc:
    """`Y = 3 X` row by row over a symbolic n, through a ring of `stages` stages of two rows each: row `t` in stage
    `t // 2 % stages`, slot `t % 2`."""

    @T.prim_func(s_tir=True)
    def two_steps(x: T.handle, y: T.handle):
        n = T.int32()
        X = T.match_buffer(x, (n, 4), "float32")
        Y = T.match_buffer(y, (n, 4), "float32")
        ring = T.sblock_alloc_buffer((stages, 2, 4), "float32", scope="shared")
        for t in range(n):
            with T.sblock("load"):
                T.reads(X[t, 0:4])
                T.writes(ring[t // 2 % stages, t % 2, 0:4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    ring[t // 2 % stages, t % 2, i] = X[t, i]
            with T.sblock("use"):
                T.reads(ring[t // 2 % stages, t % 2, 0:4])
                T.writes(Y[t, 0:4])
                T.sblock_attr({"warp_role": 1})
                for i in range(4):
                    Y[t, i] = ring[t // 2 % stages, t % 2, i] * T.float32(3)

    return two_steps


def _runs_as_three_x(func: tvm.tirx.PrimFunc) -> None:
    """`func` specialized for llvm (debug check, delays) computes `3 X` at every n from 0 to 10 and at 37; its CUDA
    form compiles (to source) too."""
    mod = tvm.IRModule({"main": func})
    executable = tvm.compile(WarpSpecialize("llvm", debug_check=True, delay_us=5)(mod), target="llvm")
    rng = np.random.default_rng(3)
    for n in (*range(0, 11), 37):
        x = rng.standard_normal((n, 4)).astype("float32")
        y = tvm.runtime.tensor(np.zeros((n, 4), "float32"))
        executable["main"](tvm.runtime.tensor(x), y)
        np.testing.assert_allclose(y.numpy(), 3 * x, rtol=1e-6)
    source = cuda_source(WarpSpecialize("cuda")(mod), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert "float ring_ptr[" in source


def test_a_ring_whose_stage_tvm_cannot_bound_is_kept_whole(threads):
    # Stage t // 2 % 3 over a symbolic n: TVM's CompactBufferAllocation sized the ring by the roles' accesses, which
    # it could not bound over their loops, and left their loop variables in its size: compiling either form failed
    # with 'variable t_r0 has been used before definition' (TVM InternalError)
    _runs_as_three_x(_two_steps_per_stage(3))


def test_a_stage_of_nested_divisions_repeats_with_their_product(threads):
    # Stage t // 2 % 2 repeats every 4 iterations; the period was the lcm of the divisors (2), and the kernel was
    # refused as "cannot prove that the region of ring in block 'load' repeats every 2 iteration(s)"
    func = _two_steps_per_stage(2)
    assert analyze(func).symbolic.loops[0].period == 4
    assert analyze(_two_steps_per_stage(3)).symbolic.loops[0].period == 6
    assert check(func).ok
    _runs_as_three_x(func)


def test_symbolic_trip_counts_cannot_be_unrolled():
    with pytest.raises(WarpSpecializeInputError, match="loop 't' has the symbolic trip count"):
        analyze(examples.symbolic_streaming_kernel(), unroll=True)


def test_long_constant_loop_falls_back_to_unrolling_when_the_rules_cannot_be_derived():
    func = examples.scheduled_scale_kernel(n=32 * 300, tile=32)  # no reused range: stages grow with the loop
    analysis = analyze(func)
    assert analysis.symbolic is None and len(analysis.reduced.instances) == 600
    with pytest.raises(WarpSpecializeInputError, match="loop 'i_0'.*stages of its channels grow"):
        analyze(func, max_instances=100)


def test_symbolic_analysis_has_no_instance_graph_but_check_explores_the_window():
    func = examples.symbolic_streaming_kernel(tile=16, stages=2)
    analysis = analyze(func)
    with pytest.raises(ValueError, match="analyzed symbolically"):
        analysis.to_dot()
    small = analysis.small_protocol()
    window = analysis.symbolic.loops[0].window
    assert len(small.plan.graph.instances) == 2 * window
    report = check(func)
    print(report.describe())
    assert report.ok and report.states > 1


@T.prim_func(s_tir=True)
def _nested_symbolic(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n * 8,), "float32")
    Y = T.match_buffer(y, (n * 8,), "float32")
    for o in range(2):
        for t in range(n):
            with T.sblock("copy"):
                T.reads(X[o * n * 4 + t * 4:o * n * 4 + t * 4 + 4])
                T.writes(Y[o * n * 4 + t * 4:o * n * 4 + t * 4 + 4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    Y[o * n * 4 + t * 4 + i] = X[o * n * 4 + t * 4 + i]


@T.prim_func(s_tir=True)
def _doubly_nested_symbolic(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n * 8,), "float32")
    Y = T.match_buffer(y, (n * 8,), "float32")
    for p in range(2):
        for o in range(1):
            for t in range(n):
                with T.sblock("copy"):
                    T.reads(X[p * n * 4 + t * 4:p * n * 4 + t * 4 + 4])
                    T.writes(Y[p * n * 4 + t * 4:p * n * 4 + t * 4 + 4])
                    T.sblock_attr({"warp_role": 0})
                    for i in range(4):
                        Y[p * n * 4 + t * 4 + i] = X[p * n * 4 + t * 4 + i]


@T.prim_func(s_tir=True)
def _two_symbolic_loops_in_a_loop(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n * 8,), "float32")
    Y = T.match_buffer(y, (n * 8,), "float32")
    for o in range(2):
        for t in range(n):
            with T.sblock("copy"):
                T.reads(X[o * n * 4 + t * 4:o * n * 4 + t * 4 + 4])
                T.writes(Y[o * n * 4 + t * 4:o * n * 4 + t * 4 + 4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    Y[o * n * 4 + t * 4 + i] = X[o * n * 4 + t * 4 + i]
        for u in range(n):
            with T.sblock("scale"):
                T.reads(Y[o * n * 4 + u * 4:o * n * 4 + u * 4 + 4])
                T.writes(X[o * n * 4 + u * 4:o * n * 4 + u * 4 + 4])
                T.sblock_attr({"warp_role": 1})
                for i in range(4):
                    X[o * n * 4 + u * 4 + i] = Y[o * n * 4 + u * 4 + i] * T.float32(2)


def test_symbolic_loops_in_a_loop_that_is_no_persistent_nest_are_rejected_naming_the_loop():
    with pytest.raises(SymbolicAnalysisError, match="loop 't' inside loop 'o' has the symbolic trip count n; a "
                                                    "symbolic loop in a loop is analyzed only as a persistent nest"):
        analyze(_two_symbolic_loops_in_a_loop)


def test_a_symbolic_loop_in_a_loop_is_a_persistent_nest_deeper_ones_are_rejected():
    analysis = analyze(_nested_symbolic)
    assert analysis.symbolic.nest is not None and "persistent nest o x t" in analysis.describe()
    with pytest.raises(WarpSpecializeInputError, match="loop 't' inside loop 'o' has the symbolic extent"):
        analyze(_doubly_nested_symbolic)


@T.prim_func(s_tir=True)
def _triangular(X: T.Buffer((4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
    ring = T.sblock_alloc_buffer((8,), "float32", scope="shared")
    acc = T.sblock_alloc_buffer((8,), "float32", scope="shared")
    for o in range(4):
        with T.sblock("init"):
            T.reads()
            T.writes(acc[0:8])
            T.sblock_attr({"warp_role": 1})
            for i in range(8):
                acc[i] = T.float32(0)
        for t in range(o):
            with T.sblock("load"):
                T.reads(X[t, 0:8])
                T.writes(ring[0:8])
                T.sblock_attr({"warp_role": 0})
                for i in range(8):
                    ring[i] = X[t, i]
            with T.sblock("accumulate"):
                T.reads(ring[0:8], acc[0:8])
                T.writes(acc[0:8])
                T.sblock_attr({"warp_role": 1})
                for i in range(8):
                    acc[i] = acc[i] + ring[i]
        with T.sblock("store"):
            T.reads(acc[0:8])
            T.writes(Y[o, 0:8])
            T.sblock_attr({"warp_role": 1})
            for i in range(8):
                Y[o, i] = acc[i]


@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_a_trip_count_of_an_enclosing_pipeline_loop_variable_is_rejected_naming_both_loops(target):
    # before, the triangular nest was taken as a persistent nest of o * 4 running steps: the generated kernel used
    # `o` outside its loop and TVM failed with an internal error ("variables (o,) are used, but are not passed in")
    match = "the extent o of loop 't' uses the variable of the pipeline loop 'o' around it"
    with pytest.raises(WarpSpecializeInputError, match=match):
        analyze(_triangular)
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=match):
        WarpSpecialize(target)(tvm.IRModule({"main": _triangular}))


@T.prim_func(s_tir=True)
def _ring_by_inner_step(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (4, n, 8), "float32")
    Y = T.match_buffer(y, (4, 8), "float32")
    ring = T.sblock_alloc_buffer((2, 8), "float32", scope="shared")
    acc = T.sblock_alloc_buffer((8,), "float32", scope="shared")
    for o in range(4):
        for t in range(n):
            with T.sblock("load"):
                T.reads(X[o, t, 0:8])
                T.writes(ring[t % 2, 0:8])
                T.sblock_attr({"warp_role": 0})
                for i in range(8):
                    ring[t % 2, i] = X[o, t, i]
            with T.sblock("accumulate"):
                T.reads(ring[t % 2, 0:8], acc[0:8])
                T.writes(acc[0:8])
                T.sblock_attr({"warp_role": 1})
                for i in range(8):
                    acc[i] = acc[i] + ring[t % 2, i]
        with T.sblock("store"):
            T.reads(acc[0:8])
            T.writes(Y[o, 0:8])
            T.sblock_attr({"warp_role": 1})
            for i in range(8):
                Y[o, i] = acc[i]


def test_a_persistent_nest_ring_indexed_by_the_inner_step_is_rejected_naming_the_users_loops_and_region():
    # before: "loop 'o_t': block 'load' indexes ring with 'n'", naming a loop the kernel does not have and an
    # index it does not write
    with pytest.raises(WarpSpecializeInputError,
                       match=r"loop 'o': the persistent nest o x t is one pipeline over the running step o \* n \+ "
                             r"t, but block 'load' accesses ring\[t % 2:t % 2 \+ 1, 0:8\].*index a ring by the "
                             r"running step, e.g. \[\(o \* n \+ t\) % stages\]"):
        analyze(_ring_by_inner_step)


def test_fallback_to_unrolling_is_logged(caplog):
    func = examples.scheduled_scale_kernel(n=32 * 300, tile=32)
    with caplog.at_level(logging.INFO, logger="tvm_tailsplit.warpspec"):
        analyze(func)
    messages = [r.getMessage() for r in caplog.records if r.name == "tvm_tailsplit.warpspec"]
    assert any("symbolic analysis failed" in m and "unrolling the 600 task instances" in m for m in messages)


def test_small_kernel_beyond_max_instances_is_analyzed_symbolically():
    # max_instances bounds the unrolling of kernels whose symbolic analysis fails; a small kernel past it was
    # unrolled anyway and refused ("more than 4 task instances"), though its rules can be derived.
    func = examples.streaming_kernel(tiles=8, tile=4, stages=2)  # 16 task instances
    analysis = analyze(func, max_instances=4)
    assert analysis.symbolic is not None
    assert analysis.plan.describe() == analyze(func, unroll=False).plan.describe()
    WarpSpecialize("llvm", max_instances=4, debug_check=True)(tvm.IRModule({"main": func}))


@T.prim_func(s_tir=True)
def _centered_rows(x: T.handle, y: T.handle):
    n = T.int32()
    X = T.match_buffer(x, (n, 8), "float32")
    Y = T.match_buffer(y, (n, 8), "float32")
    ring = T.sblock_alloc_buffer((2, 8), "float32", scope="shared")
    for t in range(n):
        with T.sblock("load"):
            T.reads(X[t, 0:8], X[0, 0:8])
            T.writes(ring[t % 2, 0:8])
            T.sblock_attr({"warp_role": 0})
            for i in range(8):
                ring[t % 2, i] = X[t, i] - X[0, i]
        with T.sblock("scale"):
            T.reads(ring[t % 2, 0:8])
            T.writes(Y[t, 0:8])
            T.sblock_attr({"warp_role": 1})
            for i in range(8):
                Y[t, i] = ring[t % 2, i] * T.float32(2)


def test_regions_of_a_read_only_input_take_no_part_in_the_period(threads):
    # `load` reads row t and row 0 of the input X (Y = 2 (X - X[0])): X's two regions move by different vectors,
    # and the symbolic analysis refused the kernel ("the regions of X move by (2, 0) and (0, 0) ... not periodic")
    # though no task writes X, so its regions cannot make a dependence.
    assert analyze(_centered_rows).symbolic is not None
    executable = tvm.compile(WarpSpecialize("llvm", debug_check=True)(tvm.IRModule({"main": _centered_rows})),
                             target="llvm")
    rng = np.random.default_rng(5)
    for rows in (1, 2, 3, 37):
        x = guarded_array((rows, 8), "float32").array
        x[:] = rng.standard_normal((rows, 8))
        np.testing.assert_allclose(run_with_guarded_output(executable, [x], (rows, 8)), 2 * (x - x[0]), rtol=1e-6)


@T.prim_func(s_tir=True)
def _two_symbolic_loops_sharing_a_ring(x: T.handle, y: T.handle, u: T.handle, v: T.handle):
    m1, m2 = T.int32(), T.int32()
    X = T.match_buffer(x, (m1, 4), "float32")
    Y = T.match_buffer(y, (m1, 4), "float32")
    U = T.match_buffer(u, (m2, 4), "float32")
    V = T.match_buffer(v, (m2, 4), "float32")
    ring = T.sblock_alloc_buffer((2, 4), "float32", scope="shared")
    for t in range(m1):
        with T.sblock("load"):
            T.reads(X[t, 0:4])
            T.writes(ring[t % 2, 0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                ring[t % 2, i] = X[t, i]
        with T.sblock("use"):
            T.reads(ring[t % 2, 0:4])
            T.writes(Y[t, 0:4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                Y[t, i] = ring[t % 2, i]
    for s in range(m2):
        with T.sblock("load2"):
            T.reads(U[s, 0:4])
            T.writes(ring[s % 2, 0:4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                ring[s % 2, i] = U[s, i]
        with T.sblock("use2"):
            T.reads(ring[s % 2, 0:4])
            T.writes(V[s, 0:4])
            T.sblock_attr({"warp_role": 1})
            for i in range(4):
                V[s, i] = ring[s % 2, i]


def test_two_symbolic_loops_sharing_a_ring_are_refused_saying_which_dependence_has_no_rule():
    # which stage the second loop starts on depends on m1 % 2: no rule states that distance. The refusal said only
    # "the rules give other dependences than the exact analysis"
    with pytest.raises(SymbolicAnalysisError, match=r"the rules give other dependences than the exact analysis: "
                       r"\w+\[\d+\] -> \w+\[\d+\] is only in the (exact analysis|rules) .*two loops sharing one ring"):
        analyze(_two_symbolic_loops_sharing_a_ring)
