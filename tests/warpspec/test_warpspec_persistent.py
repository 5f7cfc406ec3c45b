"""Persistent kernels: `ctas` CTAs loop over output tiles; the nest (tiles x K steps) is one pipeline over the
running step, so the producer fills the next tile's stages while the consumers store the current tile.

Without a GPU: the analysis of the nest (rules over `N_t * N_k` running steps, prologue/epilogue tasks proved
private), the Hopper protocol checked by `check` (wgmma drains per tile), the example's meaning on llvm (sequential
and warp-specialized on CPU threads), and nvcc for sm_90a with ptxas figures. The `gpu` test runs it against numpy.
"""

import ctypes
import os

os.environ.setdefault("TVM_NUM_THREADS", str(max(2, os.cpu_count() or 2)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tvm  # noqa: E402
import tvm_ffi  # noqa: E402

from tvm_tailsplit import TailSplit  # noqa: E402
from tvm_tailsplit.cuda import (  # noqa: E402
    DEFAULT_MULTIPROCESSORS,
    compile_cuda_source,
    cuda_source,
    cuda_target,
)
from tvm_tailsplit.testing import guarded_array, run_with_guarded_output, threads_as_serial_loops  # noqa: E402
from tvm_tailsplit.warpspec import (  # noqa: E402
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    check,
    examples,
    load_libatomic,
    require_concurrent_threads,
    tile_plan,
)
from tvm_tailsplit.warpspec.check import (  # noqa: E402
    DEADLOCK,
    MISSING_ARRIVE,
    role_programs,  # noqa: E402
)
from tvm_tailsplit.warpspec.graphs import ancestor_bitsets  # noqa: E402
from tvm_tailsplit.warpspec.hopper import hopper_protocol  # noqa: E402
from tvm_tailsplit.warpspec.retirement import WGMMA_IN_FLIGHT, defer_releases  # noqa: E402
from tvm_tailsplit.warpspec.symbolic import NEST_WINDOW_TILES, SymbolicAnalysisError  # noqa: E402
from tvm_tailsplit.warpspec.tiling import hopper_group_rows  # noqa: E402
from tvm_tailsplit.warpspec.tree import build_schedule_tree  # noqa: E402

MMAS = ("mma_top", "mma_bottom")


def test_persistent_ctas_rule():
    assert DEFAULT_MULTIPROCESSORS == 132
    # As few CTAs as give the waves of 132: 512 tiles (4096^2 in 128x256 tiles) in 4 waves of 128.
    assert examples.persistent_ctas(512) == 128 and examples.persistent_ctas(2048) == 128
    assert examples.persistent_ctas(100) == 100 and examples.persistent_ctas(133) == 67
    with pytest.raises(ValueError, match="persistent_ctas: tiles must be a positive int, got 0"):
        examples.persistent_ctas(0)
    with pytest.raises(ValueError, match="persistent_ctas: sms must be a positive int, got 0"):
        examples.persistent_ctas(8, sms=0)
    with pytest.raises(ValueError, match="ctas must be between 1 and the 4 output tiles"):
        examples.hopper_gemm_kernel(256, 512, 128, ctas=5)


@pytest.mark.parametrize("k", [64 * 3, 64 * 6, None], ids=["3_steps", "6_steps", "symbolic_k"])
def test_the_nest_is_one_pipeline_over_the_running_step(k):
    """4 tiles over 3 CTAs (CTA 0 runs two): the rules are those of one K loop of N_t * N_k steps, whatever the
    tile boundaries; the fills and stores synchronize with nobody."""
    analysis = analyze(examples.hopper_gemm_kernel(256, 512, k, ctas=3))
    plan = analysis.symbolic
    assert plan.nest is not None and plan.nest.flat.var.name == "tt_ko"
    rules = {(g.kind, g.src_task, g.dst_task): (g.distance.describe(), g.first.describe(), g.count.describe())
             for g in plan.groups}
    assert rules == {("data", "load_B", "mma_top"): ("0", "0", "N_tt_ko"),
                     ("data", "load_B", "mma_bottom"): ("0", "0", "N_tt_ko"),
                     ("resource", "mma_top", "load_A"): ("4", "0", "N_tt_ko - 4"),
                     ("resource", "mma_bottom", "load_A"): ("4", "0", "N_tt_ko - 4")}
    assert analysis.plan.min_trip_counts == ()  # nothing to assert per CTA
    counts = plan.window_counts()
    assert counts["tt"] == NEST_WINDOW_TILES and counts["ko"] == (k // 64 if k else 6)
    # The count of the kernel's plan is the running steps of the CTA: ceildiv(4 - cta, 3) tiles of K // 64 steps.
    (count,) = {str(g.count) for g in analysis.plan.groups if g.kind == "data"}
    assert "cta" in count and ("K" in count) == (k is None)


def test_the_producer_loads_the_next_tile_while_the_consumers_store():
    """Happens-before over the small protocol (program order plus the channel edges), tiles of 5 steps in 4
    stages: the producer's loads of tile 1's first 4 steps do not wait for tile 0's stores; its fifth reuses the
    stage of tile 1's first step, released by a wgmma that the consumers run after their stores."""
    analysis = analyze(examples.hopper_gemm_kernel(256, 512, 64 * 5, ctas=3))
    graph = analysis.small_protocol().plan.graph
    ancestors = ancestor_bitsets(len(graph.instances), graph.program_order_predecessors(), graph.edges)
    position = {inst.name: inst.position for inst in graph.instances}
    stores = [position[f"store_{half}[0]"] for half in ("top", "bottom")]

    def after_the_stores(name):
        return [bool(ancestors[position[name]] >> store & 1) for store in stores]

    assert [after_the_stores(f"load_A[1,{ko}]") for ko in range(5)] == [[False, False]] * 4 + [[True, True]]


@pytest.mark.parametrize("k,zero_fill", [(64 * 3, False), (64 * 5, False), (None, False), (None, True)],
                         ids=["tiles_shorter_than_the_ring", "5_steps", "symbolic_k", "symbolic_k_zero_fill"])
def test_hopper_protocol_of_the_persistent_gemm_is_safe(k, zero_fill):
    analysis = analyze(examples.hopper_gemm_kernel(256, 512, k, ctas=3, zero_fill_k=zero_fill))
    protocol = hopper_protocol(analysis.small_protocol(), tile_plan(analysis.tree))
    assert protocol.in_flight == {task: WGMMA_IN_FLIGHT for task in MMAS}
    report = check(protocol)
    assert report.ok, report.describe()
    # Each tile ends with a drain (wait_group 0) before its stores: in each consumer's program (as the checker
    # explores it) every wgmma instance is retired exactly once, and none is in flight when a store runs.
    for role, program in role_programs(protocol).items():
        issued, retired, flying = [], [], set()
        for step in program:
            retired += step.retired
            flying -= set(step.retired)
            if step.runs_task and step.instance.task.name in MMAS:
                issued.append(step.instance.position)
                flying.add(step.instance.position)
            if step.runs_task and step.instance.task.name.startswith("store"):
                assert not flying, (role, step.describe())
        assert sorted(retired) == sorted(issued) and (len(issued) > 0) == (role != 0)


@pytest.mark.parametrize("depth,deadlocks", [(3, False), (4, True)])
def test_checker_finds_the_deadlock_of_as_many_groups_in_flight_as_stages_across_tiles(depth, deadlocks):
    """4 stages, tiles of 5 steps: a release deferred by 4 steps is a cycle of waits (within a tile, and between
    the producer's next tile and the drain), 3 is safe."""
    analysis = analyze(examples.hopper_gemm_kernel(256, 512, 64 * 5, ctas=3))
    protocol = hopper_protocol(analysis.small_protocol(), tile_plan(analysis.tree))
    for task in MMAS:
        protocol = defer_releases(protocol, task, depth)
    report = check(protocol)
    assert (DEADLOCK in report.kinds()) == deadlocks, report.describe()
    assert report.ok != deadlocks


def test_checker_catches_a_missing_drain_release_between_tiles():
    """Without its releases (in the K loop and in each tile's drain) the consumer never frees a stage: the
    producer's acquires for the next tile never pass."""
    analysis = analyze(examples.hopper_gemm_kernel(256, 512, 64 * 5, ctas=3))
    protocol = hopper_protocol(analysis.small_protocol(), tile_plan(analysis.tree))
    planted = protocol.replace_ops("mma_top", protocol.before("mma_top"))
    assert {DEADLOCK, MISSING_ARRIVE} & check(planted).kinds()


def _with_block_regions(func, name, rewrite):
    """`func` with the read/write regions of block `name` rewritten by `rewrite(block) -> block`."""
    def on_block(block):
        return rewrite(block) if block.name_hint == name else block

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.s_tir.SBlock, on_block), order="post"))


def test_epilogue_tasks_that_meet_another_role_are_rejected():
    """The fill of the top rows also declares reading the A ring (which the producer writes): a persistent nest
    synchronizes only the tasks of its K loop, so the analysis refuses instead of leaving a race."""
    func = examples.hopper_gemm_kernel(256, 512, 64 * 5, ctas=3)
    ring = next(buf for buf in func.body.block.alloc_buffers if buf.name == "A_ring")

    def read_ring(block):
        region = tvm.tirx.BufferRegion(ring, [tvm.ir.Range(0, 4), tvm.ir.Range(0, 128), tvm.ir.Range(0, 64)])
        return tvm.s_tir.SBlock(block.iter_vars, [region], block.writes, block.name_hint, block.body,
                                annotations=block.annotations)

    with pytest.raises(SymbolicAnalysisError, match="block 'init_top' .* touches A_ring apart from block 'load_A'"):
        analyze(_with_block_regions(func, "init_top", read_ring))


def test_a_grid_dependent_trip_count_inside_the_nest_is_rejected():
    func = examples.hopper_gemm_kernel(256, 512, 64 * 5, ctas=3)

    def grid_extent(loop):
        if loop.loop_var.name != "ko":
            return loop
        cta = func.body.block.body.loop_var
        return tvm.tirx.For(loop.loop_var, 0, 5 - cta, loop.kind, loop.body)

    bad = func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.For, grid_extent), order="post"))
    with pytest.raises(WarpSpecializeInputError, match="only a loop at the top of the pipeline may have a trip count"):
        build_schedule_tree(bad)


def _gemm_inputs(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a = guarded_array((m, k), "float16").array
    b = guarded_array((n, k), "float16").array
    a[:] = rng.standard_normal((m, k)).astype("float16")
    b[:] = rng.standard_normal((n, k)).astype("float16")
    return a, b, a.astype("float32") @ b.astype("float32").T


@pytest.mark.parametrize("kernel_k,k,zero_fill", [(192, 192, False), (None, 320, False), (None, 200, True)],
                         ids=["static_k", "symbolic_k", "symbolic_k_zero_fill"])
def test_persistent_hopper_gemm_example_means_a_times_b_transposed(kernel_k, k, zero_fill):
    """6 tiles (384 x 512 in 128 x 256 tiles) over 4 CTAs: CTAs 0 and 1 run two tiles, 2 and 3 one."""
    m, n = 384, 512
    func = examples.hopper_gemm_kernel(m, n, kernel_k, ctas=4, zero_fill_k=zero_fill)
    executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    a, b, reference = _gemm_inputs(m, n, k, seed=4)
    out = run_with_guarded_output(executable, [a, b], (m, n))
    np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)


def test_hopper_group_rows_rule():
    # sqrt(ctas * 256 / 128) as a power of two, at most the rows of tiles: 128 CTAs of 128 x 256 tiles -> 16
    assert [hopper_group_rows(64, 128), hopper_group_rows(32, 128), hopper_group_rows(None, 128)] == [16, 16, 16]
    assert [hopper_group_rows(8, 128), hopper_group_rows(1, 132), hopper_group_rows(64, 64, block_n=128)] == [8, 1, 8]
    assert hopper_group_rows(64, 2) == 2 and hopper_group_rows(64, 1, block_n=128) == 1
    with pytest.raises(ValueError, match="hopper_group_rows: ctas must be a positive int, got 0"):
        hopper_group_rows(8, 0)


@pytest.mark.parametrize("m,n,kernel_k,k,ctas,group_rows", [
    (640, 768, 128, 128, 5, 2),    # 5 x 3 tiles: groups of 2, 2 and 1 rows
    (384, 512, None, 192, 4, 4),   # one group of all 3 rows (column-major)
    (640, 256, 128, 128, 3, 3),    # one column of tiles
    (600, 700, 128, 128, 4, 2),    # ragged rows and columns: the edge tiles' loads and stores guarded
    (None, 512, 64, 64, 3, 2),     # symbolic M: a group of the rows left
], ids=["three_groups", "column_major", "one_column", "ragged", "symbolic_m"])
def test_grouped_persistent_gemm_means_a_times_b_transposed(m, n, kernel_k, k, ctas, group_rows):
    func = examples.hopper_gemm_kernel(m, n, kernel_k, ctas=ctas, group_rows=group_rows)
    executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    for rows in ((m,) if m is not None else (1, 127, 128, 300, 640)):
        a, b, reference = _gemm_inputs(rows, n, k, seed=rows)
        out = run_with_guarded_output(executable, [a, b], (rows, n))  # every tile once, nothing outside C
        np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("m", [1024, 1000])
def test_one_group_of_every_row_with_one_tile_per_cta_is_specialized(m):
    # 8 rows of tiles in one group, 128 CTAs of one tile each: the analysis evaluates the nest past the CTA's one
    # tile, where the band's rows were 0 (integer modulo by zero)
    func = examples.hopper_gemm_kernel(m, 4096, 4096, ctas=128, group_rows=hopper_group_rows(8, 128))
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(
        TailSplit(strategy="partial")(tvm.IRModule({"main": func})))
    assert "mbarrier" in mod.script()  # specialized: the roles synchronize through mbarriers


def test_group_rows_needs_the_persistent_form_and_a_positive_count():
    with pytest.raises(ValueError, match="group_rows orders the tiles of the persistent form; give ctas"):
        examples.hopper_gemm_kernel(256, 256, 64, group_rows=2)
    with pytest.raises(ValueError, match="symbolic_k_gemm_kernel: group_rows must be a positive int, got 0"):
        examples.hopper_gemm_kernel(256, 256, 64, ctas=2, group_rows=0)


@pytest.mark.parametrize("kernel_k,k,stages,group_rows", [(48, 48, 2, None), (None, 80, 3, None), (48, 48, 2, 2)],
                         ids=["static_k", "symbolic_k", "grouped"])
def test_persistent_gemm_runs_warp_specialized_on_cpu_threads(kernel_k, k, stages, group_rows):
    """The persistent nest warp-specialized on llvm (a copy role and a compute role as concurrent threads): 9 tiles
    of 32 x 32 over 4 CTAs (row-major, or in groups of 2 rows), with and without random delays before every task."""
    load_libatomic()
    require_concurrent_threads(2)
    m, n = 96, 96
    func = examples.symbolic_k_gemm_kernel(m, n, 32, 32, 16, stages, 1, b_transposed=True, ctas=4,
                                           group_rows=group_rows)
    if kernel_k is not None:
        func = func.specialize({func.params[0]: tvm.tirx.decl_buffer((m, kernel_k), "float16", "A")})
    a, b, reference = _gemm_inputs(m, n, k, seed=5)
    ctypes.CDLL(None).srand(5)
    for delay in (0, 30):
        mod = WarpSpecialize("llvm", debug_check=True, delay_us=delay)(tvm.IRModule({"main": func}))
        executable = tvm.compile(mod, target="llvm")
        for _ in range(3):
            out = run_with_guarded_output(executable, [a, b], (m, n))
            np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)


def _persistent_source(m, n, k, ctas, zero_fill, group_rows=None):
    specialize = WarpSpecialize("cuda", hopper=True, debug_check=True)
    mod = specialize(tvm.IRModule({"main": examples.hopper_gemm_kernel(m, n, k, zero_fill_k=zero_fill, ctas=ctas,
                                                                       group_rows=group_rows)}))
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


@pytest.mark.nvcc
@pytest.mark.parametrize("m,n,k,zero_fill,grouped", [(4096, 4096, None, False, False), (8192, 8192, 2048, False, False),
                                                     (4096, 4096, None, True, False), (8192, 8192, 2048, False, True),
                                                     (4000, 4096, None, True, True)],
                         ids=["4096_symbolic_k", "8192_k2048", "4096_symbolic_k_zero_fill", "8192_k2048_grouped",
                              "4000_symbolic_k_zero_fill_grouped"])
def test_nvcc_compiles_the_persistent_hopper_gemm_for_sm_90a(m, n, k, zero_fill, grouped):
    ctas = examples.persistent_ctas(-(-m // 128) * (n // 256))
    group_rows = hopper_group_rows(-(-m // 128), ctas) if grouped else None
    source = _persistent_source(m, n, k, ctas, zero_fill, group_rows)
    kernel = source[source.index('extern "C" __global__'):]
    # Every role loops over its CTA's tiles: ceildiv(tiles - blockIdx.x, ctas) iterations.
    assert kernel.count("for (int tt_r") == 3
    assert kernel.count("complete_tx__bytes(") == 2 and "m64n256k16" in kernel
    # Per tile and consumer: one group in flight in the K loop, a drain before the stores.
    assert kernel.count("wgmma_wait_group_wait_group_sync_aligned_0()") == 2
    assert kernel.count(f"wgmma_wait_group_wait_group_sync_aligned_{WGMMA_IN_FLIGHT}()") == 2
    (usage,) = compile_cuda_source(source, "sm_90a")
    print("persistent hopper gemm", m, n, k, ctas, usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0
    assert usage.performance_losses == ()


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,ctas,group_rows", [(384, 512, 256, 4, None), (1024, 1024, 4096, 7, None),
                                                   (256, 512, 1000, 3, None), (4096, 4096, 1024, None, None),
                                                   (1024, 1024, 4096, 7, 4), (640, 512, 1000, 3, 2),
                                                   (4096, 4096, 1024, None, 16)])
def test_persistent_hopper_gemm_on_the_gpu(m, n, k, ctas, group_rows):
    zero_fill = k % 64 != 0
    ctas = ctas or examples.persistent_ctas(m // 128 * (n // 256))
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((n, k)).astype("float16")
    device = tvm.cuda(0)
    for kernel_k in (k, None):
        func = examples.hopper_gemm_kernel(m, n, kernel_k, zero_fill_k=zero_fill, ctas=ctas, group_rows=group_rows)
        mod = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))
        executable = tvm.compile(mod, target=cuda_target("sm_90a"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
        c = tvm.runtime.tensor(np.full((m, n), np.nan, "float32"), device)
        executable(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
        np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32").T, rtol=2e-3, atol=2e-2)
