"""Buffers private to the iterations of a split loop (split/privatize.py): each copy of the loop gets its own
buffer, which TVM then shrinks to one iteration's region; a buffer whose values may flow between iterations
stays shared, and the report says why. Every rewrite is compared with the original program on llvm."""

import pytest
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import workloads as wl
from tvm_tailsplit.split.privatize import buffer_privacy
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import assert_same_results

MARK = {"pragma_emit_insn": "vector_op"}
SHARED_P = tvm.tirx.decl_buffer((16,), "float32", "P", scope="shared")


def verdicts(func) -> dict[str, tuple[str, bool, str]]:
    return {v.buffer.name: (v.loop.loop_var.name, v.private, v.reason) for v in buffer_privacy(func)}


def split_with_report(mod):
    reports = []
    return TailSplit(reports=reports)(mod), reports[0]


def buffer_notes(report) -> list[str]:
    return [str(note) for nest in report.nests for note in nest.notes if note.subject.startswith("buffer ")]


def allocated_extents(mod, name_prefix: str) -> dict[str, list[int]]:
    """The shape of every allocation of a buffer named ``name_prefix*`` after TVM's placement and compaction."""
    lowered = tvm.transform.Sequential(
        [
            s_tir.transform.LowerInitBlock(),
            s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
            s_tir.transform.ConvertBlocksToOpaque(),
            s_tir.transform.CompactBufferAllocation(),
        ]
    )(mod)
    shapes = {}
    for line in lowered.script().splitlines():
        stripped = line.strip()
        if stripped.startswith(name_prefix) and "alloc_buffer(" in stripped:
            name = stripped.split(" = ")[0]
            shape_text = stripped.split("alloc_buffer((")[1].split(")")[0]
            shapes[name] = [int(d) for d in shape_text.split(",") if d.strip()]
    return shapes


# ------------------------------------------------------------------------------ the packed matmul (private)


@pytest.mark.parametrize(
    "shape, copies",
    [(dict(m=9, n=40, k=5), 2), (dict(m=17, n=33, k=3), 2), (dict(m=8, n=15, k=7), 1), (dict(m=3, n=32, k=2), 1)],
)
def test_packed_panel_gets_one_buffer_per_copy_and_shrinks_to_one_panel(shape, copies):
    """``N`` = 40 or 33: ``j_0`` is cut into full panels and the tail panel, each with its own panel buffer.
    ``N`` = 15 (only a tail panel) or 32 (no tail): one copy, nothing to privatize."""
    before = wl.matmul_fp32(**shape, pack=True)
    after, report = split_with_report(before)
    assert verdicts(before["main"]) == {"B_global": ("j_0", True, "")}
    notes = buffer_notes(report)
    if copies == 2:
        assert len(notes) == 1 and "B_global: one buffer per copy of loop j_0 (2 copies)" in notes[0]
    else:
        assert notes == []
    shapes = allocated_extents(after, "B_global")
    assert len(shapes) == copies and all(s == [1, shape["k"], 16] for s in shapes.values()), shapes
    assert_same_results(before, after)


def test_without_the_split_the_panel_buffer_is_already_one_panel():
    """What privatizing restores: in the unsplit schedule TVM places the panel inside ``j_0`` and shrinks it."""
    shapes = allocated_extents(wl.matmul_fp32(16, 32, 5, pack=True), "B_global")
    assert shapes == {"B_global": [1, 5, 16]}


# --------------------------------------------------------------- values carried between iterations (shared)


@T.macro
def pack_tile(P, A, j_0):
    for x in range(16):
        with T.sblock("pack"):
            vj, vx = T.axis.remap("SS", [j_0, x])
            P[vx] = A[vj * 16 + vx]


@T.macro
def store_tile(C, P, j_0):
    """The marked loop of every kernel below: the 16 elements of tile ``j_0`` of ``C`` (40 long) from ``P``."""
    for x in T.serial(16, annotations=MARK):
        with T.sblock("C"):
            vj, vx = T.axis.remap("SS", [j_0, x])
            T.where(j_0 * 16 + x < 40)
            C[vj * 16 + vx] = P[vx]


@T.prim_func(s_tir=True)
def running_sum(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(16):
            with T.sblock("reset"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                T.where(j_0 == 0)
                P[vx] = T.float32(0)
        for x in range(16):
            with T.sblock("accumulate"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx] = P[vx] + A[vj * 16 + vx]
        store_tile(C, P, j_0)


def test_buffer_carrying_values_between_iterations_stays_shared():
    before = tvm.IRModule({"main": running_sum})
    assert verdicts(running_sum)["P"] == ("j_0", False, "the block reset writing it first has a predicate")
    after, report = split_with_report(before)
    assert buffer_notes(report) == [
        "buffer P: shared by the 2 copies of loop j_0: the block reset writing it first has a predicate"
    ]
    assert "P_1" not in after.script()
    assert_same_results(before, after)


@T.prim_func(s_tir=True)
def accumulate_first(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(16):
            with T.sblock("accumulate"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx] = P[vx] + A[vj * 16 + vx]
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def half_written(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(8):
            with T.sblock("pack"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx] = A[vj * 16 + vx]
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def pointer_taken(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        pack_tile(P, A, j_0)
        with T.sblock("peek"):
            T.reads(P[0:16])
            T.writes()
            T.evaluate(T.call_extern("int32", "inspect", P.data))
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def used_after_the_loop(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32"), D: T.Buffer((16,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        pack_tile(P, A, j_0)
        store_tile(C, P, j_0)
    for x in range(16):
        with T.sblock("D"):
            vx = T.axis.remap("S", [x])
            D[vx] = P[vx]


@T.prim_func(s_tir=True)
def fully_written(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(16):
            with T.sblock("pack"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx] = A[vj * 16 + vx] * T.float32(2)
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def address_taken(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        pack_tile(P, A, j_0)
        with T.sblock("peek"):
            T.reads(P[0:16])
            T.writes()
            T.evaluate(T.call_extern("int32", "inspect", T.address_of(P[0])))
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def two_blocks_write_first(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(8):
            with T.sblock("pack_low"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx] = A[vj * 16 + vx]
            with T.sblock("pack_high"):
                vj, vx = T.axis.remap("SS", [j_0, x])
                P[vx + 8] = A[vj * 16 + vx + 8]
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def write_under_an_if(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32"), flag: T.int32):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(16):
            if flag > 0:
                with T.sblock("pack"):
                    vj, vx = T.axis.remap("SS", [j_0, x])
                    P[vx] = A[vj * 16 + vx]
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def write_may_be_empty(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32"), width: T.int32):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        for x in range(width):
            with T.sblock("pack"):
                vj = T.axis.spatial(3, j_0)
                vx = T.axis.spatial(16, x)
                P[vx] = A[vj * 16 + vx]
        store_tile(C, P, j_0)


@T.prim_func(s_tir=True)
def matched_region(A: T.Buffer((48,), "float32"), C: T.Buffer((40,), "float32")):
    P = T.sblock_alloc_buffer((16,))
    for j_0 in range(3):
        pack_tile(P, A, j_0)
        with T.sblock("scale"):
            P_view = T.match_buffer(P[0:16], (16,))
            for x in range(16):
                P_view[x] = P_view[x] * T.float32(2)
        store_tile(C, P, j_0)


@pytest.mark.parametrize(
    "func, reason",
    [
        (accumulate_first, "the first statement touching it also reads it"),
        (half_written, "the load P[vx] is not provably inside the region its iteration writes first"),
        (pointer_taken, "its data pointer is used directly"),
        (address_taken, "its address is taken"),
        (two_blocks_write_first, "the first statement touching it stores to it more than once"),
        (write_under_an_if, "the first statement touching it is not a loop nest around one block"),
        (write_may_be_empty, "loop x of its first write may run no iteration"),
        (matched_region, "a block matches a region of it (match_buffer)"),
    ],
    ids=["reads-before-writing", "reads-outside-the-written-region", "pointer-taken", "address-taken",
         "two-blocks-write-first", "write-under-an-if", "write-may-be-empty", "match-buffer"],
)
def test_refusals_name_the_reason(func, reason):
    assert verdicts(func)["P"] == ("j_0", False, reason)


def test_only_global_buffers_get_copies():
    shared = fully_written.with_body(tvm_ffi.structural_map(
        fully_written.body, (tvm.tirx.Buffer, lambda b: SHARED_P if b.name == "P" else b), order="post"))
    assert verdicts(shared)["P"] == ("j_0", False, "its scope is 'shared', not 'global' (a GPU kernel allocates "
                                     "every such buffer statically: one per copy would add up)")


def test_buffer_used_outside_the_loop_has_no_loop_to_be_private_to():
    assert "P" not in verdicts(used_after_the_loop)
    after, report = split_with_report(tvm.IRModule({"main": used_after_the_loop}))
    assert buffer_notes(report) == [] and "P_1" not in after.script()


def test_scratch_buffer_written_whole_each_iteration_is_private():
    before = tvm.IRModule({"main": fully_written})
    assert verdicts(fully_written)["P"] == ("j_0", True, "")
    after, report = split_with_report(before)
    assert "P_1 = T.sblock_alloc_buffer((16,))" in after.script()
    assert_same_results(before, after)


@T.prim_func(s_tir=True)
def stepped_first_write(a: T.handle, b: T.handle, n: T.int32):
    """Each iteration of j_0 writes P's even elements first, reads P whole (odd elements: the previous iteration's,
    from j_0 = 1 on), then writes P's odd elements."""
    A = T.match_buffer(a, (48,), "float32")
    B = T.match_buffer(b, (48,), "float32")
    P = T.sblock_alloc_buffer((16,), "float32")
    for j_0 in range(3):
        for t in T.serial(0, 16, step=2):
            with T.sblock("even"):
                vt, vj = T.axis.remap("SS", [t, j_0])
                P[vt] = A[vj * 16 + vt]
        for j_1 in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                vj = T.axis.spatial(48, j_0 * 16 + j_1)
                vt = T.axis.spatial(16, j_1)
                T.where(j_0 * 16 + j_1 < n and (j_1 % 2 == 0 or j_0 >= 1))
                B[vj] = P[vt] * T.float32(2)
        for t in T.serial(1, 16, step=2):
            with T.sblock("odd"):
                vt, vj = T.axis.remap("SS", [t, j_0])
                P[vt] = A[vj * 16 + vt] * T.float32(3)


def test_a_first_write_with_a_step_leaves_the_buffer_shared():
    """The first write's box took a stepped loop (range(0, 16, 2)) as writing every element of its range, so P,
    whose odd elements carry values from one iteration of j_0 to the next, got one buffer per copy of j_0: at
    n = 18 the tail copy read its own P_1's odd elements, never written (B[17] 0.0 instead of 3 * A[1] * 2; seen
    with StorageRewrite off, which otherwise may give P_1 the memory of P). P now stays shared, saying why."""
    before = tvm.IRModule({"main": stepped_first_write})
    assert verdicts(stepped_first_write)["P"] == (
        "j_0", False, "loop t of its first write has step 2: it skips elements")
    after = TailSplit(strategy="full")(before)
    assert "P_1" not in after.script()
    with tvm.transform.PassContext(config={"tirx.disable_storage_rewrite": True}):
        executables = tuple(tvm.compile(remove_marks(m), target="llvm") for m in (before, after))
    for n in range(-2, 50):
        assert_same_results(before, after, {"n": n}, trials=1, executables=executables)
