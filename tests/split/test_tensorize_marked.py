"""``tensorize_marked`` on TailSplit's output (static shapes) and on a hand-written dynamic-split output
(symbolic shapes): main tiles become the intrinsic, tails the masked variable-length form, results equal numpy
with canaries around every buffer; error cases and refused regions."""

import re

import numpy as np
import pytest
import tvm
from tvm import s_tir, te, tirx
from tvm.script import tirx as T

from tvm_tailsplit import MARK_KEY, TailSplit, TensorizeMarked, register_tail_intrinsics, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.split.examples import (
    elementwise_multiply_nc1hwc0,
    matmul,
    register_vector_scale_intrinsic,
    vector_scale_1d,
)
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.split.tensorize import TensorizeRecord
from tvm_tailsplit.testing import assert_same_results, random_like, run_guarded, threads_as_serial_loops

TARGET = intr.llvm_target()


def elementwise(shape, name=intr.MUL_16, lanes=16):
    """C = A op B over ``shape``, the last axis split by ``lanes``, the inner loop marked ``name``."""
    a, b = te.placeholder(shape, "float32", name="A"), te.placeholder(shape, "float32", name="B")
    op = (lambda x, y: x + y) if name == intr.ADD_16 else (lambda x, y: x * y)
    c = te.compute(shape, lambda *i: op(a[i], b[i]), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    loops = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(loops[-1], [None, lanes])
    sch.annotate(inner, MARK_KEY, name)
    return sch.mod


def scheduled_matmul(m, n, k, decompose=True):
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, r = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    ro, ri = sch.split(r, [None, 16])
    sch.reorder(io, jo, ro, ii, ji, ri)
    if decompose:
        sch.decompose_reduction(block, ro)
    sch.annotate(ii, MARK_KEY, intr.MATMUL_8x16x16)
    return sch.mod


def run(mod, func_name="main", scalars=None, seed=0):
    """Compile for this CPU and run on random inputs with canaries; returns (inputs, buffers after)."""
    executable = tvm.compile(mod, target=TARGET)
    func = mod[func_name]
    rng = np.random.default_rng(seed)
    scalars = scalars or {}
    shapes = [tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else d for d in p.shape) for p in func.params
              if not isinstance(p.ty, tvm.ir.PrimType)]
    inputs = [random_like("float32", shape, rng) for shape in shapes]
    return inputs, run_guarded(executable, func, inputs, scalars, func_name)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, 129])
@pytest.mark.parametrize("name", [intr.MUL_16, intr.ADD_16])
def test_vector_elementwise_after_tailsplit(n, name):
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(elementwise((n,), name)), report=report)
    actions = sorted(r.action for r in report)
    expected = (["tensorized"] if n >= 16 else []) + (["variable_length"] if n % 16 else [])
    assert actions == sorted(expected), [str(r) for r in report]
    script = mod.script()
    assert MARK_KEY not in script
    assert script.count("[T.Ramp(0, 1, 16)]") == (2 if n >= 16 else 0)  # the main tile's vector loads
    assert script.count("llvm.masked.store") == (1 if n % 16 else 0)
    (a, b, _), (_, _, c) = run(mod)
    op = np.add if name == intr.ADD_16 else np.multiply
    np.testing.assert_array_equal(c, op(a, b))


def test_two_dimensional_elementwise_tail_starts():
    """A tail in the last of two axes: the masked accesses start at row * 37 + 32."""
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(elementwise((5, 37), intr.ADD_16)), report=report)
    assert sorted(r.action for r in report) == ["tensorized", "variable_length"]
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize(
    "shape, strategy",
    [((127, 255, 129), "full"), ((8, 16, 16), "full"), ((9, 17, 17), "full"), ((9, 17, 17), "partial")],
)
def test_matmul_after_tailsplit(shape, strategy):
    m, n, k = shape
    report = []
    mod = tensorize_marked(TailSplit(strategy=strategy)(scheduled_matmul(m, n, k)), report=report)
    actions = [r.action for r in report]
    assert actions.count("tensorized") == 1 and "left" not in actions, [str(r) for r in report]
    assert len(actions) == 2 ** sum(1 for extent, tile in zip((m, n, k), (8, 16, 16), strict=True) if extent % tile)
    # a 1-row tail with full j and k is the 1x16x16 tail intrinsic
    assert actions.count("tail_intrinsic") == (1 if m % 8 == 1 else 0)
    script = mod.script()
    assert MARK_KEY not in script
    assert "T.broadcast(A_1[i, k], 16)" in script.replace("T.Broadcast", "T.broadcast")  # the micro-kernel
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows", [4, 2])
def test_matmul_row_tails_use_the_fixed_size_intrinsics(rows):
    """TailSplit's tail copy (binding i_0 * 8 + i_1, i_1 < rows) cannot be blockized; it is instantiated."""
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(scheduled_matmul(8 + rows, 32, 16)), report=report)
    assert [(r.action, r.intrinsic) for r in report] == [
        ("tensorized", intr.MATMUL_8x16x16),
        ("tail_intrinsic", intr.MATMUL_TAILS[rows]),
    ]
    assert mod.script().count("T.unroll(16)") == 2  # both k loops of the micro-kernels
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_pass_form_and_records():
    report = []
    mod = tvm.transform.Sequential([TailSplit(strategy="full"), TensorizeMarked(report=report)])(
        elementwise((40,), intr.MUL_16)
    )
    assert all(isinstance(r, TensorizeRecord) for r in report)
    assert [r.action for r in report] == ["tensorized", "variable_length"]
    assert "tensorized with tailsplit_avx512_fp32_mul_16" in str(report[0])
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_array_equal(c, a * b)


def test_unregistered_mark_is_an_error():
    # the example's loops are named i, j, k, l by TE: the mark is on k (the w axis)
    with pytest.raises(ValueError, match=r"loop 'k' \(block 'C'\) names 'vmuls'.*not a registered TensorIntrin"):
        tensorize_marked(elementwise_multiply_nc1hwc0(instruction="vmuls"))


@pytest.mark.parametrize("value", [5, 2.5])
def test_a_mark_whose_value_is_no_name_is_an_error(value):
    """A mark annotated with a number (sch.annotate(loop, "pragma_emit_insn", 5)) was reported as "names '5', which
    is not a registered TensorIntrin", as if a str had been given; the error now says the value is no name."""
    sch = s_tir.Schedule(vector_scale_1d(40, 16, "vmul16"))
    loop = sch.get_loops(sch.get_sblock("B"))[-1]
    sch.unannotate(loop, MARK_KEY)  # (annotate keeps a key's first value)
    sch.annotate(loop, MARK_KEY, value)
    message = rf"the mark on loop 'i_1' \(block 'B'\) has the value {value} \({type(value).__name__}\): .* \(a str\)"
    with pytest.raises(ValueError, match=message):
        tensorize_marked(sch.mod)


def test_undecomposed_reduction_is_an_error():
    mod = TailSplit(strategy="full")(scheduled_matmul(16, 16, 16, decompose=False))
    with pytest.raises(ValueError, match=r"block 'C\w*'.*init statement.*decompose_reduction"):
        tensorize_marked(mod)


@pytest.mark.parametrize("marked", ["threadIdx.x", "blockIdx.x"])
def test_a_mark_over_a_thread_bound_loop_is_an_error(marked):
    """A mark on (or above) a thread-bound loop: ``sch.tensorize`` refuses the region, and the instantiation that
    follows replaced the ``threadIdx.x`` loop by the 16-lane multiply, dropping the binding: one thread of each
    block then did the work of its 16 threads (and every thread, had another loop of the kernel kept
    ``threadIdx.x``). An instruction replaces every loop under its mark; a thread binding is part of the launch."""
    a, b = te.placeholder((64,), "float32", name="A"), te.placeholder((64,), "float32", name="B")
    c = te.compute((64,), lambda i: a[i] * b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    block_x, thread_x = sch.split(loop, [None, 16])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    sch.annotate(thread_x if marked == "threadIdx.x" else block_x, MARK_KEY, intr.MUL_16)
    name = "i_1" if marked == "threadIdx.x" else "i_0"
    with pytest.raises(ValueError, match=rf"mark on loop '{name}' \(block 'C'\).*loop '{name}' itself is bound to "
                                         rf"{marked}"):
        tensorize_marked(TailSplit()(sch.mod))


def test_a_mark_above_a_thread_bound_loop_names_both_loops():
    a, b = te.placeholder((64,), "float32", name="A"), te.placeholder((64,), "float32", name="B")
    c = te.compute((64,), lambda i: a[i] * b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    outer, thread_x = sch.split(loop, [None, 16])
    sch.bind(thread_x, "threadIdx.x")
    sch.annotate(outer, MARK_KEY, intr.MUL_16)
    with pytest.raises(ValueError, match=r"mark on loop 'i_0' \(block 'C'\).*loop 'i_1' under it is bound to "
                                         r"threadIdx.x"):
        tensorize_marked(TailSplit()(sch.mod))


def test_guarded_region_is_left_as_code():
    """Without TailSplit the tail's T.where stays under the mark: not condition-free, left, still right."""
    report = []
    mod = tensorize_marked(elementwise((20,), intr.MUL_16), report=report)
    assert [r.action for r in report] == ["left"]
    assert report[0].reason.startswith("not condition-free: predicate of block 'C'")
    assert MARK_KEY not in mod.script()
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_array_equal(c, a * b)


def test_refused_pattern_is_left_unchanged_with_reasons():
    """B = A * 2 marked with the A * B intrinsic: tensorize refuses the main tile, the tail does not match."""
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(vector_scale_1d(40, 16, intr.MUL_16)), report=report)
    assert [r.action for r in report] == ["left", "left"]
    main, tail = report
    assert main.block == "B_0" and main.loop == "i_1"
    assert main.reason.startswith("sch.tensorize refused:") and "\n" not in main.reason
    assert "variable-length form refused" in tail.reason and "does not match the description" in tail.reason
    script = mod.script()
    assert MARK_KEY not in script and "llvm.masked" not in script and "T.Ramp" not in script
    (a, _), (_, b) = run(mod)
    np.testing.assert_array_equal(b, a * 2)


@T.prim_func(s_tir=True)
def _vector_by_four(A: T.Buffer((24,), "float32"), B: T.Buffer((24,), "float32"), C: T.Buffer((24,), "float32")):
    for i_0 in range(6):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "tailsplit_test_mul_16_with_4"}):
            with T.sblock("C"):
                v = T.axis.spatial(24, i_0 * 4 + i_1)
                C[v] = A[v] * B[v]


def _register_mul_16_with_4_tail() -> None:
    """``tailsplit_test_mul_16_with_4``: the 16-lane multiply with a 4-lane multiply registered as its tail for
    extent 4 (and no variable-length form)."""
    if s_tir.TensorIntrin.get("tailsplit_test_mul_4", allow_missing=True) is None:
        s_tir.TensorIntrin.register("tailsplit_test_mul_4", *intr._elementwise_intrinsic("mul", lanes=4))
    intr.register_intrinsics()
    mul16 = s_tir.TensorIntrin.get(intr.MUL_16)
    if s_tir.TensorIntrin.get("tailsplit_test_mul_16_with_4", allow_missing=True) is None:
        s_tir.TensorIntrin.register("tailsplit_test_mul_16_with_4", mul16.desc, mul16.impl)
    register_tail_intrinsics("tailsplit_test_mul_16_with_4", by_extent={4: "tailsplit_test_mul_4"})


def test_tail_intrinsic_by_extent():
    """A mark whose region has extent 4 uses the intrinsic registered for extent 4 (through sch.tensorize)."""
    _register_mul_16_with_4_tail()
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _vector_by_four}), report=report)
    assert [(r.action, r.intrinsic) for r in report] == [("tail_intrinsic", "tailsplit_test_mul_4")]
    assert "T.Ramp(0, 1, 4)" in mod.script()
    (a, b, _), (_, _, c) = run(mod)
    np.testing.assert_array_equal(c, a * b)
    with pytest.raises(ValueError, match="positive loop extents"):
        register_tail_intrinsics("tailsplit_test_mul_16_with_4", by_extent={0: "tailsplit_test_mul_4"})


def test_tail_intrinsic_by_extent_after_tailsplit_allocates_nothing():
    """TailSplit's tail (binding ``i_0 * 16 + i_1``, extent 4) cannot be blockized, so the by-extent intrinsic is
    instantiated; its implementation's root block allocates nothing (this used to build a SeqStmt of length 1,
    which TVM rejects)."""
    _register_mul_16_with_4_tail()
    mod = elementwise((100,), "tailsplit_test_mul_16_with_4")
    report = []
    out = tensorize_marked(TailSplit(strategy="full")(mod), report=report)
    assert [(r.action, r.intrinsic) for r in report] == [
        ("tensorized", "tailsplit_test_mul_16_with_4"), ("tail_intrinsic", "tailsplit_test_mul_4")]
    assert "C[96:100] = A[T.Ramp(96, 1, 4)] * B[T.Ramp(96, 1, 4)]" in out.script()
    (a, b, _), (_, _, c) = run(out)
    np.testing.assert_array_equal(c, a * b)


@T.prim_func(s_tir=True)
def _dynamic_split(a: T.handle, b: T.handle, c: T.handle, n: T.int32):
    """What a dynamic split of C = A * B by 16 looks like: main tiles, then one tail whose extent is computed
    above its mark (``T.bind``); the buffers hold max(n, 0) elements."""
    m = T.int32()
    A = T.match_buffer(a, (m,), "float32")
    B = T.match_buffer(b, (m,), "float32")
    C = T.match_buffer(c, (m,), "float32")
    for i_0 in range(T.max(n, 0) // 16):
        for i_1 in T.serial(16, annotations={"pragma_emit_insn": "tailsplit_avx512_fp32_mul_16"}):
            with T.sblock("C_0"):
                v = T.axis.spatial(m, i_0 * 16 + i_1)
                C[v] = A[v] * B[v]
    for i_0 in range(T.max(n, 0) // 16, (T.max(n, 0) + 15) // 16):
        extent = T.bind(T.min(16, n - i_0 * 16))
        for i_1 in T.serial(extent, annotations={"pragma_emit_insn": "tailsplit_avx512_fp32_mul_16"}):
            with T.sblock("C_1"):
                v = T.axis.spatial(m, i_0 * 16 + i_1)
                C[v] = A[v] * B[v]


@pytest.mark.avx512
def test_symbolic_dynamic_split():
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _dynamic_split}), report=report)
    assert [r.action for r in report] == ["tensorized", "variable_length"], [str(r) for r in report]
    script = mod.script()
    assert MARK_KEY not in script and "llvm.masked.store" in script and "T.Ramp(0, 1, 16)" in script
    executable = tvm.compile(mod, target=TARGET)
    assert re.search(r"\{%k\d\}", executable.mod.inspect_source("asm"))
    rng = np.random.default_rng(5)
    for n in range(-2, 3 * 16 + 4):
        size = max(n, 0)
        a, b = rng.uniform(-1, 1, size).astype("float32"), rng.uniform(-1, 1, size).astype("float32")
        c = np.full(size, 9.0, "float32")
        _, _, got = run_guarded(executable, mod["main"], [a, b, c], {"n": n})
        np.testing.assert_array_equal(got, a * b, err_msg=f"n = {n}")


@T.prim_func(s_tir=True)
def _recurrence(B: T.Buffer((20,), "float32"), C: T.Buffer((20,), "float32")):
    for i in T.serial(5, annotations={"pragma_emit_insn": "tailsplit_avx512_fp32_mul_16"}):
        with T.sblock("C"):
            v = T.axis.spatial(19, i)
            C[v + 1] = C[v] * B[v]


def test_recurrence_is_not_vectorized():
    """C[v + 1] = C[v] * B[v] has the description's shape, but each step reads the previous one's result."""
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _recurrence}), report=report)
    assert [r.action for r in report] == ["left"] and "at different starts (a dependence)" in report[0].reason
    (b, c0), (_, c) = run(mod)
    want = c0.copy()
    for v in range(5):
        want[v + 1] = want[v] * b[v]
    np.testing.assert_array_equal(c, want)


def test_thread_bound_tail_is_not_given_cpu_code():
    """On a GPU schedule the main tiles are tensorized (16-lane ramps) and the tails stay as code."""
    a = te.placeholder((200,), "float32", name="A")
    b = te.placeholder((200,), "float32", name="B")
    c = te.compute((200,), lambda i: a[i] + b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    block_x, thread_x, inner = sch.split(loop, [None, 4, 16])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    sch.annotate(inner, MARK_KEY, intr.ADD_16)
    report = []
    mod = tensorize_marked(TailSplit()(sch.mod), report=report)
    actions = [r.action for r in report]
    assert "tensorized" in actions and "variable_length" not in actions
    assert any("bound to GPU threads" in r.reason for r in report if r.action == "left")
    assert "llvm.masked" not in mod.script()
    (a_in, b_in, _), (_, _, c_out) = run(threads_as_serial_loops(mod))
    np.testing.assert_array_equal(c_out, a_in + b_in)


def test_intrinsic_without_tail_forms():
    """examples.vector_scale_1d with its own vmul16 intrinsic: the main tiles are tensorized, the tail of 4 stays."""
    intrinsic = register_vector_scale_intrinsic(16)
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(vector_scale_1d(100, 16, intrinsic)), report=report)
    assert [r.action for r in report] == ["tensorized", "left"]
    assert report[1].reason == "tail (4) and no tail form registered for 'vmul16'"
    assert MARK_KEY not in mod.script()
    (a, _), (_, b) = run(mod)
    np.testing.assert_array_equal(b, a * 2)


@T.prim_func(s_tir=True)
def _dynamic_matmul(a: T.handle, b: T.handle, c: T.handle):
    """A dynamic split of C = A @ B (m symbolic rows, 32 x 32 otherwise) by the 8 x 16 x 16 tile: main row tiles,
    then one row tail of extent min(8, m - i_0 * 8); the init blocks are separate."""
    m = T.int32()
    A = T.match_buffer(a, (m, 32), "float32")
    B = T.match_buffer(b, (32, 32), "float32")
    C = T.match_buffer(c, (m, 32), "float32")
    for i, j in T.grid(m, 32):
        with T.sblock("C_init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.float32(0)
    for i_0, j_0, r_0 in T.grid(m // 8, 2, 2):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "tailsplit_llvm_fp32_matmul_8x16x16"}):
            for j_1, r_1 in T.grid(16, 16):
                with T.sblock("C_update_0"):
                    vi = T.axis.spatial(m, i_0 * 8 + i_1)
                    vj = T.axis.spatial(32, j_0 * 16 + j_1)
                    vr = T.axis.reduce(32, r_0 * 16 + r_1)
                    C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]
    for i_0 in range(m // 8, (m + 7) // 8):
        for j_0, r_0 in T.grid(2, 2):
            for i_1 in T.serial(
                T.min(8, m - i_0 * 8), annotations={"pragma_emit_insn": "tailsplit_llvm_fp32_matmul_8x16x16"}
            ):
                for j_1, r_1 in T.grid(16, 16):
                    with T.sblock("C_update_1"):
                        vi = T.axis.spatial(m, i_0 * 8 + i_1)
                        vj = T.axis.spatial(32, j_0 * 16 + j_1)
                        vr = T.axis.reduce(32, r_0 * 16 + r_1)
                        C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]


def test_symbolic_dynamic_matmul():
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _dynamic_matmul}), report=report)
    assert [r.action for r in report] == ["tensorized", "variable_length"], [str(r) for r in report]
    executable = tvm.compile(mod, target=TARGET)
    rng = np.random.default_rng(6)
    for m in range(0, 21):
        a = rng.uniform(-1, 1, (m, 32)).astype("float32")
        b = rng.uniform(-1, 1, (32, 32)).astype("float32")
        _, _, got = run_guarded(executable, mod["main"], [a, b, np.zeros((m, 32), "float32")], {})
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"m = {m}")


@T.prim_func(s_tir=True)
def window_of_a_vector(a: T.handle, b: T.handle, c: T.handle, s: T.int32, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    C = T.match_buffer(c, (64,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(16, annotations={"pragma_emit_insn": "tailsplit_avx512_fp32_mul_16"}):
            with T.sblock("C"):
                v = T.axis.spatial(64, i_0 * 16 + i_1)
                T.where(s <= i_0 * 16 + i_1 and i_0 * 16 + i_1 < n)
                C[v] = A[v] * B[v]


def test_main_tiles_under_a_symbolic_start_are_instantiated():
    """``s <= i < n``: the full split's main tiles run under ``for i_0 in range(lo(s), hi(n))``, which
    ``sch.tensorize`` cannot blockize; they are matched and instantiated instead, never left as code."""
    intr.register_intrinsics()
    mod = tvm.IRModule({"main": window_of_a_vector.with_attr("global_symbol", "main")})
    records: list = []
    after = tensorize_marked(TailSplit(strategy="full")(mod), report=records)
    actions = [r.action for r in records]
    assert "instantiated" in actions and "left" not in actions, [str(r) for r in records]
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(after, target=intr.llvm_target()))
    for s_value, n_value in [(s, n) for s in range(-2, 40, 3) for n in range(-2, 67, 3)]:
        assert_same_results(mod, after, scalar_args={"s": s_value, "n": n_value}, trials=1, executables=executables)


def test_free_extent_of_the_implementation_must_be_bound():
    """``instantiate`` takes a free extent of the implementation (the any-depth kernel's ``depth``) from the
    match; a match that does not bind it is refused with the variable's name, never instantiated unbound."""
    from tvm_tailsplit.split.tail_forms import TailMatch, TailMismatch
    from tvm_tailsplit.split.tensorize import instantiate

    intr.register_intrinsics()
    kernel = s_tir.TensorIntrin.get(intr.MATMUL_8x16_ANY_DEPTH)
    a, b, c = (tvm.tirx.decl_buffer(shape, "float32", name) for name, shape in
               (("A", (8, 20)), ("B", (20, 16)), ("C", (8, 16))))
    zero = tvm.tirx.const(0, "int32")
    buffers = {"A": (a, (zero, zero)), "B": (b, (zero, zero)), "C": (c, (zero, zero))}
    extents = (tvm.tirx.const(8, "int32"), tvm.tirx.const(16, "int32"), tvm.tirx.const(20, "int32"))
    unbound = TailMatch(intr.MATMUL_8x16_ANY_DEPTH, "C_update", (), extents, buffers)
    with pytest.raises(TailMismatch, match="extent depth is not bound"):
        instantiate(unbound, kernel.impl)
    bound = TailMatch(intr.MATMUL_8x16_ANY_DEPTH, "C_update", (), extents, buffers, free_extents={"depth": extents[2]})
    assert "for k_outer in range(5)" in str(instantiate(bound, kernel.impl))  # 20 // K_UNROLL


@T.prim_func(s_tir=True)
def _every_other_element(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"),
                         C: T.Buffer((64,), "float32")):
    for i in range(4):
        for j in T.serial(0, 16, step=2, annotations={"pragma_emit_insn": "tailsplit_avx512_fp32_mul_16"}):
            with T.sblock("C"):
                v = T.axis.spatial(64, i * 16 + j)
                C[v] = A[v] * B[v]


def test_a_loop_with_a_step_is_not_tensorized():
    """``T.serial(0, 16, step=2)`` has the 16-lane description's extent but runs 8 iterations; ``sch.tensorize``
    ignores the step, so the region became a 16-lane multiply that wrote every element. It is now left as code."""
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _every_other_element}), report=report)
    assert [r.action for r in report] == ["left"] and "step 2" in report[0].reason
    (a, b, c0), (_, _, c) = run(mod)
    want = c0.copy()
    want[::2] = a[::2] * b[::2]
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("returned", [None, tirx.const(1, "int32"), [tirx.Evaluate(0)]], ids=["None", "expr", "list"])
def test_a_variable_length_form_that_returns_no_statement_is_named(returned):
    """A user's variable-length emitter returning None, an expression or a list (not a tirx.Stmt) failed inside
    TVM's mutator with 'Cannot dispatch a null statement' or 'structural mutate result does not match the declared
    type', naming neither the emitter, the mark nor its loop; it is now a TypeError naming all three."""
    intrinsic = register_vector_scale_intrinsic(16, name="tailsplit_test_scale_bad_emitter")

    def returns_no_statement(match):
        return returned

    register_tail_intrinsics(intrinsic, variable_length=returns_no_statement)
    split = TailSplit(strategy="full")(vector_scale_1d(100, 16, intrinsic))
    message = (r"the variable-length tail form .*returns_no_statement registered for "
               r"'tailsplit_test_scale_bad_emitter' returned \w+ .* for loop 'i_1' \(block 'B_1'\); it must return a "
               r"tirx.Stmt")
    with pytest.raises(TypeError, match=message):
        tensorize_marked(split)


LOWER_PAST_BLOCKS = [s_tir.transform.LowerInitBlock(), s_tir.transform.ConvertBlocksToOpaque(),
                     s_tir.transform.CompactBufferAllocation(), s_tir.transform.LowerOpaqueBlock()]


def test_marks_lowered_past_their_blocks_do_not_reach_llvm(capfd):
    """TailSplit keeps a mark lowered by LowerOpaqueBlock (``T.attr(i_1, "pragma_emit_insn", ...)`` above its
    loop); tensorize_marked found no loop annotation there and passed the attributes on, so llvm's codegen warned
    "Unknown pragma pragma_emit_insn" once per mark and the report said nothing. Now each such mark is reported as
    left as code (no block to match) and removed; the program still means a * b."""
    from tvm_tailsplit.split.examples import symbolic_vector_multiply

    lowered = tvm.transform.Sequential([*LOWER_PAST_BLOCKS, TailSplit()])(symbolic_vector_multiply())
    report = []
    mod = tensorize_marked(lowered, report=report)
    assert [r.action for r in report] == ["left", "left"], [str(r) for r in report]
    assert all("no block under the mark" in r.reason for r in report)
    assert MARK_KEY not in mod.script()
    capfd.readouterr()
    executable = tvm.compile(mod, target=TARGET)
    assert "Unknown pragma" not in capfd.readouterr().err
    rng = np.random.default_rng(0)
    for n in (0, 1, 15, 16, 17, 40):
        a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
        _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {"n": n})
        np.testing.assert_array_equal(c, a * b)


def test_remove_marks_removes_marks_lowered_past_their_blocks(capfd):
    """remove_marks (and testing's assert_same_results, through ir_utils.drop_loop_annotation) dropped only loop
    annotations: a mark lowered by LowerOpaqueBlock (``T.attr(i_1, "pragma_emit_insn", ...)``) stayed, and llvm's
    codegen warned "Unknown pragma pragma_emit_insn" for each. Both forms are removed now."""
    from tvm_tailsplit.split.examples import symbolic_vector_multiply

    lowered = tvm.transform.Sequential([*LOWER_PAST_BLOCKS, TailSplit()])(symbolic_vector_multiply())
    assert MARK_KEY in lowered.script()
    mod = remove_marks(lowered)
    assert MARK_KEY not in mod.script()
    capfd.readouterr()
    executable = tvm.compile(mod, target=TARGET)
    assert "Unknown pragma" not in capfd.readouterr().err
    rng = np.random.default_rng(0)
    for n in (0, 5, 16, 33):
        a, b = (random_like("float32", (n,), rng) for _ in range(2))
        _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {"n": n})
        np.testing.assert_array_equal(c, a * b)


def test_a_mark_on_a_block_is_named_in_the_report_and_is_an_error():
    """``sch.annotate(block, MARK_KEY, name)`` (a block instead of the loop) marked nothing: TailSplit reported 'no
    marks (pragma_emit_insn), unchanged', tensorize_marked did nothing and said nothing, and llvm's codegen warned
    "Unknown pragma pragma_emit_insn". TailSplit's report now names the block, and tensorize_marked raises a
    ValueError naming the function, the block and the value; on the loop the same mark is tensorized."""
    from tvm_tailsplit.split.examples import symbolic_vector_multiply

    mod = symbolic_vector_multiply()
    sch = s_tir.Schedule(remove_marks(mod))
    sch.annotate(sch.get_sblock("C"), MARK_KEY, intr.MUL_16)
    reports = []
    split = TailSplit(reports=reports)(sch.mod)
    assert str(reports[0]) == ("TailSplit main: no marks (pragma_emit_insn) on loops; block 'C' carries "
                               "pragma_emit_insn, which marks nothing there (a mark goes on the outermost loop of the "
                               "region its instruction covers), unchanged")
    with pytest.raises(ValueError, match=r"^main: block 'C' is annotated pragma_emit_insn = "
                                         r"'tailsplit_avx512_fp32_mul_16': a mark on a block marks nothing; it goes on "
                                         r"the outermost loop"):
        tensorize_marked(split)
    report = []
    executable = tvm.compile(tensorize_marked(TailSplit()(mod), report=report), target=TARGET)
    assert [r.action for r in report] == ["tensorized", "variable_length"]
    rng = np.random.default_rng(0)
    for n in (0, 7, 16, 21):
        a, b = (random_like("float32", (n,), rng) for _ in range(2))
        np.testing.assert_array_equal(run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {})[-1],
                                      a * b)
