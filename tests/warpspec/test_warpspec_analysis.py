"""Analyses of WarpSpecialize, each tested alone: schedule tree, CDFG, CDRFG, redundancy elimination, channels."""

import pytest
import tvm
from tvm import s_tir, tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.script import tirx as T

from tvm_tailsplit.warpspec import WarpSpecialize, WarpSpecializeInputError, analyze, examples
from tvm_tailsplit.warpspec.channels import allocate_channels
from tvm_tailsplit.warpspec.check import check
from tvm_tailsplit.warpspec.graphs import (
    DATA,
    RESOURCE,
    control_data_flow_graph,
    control_data_resource_flow_graph,
    eliminate_redundant,
)
from tvm_tailsplit.warpspec.tree import build_schedule_tree

SEED_RESOURCE_EDGES = [("c2", "p4"), ("c3", "p4"), ("c1", "p7"), ("c4", "p7"), ("c5", "p7"), ("c6", "p7")]
SEED_DATA_EDGES = [(f"p{i}", f"c{i}") for i in range(1, 8)]


def test_seed_example_edges_reduction_channels_and_check():
    analysis = analyze(examples.seed_example())
    print(analysis.describe())
    cdrfg = analysis.cdrfg
    assert cdrfg.edge_names(DATA) == SEED_DATA_EDGES
    assert sorted(cdrfg.edge_names(RESOURCE)) == sorted(SEED_RESOURCE_EDGES)

    reduced = analysis.reduced
    removed = {(reduced.instances[e.src].name, reduced.instances[e.dst].name) for e in reduced.removed}
    # The seed removes c1->p7; the edges implied through a warp's program order go too.
    assert removed == {("c1", "p7"), ("c2", "p4"), ("c4", "p7"), ("c5", "p7")}
    assert reduced.edge_names(DATA) == SEED_DATA_EDGES
    assert reduced.edge_names(RESOURCE) == [("c3", "p4"), ("c6", "p7")]

    plan = analysis.plan
    assignment = plan.assignment()
    print(plan.describe())
    print("channel assignment:", assignment)
    # Data channels 0, 1, 2 are reused across stages; the two remaining resource edges share channel 3.
    assert assignment == {
        ("p1", "c1"): 0, ("p2", "c2"): 1, ("p3", "c3"): 2,
        ("p4", "c4"): 0, ("p5", "c5"): 1, ("p6", "c6"): 2, ("p7", "c7"): 0,
        ("c3", "p4"): 3, ("c6", "p7"): 3,
    }
    assert plan.channel_count == 4
    assert plan.channels_of_kind(DATA) == [0, 1, 2]
    assert plan.channels_of_kind(RESOURCE) == [3]

    report = check(analysis.protocol)
    print(report.describe())
    assert report.ok, report.describe()


def test_seed_example_unreduced_protocol_is_also_safe_but_larger():
    tree = build_schedule_tree(examples.seed_example())
    cdrfg = control_data_resource_flow_graph(control_data_flow_graph(tree))
    unreduced = allocate_channels(cdrfg)
    reduced = allocate_channels(eliminate_redundant(cdrfg))
    assert len(unreduced.groups) == 13 and len(reduced.groups) == 9
    assert unreduced.sync_operations_per_iteration() > reduced.sync_operations_per_iteration()


def test_schedule_tree_of_gemm_keeps_grid_loops_apart():
    tree = build_schedule_tree(examples.gemm_kernel(k=64))
    assert [loop.loop_var.name for loop in tree.grid_loops] == ["by", "bx"]
    assert [t.name for t in tree.tasks()] == ["init", "load_A", "load_B", "mma", "store"]
    assert tree.roles == (0, 1)
    text = tree.describe()
    assert "for ko in range(4):" in text and "task mma (warp role 1)" in text


def test_streaming_ring_dependences_follow_the_stage_index():
    analysis = analyze(examples.streaming_kernel(tiles=6, tile=4, stages=3))
    assert analysis.cdfg.edge_names(DATA) == [(f"load[{t}]", f"compute[{t}]") for t in range(6)]
    # Stage t % 3 is reused by iteration t + 3: compute[t] -> load[t + 3].
    assert analysis.cdrfg.edge_names(RESOURCE) == [(f"compute[{t}]", f"load[{t + 3}]") for t in range(3)]
    groups = {(g.kind, g.src_task, g.dst_task): g for g in analysis.plan.groups}
    full = groups[(DATA, "load", "compute")]
    empty = groups[(RESOURCE, "compute", "load")]
    assert (full.distance, full.stages, full.count) == (0, 3, 6)
    assert (empty.distance, empty.stages, empty.count) == (3, 3, 3)
    assert analysis.plan.channel_count == 6


def test_gemm_redundancy_keeps_one_full_and_one_empty_ring():
    analysis = analyze(examples.gemm_kernel(k=128, block_k=16, stages=3))
    kept = {(analysis.reduced.instances[e.src].task.name, analysis.reduced.instances[e.dst].task.name)
            for e in analysis.reduced.edges}
    # load_A -> mma is implied by load_A -> load_B (program order) -> mma; mma -> load_B by mma -> load_A.
    assert kept == {("load_B", "mma"), ("mma", "load_A")}
    assert [g.stages for g in analysis.plan.groups] == [3, 3]


def test_to_dot_draws_roles_and_edges():
    dot = analyze(examples.seed_example()).to_dot()
    assert dot.startswith("digraph")
    assert "cluster_role0" in dot and "cluster_role1" in dot
    assert "style=dotted" in dot  # removed edges are drawn dotted
    assert dot.count("color=blue") == 7


@T.prim_func(s_tir=True)
def _unannotated(X: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32")):
    for t in range(4):
        with T.sblock("scale"):
            T.reads(X[t * 4:t * 4 + 4])
            T.writes(Y[t * 4:t * 4 + 4])
            for i in range(4):
                Y[t * 4 + i] = X[t * 4 + i]


def _annotated(role: int) -> s_tir.Schedule:
    """A schedule of `_unannotated` with its block given warp role `role` (the input form as a schedule makes it)."""
    sch = s_tir.Schedule(_unannotated)
    sch.annotate(sch.get_sblock("scale"), "warp_role", role)
    return sch


def test_rejects_blocks_without_warp_role_naming_the_block():
    with pytest.raises(WarpSpecializeInputError, match="block 'scale'.*no 'warp_role'"):
        build_schedule_tree(_unannotated)


def test_rejects_non_serial_pipeline_loops():
    sch = _annotated(0)
    sch.parallel(sch.get_loops(sch.get_sblock("scale"))[0])
    # the loop kind is named (the message said "is 1")
    with pytest.raises(WarpSpecializeInputError, match="loop 't' in the pipeline is parallel; pipeline loops must be "
                                                       "serial"):
        build_schedule_tree(sch.mod["main"])


@T.prim_func(s_tir=True)
def _grid_with_a_sibling(X: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32"), Z: T.Buffer((4,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):
        for t in range(4):
            with T.sblock("scale"):
                T.reads(X[t * 4:t * 4 + 4])
                T.writes(Y[t * 4:t * 4 + 4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    Y[t * 4 + i] = X[t * 4 + i]
    for i in range(4):
        with T.sblock("tail"):
            T.sblock_attr({"warp_role": 1})
            Z[i] = X[i]


def test_rejects_a_grid_loop_beside_other_statements_saying_where_grid_loops_go():
    # the blockIdx loop was taken for a pipeline loop: "loop 'b' in the pipeline is thread_binding; pipeline loops
    # must be serial", as if it should have been serial
    with pytest.raises(WarpSpecializeInputError, match="loop 'b' in the pipeline is bound to blockIdx.x; grid loops "
                                                       "must enclose the whole pipeline"):
        build_schedule_tree(_grid_with_a_sibling)


@T.prim_func(s_tir=True)
def _stepped(X: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32")):
    for t in T.serial(0, 4, step=2):
        with T.sblock("scale"):
            T.reads(X[t * 4:t * 4 + 4])
            T.writes(Y[t * 4:t * 4 + 4])
            T.sblock_attr({"warp_role": 0})
            for i in range(4):
                Y[t * 4 + i] = X[t * 4 + i]


def test_rejects_stepped_pipeline_loops():
    # the step was dropped: the per-role programs ran t = 0, 1, 2, 3 where the loop runs t = 0, 2
    with pytest.raises(WarpSpecializeInputError, match="loop 't' in the pipeline has the step 2; pipeline loops "
                                                       "must have step 1"):
        build_schedule_tree(_stepped)


def test_rejects_a_bool_warp_role():
    # True passed the non-negative int check as role 1
    with pytest.raises(WarpSpecializeInputError, match="block 'scale': 'warp_role' must be a non-negative int, got "
                                                       "True"):
        build_schedule_tree(_annotated(True).mod["main"])


def test_schedule_annotation_is_the_input_form():
    tree = build_schedule_tree(_annotated(1).mod["main"])
    assert [(t.name, t.role) for t in tree.tasks()] == [("scale", 1)]


def _partial_sums_then(pairs: bool) -> tirx.PrimFunc:
    """Role 0 writes `acc[t] = X[4 t]` for t < 4; role 1 then reads them all in one block `total` (Y[0]), or with
    `pairs` two at a time in the loop of blocks `pair` (Y[0], Y[1])."""

    @T.prim_func(s_tir=True)
    def partial_sums_then(X: T.Buffer((16,), "float32"), Y: T.Buffer((2 if pairs else 1,), "float32")):
        acc = T.sblock_alloc_buffer((4,), "float32", scope="shared")
        for t in range(4):
            with T.sblock("partial"):
                T.reads(X[t * 4:t * 4 + 4])
                T.writes(acc[t])
                T.sblock_attr({"warp_role": 0})
                acc[t] = X[t * 4]
        if pairs:
            for u in range(2):
                with T.sblock("pair"):
                    T.reads(acc[u * 2:u * 2 + 2])
                    T.writes(Y[u])
                    T.sblock_attr({"warp_role": 1})
                    Y[u] = acc[u * 2] + acc[u * 2 + 1]
        else:
            with T.sblock("total"):
                T.reads(acc[0:4])
                T.writes(Y[0])
                T.sblock_attr({"warp_role": 1})
                Y[0] = acc[0] + acc[1] + acc[2] + acc[3]

    return partial_sums_then


def test_single_consumer_after_a_producer_loop_needs_only_the_last_edge():
    analysis = analyze(_partial_sums_then(pairs=False))
    assert analysis.reduced.edge_names() == [("partial[3]", "total")]
    assert check(analysis.protocol).ok


def test_pairs_at_two_instance_distances_get_two_groups():
    analysis = analyze(_partial_sums_then(pairs=True))
    assert analysis.reduced.edge_names() == [("partial[1]", "pair[0]"), ("partial[3]", "pair[1]")]
    assert sorted(g.distance for g in analysis.plan.groups) == [-2, -1]
    assert check(analysis.protocol).ok


def test_rejects_a_rule_that_would_wait_backwards():
    @T.prim_func(s_tir=True)
    def rotated(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        buf = T.sblock_alloc_buffer((4,), "float32", scope="shared")
        for o in range(2):
            for t in range(2):
                with T.sblock("put"):
                    T.reads(X[o * 2 + t])
                    T.writes(buf[o * 2 + t])
                    T.sblock_attr({"warp_role": 0})
                    buf[o * 2 + t] = X[o * 2 + t]
            for u in range(2):
                with T.sblock("take"):
                    T.reads(buf[(o * 2 + u + 1) % 4])
                    T.writes(Y[o * 2 + u])
                    T.sblock_attr({"warp_role": 1})
                    Y[o * 2 + u] = buf[(o * 2 + u + 1) % 4]

    with pytest.raises(WarpSpecializeInputError, match="from block 'put' to block 'take'.*not uniform"):
        analyze(rotated)


def _ring_kernel(read_hi: int, write_hi: int) -> tirx.PrimFunc:
    """A two-stage ring of 8-element tiles; `compute` declares it reads `ring[t % 2, 0:read_hi]` and `load` that
    it writes `ring[t % 2, 0:write_hi]` (8 for both is the truth)."""

    @T.prim_func(s_tir=True)
    def ring_kernel(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32")):
        ring = T.sblock_alloc_buffer((2, 8), "float32", scope="shared")
        for t in range(4):
            with T.sblock("load"):
                T.reads(X[t * 8:t * 8 + 8])
                T.writes(ring[t % 2, 0:write_hi])
                T.sblock_attr({"warp_role": 0})
                for i in range(8):
                    ring[t % 2, i] = X[t * 8 + i]
            with T.sblock("compute"):
                T.reads(ring[t % 2, 0:read_hi])
                T.writes(Y[t * 8:t * 8 + 8])
                T.sblock_attr({"warp_role": 1})
                for i in range(8):
                    Y[t * 8 + i] = ring[t % 2, i] + T.float32(1)

    return ring_kernel


def test_truthful_regions_are_accepted():
    assert [t.name for t in build_schedule_tree(_ring_kernel(8, 8)).tasks()] == ["load", "compute"]


def test_rejects_a_block_whose_reads_understate_its_body():
    expected = (r"block 'compute' reads ring\[t % 2, 0:8\] in its body but declares ring\[t % 2, 0:4\] for "
                r"buffer 'ring' in T.reads")
    with pytest.raises(WarpSpecializeInputError, match=expected):
        build_schedule_tree(_ring_kernel(read_hi=4, write_hi=8))
    # Through the pass the error reaches the caller via TVM's FFI, message intact.
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=expected):
        WarpSpecialize("llvm")(tvm.IRModule({"main": _ring_kernel(read_hi=4, write_hi=8)}))


def test_rejects_a_block_whose_writes_understate_its_body():
    with pytest.raises(WarpSpecializeInputError,
                       match=r"block 'load' writes ring\[t % 2, 0:8\] .* declares ring\[t % 2, 0:6\] .*T.writes"):
        build_schedule_tree(_ring_kernel(read_hi=8, write_hi=6))


def test_rejects_an_undeclared_buffer():
    @T.prim_func(s_tir=True)
    def hidden_read(X: T.Buffer((16,), "float32"), Z: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32")):
        for t in range(4):
            with T.sblock("scale"):
                T.reads(X[t * 4:t * 4 + 4])
                T.writes(Y[t * 4:t * 4 + 4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    Y[t * 4 + i] = X[t * 4 + i] + Z[t * 4 + i]

    with pytest.raises(WarpSpecializeInputError, match=r"block 'scale' reads Z\[t \* 4:t \* 4 \+ 4\] .*declares "
                                                       r"nothing for buffer 'Z'"):
        build_schedule_tree(hidden_read)


def test_warp_roles_on_loops_are_rejected_naming_the_loop():
    # sch.annotate(loop, "warp_role", r) left the kernel unchanged without a word (only blocks were looked at)
    sch = s_tir.Schedule(_unannotated)
    sch.annotate(sch.get_loops(sch.get_sblock("scale"))[0], "warp_role", 0)
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match="loop 't' in the pipeline carries 'warp_role'; warp roles mark blocks"):
        WarpSpecialize("llvm")(tvm.IRModule({"main": sch.mod["main"]}))


@pytest.mark.parametrize("tasks_marked", [True, False])
def test_a_warp_role_on_the_root_block_is_rejected(tasks_marked):
    """A mark on the root block applies to no task: with the tasks marked too it was ignored without a word, alone
    it was reported as the first task missing its mark."""
    func = examples.streaming_kernel(tiles=4, tile=4)
    if not tasks_marked:
        sch = s_tir.Schedule(func)
        for name in ("load", "compute"):
            sch.unannotate(sch.get_sblock(name), "warp_role")
        func = sch.mod["main"]
    root = func.body.block
    marked = func.with_body(SBlockRealize([], True, SBlock(
        root.iter_vars, root.reads, root.writes, root.name_hint, root.body, alloc_buffers=root.alloc_buffers,
        annotations={"warp_role": 0})))
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match="the root block carries 'warp_role' .*annotate each block of the pipeline"):
        WarpSpecialize("llvm")(tvm.IRModule({"main": marked}))


def _copy_kernel(kind: str) -> tirx.PrimFunc:
    """load (warp role 0) then compute (role 1) over a two-stage ring; load's loop is of `kind`."""
    loop = {"thread": lambda: T.thread_binding(32, thread="threadIdx.x"), "parallel": lambda: T.parallel(32),
            "vectorized": lambda: T.vectorized(32), "unrolled": lambda: T.unroll(32)}[kind]

    @T.prim_func(s_tir=True)
    def copy(X: T.Buffer((64,), "float32"), Y: T.Buffer((64,), "float32")):
        ring = T.sblock_alloc_buffer((2, 32), "float32", scope="shared")
        for t in range(2):
            with T.sblock("load"):
                T.reads(X[t * 32:t * 32 + 32])
                T.writes(ring[t % 2, 0:32])
                T.sblock_attr({"warp_role": 0})
                for i in loop():
                    ring[t % 2, i] = X[t * 32 + i]
            with T.sblock("compute"):
                T.reads(ring[t % 2, 0:32])
                T.writes(Y[t * 32:t * 32 + 32])
                T.sblock_attr({"warp_role": 1})
                for i in range(32):
                    Y[t * 32 + i] = ring[t % 2, i] * T.float32(2)

    return copy


@pytest.mark.parametrize("kind,how,target", [("thread", "bound to threadIdx.x", "cuda"),
                                             ("parallel", "marked parallel", "llvm")])
def test_a_task_loop_bound_to_threads_or_parallel_is_rejected(kind, how, target):
    # A task loop bound to threadIdx.x (sch.bind inside the copy block) merged with the thread loop of the roles on
    # CUDA: the kernel launched 32 threads, the compute role and its output were gone and the copy ran on thread 0
    # alone, all silently. A parallel one failed on llvm inside TVM ("Nested parallel loop is not supported").
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match=f"block 'load' has the loop 'i' {how}; .* leave the loops of a task serial"):
        WarpSpecialize(target)(tvm.IRModule({"main": _copy_kernel(kind)}))


@pytest.mark.parametrize("kind", ["vectorized", "unrolled"])
def test_vectorized_and_unrolled_task_loops_are_accepted(kind):
    assert [t.name for t in build_schedule_tree(_copy_kernel(kind)).tasks()] == ["load", "compute"]


@pytest.mark.parametrize("scope", ["shared", "warp"])
def test_a_thread_barrier_in_a_task_is_rejected(scope):
    # A __syncthreads in the copy block compiled inside the copy role's branch (on its first thread only): the
    # other roles' threads never reach it, so the kernel would hang on a GPU.
    @T.prim_func(s_tir=True)
    def synced(X: T.Buffer((64,), "float32"), Y: T.Buffer((64,), "float32")):
        ring = T.sblock_alloc_buffer((2, 32), "float32", scope="shared")
        for t in range(2):
            with T.sblock("load"):
                T.reads(X[t * 32:t * 32 + 32])
                T.writes(ring[t % 2, 0:32])
                T.sblock_attr({"warp_role": 0})
                for i in range(32):
                    ring[t % 2, i] = X[t * 32 + i]
                T.tvm_storage_sync(scope)
            with T.sblock("compute"):
                T.reads(ring[t % 2, 0:32])
                T.writes(Y[t * 32:t * 32 + 32])
                T.sblock_attr({"warp_role": 1})
                for i in range(32):
                    Y[t * 32 + i] = ring[t % 2, i] * T.float32(2)

    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match="block 'load' calls the thread barrier tirx.tvm_storage_sync; .* remove it"):
        WarpSpecialize("cuda")(tvm.IRModule({"main": synced}))


def _two_blocks_named(second: str) -> tirx.PrimFunc:
    """copy (role 0) -> use (role 1) -> a second copy block (role 0) named `second`."""

    @T.prim_func(s_tir=True)
    def named(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32"), Z: T.Buffer((32,), "float32")):
        S = T.sblock_alloc_buffer((2, 4), "float32", scope="shared")
        R = T.sblock_alloc_buffer((2, 4), "float32", scope="shared")
        for t in range(8):
            with T.sblock("copy"):
                T.reads(X[t * 4:t * 4 + 4])
                T.writes(S[t % 2, 0:4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    S[t % 2, i] = X[t * 4 + i]
            with T.sblock("use"):
                T.reads(S[t % 2, 0:4])
                T.writes(Y[t * 4:t * 4 + 4], R[t % 2, 0:4])
                T.sblock_attr({"warp_role": 1})
                for i in range(4):
                    Y[t * 4 + i] = S[t % 2, i] * T.float32(2)
                    R[t % 2, i] = S[t % 2, i] + T.float32(1)
            with T.sblock(second):
                T.reads(R[t % 2, 0:4])
                T.writes(Z[t * 4:t * 4 + 4])
                T.sblock_attr({"warp_role": 0})
                for i in range(4):
                    Z[t * 4 + i] = R[t % 2, i]

    return named


def test_two_task_blocks_with_one_name_are_rejected():
    # TVMScript accepts two blocks named 'copy'; the protocol attaches operations to tasks by name, so both were
    # taken for one task with two instances per iteration: 16 nonsensical channel groups, a checker that did not
    # finish, and a kernel that hung on llvm threads.
    with pytest.raises(WarpSpecializeInputError, match="two blocks of the pipeline are named 'copy'.* rename one"):
        analyze(_two_blocks_named("copy"))
    assert check(_two_blocks_named("copy_back")).ok


def test_a_stage_index_with_a_kernel_parameter_is_refused_naming_the_block_and_region():
    # the error was "index variable 's' is not a pipeline or grid loop variable": no block, buffer or region
    @T.prim_func(s_tir=True)
    def offset_ring(X: T.Buffer((64,), "float32"), Y: T.Buffer((64,), "float32"), s: T.int32):
        ring = T.sblock_alloc_buffer((2, 8), "float32", scope="shared")
        for t in range(8):
            with T.sblock("load"):
                T.reads(X[t * 8:t * 8 + 8])
                T.writes(ring[(t + s) % 2, 0:8])
                T.sblock_attr({"warp_role": 0})
                for i in range(8):
                    ring[(t + s) % 2, i] = X[t * 8 + i]
            with T.sblock("use"):
                T.reads(ring[(t + s) % 2, 0:8])
                T.writes(Y[t * 8:t * 8 + 8])
                T.sblock_attr({"warp_role": 1})
                for i in range(8):
                    Y[t * 8 + i] = ring[(t + s) % 2, i]

    with pytest.raises(WarpSpecializeInputError,
                       match=r"^block 'load' \(warp role 0\), region ring\[\(t \+ s\) % 2:\(t \+ s\) % 2 \+ 1, 0:8\]: "
                             r"index variable 's' is not a pipeline or grid loop variable"):
        analyze(offset_ring)
