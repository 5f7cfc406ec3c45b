"""The CUDA form: mbarrier full/empty channels with parity tracking, compiled by nvcc for sm_80 and sm_90.

There is no GPU here: the generated source is compiled and ptxas' resource usage is printed; the protocol itself
is checked by `check` and executed on llvm (test_warpspec_llvm.py).
"""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.script import tirx as T

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, cuda_target, device_arch
from tvm_tailsplit.ir_utils import substitute
from tvm_tailsplit.warpspec import (
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    examples,
)

KERNELS = {
    "gemm_fp16_2_stages": (lambda: examples.gemm_kernel(256, 256, 512, 64, 64, 32, stages=2), {0: 32, 1: 128}),
    "gemm_fp16_3_stages": (lambda: examples.gemm_kernel(256, 256, 512, 64, 64, 32, stages=3), {0: 32, 1: 128}),
    "gemm_fp16_two_compute_roles": (
        lambda: examples.gemm_kernel(256, 256, 512, 64, 64, 32, stages=3, compute_roles=2),
        {0: 32, 1: 64, 2: 64}),
    "streaming": (lambda: examples.streaming_kernel(tiles=64, tile=256, stages=3), {0: 32, 1: 128}),
    "scheduled_scale": (lambda: examples.scheduled_scale_kernel(n=2048, tile=256), {0: 32, 1: 64}),
}


CARRIERS = {"mbarrier": False, "named": True}


def _specialized(name, carrier="mbarrier"):
    build, threads = KERNELS[name]
    specialize = WarpSpecialize("cuda", threads_per_role=threads, debug_check=True,
                                named_barriers=CARRIERS[carrier])
    return specialize(tvm.IRModule({"main": build()}))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_generated_source_uses_mbarrier_channels(name):
    source = cuda_source(_specialized(name), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert "mbarrier_init" in source and "mbarrier_arrive" in source
    assert "test_wait_parity" in source and "try_wait" not in source  # sm_80 has no try_wait.parity
    assert "__syncthreads" not in source.split("cta_sync();", 1)[1]  # only the barrier-init sync is CTA-wide


def test_task_loops_are_strided_over_the_role_threads():
    source = cuda_source(_specialized("scheduled_scale"), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    # The copy role (32 threads) moves a 256-element tile in 8 strided steps; the compute role (64) in 4.
    assert "step < 8" in kernel and "step_1 < 4" in kernel
    assert kernel.count("threadIdx.x) == 0") == 1  # only the mbarrier initialisation runs on one thread


def test_named_barrier_channels_have_constant_ids():
    source = cuda_source(_specialized("streaming", "named"), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    assert "mbarrier" not in kernel
    # Two roles take ids 1 and 2; the full ring (3 stages) is 3..5, the empty ring 6..8.
    for barrier_id in range(3, 9):
        assert f"bar_arrive_arrive((uint){barrier_id}, (uint)160)" in kernel
        assert f"bar_sync_count_sync((uint){barrier_id}, (uint)160)" in kernel


def test_named_barriers_must_fit_in_fifteen_ids():
    func = examples.streaming_kernel(tiles=16, tile=32, stages=8)  # 16 channels
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match="needs 18 named barriers"):
        WarpSpecialize("cuda", threads_per_role={0: 32, 1: 32}, named_barriers=True)(tvm.IRModule({"main": func}))


@pytest.mark.nvcc
@pytest.mark.parametrize("carrier", sorted(CARRIERS))
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvcc_compiles_generated_kernel(name, arch, carrier):
    source = cuda_source(_specialized(name, carrier), arch, tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    usages = compile_cuda_source(source, arch)
    for usage in usages:
        print(name, carrier, usage)
    assert len(usages) == 1
    usage = usages[0]
    assert usage.spill_store_bytes == 0
    # Barrier 0 (__syncthreads), ids 1..roles for the roles that synchronize their own threads and, with named
    # barrier channels, one id per channel after them. All ids are constants: ptxas counts up to the highest.
    plan = analyze(KERNELS[name][0]()).plan
    roles = len(KERNELS[name][1])
    if CARRIERS[carrier]:
        assert usage.barriers == 1 + roles + plan.channel_count
    else:
        assert 1 <= usage.barriers <= 1 + roles
    assert usage.shared_memory_bytes > 0


def test_threads_per_role_must_cover_every_role():
    func = examples.streaming_kernel(tiles=4, tile=32)
    # Errors raised inside a pass reach the caller through TVM's FFI as RuntimeError, message intact.
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=r"no entry for warp roles \[1\]"):
        WarpSpecialize("cuda", threads_per_role={0: 32})(tvm.IRModule({"main": func}))


def _dependent_bodies_kernel(tiles: int = 3, tile: int = 64, stages: int = 2) -> tvm.tirx.PrimFunc:
    """A copy role and four compute tasks: element-wise (E), a running sum (S: iteration i reads what i - 1
    wrote), pairs summed into one element (P: iterations 2j and 2j + 1 write P[j]), a reversal through a
    scratch tile (Z: the second loop reads what other iterations of the first wrote) and a loop with step 2 (G:
    strided as a step-1 loop, its threads wrote every element)."""
    half = tile // 2

    @T.prim_func(s_tir=True)
    def dependent(X: T.Buffer((tiles * tile,), "float32"), E: T.Buffer((tiles * tile,), "float32"),
                  S: T.Buffer((tiles * tile,), "float32"), P: T.Buffer((tiles * half,), "float32"),
                  Z: T.Buffer((tiles * tile,), "float32"), G: T.Buffer((tiles * tile,), "float32")):
        ring = T.sblock_alloc_buffer((stages, tile), "float32", scope="shared")
        scratch = T.sblock_alloc_buffer((tile,), "float32", scope="shared")
        for t in range(tiles):
            with T.sblock("load"):
                T.reads(X[t * tile:t * tile + tile])
                T.writes(ring[t % stages, 0:tile])
                T.sblock_attr({"warp_role": 0})
                for i in range(tile):
                    ring[t % stages, i] = X[t * tile + i]
            with T.sblock("elementwise"):
                T.reads(ring[t % stages, 0:tile])
                T.writes(E[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    E[t * tile + i] = ring[t % stages, i] * T.float32(2)
            with T.sblock("running_sum"):
                T.reads(ring[t % stages, 0:tile], S[t * tile:t * tile + tile])
                T.writes(S[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                S[t * tile] = ring[t % stages, 0]
                for i in range(tile - 1):
                    S[t * tile + i + 1] = S[t * tile + i] + ring[t % stages, i + 1]
            with T.sblock("pairs"):
                T.reads(ring[t % stages, 0:tile], P[t * half:t * half + half])
                T.writes(P[t * half:t * half + half])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    P[t * half + i // 2] = T.if_then_else(i % 2 == 0, T.float32(0), P[t * half + i // 2]) \
                        + ring[t % stages, i]
            with T.sblock("reverse"):
                T.reads(ring[t % stages, 0:tile], scratch[0:tile])
                T.writes(scratch[0:tile], Z[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    scratch[i] = ring[t % stages, i]
                for i in range(tile):
                    Z[t * tile + i] = scratch[tile - 1 - i]
            with T.sblock("every_other"):
                T.reads(ring[t % stages, 0:tile])
                T.writes(G[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                for i in T.serial(0, tile, step=2):
                    G[t * tile + i] = ring[t % stages, i]

    return dependent


def _strided_stores(func: tvm.tirx.PrimFunc) -> set[str]:
    """The buffers stored to inside the loops that stride a task body over a role's threads."""
    stored: set[str] = set()

    def on_loop(loop):
        if loop.loop_var.name.startswith("step"):
            tvm_ffi.structural_walk(loop.body, (tvm.tirx.BufferStore, lambda s: stored.add(s.buffer.name)))

    tvm_ffi.structural_walk(func.body, (tvm.tirx.For, on_loop))
    return stored


def test_only_independent_iterations_are_strided_over_the_role_threads():
    # Striding a loop whose iterations depend on each other (a running sum, two iterations writing one element,
    # a second loop reading what other iterations of the first wrote) made the role's threads race: silently
    # wrong results on a GPU. Such bodies run on the role's first thread; element-wise ones stay strided.
    mod = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 32}, debug_check=True)(
        tvm.IRModule({"main": _dependent_bodies_kernel()}))
    assert _strided_stores(mod["main"]) == {"ring", "E"}


def _offset_mods_kernel(tiles: int = 3, tile: int = 64) -> tvm.tirx.PrimFunc:
    """A copy role and a task whose iterations i = 0 and 1 both accumulate into F[2 t + 1]: its index
    `(i + 1) % 2 + i % 2` is 1 at both, which TVM 0.27's `detect_iter_map` calls bijective."""

    @T.prim_func(s_tir=True)
    def offset_mods(X: T.Buffer((tiles * tile,), "float32"), F: T.Buffer((tiles * 2 + 1,), "float32")):
        ring = T.sblock_alloc_buffer((2, tile), "float32", scope="shared")
        for t in range(tiles):
            with T.sblock("load"):
                T.reads(X[t * tile:t * tile + tile])
                T.writes(ring[t % 2, 0:tile])
                T.sblock_attr({"warp_role": 0})
                for i in range(tile):
                    ring[t % 2, i] = X[t * tile + i]
            with T.sblock("fold"):
                T.reads(ring[t % 2, 0:2], F[t * 2:t * 2 + 3])  # (TVM bounds the index by [0, 3))
                T.writes(F[t * 2:t * 2 + 3])
                T.sblock_attr({"warp_role": 1})
                for i in range(2):
                    F[t * 2 + (i + 1) % 2 + i % 2] = F[t * 2 + (i + 1) % 2 + i % 2] + ring[t % 2, i]

    return offset_mods


def test_a_body_whose_iterations_write_one_element_is_not_strided_whatever_tvm_says():
    # TVM's iter-map analysis took (i + 1) % 2 + i % 2 for a one-to-one index, so the fold was strided over the
    # role's threads: two threads adding into F[2 t + 1] at once, a race on a GPU. codegen._one_to_one evaluates
    # every point of a small constant domain.
    import tvm.sym

    i = tvm.tirx.Var("i", "int32")
    index = tvm.tirx.floormod(i + 1, 2) + tvm.tirx.floormod(i, 2)
    assert len(tvm.sym.detect_iter_map([index], {i: tvm.ir.Range(0, 2)}, True, "bijective").indices)  # TVM's answer
    mod = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 32}, debug_check=True)(
        tvm.IRModule({"main": _offset_mods_kernel()}))
    assert _strided_stores(mod["main"]) == {"ring"}


def test_threads_per_role_must_fit_in_one_thread_block():
    # 2 x 1024 threads compiled (nvcc too) and would only fail at launch on a GPU ("invalid configuration").
    func = examples.streaming_kernel(tiles=4, tile=32)
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match=r"threads_per_role gives 2048 threads .* at most 1024"):
        WarpSpecialize("cuda", threads_per_role={0: 1024, 1: 1024})(tvm.IRModule({"main": func}))
    WarpSpecialize("cuda", threads_per_role={0: 512, 1: 512, 7: 1024})(tvm.IRModule({"main": func}))


def test_shared_buffers_beyond_a_blocks_static_shared_memory_are_rejected_naming_them():
    # The scheduled copy indexes its shared buffer by the element, not by a ring stage: WarpSpecialize keeps it
    # whole (256 KiB at n = 65536) and, before, nvcc failed at compile time ("uses too much shared data").
    func = examples.scheduled_scale_kernel(n=65536, tile=256)
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match=r"the shared buffers of the CUDA kernel take 264192 bytes \(A_shared 262144, channels "
                             r"2048\), more than the 49152 bytes of static shared memory"):
        WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64})(tvm.IRModule({"main": func}))
    WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64})(tvm.IRModule({"main": examples.scheduled_scale_kernel(
        n=8192, tile=256)}))  # 32 KiB fit


def _staged_reversal_kernel(tiles: int = 3, tile: int = 64, stages: int = 2) -> tvm.tirx.PrimFunc:
    """Role 1 copies each tile into a scratch buffer (task `stage`), then reads it reversed (task `reverse`): a
    thread of `reverse` reads what other threads of `stage` wrote, and the next `stage` overwrites what other
    threads of `reverse` may still be reading."""

    @T.prim_func(s_tir=True)
    def staged(X: T.Buffer((tiles * tile,), "float32"), Z: T.Buffer((tiles * tile,), "float32")):
        ring = T.sblock_alloc_buffer((stages, tile), "float32", scope="shared")
        scratch = T.sblock_alloc_buffer((tile,), "float32", scope="shared")
        for t in range(tiles):
            with T.sblock("load"):
                T.reads(X[t * tile:t * tile + tile])
                T.writes(ring[t % stages, 0:tile])
                T.sblock_attr({"warp_role": 0})
                for i in range(tile):
                    ring[t % stages, i] = X[t * tile + i]
            with T.sblock("stage"):
                T.reads(ring[t % stages, 0:tile])
                T.writes(scratch[0:tile])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    scratch[i] = ring[t % stages, i]
            with T.sblock("reverse"):
                T.reads(scratch[0:tile])
                T.writes(Z[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    Z[t * tile + i] = scratch[tile - 1 - i]

    return staged


def test_role_threads_synchronize_after_reading_what_the_role_overwrites():
    # A barrier followed `stage` (its writes are read by other threads of `reverse`) but not `reverse`: a fast
    # thread ran on into the next tile's `stage` and overwrote scratch elements slower threads of `reverse` were
    # still reading (a write-after-read race inside the role). Both tasks are now followed by the role's barrier.
    mod = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64}, debug_check=True)(
        tvm.IRModule({"main": _staged_reversal_kernel()}))
    source = cuda_source(mod, "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert source.count("bar_sync_count_sync((uint)2, (uint)64)") == 2


def _local_accumulator_kernel(init_role: int = 1, store_role: int = 1, tiles: int = 4,
                              tile: int = 32) -> tvm.tirx.PrimFunc:
    """Role 0 loads tiles into a ring; role 1 sums them into a 2-element accumulator of scope `local` (even and
    odd elements); `init` and `store` run on the given roles."""

    @T.prim_func(s_tir=True)
    def local_sums(X: T.Buffer((tiles * tile,), "float32"), Y: T.Buffer((2,), "float32")):
        ring = T.sblock_alloc_buffer((2, tile), "float32", scope="shared")
        acc = T.sblock_alloc_buffer((2,), "float32", scope="local")
        with T.sblock("init"):
            T.reads()
            T.writes(acc[0:2])
            T.sblock_attr({"warp_role": init_role})
            for i in range(2):
                acc[i] = T.float32(0)
        for t in range(tiles):
            with T.sblock("load"):
                T.reads(X[t * tile:t * tile + tile])
                T.writes(ring[t % 2, 0:tile])
                T.sblock_attr({"warp_role": 0})
                for i in range(tile):
                    ring[t % 2, i] = X[t * tile + i]
            with T.sblock("accumulate"):
                T.reads(ring[t % 2, 0:tile], acc[0:2])
                T.writes(acc[0:2])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    acc[i % 2] = acc[i % 2] + ring[t % 2, i]
        with T.sblock("store"):
            T.reads(acc[0:2])
            T.writes(Y[0:2])
            T.sblock_attr({"warp_role": store_role})
            for i in range(2):
                Y[i] = acc[i]

    return local_sums


def _threads_touching(func: tvm.tirx.PrimFunc, buffer: str, threads: int) -> list[list[int]]:
    """For every access to `buffer` in the generated kernel, the threads `tx` whose enclosing conditions hold."""
    analyzer = tvm.sym.Analyzer()
    found: list[list[int]] = []

    def visit(stmt, conditions):
        if isinstance(stmt, tvm.tirx.IfThenElse):
            visit(stmt.then_case, [*conditions, stmt.condition])
            if stmt.else_case is not None:
                visit(stmt.else_case, [*conditions, tvm.tirx.Not(stmt.condition)])
            return
        accesses: list = []
        if isinstance(stmt, tvm.tirx.BufferStore):
            accesses.append(stmt.buffer.name)
        if isinstance(stmt, tvm.tirx.BufferStore | tvm.tirx.Evaluate):
            tvm_ffi.structural_walk(stmt, (tvm.ir.TensorLoad, lambda load: accesses.append(load.source.name)))
        if buffer in accesses:
            tx = next(v for c in conditions for v in tvm.tirx.analysis.undefined_vars(c) if v.name == "tx")
            found.append([t for t in range(threads) if all(
                analyzer.can_prove(substitute(c, {tx: tvm.tirx.IntImm("int32", t)})) for c in conditions)])
        if isinstance(stmt, tvm.s_tir.SBlockRealize):
            stmt = stmt.block
        for child in (stmt.seq if isinstance(stmt, tvm.tirx.SeqStmt) else [getattr(stmt, "body", None)]):
            if isinstance(child, tvm.tirx.Stmt):
                visit(child, conditions)

    visit(func.body, [])
    return found


def test_a_local_accumulator_is_touched_by_one_thread_of_its_role():
    # `local` is one copy per CUDA thread. The accumulator's fill and store were strided over the role's threads
    # (thread 33 zeroed acc[1] in its own copy, thread 32 alone accumulated): Y[1] read a copy that no thread
    # accumulated into, a silently wrong result on a GPU. Every statement touching it now runs on one thread.
    mod = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 32}, debug_check=True)(
        tvm.IRModule({"main": _local_accumulator_kernel()}))
    touching = _threads_touching(mod["main"], "acc", 64)
    assert len(touching) == 3  # the fill, the accumulation, the store
    assert all(threads == [32] for threads in touching), touching


@pytest.mark.parametrize("init_role,store_role", [(0, 1), (1, 0)])
def test_a_local_buffer_shared_by_two_roles_is_rejected(init_role, store_role):
    # One role's copy of a `local` buffer is invisible to the other role's threads: the kernel compiled and its
    # store read a copy that was never written.
    func = _local_accumulator_kernel(init_role, store_role)
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match=r"buffer 'acc' has a thread-private scope .*warp role 0: .*warp role 1: "):
        WarpSpecialize("cuda", threads_per_role={0: 32, 1: 32})(tvm.IRModule({"main": func}))


@pytest.mark.gpu
def test_a_local_accumulator_on_the_gpu():
    mod = WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64})(tvm.IRModule({"main": _local_accumulator_kernel()}))
    executable = tvm.compile(mod, target=cuda_target(device_arch()), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    x = np.random.default_rng(0).standard_normal(128).astype("float32")
    device = tvm.cuda(0)
    y = tvm.runtime.tensor(np.full(2, np.nan, "float32"), device)
    executable(tvm.runtime.tensor(x, device), y)
    np.testing.assert_allclose(y.numpy(), [x[0::2].sum(), x[1::2].sum()], rtol=1e-5, atol=1e-5)


def _sliding_window_kernel(tiles: int = 4, width: int = 64) -> tvm.tirx.PrimFunc:
    """Role 0 writes a window of D that moves by one element per iteration (`D[t + i]`, the last write of each
    element wins); role 1 does unrelated work."""

    @T.prim_func(s_tir=True)
    def window(X: T.Buffer((tiles, width), "float32"), D: T.Buffer((tiles + width - 1,), "float32"),
               E: T.Buffer((tiles,), "float32")):
        for t in range(tiles):
            with T.sblock("slide"):
                T.reads(X[t, 0:width])
                T.writes(D[t:t + width])
                T.sblock_attr({"warp_role": 0})
                for i in range(width):
                    D[t + i] = X[t, i]
            with T.sblock("other"):
                T.reads()
                T.writes(E[t])
                T.sblock_attr({"warp_role": 1})
                E[t] = T.float32(1)

    return window


def test_a_task_storing_an_element_from_other_threads_in_its_next_instance_synchronizes_its_role():
    # `D[t + i]` strided over 64 threads: D[33] is thread 33's at t = 0, thread 32's at t = 1 (warp 1) and thread
    # 31's at t = 2, thread 30's at t = 3 (warp 0). Nothing ordered the instances across the role's threads, so a
    # late warp 1 could store its t = 0 or 1 value after warp 0's t = 3 one (a write-after-write race, D wrong on a
    # GPU). The role's barrier now follows each instance; bodies that keep every element on one thread (a ring's
    # `R[t % 3, i]`, `Y[t * tile + i]`) get none.
    mod = WarpSpecialize("cuda", threads_per_role={0: 64, 1: 32}, debug_check=True)(
        tvm.IRModule({"main": _sliding_window_kernel()}))
    assert _strided_stores(mod["main"]) == {"D"}
    source = cuda_source(mod, "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert source.count("bar_sync_count_sync((uint)1, (uint)64)") == 1
    for name in ("streaming", "scheduled_scale"):
        kernel = cuda_source(_specialized(name), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
        assert "bar_sync" not in kernel, name
