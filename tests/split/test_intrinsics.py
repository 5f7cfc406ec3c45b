"""The intrinsics of ``tvm_tailsplit.split.intrinsics`` on llvm against numpy: the 16-lane vector operations, their
masked variable-length tail forms (every extent 0..16, canary-guarded buffers, masked AVX-512 instructions in
the assembly), the 8x16x16 matmul micro-kernel and its any-depth form (accumulators kept in registers), the
one-instruction VNNI dot and the register-blocked VNNI dense kernel with their tail forms."""

import importlib.util
import pathlib
import re

import numpy as np
import pytest
import tvm
from tvm import s_tir, te
from tvm.script import tirx as T

from tvm_tailsplit import MARK_KEY, TailSplit, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.split import workloads
from tvm_tailsplit.split.examples import matmul, symbolic_vector_multiply
from tvm_tailsplit.testing import guarded_array, run_guarded, to_tvm

from .test_tensorize_layouts import marked_for_dot_16x4

TARGET = intr.llvm_target()
OPS = {intr.MUL_16: np.multiply, intr.ADD_16: np.add}


def test_register_intrinsics_is_idempotent_and_registers_everything():
    names = intr.register_intrinsics()
    assert names == intr.register_intrinsics()
    assert set(names) == {
        intr.MUL_16, intr.ADD_16, intr.MATMUL_8x16x16, *intr.MATMUL_TAILS.values(), intr.MATMUL_8x16_ANY_DEPTH,
        intr.VNNI_DOT_16x4_LLVM22, intr.VNNI_DENSE_8x16_ANY_DEPTH,
    }
    for name in names:
        assert s_tir.TensorIntrin.get(name, allow_missing=True) is not None
    assert intr.MATMUL_TILE == (8, 16, 16)
    assert intr.MATMUL_PANEL_TILE == (8, 16)
    assert intr.VNNI_PANEL_TILE == (8, 16)


def test_builtin_names_are_tvms():
    """The re-exported names are the strings TVM registers (read from its sources: importing them costs ~40 s)."""
    package = pathlib.Path(importlib.util.find_spec("tvm").origin).parent / "s_tir" / "tensor_intrin"
    sources = (package / "x86.py").read_text() + (package / "cuda.py").read_text()
    expected = {
        "VNNI_DOT_16x4_INTRIN": intr.VNNI_DOT_16x4,
        "WMMA_SYNC_16x16x16_f16f16f32_INTRIN": intr.WMMA_SYNC_F16F16F32,
        "WMMA_FILL_16x16x16_F32_INTRIN": intr.WMMA_FILL_F32,
        "WMMA_LOAD_16x16x16_F16_A_INTRIN": intr.WMMA_LOAD_F16_A,
        "WMMA_LOAD_16x16x16_F16_B_INTRIN": intr.WMMA_LOAD_F16_B,
        "WMMA_STORE_16x16x16_F32_GLOBAL_INTRIN": intr.WMMA_STORE_F32_GLOBAL,
        "WMMA_STORE_16x16x16_F32_SHARED_INTRIN": intr.WMMA_STORE_F32_SHARED,
    }
    for constant, name in expected.items():
        assert f'\n{constant} = "{name}"' in sources, constant
        assert name in intr.BUILTIN_NAMES


def test_llvm_target_names_the_host_cpu():
    cpu = str(tvm.target.codegen.llvm_get_system_cpu())
    assert str(TARGET.attrs["mcpu"]) == cpu


def _vector_function(n, name):
    """C = A op B over n elements (n a multiple of 16), split by 16, the inner loop tensorized directly."""
    from tvm import te

    a, b = te.placeholder((n,), "float32", name="A"), te.placeholder((n,), "float32", name="B")
    op = (lambda x, y: x * y) if name == intr.MUL_16 else (lambda x, y: x + y)
    c = te.compute((n,), lambda i: op(a[i], b[i]), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(loop, [None, 16])
    sch.tensorize(inner, name)
    return sch.mod


@pytest.mark.parametrize("name", [intr.MUL_16, intr.ADD_16])
@pytest.mark.avx512
def test_vector_intrinsic_is_one_16_lane_operation(name):
    intr.register_intrinsics()
    mod = _vector_function(64, name)
    script = mod.script()
    assert script.count("T.Ramp(0, 1, 16)") == 2 and "[0:16] = " in script  # the store prints as a slice
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    mnemonic = "vmulps" if name == intr.MUL_16 else "vaddps"
    assert len(re.findall(rf"{mnemonic}\s.*zmm", asm)) == 4
    rng = np.random.default_rng(0)
    a, b, c = (guarded_array((64,), "float32") for _ in range(3))
    a.array[:], b.array[:] = rng.uniform(-1, 1, 64), rng.uniform(-1, 1, 64)
    executable["main"](to_tvm(a.array), to_tvm(b.array), to_tvm(c.array))
    for g, what in ((a, "A"), (b, "B"), (c, "C")):
        g.check_canaries(what)
    np.testing.assert_array_equal(c.array, OPS[name](a.array, b.array))


@T.prim_func(s_tir=True)
def _variable_tail(a: T.handle, b: T.handle, c: T.handle, n: T.int32, start: T.int32):
    """One marked tail of extent min(16, n) at an arbitrary (unaligned) start."""
    A = T.match_buffer(a, (40,), "float32")
    B = T.match_buffer(b, (40,), "float32")
    C = T.match_buffer(c, (40,), "float32")
    for i in T.serial(T.min(16, n), annotations={MARK_KEY: "tailsplit_avx512_fp32_mul_16"}):
        with T.sblock("C"):
            v = T.axis.spatial(40, start + i)
            C[v] = A[v] * B[v]


def _tail_module(name):
    func = _variable_tail
    if name != intr.MUL_16:  # the same function with + and the add mark
        func = tvm.script.from_source(
            func.script().replace("A[v] * B[v]", "A[v] + B[v]").replace(intr.MUL_16, name)
        )
    return tvm.IRModule({"main": func})


@pytest.mark.parametrize("name", [intr.MUL_16, intr.ADD_16])
@pytest.mark.avx512
def test_masked_tail_every_extent(name):
    report = []
    mod = tensorize_marked(_tail_module(name), report=report)
    assert [r.action for r in report] == ["variable_length"]
    script = mod.script()
    assert "llvm.masked.store" in script and script.count("llvm.masked.load") == 2 and MARK_KEY not in script
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    mnemonic = "vmulps" if name == intr.MUL_16 else "vaddps"
    assert re.search(r"vmov[au]ps\s+[^\n]*\(.*\), %zmm\d+ \{%k\d\} \{z\}", asm), "masked load"
    assert re.search(r"vmov[au]ps\s+%zmm\d+, [^\n]*\(.*\) \{%k\d\}", asm), "masked store"
    assert re.search(rf"{mnemonic}\s[^\n]*zmm", asm)
    assert not re.search(r"v(mul|add)ss", asm), "no scalar loop"
    rng = np.random.default_rng(1)
    a, b, c = (guarded_array((40,), "float32") for _ in range(3))
    a.array[:], b.array[:] = rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)
    for start in (0, 3, 24):
        for extent in range(17):
            c.array[:] = 7.0
            executable["main"](to_tvm(a.array), to_tvm(b.array), to_tvm(c.array), extent, start)
            for g, what in ((a, "A"), (b, "B"), (c, "C")):
                g.check_canaries(what)
            want = np.full(40, 7.0, "float32")
            end = start + extent
            want[start:end] = OPS[name](a.array[start:end], b.array[start:end])
            np.testing.assert_array_equal(c.array, want, err_msg=f"extent {extent}, start {start}")


def _matmul_tile(m, n, k, rows=8):
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, r = sch.get_loops(block)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, 16])
    ro, ri = sch.split(r, [None, 16])
    sch.reorder(io, jo, ro, ii, ji, ri)
    sch.decompose_reduction(block, ro)
    return sch, ii


@pytest.mark.avx512
def test_matmul_micro_kernel_keeps_accumulators_in_registers():
    intr.register_intrinsics()
    sch, ii = _matmul_tile(8, 16, 16)
    sch.tensorize(ii, intr.MATMUL_8x16x16)
    executable = tvm.compile(sch.mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    # Properties, not one CPU's schedule (LLVM may emit more than one version of the kernel, e.g. for aligned and
    # unaligned C, as it does on AMD Zen 5): every version issues 8 rows x 16 k 16-lane FMAs, keeps the
    # accumulators in registers (no vector register stored to or loaded from the stack) and stores each row of C
    # twice, once for the init block and once for the result.
    fmas = len(re.findall(r"vfmadd\d+ps\s[^\n]*zmm", asm))
    assert fmas and fmas % 128 == 0, fmas
    assert not re.search(r"vmov[au]ps\s+[^\n]*\(%rsp\)[^\n]*%zmm|vmov[au]ps\s+%zmm\d+, [^\n]*\(%rsp\)", asm)
    stores = re.findall(r"vmov[au]ps\s+%zmm\d+, (-?\d*)\((%r\w+)\)", asm)
    offsets_by_base: dict[str, list[int]] = {}
    for offset, base in stores:
        offsets_by_base.setdefault(base, []).append(int(offset or 0))
    assert offsets_by_base, "no 16-lane store of C"
    for base, offsets in offsets_by_base.items():
        assert sorted(offsets) == sorted(list(range(0, 512, 64)) * 2), (base, offsets)  # each row of C twice
    rng = np.random.default_rng(2)
    a, b, c = guarded_array((8, 16), "float32"), guarded_array((16, 16), "float32"), guarded_array((8, 16), "float32")
    a.array[:], b.array[:] = rng.uniform(-1, 1, (8, 16)), rng.uniform(-1, 1, (16, 16))
    executable["main"](to_tvm(a.array), to_tvm(b.array), to_tvm(c.array))
    for g, what in ((a, "A"), (b, "B"), (c, "C")):
        g.check_canaries(what)
    np.testing.assert_allclose(c.array, a.array @ b.array, rtol=1e-5, atol=1e-5)


def _any_depth_tiles(m, n, k, split_reduction=None, decompose=False):
    """``m x n x k`` matmul in 8 x 16 tiles of ``C``, each over the whole reduction (or its slices of
    ``split_reduction``), the block's init kept (or split out at the tile), marked with the any-depth kernel; ``k``
    may be a symbolic variable."""
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, r = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    if split_reduction:
        ro, r = sch.split(r, [None, split_reduction])
        sch.reorder(io, jo, ro, ii, ji, r)
    else:
        sch.reorder(io, jo, ii, ji, r)
    if decompose:
        sch.decompose_reduction(block, ii)
    sch.annotate(ii, MARK_KEY, intr.MATMUL_8x16_ANY_DEPTH)
    return sch.mod


def _check_matmul(executable, func, m, n, k, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (k, n)).astype("float32")
    _, _, got = run_guarded(executable, func, [a, b, np.zeros((m, n), "float32")], {})
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("depth", [1, 5, 16, 17, 100])
@pytest.mark.avx512
def test_any_depth_micro_kernel_covers_the_whole_reduction(depth):
    """Every 8 x 16 tile over a reduction of ``depth`` is a main tile of ``MATMUL_8x16_ANY_DEPTH`` (its free depth
    bound to the region's), instantiated: accumulators from zero, a serial ``k`` loop of ``K_UNROLL`` steps per
    iteration and its remainder (extents folded), no accumulator spilled to the stack while it is a loop, ``C``
    only stored; the result equal to numpy's on canary-guarded buffers."""
    report = []
    mod = tensorize_marked(_any_depth_tiles(16, 32, depth), report=report)
    assert [(r.action, r.intrinsic) for r in report] == [("instantiated", intr.MATMUL_8x16_ANY_DEPTH)]
    script = mod.script()
    assert f"for k_outer in range({depth // intr.K_UNROLL}):" in script
    assert f"for k_rest in range({depth % intr.K_UNROLL}):" in script
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    assert re.search(r"vfmadd\d+ps\s[^\n]*zmm", asm)
    if depth >= 16:  # (LLVM unrolls a shorter k loop completely and hoists B's rows, which may spill)
        assert not re.search(r"vmov[au]ps\s+%zmm\d+, [^\n]*\(%rsp\)", asm)  # accumulators stay in registers
    _check_matmul(executable, mod["main"], 16, 32, depth, seed=depth)


def test_any_depth_micro_kernel_needs_the_init_at_the_start_of_the_tile():
    """The kernel computes ``C = A @ B`` from zero: a tile over one slice of the reduction (its init would run only
    in the first slice) and a tile whose init was split out are refused with the reason and left as code, which
    still computes the product."""
    for mod, reason in ((_any_depth_tiles(16, 32, 40, split_reduction=8), "does not run at the start of the region"),
                        (_any_depth_tiles(16, 32, 40, decompose=True), "has an init statement, the block has none")):
        report = []
        result = tensorize_marked(mod, report=report)
        assert [r.action for r in report] == ["left"] and reason in report[0].reason, report
        executable = tvm.compile(result, target=TARGET)
        _check_matmul(executable, result["main"], 16, 32, 40, seed=0)


def test_any_depth_micro_kernel_with_a_symbolic_depth():
    """``K`` symbolic: the free depth is bound to ``k``; one compiled kernel for every K, including 0."""
    mod = tensorize_marked(_any_depth_tiles(8, 16, tvm.te.var("k")))
    executable = tvm.compile(mod, target=TARGET)
    for k in (0, 1, 3, 16, 33):
        _check_matmul(executable, mod["main"], 8, 16, k, seed=k)


@pytest.mark.parametrize("rows", sorted(intr.MATMUL_TAILS))
@pytest.mark.avx512
def test_matmul_row_tail_intrinsics(rows):
    """The fixed-size row tails (rows x 16 x 16) on a 2 rows by 32 by 32 matmul tiled by (rows, 16, 16) and marked
    with the 8-row kernel: every tile is a row tail (sch.tensorize for 4 and 2 rows; it refuses the unit loop of
    the 1-row form, which tensorize_marked then instantiates)."""
    m = 2 * rows
    sch, ii = _matmul_tile(m, 32, 32, rows)
    sch.annotate(ii, MARK_KEY, intr.MATMUL_8x16x16)
    report = []
    mod = tensorize_marked(sch.mod, report=report)
    assert [(r.action, r.intrinsic) for r in report] == [("tail_intrinsic", intr.MATMUL_TAILS[rows])]
    executable = tvm.compile(mod, target=TARGET)
    assert len(re.findall(r"vfmadd\d+ps\s[^\n]*zmm", executable.mod.inspect_source("asm"))) >= rows * 16
    rng = np.random.default_rng(rows)
    a, b, c = guarded_array((m, 32), "float32"), guarded_array((32, 32), "float32"), guarded_array((m, 32), "float32")
    a.array[:], b.array[:] = rng.uniform(-1, 1, (m, 32)), rng.uniform(-1, 1, (32, 32))
    executable["main"](to_tvm(a.array), to_tvm(b.array), to_tvm(c.array))
    for g, what in ((a, "A"), (b, "B"), (c, "C")):
        g.check_canaries(what)
    np.testing.assert_allclose(c.array, a.array @ b.array, rtol=1e-5, atol=1e-5)


@T.prim_func(s_tir=True)
def _matmul_variable_tail(a: T.handle, b: T.handle, c: T.handle, rows: T.int32, cols: T.int32, depth: T.int32):
    """One marked matmul tail with symbolic extents (rows, cols, depth) <= (8, 16, 16) at offset (1, 2, 3)."""
    A = T.match_buffer(a, (10, 20), "float32")
    B = T.match_buffer(b, (20, 19), "float32")
    C = T.match_buffer(c, (10, 19), "float32")
    for i in T.serial(T.min(8, rows), annotations={MARK_KEY: "tailsplit_llvm_fp32_matmul_8x16x16"}):
        for j, r in T.grid(T.min(16, cols), T.min(16, depth)):
            with T.sblock("C_update"):
                vi = T.axis.spatial(10, 1 + i)
                vj = T.axis.spatial(19, 2 + j)
                vr = T.axis.reduce(20, 3 + r)
                C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]


@pytest.mark.avx512
def test_matmul_variable_tail_every_shape_class():
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _matmul_variable_tail}), report=report)
    assert [r.action for r in report] == ["variable_length"]
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    assert re.search(r"\{%k\d\}", asm)
    assert len(re.findall(r"vfmadd\d+ps\s[^\n]*zmm", asm)) >= 8  # one accumulator per row: 8 independent FMAs
    rng = np.random.default_rng(3)
    a, b, c = guarded_array((10, 20), "float32"), guarded_array((20, 19), "float32"), guarded_array((10, 19), "float32")
    a.array[:], b.array[:] = rng.uniform(-1, 1, (10, 20)), rng.uniform(-1, 1, (20, 19))
    for rows, cols, depth in [(8, 16, 16), (0, 16, 16), (3, 0, 5), (1, 1, 1), (7, 15, 16), (8, 9, 0), (5, 16, 2)]:
        c0 = rng.uniform(-1, 1, (10, 19)).astype("float32")
        c.array[:] = c0
        executable["main"](to_tvm(a.array), to_tvm(b.array), to_tvm(c.array), rows, cols, depth)
        for g, what in ((a, "A"), (b, "B"), (c, "C")):
            g.check_canaries(what)
        want = c0.copy()
        want[1 : 1 + rows, 2 : 2 + cols] += a.array[1 : 1 + rows, 3 : 3 + depth] @ b.array[3 : 3 + depth, 2 : 2 + cols]
        np.testing.assert_allclose(c.array, want, rtol=1e-5, atol=1e-5, err_msg=f"{rows}x{cols}x{depth}")


def _dense_16x4(m, n, k):
    """The dense workload's computation tiled and marked for the one-instruction ``dot_16x4``."""
    return marked_for_dot_16x4(workloads._dense_int8_func(m, n, k))


@pytest.mark.parametrize("n", [7, 16, 40])
@pytest.mark.vnni
def test_vnni_dot_and_its_masked_tail(n):
    from tvm_tailsplit import TailSplit

    m, k = 5, 36
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(_dense_16x4(m, n, k)), report=report)
    expected = (["tensorized"] if n >= 16 else []) + (["variable_length"] if n % 16 else [])
    assert [r.action for r in report] == expected, [str(r) for r in report]
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    assert "vpdpbusd" in asm
    if n % 16:
        assert re.search(r"\{%k\d\}", asm)
    rng = np.random.default_rng(n)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    b = rng.integers(-128, 128, (-(-n // 16), k // 4, 16, 4)).astype("int8")
    guarded = [guarded_array(x.shape, str(x.dtype), canary=77) for x in (a, b, np.zeros((m, n), "int32"))]
    guarded[0].array[:], guarded[1].array[:] = a, b
    executable["main"](*(to_tvm(g.array) for g in guarded))
    for g, what in zip(guarded, "ABC", strict=True):
        g.check_canaries(what)
    got = guarded[2].array
    dense_b = b.transpose(1, 3, 0, 2).reshape(k, -1)[:, :n].astype("int32")
    np.testing.assert_array_equal(got, a.astype("int32") @ dense_b)


@pytest.mark.parametrize("depth", [1, 3, 4, 5, 64, 255])
@pytest.mark.vnni
def test_vnni_dense_kernel_covers_the_whole_reduction(depth):
    """The register-blocked VNNI kernel on whole 8 x 16 tiles: instantiated with the region's depth (any, not only
    multiples of 4: the last group's activation bytes are masked), one vpdpbusd per row and group, zmm accumulators
    stored once; exact against numpy on canary-guarded buffers, whatever the weights' padding holds."""
    from tvm_tailsplit import TailSplit

    m, n = 16, 32
    report = []
    mod = tensorize_marked(TailSplit()(workloads.dense_int8_vnni(m, n, depth)), report=report)
    assert [r.action for r in report] == ["instantiated"], [str(r) for r in report]
    assert ("masked.load" in mod.script()) == (depth % 4 != 0)
    executable = tvm.compile(mod, target=TARGET)
    asm = executable.mod.inspect_source("asm")
    assert len(re.findall(r"vpdpbusd\s[^\n]*zmm", asm)) >= 8  # one accumulator per row
    rng = np.random.default_rng(depth)
    a = rng.integers(0, 256, (m, depth)).astype("uint8")
    w = rng.integers(-128, 128, (n // 16, -(-depth // 4), 16, 4)).astype("int8")  # padding: random, not zeros
    _, _, got = run_guarded(executable, mod["main"], [a, w, np.zeros((m, n), "int32")], {})
    dense_w = w.transpose(1, 3, 0, 2).reshape(-1, n)[:depth].astype("int32")
    np.testing.assert_array_equal(got, a.astype("int32") @ dense_w)


@T.prim_func(s_tir=True)
def _vnni_dense_variable_tail(a: T.handle, w: T.handle, c: T.handle, rows: T.int32, cols: T.int32, depth: T.int32):
    """One marked tile of the dense layer with symbolic extents (rows, cols) <= (8, 16) at row 1, column tile 1,
    over a reduction of symbolic depth."""
    A = T.match_buffer(a, (10, 40), "uint8")
    W = T.match_buffer(w, (3, 10, 16, 4), "int8")
    C = T.match_buffer(c, (10, 48), "int32")
    for i in T.serial(T.min(8, rows), annotations={MARK_KEY: "tailsplit_avx512_vnni_dense_8x16xk"}):
        for j, r in T.grid(T.min(16, cols), depth):
            with T.sblock("C"):
                vi = T.axis.spatial(10, 1 + i)
                vj = T.axis.spatial(48, 16 + j)
                vr = T.axis.reduce(depth, r)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vr]) * T.Cast("int32", W[vj // 16, vr // 4, vj % 16,
                                                                                        vr % 4])


@pytest.mark.vnni
def test_vnni_dense_variable_tail_every_shape_class():
    """The VNNI kernel's tail form with symbolic rows, columns and depth (one compiled kernel): every row count
    0..8 and column count 0..16 at several depths; rows and columns outside the extents are never written."""
    report = []
    mod = tensorize_marked(tvm.IRModule({"main": _vnni_dense_variable_tail}), report=report)
    assert [r.action for r in report] == ["variable_length"], [str(r) for r in report]
    executable = tvm.compile(mod, target=TARGET)
    assert re.search(r"\{%k\d\}", executable.mod.inspect_source("asm"))
    rng = np.random.default_rng(5)
    a, w, c = guarded_array((10, 40), "uint8"), guarded_array((3, 10, 16, 4), "int8"), guarded_array((10, 48), "int32")
    a.array[:] = rng.integers(0, 256, (10, 40))
    w.array[:] = rng.integers(-128, 128, (3, 10, 16, 4))
    dense_w = w.array.transpose(1, 3, 0, 2).reshape(40, 48).astype("int32")
    for depth in (0, 1, 3, 4, 6, 40):
        for rows in range(9):
            for cols in range(17):
                c0 = rng.integers(-1000, 1000, (10, 48)).astype("int32")
                c.array[:] = c0
                executable["main"](to_tvm(a.array), to_tvm(w.array), to_tvm(c.array), rows, cols, depth)
                for g, what in ((a, "A"), (w, "W"), (c, "C")):
                    g.check_canaries(what)
                want = c0.copy()
                if depth:  # the init runs with the first reduction step: a depth of 0 writes nothing
                    want[1 : 1 + rows, 16 : 16 + cols] = (a.array[1 : 1 + rows, :depth].astype("int32")
                                                          @ dense_w[:depth, 16 : 16 + cols])
                np.testing.assert_array_equal(c.array, want, err_msg=f"{rows}x{cols}x{depth}")


def test_tail_accesses_are_plain_where_the_whole_vector_is_in_bounds():
    """A tail form masks only what needs a mask: all 16 lanes used -> a plain vector load/store; a row packed whole
    (16 elements from the start) -> a plain load whose extra lanes are never stored; otherwise masked."""
    full = tvm.tirx.decl_buffer((4, 20), "float32", "X")
    panel = tvm.tirx.decl_buffer((3, 7, 16), "float32", "P")
    zero, three = tvm.tirx.const(0, "int32"), tvm.tirx.const(3, "int32")
    sixteen, nine = tvm.tirx.const(16, "int32"), tvm.tirx.const(9, "int32")
    assert isinstance(intr._tail_load(full, [zero, three], sixteen), tvm.ir.TensorLoad)
    five = tvm.tirx.const(5, "int32")
    assert "masked.load" in str(intr._tail_load(full, [zero, five], nine))  # 5 + 16 > 20: past the row
    assert "masked.load" not in str(intr._tail_load(full, [zero, three], nine))  # 3 + 16 <= 20
    assert "masked.load" not in str(intr._tail_load(panel, [zero, three, zero], nine))
    assert isinstance(intr._tail_store(full, [zero, three], tvm.tirx.Broadcast(tvm.tirx.const(1.0, "float32"), 16),
                                       sixteen), tvm.tirx.BufferStore)
    assert "masked.store" in str(intr._tail_store(panel, [zero, three, zero],
                                                  tvm.tirx.Broadcast(tvm.tirx.const(1.0, "float32"), 16), nine))


def test_frozen_frames_answer_no_module_while_builtins_import():
    """The import of TVM's built-in intrinsics asks inspect.getmodule about every frame of the stack; inside the
    context frozen-code frames answer None at once (what inspect answers after a full scan), other objects are
    answered by inspect itself, and inspect is restored afterwards."""
    import inspect
    import sys

    original = inspect.getmodule
    frame = sys._getframe()
    with intr._frames_of_frozen_code_have_no_module():
        assert inspect.getmodule is not original
        assert inspect.getmodule(frame, "<frozen importlib._bootstrap>") is None
        assert original(frame, "<frozen importlib._bootstrap>") is None
        assert inspect.getmodule(frame) is original(frame)
        assert inspect.getmodule(np) is np
    assert inspect.getmodule is original


@pytest.mark.vnni
def test_vnni_masked_tail_covers_the_reduction_tail():
    """Weights packed in whole 16 x 4 tiles: the tails of 3 reduction steps (and of 7 outputs) are one masked
    vpdpbusd each, read 4 activation bytes under a 3-byte mask, and compute what numpy computes."""
    from tvm_tailsplit import TailSplit

    m, n, k = 3, 23, 11
    report = []
    mod = tensorize_marked(TailSplit(strategy="full")(_dense_16x4(m, n, k)), report=report)
    assert sorted(r.action for r in report) == ["tensorized", "variable_length", "variable_length",
                                                "variable_length"], [str(r) for r in report]
    assert "T.Broadcast(T.uint8(0), 4)" in mod.script()  # the masked activation load's zeros
    executable = tvm.compile(mod, target=TARGET)
    rng = np.random.default_rng(k)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    b = rng.integers(-128, 128, (2, 3, 16, 4)).astype("int8")
    guarded = [guarded_array(x.shape, str(x.dtype), canary=77) for x in (a, b, np.zeros((m, n), "int32"))]
    guarded[0].array[:], guarded[1].array[:] = a, b
    executable["main"](*(to_tvm(g.array) for g in guarded))
    for g, what in zip(guarded, "ABC", strict=True):
        g.check_canaries(what)
    dense_b = b.transpose(1, 3, 0, 2).reshape(12, -1)[:k, :n].astype("int32")
    np.testing.assert_array_equal(guarded[2].array, a.astype("int32") @ dense_b)


@pytest.mark.parametrize("mcpu", ["haswell", "x86-64"])
def test_the_intrinsics_run_on_a_cpu_without_avx512(mcpu):
    """The package works on a CPU without AVX-512: compiled for an AVX2 CPU (or the baseline x86-64) the 16-lane
    intrinsics and their masked tails become narrower vectors (no zmm register, no k mask), and the result is
    still exact for every length (the code runs here: this CPU has every feature of those targets)."""
    from tvm_tailsplit import TailSplit

    intr.register_intrinsics()
    mod = tensorize_marked(TailSplit()(symbolic_vector_multiply()))
    executable = tvm.compile(mod, target=intr.llvm_target(mcpu))
    assert "zmm" not in executable.mod.inspect_source("asm")
    rng = np.random.default_rng(7)
    for n in list(range(0, 40)) + [1000]:
        a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
        _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {"n": n})
        np.testing.assert_array_equal(c, a * b)


def test_tail_forms_registered_before_the_first_registration_are_kept():
    """A user's ``register_tail_intrinsics`` for one of the package's marks, made before the first
    ``register_intrinsics`` (which ``tensorize_marked`` calls), was replaced by the package's tail form: the user's
    emitter was never called. ``register_intrinsics`` now registers a tail form only where none is registered."""
    from tvm_tailsplit import register_tail_intrinsics
    from tvm_tailsplit.split.tail_forms import tail_intrinsics

    package_form = intr.emit_masked_elementwise("mul")
    calls = []

    def mine(match):
        calls.append(match.extents)
        return package_form(match)

    intr._register_once.cache_clear()  # as in a fresh process: nothing registered by the package yet
    try:
        register_tail_intrinsics(intr.MUL_16, variable_length=mine)
        mod = symbolic_vector_multiply()
        tensorized = tensorize_marked(TailSplit()(mod))
        assert calls, "the tail form registered by the user was replaced"
        assert tail_intrinsics(intr.MUL_16).variable_length is mine
        executable = tvm.compile(tensorized, target=TARGET)
        for n in (0, 5, 16, 21):
            rng = np.random.default_rng(n)
            a, b = (rng.uniform(-1, 1, n).astype("float32") for _ in range(2))
            got = run_guarded(executable, tensorized["main"], [a, b, np.zeros(n, "float32")], {})[-1]
            np.testing.assert_array_equal(got, a * b, err_msg=f"n={n}")
    finally:
        register_tail_intrinsics(intr.MUL_16, variable_length=package_form)
        intr.register_intrinsics()


@pytest.mark.vnni
@pytest.mark.parametrize("kernel", ["dense", "dot"])
def test_vnni_tails_mask_activations_of_a_row_longer_than_the_reduction(kernel):
    """``C = A[:, :9] @ W^T`` with ``A`` 12 columns wide and ``W`` packed for 12 (real weights past the reduction):
    the tail forms loaded the last group's 4 activation bytes plainly whenever ``A``'s row went on (a plain load is
    right for lanes that are never stored, not for bytes that enter the dot product), so ``A[:, 9:12]`` times the
    weights there was added to every row of the tail tiles. Equal to TVM's own result and to numpy now."""
    m, n, k, width = 11, 20, 9, 12
    a = te.placeholder((m, width), "uint8", name="A")
    w = te.placeholder((2, width // 4, 16, 4), "int8", name="W")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(
        a[i, r].astype("int32") * w[j // 16, r // 4, j % 16, r % 4].astype("int32"), axis=r), name="C")
    func = te.create_prim_func([a, w, c]).with_attr("global_symbol", "main")
    sch = s_tir.Schedule(func)
    if kernel == "dense":
        workloads.WORKLOADS["dense_int8_vnni"].schedule(sch, mark=True, vectorize=False)
    else:
        block = sch.get_sblock("C")
        i, j, reduction = sch.get_loops(block)
        j_0, j_1 = sch.split(j, [None, 16])
        r_0, r_1 = sch.split(reduction, [None, 4])
        sch.reorder(i, j_0, r_0, j_1, r_1)
        sch.decompose_reduction(block, r_0)
        sch.annotate(j_1, MARK_KEY, intr.VNNI_DOT_16x4_LLVM22)
    report = []
    mod = tensorize_marked(TailSplit()(sch.mod), report=report)
    assert any(record.action == "variable_length" for record in report), [str(rec) for rec in report]
    rng = np.random.default_rng(0)
    activations = rng.integers(0, 256, (m, width)).astype("uint8")
    weights = rng.integers(-128, 128, (2, width // 4, 16, 4)).astype("int8")
    got = run_guarded(tvm.compile(mod, target=TARGET), mod["main"], [activations, weights, np.zeros((m, n), "int32")],
                      {})[-1]
    unpacked = weights.transpose(0, 2, 1, 3).reshape(32, width)[:n, :k]
    np.testing.assert_array_equal(got, activations[:, :k].astype(np.int32) @ unpacked.astype(np.int32).T)


# Run in a child process: a read past a page-guarded buffer ends the process (SIGSEGV).
_READS_INSIDE_THE_REGION = r'''
import sys
import numpy as np, tvm
from tvm import s_tir, te
from tvm_tailsplit import MARK_KEY, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.testing import page_guarded_array, to_tvm

kernel, lane_start, step_start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lanes, rows, depth = 16 - lane_start, 5, (4 - step_start if kernel == "dot" else 6)
groups = -(-(step_start + depth) // 4)
a = te.placeholder((rows, 4 * groups), "uint8", name="A")
w = te.placeholder((groups, 16, 4), "int8", name="W")
k = te.reduce_axis((0, depth), name="k")
if kernel == "dot":  # one group: W[0, j + lane_start, k + step_start]
    weight = lambda j: w[0, j + lane_start, k + step_start]  # noqa: E731
else:  # the dense kernel's reduction starts at a group (step_start is 0)
    weight = lambda j: w[k // 4, j + lane_start, k % 4]  # noqa: E731
c = te.compute((rows, lanes), lambda i, j: te.sum(
    a[i, k + step_start].astype("int32") * weight(j).astype("int32"), axis=k), name="C")
sch = s_tir.Schedule(te.create_prim_func([a, w, c]).with_attr("global_symbol", "main"))
block = sch.get_sblock("C")
i, j, _ = sch.get_loops(block)
if kernel == "dot":
    sch.decompose_reduction(block, j)
    sch.annotate(j, MARK_KEY, intr.VNNI_DOT_16x4_LLVM22)
else:
    sch.annotate(i, MARK_KEY, intr.VNNI_DENSE_8x16_ANY_DEPTH)
report = []
mod = tensorize_marked(sch.mod, report=report)
assert [r.action for r in report] in (["variable_length"], ["variable_length"] * rows), [str(r) for r in report]
executable = tvm.compile(mod, target=intr.llvm_target())
rng = np.random.default_rng(lane_start * 4 + step_start)
arrays = [page_guarded_array(shape, dtype) for shape, dtype in
          (((rows, 4 * groups), "uint8"), ((groups, 16, 4), "int8"), ((rows, lanes), "int32"))]
arrays[0][:] = rng.integers(0, 256, arrays[0].shape)
arrays[1][:] = rng.integers(-128, 128, arrays[1].shape)
executable["main"](*(to_tvm(x) for x in arrays))
unpacked = arrays[1].transpose(1, 0, 2).reshape(16, -1).astype(np.int64)
want = (arrays[0][:, step_start : step_start + depth].astype(np.int64)
        @ unpacked[lane_start:, step_start : step_start + depth].T)
np.testing.assert_array_equal(arrays[2], want)
print("same as numpy")
'''


@pytest.mark.vnni
@pytest.mark.parametrize(("kernel", "lane_start", "step_start"),
                         [("dot", 0, 2), ("dot", 3, 0), ("dot", 3, 1), ("dot", 15, 3), ("dense", 3, 0)])
def test_vnni_tails_read_no_weights_past_a_region_that_starts_inside_a_tile(kernel, lane_start, step_start):
    """A VNNI tail region whose lanes or reduction steps start inside a 16 x 4 weight tile (``W[.., j + 3, k + 2]``,
    weights packed in whole tiles) read the 64 bytes from the region's first byte: up to 63 bytes past the tile,
    past the end of ``W`` for its last tile (the process died with SIGSEGV on a page-guarded ``W``; the extra
    bytes met zero activations or unstored lanes, so no result showed it). The weights outside the region are now
    loaded under a mask, and the result is numpy's; the whole tile is still read where the region starts it."""
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", _READS_INSIDE_THE_REGION, kernel, str(lane_start),
                            str(step_start)], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0 and "same as numpy" in child.stdout, (child.returncode, child.stderr[-2000:])


# Run in a child process: a read past a page-guarded buffer ends the process (SIGSEGV).
_FUSED_INDEX_TAIL = r'''
import sys
import numpy as np, tvm
from tvm.script import tirx as T
from tvm_tailsplit import TailSplit, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.testing import page_guarded_array, to_tvm

first = int(sys.argv[1])


@T.prim_func(s_tir=True)
def multiply(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32"), C: T.Buffer((4, 16), "float32")):
    for i0 in range(4):
        for i1 in T.serial(16, annotations={"pragma_emit_insn": intr.MUL_16}):
            with T.sblock("C"):
                v = T.axis.spatial(64, i0 * 16 + i1)
                T.where(first <= i0 * 16 + i1)
                C[v // 16, v % 16] = A[v // 16, v % 16] * B[v // 16, v % 16]


report = []
mod = tensorize_marked(TailSplit()(tvm.IRModule({"main": multiply})), report=report)
assert report[0].action == "variable_length", [str(r) for r in report]
executable = tvm.compile(mod, target=intr.llvm_target())
a, b, c = (page_guarded_array((4, 16), "float32") for _ in range(3))
rng = np.random.default_rng(first)
a[:], b[:], c[:] = rng.random((4, 16)), rng.random((4, 16)), -7.0
executable["main"](to_tvm(a), to_tvm(b), to_tvm(c))
want = a * b
want.reshape(-1)[:first] = -7.0
np.testing.assert_array_equal(c, want)
print("same as numpy")
'''


@pytest.mark.parametrize("first", [1, 5, 15])
def test_a_tail_starting_inside_a_tile_through_a_fused_index_takes_the_masked_form(first, tmp_path):
    """The tail tile of ``T.where(first <= v)`` over ``C[v // 16, v % 16]`` (``v = i0 * 16 + i1``) is
    ``i1`` in ``[first, 16)``: its leading index ``(i0 * 16 + i1' + first) // 16`` is ``i0`` over the region, but
    not over the description's whole 16 lanes, where the matcher compared it, so the tail stayed code. It now
    takes the masked form, reading nothing past the region (page-guarded buffers), with numpy's result."""
    import subprocess
    import sys

    script = tmp_path / "fused_index_tail.py"  # (TVMScript reads its source: a file, not -c)
    script.write_text(_FUSED_INDEX_TAIL)
    child = subprocess.run([sys.executable, str(script), str(first)], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0 and "same as numpy" in child.stdout, (child.returncode, child.stderr[-2000:])
