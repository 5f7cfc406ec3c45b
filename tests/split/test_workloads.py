"""The end-to-end workloads (tvm_tailsplit.split.workloads): after TailSplit + tensorize_marked each one compiles on
llvm, its main tiles carry the intrinsic, and it computes what numpy computes, on canary-guarded buffers;
the symbolic-M matmul and dense layer run for several M with one compiled kernel each."""

import re

import numpy as np
import pytest
import tvm

from tvm_tailsplit import TailSplit, tensorize_marked
from tvm_tailsplit.cuda import compile_cuda_source, cuda_source
from tvm_tailsplit.split import analysis, examples
from tvm_tailsplit.split import workloads as wl
from tvm_tailsplit.testing import dispatched_labels, random_like, run_guarded

SHAPES = {
    "dense_int8_vnni": [dict(m=13, n=40, k=11), dict(m=16, n=32, k=16), dict(m=4, n=17, k=7)],
    "matmul_fp32": [dict(m=13, n=40, k=21), dict(m=16, n=32, k=32), dict(m=9, n=15, k=17)],
    "elementwise_nc1hwc0": [dict(n=1, c1=2, h=13, w=3, c0=16), dict(n=2, c1=1, h=16, w=2, c0=16)],
}
MARKS = {"dense_int8_vnni": wl.VNNI_INTRINSIC, "matmul_fp32": wl.MATMUL_INTRINSIC,
         "elementwise_nc1hwc0": wl.VECTOR_MUL_INTRINSIC}
# a piece of each intrinsic's implementation, as it appears in the tensorized TIR
IMPLEMENTATION = {"dense_int8_vnni": "llvm.x86.avx512.vpdpbusd.512",
                  "matmul_fp32": "acc[i, T.Ramp(0, 1, 16)] + T.Broadcast(A[",
                  "elementwise_nc1hwc0": "A_1[T.Ramp(0, 1, 16)] * B_1[T.Ramp(0, 1, 16)]"}
# how a main tile is tensorized: by sch.tensorize, or (the free depth of the matmul and VNNI kernels, which
# sch.tensorize cannot bind) matched and instantiated by tensorize_marked
MAIN_TILE_ACTION = {"dense_int8_vnni": "instantiated", "matmul_fp32": "instantiated",
                    "elementwise_nc1hwc0": "tensorized"}
CASES = [(name, shape) for name, shapes in SHAPES.items() for shape in shapes]
# the workloads whose code needs an instruction set beyond AVX-512F to run
NEEDS = {"dense_int8_vnni": pytest.mark.vnni}


def workload_params(names) -> list:
    """``names`` as parameters, each marked with the instruction set its code needs."""
    return [pytest.param(name, marks=NEEDS.get(name, ()), id=name) for name in names]


def case_id(case) -> str:
    name, shape = case
    return name + "-" + "x".join(str(v) for v in shape.values())


def random_inputs(func, rng) -> list[np.ndarray]:
    arrays = []
    for param in func.params:
        shape = tuple(int(d) for d in param.shape)
        if param.dtype == "uint8":
            arrays.append(rng.integers(0, 256, size=shape).astype("uint8"))
        else:
            arrays.append(random_like(param.dtype, shape, rng))
    return arrays


def check_against_numpy(name, mod, shape, target, seed=0):
    func = mod["main"]
    executable = tvm.compile(mod, target=target)
    rng = np.random.default_rng(seed)
    arrays = random_inputs(func, rng)
    outputs = run_guarded(executable, func, arrays, {})
    want = wl.reference(name, arrays, shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(outputs[-1], want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(outputs[-1], want)


@pytest.mark.parametrize("case", [pytest.param(c, marks=NEEDS.get(c[0], ()), id=case_id(c)) for c in CASES])
def test_tailsplit_and_tensorize_match_numpy(case, target):
    name, shape = case
    marked = wl.WORKLOADS[name].build(**shape)
    split = TailSplit()(marked)
    assert analysis.conditions_under_marks(split) == 0
    report = []
    mod = tensorize_marked(split, report=report)
    for record in report:
        print(record)
    spec = wl.WORKLOADS[name]
    has_main_tile = all(shape[axis] >= tile for axis, tile in zip(spec.tiled, spec.tile, strict=True))
    # the main tile (the intrinsic's exact shape) comes first; a shape smaller than a tile has only tails
    assert (report[0].action == MAIN_TILE_ACTION[name]) == has_main_tile
    if has_main_tile:
        assert report[0].intrinsic == MARKS[name]
        assert IMPLEMENTATION[name] in mod.script()
    check_against_numpy(name, mod, shape, target)


def test_tailsplit_leaves_no_guard_and_tensorizes_every_main_tile(target):
    """The benchmark's matmul: 4 main-tile kinds would be guarded without the pass; after it the mark whose
    extents equal the micro-kernel's (8 x 16, any depth) is instantiated and the tails use the tail form."""
    mod = wl.matmul_fp32(127, 255, 129)
    assert analysis.conditions_under_marks(mod) > 0
    report = []
    tensorize_marked(TailSplit()(mod), report=report)
    assert [r.action for r in report] == ["instantiated"] + ["variable_length"] * 3, report


@pytest.mark.parametrize("name", workload_params(n for n, w in wl.WORKLOADS.items() if w.symbolic_axis))
def test_symbolic_m_runs_for_every_m(name, target):
    """M is a symbolic variable: one compiled kernel; main tiles instantiated, the M tail has a symbolic extent
    (``min(8, m - i_0 * 8)``) and is handled by the tail form; checked against numpy for several M, 0 included
    (nothing is written)."""
    spec = wl.WORKLOADS[name]
    shape = dict(m=None, n=40, k=21)
    split = TailSplit()(spec.build(**shape))
    assert analysis.conditions_under_marks(split) == 0
    report = []
    tensorized = tensorize_marked(split, report=report)
    assert report[0].action == "instantiated"
    assert all(r.action != "left" for r in report), [str(r) for r in report]
    executable = tvm.compile(tensorized, target=target)
    for m in (0, 1, 7, 8, 9, 30):
        concrete = {**shape, spec.symbolic_axis: m}
        arrays = random_inputs(spec.compute(**concrete), np.random.default_rng(m))
        got = run_guarded(executable, tensorized["main"], arrays, {})[-1]
        want = wl.reference(name, arrays, concrete)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"m={m}")


@pytest.mark.vnni
def test_dense_every_small_shape(target):
    """The VNNI kernel and its tail form over a small space: for N and K around the tile (16 outputs, 4-step
    groups) one symbolic-M kernel each, run for every M from 0 to 17, exact against numpy."""
    for n in (1, 7, 15, 16, 17, 32, 33):
        for k in (1, 2, 3, 4, 5, 8, 13):
            mod = tensorize_marked(TailSplit()(wl.dense_int8_vnni(None, n, k)))
            executable = tvm.compile(mod, target=target)
            for m in range(18):
                shape = dict(m=m, n=n, k=k)
                arrays = random_inputs(wl.WORKLOADS["dense_int8_vnni"].compute(**shape), np.random.default_rng(m))
                got = run_guarded(executable, mod["main"], arrays, {})[-1]
                np.testing.assert_array_equal(got, wl.reference("dense_int8_vnni", arrays, shape), err_msg=str(shape))


@pytest.fixture(scope="module")
def wmma_tensorized():
    """The 1000 x 1000 x 1000 tensor-core matmul after TailSplit + tensorize_marked, and the report."""
    wl.register_workload_intrinsics()
    marked = wl.matmul_wmma_cuda(1000, 1000, 1000)
    assert analysis.conditions_under_marks(marked) > 0  # the last thread blocks are guarded at every stage
    split = TailSplit()(marked)
    assert analysis.conditions_under_marks(split) == 0
    report = []
    return tensorize_marked(split, report=report), report


def test_wmma_workload_every_stage_tensorized(wmma_tensorized):
    mod, report = wmma_tensorized
    assert report and all(r.action == "tensorized" for r in report), [str(r) for r in report]
    assert {r.instruction for r in report} == set(wl.WMMA_MARKS.values())
    source = cuda_source(mod, "sm_80")
    for call in ("wmma::fill_fragment", "wmma::load_matrix_sync", "wmma::mma_sync", "wmma::store_matrix_sync"):
        assert call in source


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_wmma_workload_compiles_with_nvcc(wmma_tensorized, arch):
    mod, _ = wmma_tensorized
    usages = compile_cuda_source(cuda_source(mod, arch), arch)
    assert usages and all(u.registers > 0 for u in usages)
    for usage in usages:
        print(usage)


@pytest.mark.gpu
def test_wmma_workload_runs_on_the_gpu(wmma_tensorized):
    mod, _ = wmma_tensorized
    device = tvm.cuda(0)
    arch = "sm_" + device.compute_version.replace(".", "")
    executable = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}))
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (1000, 1000)).astype("float16")
    b = rng.uniform(-1, 1, (1000, 1000)).astype("float16")
    c = tvm.runtime.empty((1000, 1000), "float32", device)
    executable["main"](tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32"), rtol=1e-2, atol=1e-2)


def test_matmul_reads_b_from_a_packed_panel(target):
    """(d) and (e) share the kernel: ``B`` is copied per 16-column panel into ``[N/16, K, 16]`` (whole 64-byte
    rows; the last panel padded with zeros by the copy only) and the micro-kernel and its tails read the panel.
    The full panels and the tail panel each have their own panel buffer (TVM shrinks each to one panel)."""
    mod = tensorize_marked(TailSplit()(wl.matmul_fp32(13, 40, 21, pack=True)))
    script = mod.script()
    assert "B_global = T.sblock_alloc_buffer((3, 21, 16))" in script
    assert "B_global_1 = T.sblock_alloc_buffer((3, 21, 16))" in script
    # the main tiles' B operand: a whole panel row
    assert "* B_global[j_0, k_outer * 4 + k_inner, T.Ramp(0, 1, 16)]" in script
    reads_of_b = [line for line in script.splitlines() if "B[" in line]
    copies = ("T.reads(B[", "B_global[", "B_global_1[")
    assert reads_of_b and all(any(c in line for c in copies) for line in reads_of_b)  # only the copies read B
    assert "masked.load\", T.address_of(B_global" not in script  # a panel row is read whole, even in the N tail


def _packs(mod: tvm.IRModule) -> list[bool]:
    """For each kernel of ``mod`` (the cases of a dispatched function, in order): whether it reads a packed panel."""
    script = mod.script()
    labels = re.findall(r'T\.sblock\("C_(in_place|packed)"\)', script) or [None]
    return ["B_global" in script] if labels == [None] else [label == "packed" for label in labels]


def test_matmul_packs_b_by_the_rule_of_its_row_tiles(target):
    """``MATMUL_PACK_MIN_ROW_TILES``: a thin M (at most 16 rows: one or two 8-row tiles read each panel) reads ``B``
    in place; from 17 rows on ``B`` is packed. A symbolic M holds both kernels, dispatched on M: each M runs the
    kernel its rows get (the blocks of each case carry its label), equal to numpy for M = 0 to 40."""
    assert [wl.matmul_packs_panels(m) for m in (1, 8, 16, 17, 24, 127)] == [False] * 3 + [True] * 3
    assert wl.matmul_packs_panels(np.int64(24)) and not wl.matmul_packs_panels(np.int64(0))  # as matmul_fp32 does
    for m, packed in ((1, False), (16, False), (17, True), (127, True)):
        assert _packs(wl.matmul_fp32(m, 40, 21)) == [packed], m
        assert _packs(wl.matmul_fp32(m, 40, 21, pack=not packed)) == [not packed], m
    symbolic = wl.matmul_fp32(None, 40, 21)
    assert _packs(symbolic) == [False, True]
    (m_var,) = {dim for dim in symbolic["main"].params[0].shape if isinstance(dim, tvm.tirx.Var)}
    for m, label in ((0, "in_place"), (16, "in_place"), (17, "packed"), (1000, "packed")):
        assert dispatched_labels(symbolic["main"], m_var, m, ("in_place", "packed")) == [label], m
    tensorized = tensorize_marked(TailSplit()(symbolic))
    executable = tvm.compile(tensorized, target=target)
    for m in range(41):
        arrays = random_inputs(wl._matmul_func(m, 40, 21), np.random.default_rng(m))
        got = run_guarded(executable, tensorized["main"], arrays, {})[-1]
        np.testing.assert_allclose(got, arrays[0] @ arrays[1], rtol=1e-5, atol=1e-5, err_msg=f"m={m}")
    with pytest.raises(TypeError, match="matmul_fp32: pack must be True, False or None"):
        wl.matmul_fp32(16, 40, 21, pack=1)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: wl.matmul_fp32(9, 0, 3), "matmul_fp32: n must be a positive int, got 0"),
    (lambda: wl.matmul_fp32(None, 17, 0), "matmul_fp32: k must be a positive int, got 0"),
    (lambda: wl.dense_int8_vnni(0), "dense_int8_vnni: m must be a positive int or None, got 0"),
    (lambda: wl.elementwise_nc1hwc0(h_tile=0), "elementwise_nc1hwc0: h_tile must be a positive int, got 0"),
    (lambda: wl.matmul_wmma_cuda(16, 2.5), "matmul_wmma_cuda: n must be a positive int, got 2.5"),
    # the rule failed with "bad operand type for unary -: 'NoneType'" and took True, -5 and 2.5 as row counts
    (lambda: wl.matmul_packs_panels(None), "matmul_packs_panels: m must be a non-negative int, got None"),
    (lambda: wl.matmul_packs_panels(True), "matmul_packs_panels: m must be a non-negative int, got True"),
    (lambda: wl.matmul_packs_panels(-5), "matmul_packs_panels: m must be a non-negative int, got -5"),
    (lambda: wl.matmul_packs_panels(24.0), "matmul_packs_panels: m must be a non-negative int, got 24.0"),
])
def test_workload_builders_name_a_bad_size(build, message):
    # they failed deep inside TVM (`!info.dom.IsNothing()`) on an empty axis
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(("build", "error", "message"), [
    (lambda: examples.elementwise_multiply_nc1hwc0(h=-3), ValueError,
     "elementwise_multiply_nc1hwc0: h must be a positive int, got -3"),
    (lambda: examples.elementwise_multiply_nc1hwc0(c0=2.5), ValueError,
     "elementwise_multiply_nc1hwc0: c0 must be a positive int, got 2.5"),
    (lambda: examples.matmul(0, 4, 4), ValueError, "matmul: m must be a positive int, got 0"),
    (lambda: examples.vector_scale_1d(n=0), ValueError, "vector_scale_1d: n must be a positive int, got 0"),
    (lambda: examples.vector_scale_1d(instruction=5), TypeError,
     "vector_scale_1d: instruction must be the name of an instruction"),
    (lambda: examples.symbolic_vector_multiply(lanes=0), ValueError,
     "symbolic_vector_multiply: lanes must be a positive int, got 0"),
    (lambda: examples.register_vector_scale_intrinsic(lanes=0), ValueError,
     "register_vector_scale_intrinsic: lanes must be a positive int, got 0"),
    (lambda: examples.gpu_vector_add_one(n=-1), ValueError,
     "gpu_vector_add_one: n must be a positive int or None, got -1"),
])
def test_example_builders_name_a_bad_argument(build, error, message):
    # they built a module with a negative or fractional extent (h=-3 compiled and ran), or failed inside TVM
    # ("All the constant factors are required to be positive", a DiagnosticError) naming no argument
    with pytest.raises(error, match=message):
        build()


def test_example_matmul_takes_symbolic_sizes():
    k = tvm.tirx.Var("k", "int32")
    assert examples.matmul(4, 16, k).params[0].shape[1].same_as(k)


def test_vnni_marks_stay_code_for_a_cpu_without_vnni():
    """The dense layer compiled for a CPU without AVX-512 VNNI (TVM's plain "llvm", or haswell) through the
    "tailsplit" pipeline: the code with vpdpbusd.512 compiled, and LLVM aborted the process at the first call ("Do
    not know how to split the result of this operator!"). The marks naming a VNNI intrinsic now stay code where the
    function's target (or the current one) lacks the feature, with the reason; it runs, equal to numpy."""
    haswell = tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})
    marked = wl.dense_int8_vnni(None, 20, 9)
    report = []
    with haswell:
        tensorize_marked(TailSplit()(marked), report=report)
    assert report and all(r.action == "left" and "lacks avx512vnni" in r.reason for r in report), report
    executable = tvm.compile(marked, target=haswell, tir_pipeline="tailsplit")  # the function's target attribute
    for m in (0, 5, 13):
        shape = dict(m=m, n=20, k=9)
        arrays = random_inputs(wl.WORKLOADS["dense_int8_vnni"].compute(**shape), np.random.default_rng(m))
        got = run_guarded(executable, marked["main"], arrays, {})[-1]
        np.testing.assert_array_equal(got, wl.reference("dense_int8_vnni", arrays, shape), err_msg=f"m={m}")


@pytest.mark.vnni
def test_vnni_marks_are_tensorized_for_a_cpu_with_vnni(target):
    report = []
    with target:
        tensorize_marked(TailSplit()(wl.dense_int8_vnni(None, 20, 9)), report=report)
    assert [r.action for r in report] == ["instantiated"] + ["variable_length"] * 3, [str(r) for r in report]


def _loop_order(func: tvm.tirx.PrimFunc, block: str) -> list[str]:
    sch = tvm.s_tir.Schedule(func)
    return [sch.get(loop).loop_var.name for loop in sch.get_loops(sch.get_sblock(block))]


def test_matmul_loop_order_is_the_documented_one():
    """``matmul_fp32``'s docstring gave ``j_0, i_0, i_1, j_1, r`` for both kernels; the in-place one runs
    ``i_0, j_0, ...`` (each panel of ``B`` is read in place, no panel to keep in cache)."""
    assert _loop_order(wl.matmul_fp32(20, 33, 7, pack=True)["main"], "C") == ["j_0", "i_0", "i_1", "j_1", "r"]
    assert _loop_order(wl.matmul_fp32(20, 33, 7, pack=False)["main"], "C") == ["i_0", "j_0", "i_1", "j_1", "r"]
    symbolic = wl.matmul_fp32(None, 33, 7)["main"]
    assert _loop_order(symbolic, "C_in_place") == ["i_0", "j_0", "i_1", "j_1", "r"]
    assert _loop_order(symbolic, "C_packed") == ["j_0", "i_0", "i_1", "j_1", "r"]
    assert "(``False``: loops ``i_0, j_0, i_1, j_1, r``)" in " ".join(wl.matmul_fp32.__doc__.split())


def test_marked_block_names_the_block_under_each_mark():
    """``Workload.marked_block`` said "the block under the mark in ``build``'s module", but the symbolic-M matmul
    holds two kernels whose blocks carry the case's suffix; the docstring says so now."""
    from tvm_tailsplit.split.conditions import find_marks

    for name, spec in wl.WORKLOADS.items():
        static = spec.build(**SHAPES[name][0])
        assert {b for mark in find_marks(static["main"]) for b in mark.blocks()} == {spec.marked_block}, name
        if spec.symbolic_axis:
            symbolic = spec.build(**{**SHAPES[name][0], spec.symbolic_axis: None})
            blocks = {b for mark in find_marks(symbolic["main"]) for b in mark.blocks()}
            want = ({f"{spec.marked_block}_in_place", f"{spec.marked_block}_packed"} if name == "matmul_fp32"
                    else {spec.marked_block})
            assert blocks == want, (name, blocks)
    assert "suffixed ``_in_place`` and ``_packed``" in " ".join(wl.Workload.__doc__.split())
