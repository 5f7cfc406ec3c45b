"""The tensor intrinsics TailSplit's marks name, in one place.

Registered by ``register_intrinsics()`` (idempotent; ``tensorize_marked`` calls it):

- ``"tailsplit_avx512_fp32_mul_16"`` / ``"tailsplit_avx512_fp32_add_16"``: ``C[i] = A[i] * B[i]`` (``+``) over one
  serial loop of 16; implementation: one 16-lane vector operation (``T.ramp`` loads and store: one ``zmm``
  register with AVX-512). Their **variable-length tail form** (registered with ``register_tail_intrinsics``)
  takes the extent ``e`` as an operand: masked loads and a masked store with the lane mask
  ``ramp(0, 1, 16) < broadcast(e, 16)``, emitted as ``llvm.masked.load`` / ``llvm.masked.store`` calls. TVM 0.27
  dropped the ``predicate`` of ``BufferLoad``/``BufferStore``, so the masked accesses are LLVM intrinsics; with an
  AVX-512 ``-mcpu`` they become ``vmovups ... {%k1}`` (nothing outside the extent is read or written). In LLVM 22
  these intrinsics have no alignment operand: the alignment is derived from the pointer (4 bytes for an
  arbitrary element), so unaligned tails are safe. Where no mask is needed (all 16 lanes used, or a load whose
  16 elements stay inside the buffer's innermost dimension, e.g. a panel packed in whole rows; its extra lanes
  are never stored) the tail forms use plain vector accesses: LLVM does not fold a constant full mask back.
- ``"tailsplit_llvm_fp32_matmul_8x16x16"`` (``MATMUL_TILE = (8, 16, 16)``): the update block
  ``C[i, j] += A[i, k] * B[k, j]`` over loops ``i(8), j(16), k(16)``, all row-major; the init block must be
  separate (``sch.decompose_reduction``). Implementation vectorized over ``j``: the 8 rows of ``C`` are loaded
  once into 16-lane accumulators, the ``k`` loop is unrolled (``broadcast(A[i, k]) * B[k, 0:16]`` as fused
  multiply-adds with an embedded broadcast), and the rows are stored once. Tails by the extent of the ``i``
  loop with full ``j`` and ``k``: ``MATMUL_TAILS`` (``4x16x16``, ``2x16x16``, ``1x16x16``; instantiated by
  ``tensorize_marked``, since ``sch.tensorize`` cannot blockize TailSplit's tail bindings such as ``i_0 * 8 + i_1``
  with ``i_1 < 4``); any other tail (``i <= 8``, ``j <= 16``, any ``k``, constant or symbolic) uses the
  variable-length form: one 16-lane accumulator per row masked over ``j`` (independent FMA chains, as in the
  micro-kernel).
- ``"tailsplit_llvm_fp32_matmul_8x16xk"`` (``MATMUL_8x16_ANY_DEPTH``, tile ``MATMUL_PANEL_TILE = (8, 16)``): an
  8 x 16 tile of ``C = A @ B`` over the whole reduction: the description's block keeps its init (``C = 0``; do
  not ``decompose_reduction``) and its ``k`` loop has a free extent ``depth`` (any depth; ``tensorize_marked``
  binds it to the region's). The implementation starts 8 accumulators at zero, runs a serial ``k`` loop of
  ``K_UNROLL`` (4) steps of 8 fused multiply-adds per iteration, then the ``depth % 4`` remaining steps (LLVM keeps
  the accumulators in registers across them; four steps per iteration amortize the loop overhead and the extra
  micro-op of each indexed-address FMA, worth 10-15% here) and stores the rows once: ``C`` is
  never read, there is no reduction tail, and no init pass. Row and column tails (``i <= 8``, ``j <= 16``):
  ``emit_masked_matmul_from_zero``, the variable-length form with zero-started accumulators.
- ``"tailsplit_avx512_vnni_dot_16x4"`` (``VNNI_DOT_16x4_LLVM22``): TVM's ``dot_16x4_vnni`` (``C int32[16] +=
  sum_4 A uint8[4] * B int8[16, 4]``, ``B`` packed ``[N/16, K/4, 16, 4]``) with the ``vpdpbusd`` signature of LLVM
  22: the built-in fails LLVM's module verification with this wheel ("Call parameter type does not match
  function signature": it passes ``<16 x i32>`` where LLVM 22 takes ``<64 x i8>``). Its variable-length tail
  form (``e_n <= 16`` output lanes, ``e_k <= 4`` reduction steps) masks ``C`` by lane and the 4 activation bytes
  by byte, and reads the packed ``B`` tile whole when the region starts a tile of a ``B`` allocated in whole 16 x 4
  tiles (else by byte, under the mask of its ``e_n`` rows of ``e_k`` bytes: nothing past the region is read).
- ``"tailsplit_avx512_vnni_dense_8x16xk"`` (``VNNI_DENSE_8x16_ANY_DEPTH``, tile ``VNNI_PANEL_TILE = (8, 16)``): the
  dense layer's register-blocked kernel, an 8 x 16 tile of ``C = A @ W^T`` (uint8 ``A``, int8 ``W`` packed
  ``[K/4, 16, 4]``, int32 ``C``) over the whole reduction, as the any-depth matmul kernel: the block keeps its
  init, the ``k`` loop has the free extent ``depth``. The implementation keeps 8 zmm accumulators, adds one
  ``vpdpbusd`` per row and 4-step group (the 64-byte weight tile read once per group, each row's 4 activation
  bytes broadcast), masks the last group's activation bytes when ``depth % 4`` is not 0 (the packed weights'
  padding then meets zeros), and stores each row of ``C`` once: ``C`` is never read, so its row pitch does not
  matter. Row and column tails (``i <= 8``, ``j <= 16``, constant or symbolic): ``emit_masked_vnni_dense``.
- Built-ins re-exported by name: ``VNNI_DOT_16x4`` (``dot_16x4_vnni``) and the CUDA WMMA fp16-in /
  fp32-accumulate set (``WMMA_*``). TVM registers them when
  ``tvm.s_tir.tensor_intrin`` is imported (a few hundred TVMScript functions); ``tensorize_marked`` does it only
  when a mark names one of them (``ensure_builtin_registered``, which also cuts the import from ~35 s to ~5 s: see
  ``_frames_of_frozen_code_have_no_module``).

The masked forms are correct on any llvm target (without AVX-512, LLVM expands the masked accesses into
per-lane branches). The VNNI intrinsics are not: compiled for a CPU without ``avx512vnni`` LLVM aborts the process
at the first call ("Do not know how to split the result of this operator!"); ``TARGET_FEATURES`` lists what each
intrinsic needs, and ``tensorize_marked`` leaves such marks as code for a target that lacks it.

Compile with ``llvm_target()``: TVM's plain ``"llvm"`` target means ``-mcpu=generic`` (no AVX-512), and with
LLVM 22 ``{"kind": "llvm", "mcpu": "native"}`` is rejected (TVM falls back to generic with an error message), so
``llvm_target`` names the host CPU (e.g. ``cascadelake``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable

import tvm
from tvm import s_tir, tirx
from tvm.script import tirx as T

from .tail_forms import TailMatch, TailMismatch, register_tail_intrinsics, tail_intrinsics

__all__ = [
    "ADD_16",
    "LANES",
    "MATMUL_8x16x16",
    "MATMUL_8x16_ANY_DEPTH",
    "MATMUL_PANEL_TILE",
    "K_UNROLL",
    "MATMUL_TAILS",
    "MATMUL_TILE",
    "MUL_16",
    "BUILTIN_NAMES",
    "TARGET_FEATURES",
    "VNNI_DOT_16x4",
    "VNNI_DOT_16x4_LLVM22",
    "VNNI_DENSE_8x16_ANY_DEPTH",
    "VNNI_PANEL_TILE",
    "WMMA_FILL_F32",
    "WMMA_LOAD_F16_A",
    "WMMA_LOAD_F16_B",
    "WMMA_STORE_F32_GLOBAL",
    "WMMA_STORE_F32_SHARED",
    "WMMA_SYNC_F16F16F32",
    "emit_masked_elementwise",
    "ensure_builtin_registered",
    "emit_masked_matmul",
    "emit_masked_matmul_from_zero",
    "emit_masked_vnni",
    "emit_masked_vnni_dense",
    "llvm_target",
    "missing_target_features",
    "register_intrinsics",
]

LANES = 16
MUL_16 = "tailsplit_avx512_fp32_mul_16"
ADD_16 = "tailsplit_avx512_fp32_add_16"
MATMUL_TILE = (8, 16, 16)
MATMUL_8x16x16 = "tailsplit_llvm_fp32_matmul_8x16x16"
MATMUL_TAILS = {rows: f"tailsplit_llvm_fp32_matmul_{rows}x16x16" for rows in (4, 2, 1)}
MATMUL_8x16_ANY_DEPTH = "tailsplit_llvm_fp32_matmul_8x16xk"
MATMUL_PANEL_TILE = MATMUL_TILE[:2]  # (m, n) of the any-depth micro-kernel; its k loop is the whole reduction
K_UNROLL = 4  # the any-depth kernel's k steps per loop iteration (its loop overhead and indexed-address uops amortized)

# TVM's dot_16x4_vnni with the vpdpbusd signature of LLVM 22 (<16 x i32>, <64 x i8>, <64 x i8>): the built-in
# passes <16 x i32> operands and fails LLVM's module verification with this wheel ("Call parameter type does not
# match function signature"). Same description (C int32[16] += sum_4 A uint8[4] * B int8[16, 4]).
VNNI_DOT_16x4_LLVM22 = "tailsplit_avx512_vnni_dot_16x4"
# C[8, 16] = A[8, K] (uint8) x W (int8, packed [K/4, 16, 4])^T -> int32 over the whole reduction, accumulators in
# registers: the dense layer's register-blocked kernel
VNNI_DENSE_8x16_ANY_DEPTH = "tailsplit_avx512_vnni_dense_8x16xk"
VNNI_PANEL_TILE = (8, 16)  # (m, n) of the any-depth VNNI kernel; its k loop is the whole reduction

# Built-ins of tvm.s_tir.tensor_intrin (registered on import of that package; register_intrinsics imports it).
VNNI_DOT_16x4 = "dot_16x4_vnni"
WMMA_SYNC_F16F16F32 = "wmma_sync_16x16x16_f16f16f32"
WMMA_FILL_F32 = "wmma_fill_16x16x16_f32"
WMMA_LOAD_F16_A = "wmma_load_16x16x16_f16_a_shared"
WMMA_LOAD_F16_B = "wmma_load_16x16x16_f16_b_shared"
WMMA_STORE_F32_GLOBAL = "wmma_store_16x16x16_f32_global"
WMMA_STORE_F32_SHARED = "wmma_store_16x16x16_f32_shared"

_OPS = {MUL_16: tirx.Mul, ADD_16: tirx.Add}

# The llvm CPU features an intrinsic's code needs (LLVM aborts the process, "Do not know how to split the result of
# this operator!", when it JIT-compiles ``vpdpbusd.512`` for a CPU without them); the others run on any llvm target.
TARGET_FEATURES: dict[str, tuple[str, ...]] = {
    VNNI_DOT_16x4: ("avx512vnni",),
    VNNI_DOT_16x4_LLVM22: ("avx512vnni",),
    VNNI_DENSE_8x16_ANY_DEPTH: ("avx512vnni",),
}


def llvm_target(mcpu: str | None = None) -> tvm.target.Target:
    """An llvm target for this machine's CPU (``mcpu`` defaults to LLVM's name of the host CPU)."""
    cpu = mcpu or tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": str(cpu)})


def missing_target_features(name: str, target: tvm.target.Target) -> tuple[str, ...]:
    """The CPU features that intrinsic ``name`` needs (``TARGET_FEATURES``) and ``target`` lacks (all of them for a
    target that is not llvm); ``()`` for an intrinsic that needs none."""
    needed = TARGET_FEATURES.get(name, ())
    if not needed or target.kind.name != "llvm":
        return needed
    return tuple(feature for feature in needed if not tvm.target.codegen.target_has_features(feature, target))


def _elementwise_intrinsic(op: str, lanes: int = LANES):
    def combine(x, y):
        return x * y if op == "mul" else x + y

    @T.prim_func(s_tir=True)
    def description(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (lanes,), "float32", offset_factor=1)
        B = T.match_buffer(b, (lanes,), "float32", offset_factor=1)
        C = T.match_buffer(c, (lanes,), "float32", offset_factor=1)
        with T.sblock("root"):
            T.reads(A[0:lanes], B[0:lanes])
            T.writes(C[0:lanes])
            for i in T.serial(lanes):
                with T.sblock("C"):
                    vi = T.axis.remap("S", [i])
                    C[vi] = combine(A[vi], B[vi])

    @T.prim_func(s_tir=True)
    def implementation(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (lanes,), "float32", offset_factor=1)
        B = T.match_buffer(b, (lanes,), "float32", offset_factor=1)
        C = T.match_buffer(c, (lanes,), "float32", offset_factor=1)
        with T.sblock("root"):
            T.reads(A[0:lanes], B[0:lanes])
            T.writes(C[0:lanes])
            C[T.ramp(0, 1, lanes)] = combine(A[T.ramp(0, 1, lanes)], B[T.ramp(0, 1, lanes)])

    return description, implementation


@T.macro(hygienic=False)
def _multiply_add(k):
    """One ``k`` step of the matmul kernels: every row's accumulator ``+= broadcast(A[i, k]) * B[k, 0:cols]``
    (``acc``, ``A``, ``B``, ``rows`` and ``cols`` are the calling implementation's)."""
    for i in T.unroll(rows):  # noqa: F821
        acc[i, T.ramp(0, 1, cols)] = (  # noqa: F821
            acc[i, T.ramp(0, 1, cols)] + T.broadcast(A[i, k], cols) * B[k, T.ramp(0, 1, cols)]  # noqa: F821
        )


def _matmul_intrinsic(rows: int, cols: int = 16, depth: int | None = 16):
    """``C += A @ B`` on a ``rows x cols x depth`` tile, the init block separate (``C`` loaded into the accumulators,
    the ``k`` loop unrolled); or, with ``depth=None``, ``C = A @ B`` over a reduction of any depth: the
    description's block has the init (``C = 0``) and its ``k`` loop the free extent ``depth``; the implementation
    starts the accumulators at zero (``C`` is never read) and runs a serial ``k`` loop of ``K_UNROLL`` steps per
    iteration, then the remainder."""
    from_zero = depth is None
    if from_zero:
        depth = tirx.Var("depth", "int32")

    @T.prim_func(s_tir=True)
    def description(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (rows, depth), "float32", offset_factor=1)
        B = T.match_buffer(b, (depth, cols), "float32", offset_factor=1)
        C = T.match_buffer(c, (rows, cols), "float32", offset_factor=1)
        with T.sblock("root"):
            if from_zero:
                T.reads(A[0:rows, 0:depth], B[0:depth, 0:cols])
            else:
                T.reads(C[0:rows, 0:cols], A[0:rows, 0:depth], B[0:depth, 0:cols])
            T.writes(C[0:rows, 0:cols])
            for i, j, k in T.grid(rows, cols, depth):
                with T.sblock("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    if from_zero:
                        with T.init():
                            C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(s_tir=True)
    def implementation(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb, sc = T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, (rows, depth), "float32", offset_factor=1, strides=[sa, 1])
        B = T.match_buffer(b, (depth, cols), "float32", offset_factor=1, strides=[sb, 1])
        C = T.match_buffer(c, (rows, cols), "float32", offset_factor=1, strides=[sc, 1])
        with T.sblock("root"):
            if from_zero:
                T.reads(A[0:rows, 0:depth], B[0:depth, 0:cols])
            else:
                T.reads(C[0:rows, 0:cols], A[0:rows, 0:depth], B[0:depth, 0:cols])
            T.writes(C[0:rows, 0:cols])
            with T.sblock("accumulate"):  # a nested block: tensorize keeps its buffers (not the root's)
                if from_zero:
                    T.reads(A[0:rows, 0:depth], B[0:depth, 0:cols])
                else:
                    T.reads(C[0:rows, 0:cols], A[0:rows, 0:depth], B[0:depth, 0:cols])
                T.writes(C[0:rows, 0:cols])
                acc = T.sblock_alloc_buffer((rows, cols), "float32", scope="local")
                if from_zero:
                    if depth > 0:  # (a block in a loop of extent 0 never runs, its init neither: C is not written)
                        for i in T.unroll(rows):
                            acc[i, T.ramp(0, 1, cols)] = T.broadcast(T.float32(0), cols)
                        for k_outer in T.serial(depth // K_UNROLL):
                            for k_inner in T.unroll(K_UNROLL):
                                _multiply_add(k_outer * K_UNROLL + k_inner)
                        for k_rest in T.serial(depth % K_UNROLL):
                            _multiply_add(depth - depth % K_UNROLL + k_rest)
                        for i in T.unroll(rows):
                            C[i, T.ramp(0, 1, cols)] = acc[i, T.ramp(0, 1, cols)]
                else:
                    for i in T.unroll(rows):
                        acc[i, T.ramp(0, 1, cols)] = C[i, T.ramp(0, 1, cols)]
                    for k in T.unroll(depth):
                        _multiply_add(k)
                    for i in T.unroll(rows):
                        C[i, T.ramp(0, 1, cols)] = acc[i, T.ramp(0, 1, cols)]

    return description, implementation


@T.prim_func(s_tir=True)
def _vnni_description(
    A: T.Buffer((4,), "uint8", offset_factor=1),
    B: T.Buffer((16, 4), "int8", offset_factor=1),
    C: T.Buffer((16,), "int32", offset_factor=1),
) -> None:
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        for i in T.serial(0, 16):
            for k in T.serial(0, 4):
                with T.sblock("update"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")


@T.prim_func(s_tir=True)
def _vnni_implementation(
    A: T.Buffer((4,), "uint8", offset_factor=1),
    B: T.Buffer((16, 4), "int8", offset_factor=1),
    C: T.Buffer((16,), "int32", offset_factor=1),
) -> None:
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        a_bytes = T.reinterpret(T.broadcast(T.reinterpret(A.vload([0], "uint8x4"), dtype="int32"), 16), dtype="int8x64")
        C[T.ramp(T.int32(0), 1, 16)] = T.call_llvm_pure_intrin(
            "int32x16",
            "llvm.x86.avx512.vpdpbusd.512",
            C.vload([0], dtype="int32x16"),
            a_bytes,
            B.vload([0, 0], dtype="int8x64"),
        )


def _vnni_dense_intrinsic(rows: int):
    """``C = A @ W^T`` over ``rows x 16`` outputs and a reduction of any depth (uint8 activations ``A[rows, depth]``,
    int8 weights packed ``[(depth + 3) / 4, 16, 4]``, int32 ``C``). The description's block has the init (``C =
    0``) and its ``k`` loop the free extent ``depth``; the implementation starts ``rows`` accumulators at zero, adds
    one ``vpdpbusd`` per row and 4-step group (the weight tile read once per group, each row's 4 activation bytes
    broadcast), the last group's activations under the mask of the ``depth % 4`` bytes left (the masked bytes
    are zeros, so whatever the weights' padding holds adds nothing), and stores every row once."""
    depth = tirx.Var("depth", "int32")

    @T.prim_func(s_tir=True)
    def description(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (rows, depth), "uint8", offset_factor=1)
        B = T.match_buffer(b, ((depth + 3) // 4, 16, 4), "int8", offset_factor=1)
        C = T.match_buffer(c, (rows, 16), "int32", offset_factor=1)
        with T.sblock("root"):
            T.reads(A[0:rows, 0:depth], B[0 : (depth + 3) // 4, 0:16, 0:4])
            T.writes(C[0:rows, 0:16])
            for i, j, k in T.grid(rows, 16, depth):
                with T.sblock("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = 0
                    C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vk]) * T.Cast("int32", B[vk // 4, vj, vk % 4])

    @T.prim_func(s_tir=True)
    def implementation(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sc = T.int32(), T.int32()
        A = T.match_buffer(a, (rows, depth), "uint8", offset_factor=1, strides=[sa, 1])
        B = T.match_buffer(b, ((depth + 3) // 4, 16, 4), "int8", offset_factor=1)
        C = T.match_buffer(c, (rows, 16), "int32", offset_factor=1, strides=[sc, 1])
        with T.sblock("root"):
            T.reads(A[0:rows, 0:depth], B[0 : (depth + 3) // 4, 0:16, 0:4])
            T.writes(C[0:rows, 0:16])
            with T.sblock("accumulate"):  # a nested block: tensorize keeps its buffers (not the root's)
                T.reads(A[0:rows, 0:depth], B[0 : (depth + 3) // 4, 0:16, 0:4])
                T.writes(C[0:rows, 0:16])
                acc = T.sblock_alloc_buffer((rows, 16), "int32", scope="local")
                if depth > 0:  # (a block in a loop of extent 0 never runs, its init neither: C is not written)
                    for i in T.unroll(rows):
                        acc[i, T.ramp(0, 1, 16)] = T.broadcast(T.int32(0), 16)
                    for step in T.serial(depth // 4):
                        for i in T.unroll(rows):
                            acc[i, T.ramp(0, 1, 16)] = _vpdpbusd(
                                acc[i, T.ramp(0, 1, 16)], _activation_word(A, [i, step * 4], T.int32(4)),
                                _weight_tile(B, [step, T.int32(0), T.int32(0)]))
                    if depth % 4 > 0:
                        for i in T.unroll(rows):
                            acc[i, T.ramp(0, 1, 16)] = _vpdpbusd(
                                acc[i, T.ramp(0, 1, 16)], _activation_word(A, [i, depth // 4 * 4], depth % 4),
                                _weight_tile(B, [depth // 4, T.int32(0), T.int32(0)]))
                    for i in T.unroll(rows):
                        C[i, T.ramp(0, 1, 16)] = acc[i, T.ramp(0, 1, 16)]

    return description, implementation


def _address(buffer: tirx.Buffer, indices) -> tvm.ir.PrimExpr:
    return tirx.address_of(tirx.BufferLoad(buffer, list(indices)))


def _mask(extent: tvm.ir.PrimExpr, lanes: int = LANES) -> tvm.ir.PrimExpr:
    extent = tirx.Cast("int32", extent) if extent.ty.dtype != "int32" else extent
    return tirx.LT(tirx.Ramp(tirx.const(0, "int32"), tirx.const(1, "int32"), lanes), tirx.Broadcast(extent, lanes))


def _masked_load(buffer: tirx.Buffer, indices, mask, lanes: int = LANES) -> tvm.ir.PrimExpr:
    zero = tirx.Broadcast(tirx.const(0, buffer.dtype), lanes)
    return tirx.call_llvm_pure_intrin(
        f"{buffer.dtype}x{lanes}", "llvm.masked.load", _address(buffer, indices), mask, zero
    )


def _masked_store(buffer: tirx.Buffer, indices, value, mask) -> tirx.Stmt:
    return tirx.Evaluate(tirx.call_llvm_intrin("void", "llvm.masked.store", value, _address(buffer, indices), mask))


def _row_vector(indices, lanes: int = LANES) -> list:
    indices = list(indices)
    indices[-1] = tirx.Ramp(indices[-1], tirx.const(1, indices[-1].ty.dtype), lanes)
    return indices


def _whole_row_in_bounds(buffer: tirx.Buffer, indices, lanes: int = LANES) -> bool:
    """Whether ``lanes`` elements from ``indices`` stay inside the innermost dimension of a contiguous
    ``buffer`` (e.g. a tail tile of a panel packed in whole 16-element rows)."""
    if buffer.strides or not indices:
        return False
    return tvm.sym.Analyzer().can_prove(buffer.shape[-1] - indices[-1] >= lanes)


def _tail_load(buffer: tirx.Buffer, indices, extent: tvm.ir.PrimExpr, lanes: int = LANES) -> tvm.ir.PrimExpr:
    """``lanes`` elements from ``indices`` of which the first ``extent`` are used: a plain vector load when
    ``extent >= lanes`` or the whole row is in bounds (lanes past ``extent`` are then never stored), otherwise a
    masked load (zeros past ``extent``). LLVM does not turn a masked access with a constant full mask back into a
    plain one here, and the masked forms cost up to 40% in a tail tile."""
    if _whole_row_in_bounds(buffer, indices, lanes):
        return tirx.BufferLoad(buffer, _row_vector(indices, lanes))
    return _exact_load(buffer, indices, extent, lanes)


def _exact_load(buffer: tirx.Buffer, indices, extent: tvm.ir.PrimExpr, lanes: int = LANES) -> tvm.ir.PrimExpr:
    """``lanes`` elements from ``indices``, those past ``extent`` zero: a plain vector load when ``extent >= lanes``,
    otherwise a masked one (where every lane is used, as in a dot product)."""
    if tvm.sym.Analyzer().can_prove(extent >= lanes):
        return tirx.BufferLoad(buffer, _row_vector(indices, lanes))
    return _masked_load(buffer, indices, _mask(extent, lanes), lanes)


def _tail_store(buffer: tirx.Buffer, indices, value, extent: tvm.ir.PrimExpr) -> tirx.Stmt:
    """Store the first ``extent`` of ``LANES`` elements: a plain vector store when ``extent >= LANES``, otherwise a
    masked one."""
    if tvm.sym.Analyzer().can_prove(extent >= LANES):
        return tirx.BufferStore(buffer, value, _row_vector(indices))
    return _masked_store(buffer, indices, value, _mask(extent))


def _shifted(start: tuple, offsets: dict[int, tvm.ir.PrimExpr]) -> list:
    """``start`` with ``offsets[d]`` added to dimension ``d`` counted from the end (-1: last dimension)."""
    indices = list(start)
    for dim, offset in offsets.items():
        indices[dim] = indices[dim] + offset
    return indices


def _check_float32(match: TailMatch) -> None:
    if match.thread_bound:
        raise TailMismatch("the region is bound to GPU threads; the masked forms are llvm code")
    for name, (buffer, _) in match.buffers.items():
        if buffer.dtype != "float32":
            raise TailMismatch(f"buffer {buffer.name} (operand {name}) is {buffer.dtype}, not float32")
        if buffer.strides and not (isinstance(buffer.strides[-1], tirx.IntImm) and buffer.strides[-1].value == 1):
            raise TailMismatch(f"buffer {buffer.name} is not contiguous in its last dimension")


def emit_masked_elementwise(op: str):
    """The variable-length tail form of the 16-lane ``mul``/``add`` intrinsics: a callable for
    ``register_tail_intrinsics`` that emits masked loads, the operation and a masked store over ``extent``
    lanes (``extent`` may be any expression in ``[0, 16]``; a non-positive extent touches nothing)."""
    if op not in ("mul", "add"):
        raise ValueError(f"op must be 'mul' or 'add', got {op!r}")

    def emit(match: TailMatch) -> tirx.Stmt:
        _check_float32(match)
        (extent,) = match.extents
        (a, a_start), (b, b_start), (c, c_start) = (match.buffers[n] for n in ("A", "B", "C"))
        x, y = _tail_load(a, a_start, extent), _tail_load(b, b_start, extent)
        return _tail_store(c, c_start, x * y if op == "mul" else x + y, extent)

    emit.__name__ = f"masked_{op}_16"
    return emit


def emit_masked_matmul(match: TailMatch) -> tirx.Stmt:
    """The variable-length tail form of the matmul micro-kernel (``i`` extent up to 8, ``j`` up to 16, any ``k``;
    constants or expressions). Like the micro-kernel it keeps one 16-lane accumulator per row (independent FMA
    chains): the rows of ``C`` are loaded with the ``j`` mask, the ``k`` loop adds ``broadcast(A[i, k]) * B[k, :]``
    (a masked load of ``B`` shared by the rows; a plain one when ``B``'s rows are packed whole, or ``j`` is 16) to
    every row (fully unrolled up to 16 steps, else ``K_UNROLL`` steps per iteration and the remainder, as in the
    any-depth kernel), and the rows are stored with the mask (plain accesses when ``j`` is 16). With a
    symbolic row count all 8 rows are computed, rows past the extent repeating the last row (``A`` is read in
    bounds), and only the rows inside the extent are stored; nothing runs unless all three extents are positive."""
    return _masked_matmul(match, from_zero=False)


def emit_masked_matmul_from_zero(match: TailMatch) -> tirx.Stmt:
    """The variable-length tail form of the any-depth kernel (``C = A @ B``, the block's init included): as
    ``emit_masked_matmul``, but the accumulators start at zero and ``C`` is only stored."""
    return _masked_matmul(match, from_zero=True)


class _TailRows:
    """The accumulators of a tail tile of a row-blocked kernel: one 16-lane vector per row of ``C``. ``rows`` is a
    constant (that many accumulators) or an expression up to ``max_rows``: then all ``max_rows`` are computed, rows
    past the extent repeating the last row (the loads stay in bounds), and only the rows inside it are stored."""

    def __init__(self, rows: tvm.ir.PrimExpr, max_rows: int, dtype: str):
        analyzer = tvm.sym.Analyzer()
        self.rows = rows
        self.constant = isinstance(analyzer.simplify(rows), tirx.IntImm)
        self.count = int(analyzer.simplify(rows).value) if self.constant else max_rows
        self.buffer = tirx.decl_buffer((max(self.count, 1), LANES), dtype, "acc_tail", scope="local")
        self.lanes = tirx.Ramp(tirx.const(0, "int32"), tirx.const(1, "int32"), LANES)

    def source_row(self, i: tirx.Var) -> tvm.ir.PrimExpr:
        """The row whose inputs accumulator ``i`` reads (in bounds)."""
        return i if self.constant else tirx.Min(i, self.rows - 1)

    def each(self, body: Callable[[tirx.Var], tirx.Stmt]) -> tirx.Stmt:
        """An unrolled loop over the accumulators (a variable of its own: a TIR variable is defined by one loop)."""
        i = tirx.Var("i_tail", "int32")
        return tirx.For(i, 0, self.count, tirx.ForKind.UNROLLED, body(i))

    def value(self, i: tirx.Var) -> tvm.ir.PrimExpr:
        return tirx.BufferLoad(self.buffer, [i, self.lanes])

    def assign(self, i: tirx.Var, value: tvm.ir.PrimExpr) -> tirx.Stmt:
        return tirx.BufferStore(self.buffer, value, [i, self.lanes])

    def store(self, c: tirx.Buffer, c_start, cols: tvm.ir.PrimExpr) -> tirx.Stmt:
        """Every row inside the extent stored into ``C`` from ``c_start``, ``cols`` lanes of it."""

        def row(i: tirx.Var) -> tirx.Stmt:
            stored = _tail_store(c, _shifted(c_start, {-2: i}), self.value(i), cols)
            return stored if self.constant else tirx.IfThenElse(i < self.rows, stored, None)

        return self.each(row)

    def kernel(self, start: tirx.Stmt, k_loop: tirx.Stmt, stored: tirx.Stmt) -> tirx.Stmt:
        return tirx.SeqStmt([tirx.AllocBuffer(self.buffer), start, k_loop, stored])


def _when_positive(body: tirx.Stmt, *extents: tvm.ir.PrimExpr) -> tirx.Stmt:
    """``body`` guarded by every extent being positive (the guard folded away when it is a constant)."""
    zero = tirx.const(0, "int32")
    condition = tirx.const(True, "bool")
    for extent in extents:
        condition = tirx.And(condition, extent > zero)
    runs = tvm.sym.Analyzer().simplify(condition)
    if isinstance(runs, tirx.IntImm):
        return body if runs.value else tirx.Evaluate(zero)
    return tirx.IfThenElse(runs, body, None)


def _masked_matmul(match: TailMatch, from_zero: bool) -> tirx.Stmt:
    _check_float32(match)
    rows, cols, depth = (_as_int32(e) for e in match.extents)
    (a, a_start), (b, b_start), (c, c_start) = (match.buffers[n] for n in ("A", "B", "C"))
    analyzer = tvm.sym.Analyzer()
    acc = _TailRows(rows, MATMUL_TILE[0], "float32")

    def step(k: tvm.ir.PrimExpr) -> tirx.Stmt:  # one k step: every row's accumulator += A[row, k] * B[k, :]
        b_row = _tail_load(b, _shifted(b_start, {-2: k}), cols)

        def update(i: tirx.Var) -> tirx.Stmt:
            a_value = tirx.BufferLoad(a, _shifted(a_start, {-2: acc.source_row(i), -1: k}))
            return acc.assign(i, acc.value(i) + tirx.Broadcast(a_value, LANES) * b_row)

        return acc.each(update)

    def start(i: tirx.Var) -> tirx.Stmt:
        if from_zero:
            return acc.assign(i, tirx.Broadcast(tirx.const(0, "float32"), LANES))
        return acc.assign(i, _tail_load(c, _shifted(c_start, {-2: acc.source_row(i)}), cols))

    k = tirx.Var("k_tail", "int32")
    constant_depth = analyzer.simplify(depth)
    if isinstance(constant_depth, tirx.IntImm) and constant_depth.value <= MATMUL_TILE[2]:
        k_loop = tirx.For(k, 0, depth, tirx.ForKind.UNROLLED, step(k))
    else:  # as the any-depth kernel: K_UNROLL steps per iteration, then the remainder
        k_outer, k_inner = tirx.Var("k_tail_outer", "int32"), tirx.Var("k_tail_inner", "int32")
        remainder = analyzer.simplify(depth % K_UNROLL)
        k_loop = tirx.SeqStmt([
            tirx.For(k_outer, 0, analyzer.simplify(depth // K_UNROLL), tirx.ForKind.SERIAL,
                     tirx.For(k_inner, 0, K_UNROLL, tirx.ForKind.UNROLLED, step(k_outer * K_UNROLL + k_inner))),
            tirx.For(k, 0, remainder, tirx.ForKind.SERIAL, step(analyzer.simplify(depth - remainder) + k)),
        ])
    return _when_positive(acc.kernel(acc.each(start), k_loop, acc.store(c, c_start, cols)), rows, cols, depth)


def emit_masked_vnni(match: TailMatch) -> tirx.Stmt:
    """The variable-length tail form of ``VNNI_DOT_16x4_LLVM22``: ``e_n <= 16`` output lanes and ``e_k <= 4``
    reduction steps in one ``vpdpbusd``. ``C`` is loaded and stored under the ``e_n``-lane mask (plainly when
    ``e_n`` is 16); the 4 activation bytes are loaded under the ``e_k``-byte mask (zeros past it, so nothing past
    the end of ``A`` is read and the products there are 0; plainly when ``e_k`` is 4). The packed weights (rows of
    4 bytes): when the region starts a tile of a ``B`` allocated in whole 16 x 4 tiles (its last two dimensions;
    packing pads with zeros) the 64 bytes are read whole; otherwise the region's ``e_n`` rows of ``e_k`` bytes are
    loaded under a mask (``_weight_bytes``). Nothing runs unless both extents are positive."""
    if match.thread_bound:
        raise TailMismatch("the region is bound to GPU threads; the masked forms are llvm code")
    lanes_extent, depth = (_as_int32(e) for e in match.extents)
    (a, a_start), (b, b_start), (c, c_start) = (match.buffers[n] for n in ("A", "B", "C"))
    if (a.dtype, b.dtype, c.dtype) != ("uint8", "int8", "int32"):
        raise TailMismatch(f"operands are {a.dtype}, {b.dtype}, {c.dtype}, not uint8, int8, int32")
    if a.strides or b.strides or c.strides:
        raise TailMismatch("a buffer is strided; the masked VNNI form needs contiguous rows")
    if not (isinstance(b.shape[-1], tirx.IntImm) and b.shape[-1].value == 4):
        raise TailMismatch(f"buffer {b.name} (shape {list(b.shape)}) does not hold its weights in rows of 4 packed "
                           "bytes")
    b_bytes = _weight_bytes(b, b_start, lanes_extent, depth)
    accumulated = _vpdpbusd(_tail_load(c, c_start, lanes_extent), _activation_word(a, a_start, depth), b_bytes)
    return _when_positive(_tail_store(c, c_start, accumulated, lanes_extent), lanes_extent, depth)


def emit_masked_vnni_dense(match: TailMatch) -> tirx.Stmt:
    """The variable-length tail form of ``VNNI_DENSE_8x16_ANY_DEPTH`` (``rows <= 8`` rows of ``C``, ``cols <= 16``
    outputs, any depth; constants or expressions): as the kernel, one ``vpdpbusd`` per row and 4-step group of
    the reduction into zero-started accumulators, the last group's activation bytes loaded under the mask of the
    ``depth % 4`` bytes left; the rows stored under the ``cols``-lane mask (plainly when ``cols`` is 16). With a
    symbolic row count all 8 rows are computed (rows past the extent repeat the last row) and only the rows inside
    it are stored. The weights must be packed in whole 16 x 4 tiles; a group's tile is read whole where the region
    starts it, else under the mask of the region's lanes and steps (``_weight_bytes``). Nothing runs unless all
    three extents are positive."""
    if match.thread_bound:
        raise TailMismatch("the region is bound to GPU threads; the masked forms are llvm code")
    rows, cols, depth = (_as_int32(e) for e in match.extents)
    (a, a_start), (b, b_start), (c, c_start) = (match.buffers[n] for n in ("A", "B", "C"))
    if (a.dtype, b.dtype, c.dtype) != ("uint8", "int8", "int32"):
        raise TailMismatch(f"operands are {a.dtype}, {b.dtype}, {c.dtype}, not uint8, int8, int32")
    if a.strides or b.strides or c.strides:
        raise TailMismatch("a buffer is strided; the masked VNNI form needs contiguous rows")
    if not _packed_in_whole_tiles(b):
        raise TailMismatch(f"buffer {b.name} is not packed in whole 16 x 4 tiles (shape {list(b.shape)})")
    analyzer = tvm.sym.Analyzer()
    acc = _TailRows(rows, VNNI_PANEL_TILE[0], "int32")

    def group(step: tvm.ir.PrimExpr, used: tvm.ir.PrimExpr) -> tirx.Stmt:
        """Reduction steps ``4 step`` to ``4 step + used`` into every row's accumulator."""
        weights = _weight_bytes(b, _shifted(b_start, {-3: step}), cols, used)

        def update(i: tirx.Var) -> tirx.Stmt:
            word = _activation_word(a, _shifted(a_start, {-2: acc.source_row(i), -1: step * 4}), used)
            return acc.assign(i, _vpdpbusd(acc.value(i), word, weights))

        return acc.each(update)

    step = tirx.Var("k_tail_group", "int32")
    whole_groups, left = analyzer.simplify(depth // 4), analyzer.simplify(depth % 4)
    k_loop = tirx.SeqStmt([tirx.For(step, 0, whole_groups, tirx.ForKind.SERIAL, group(step, tirx.const(4, "int32"))),
                           _when_positive(group(whole_groups, left), left)])
    start = acc.each(lambda i: acc.assign(i, tirx.Broadcast(tirx.const(0, "int32"), LANES)))
    return _when_positive(acc.kernel(start, k_loop, acc.store(c, c_start, cols)), rows, cols, depth)


def _vpdpbusd(acc: tvm.ir.PrimExpr, word: tvm.ir.PrimExpr, weights: tvm.ir.PrimExpr) -> tvm.ir.PrimExpr:
    """``acc`` (``int32x16``) plus, in every lane ``l``, the dot product of the 4 unsigned bytes of ``word`` (an
    ``int32``) with the signed bytes ``4 l`` to ``4 l + 3`` of ``weights`` (``int8x64``): one ``vpdpbusd``."""
    return tirx.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.vpdpbusd.512", acc,
                                      tirx.reinterpret("int8x64", tirx.Broadcast(word, 16)), weights)


def _activation_word(a: tirx.Buffer, start, used: tvm.ir.PrimExpr) -> tvm.ir.PrimExpr:
    """The 4 activation bytes from ``start`` as one ``int32``, the bytes past ``used`` zero (masked, not read).
    Never ``_tail_load``'s plain load of a row that goes on past ``used``: every byte enters the dot product, and
    the row's next bytes (outside the reduction) would meet the weights' padding, or real weights."""
    return tirx.reinterpret("int32", _exact_load(a, start, used, 4))


def _packed_in_whole_tiles(b: tirx.Buffer) -> bool:
    """Whether the packed weights ``b`` are allocated in whole 16 x 4 tiles (its last two dimensions)."""
    analyzer = tvm.sym.Analyzer()
    return len(b.shape) >= 2 and all(
        analyzer.can_prove_equal(dim, size) for dim, size in zip(b.shape[-2:], (16, 4), strict=True)
    )


def _weight_bytes(b: tirx.Buffer, start, lanes_extent: tvm.ir.PrimExpr, used: tvm.ir.PrimExpr) -> tvm.ir.PrimExpr:
    """The ``int8x64`` weight operand of one ``vpdpbusd`` for a region of ``b`` (contiguous rows of 4 bytes) from
    ``start``: byte ``4 l + t`` is ``b``'s byte ``t`` of lane ``l`` (row ``start[-2] + l``, step ``start[-1] + t``).
    Where ``start`` is the first byte of a 16 x 4 tile of ``b`` packed in whole tiles, the tile is read whole (its
    bytes past ``used`` meet zero activation bytes, its lanes past ``lanes_extent`` are never stored). Otherwise the
    64 bytes from ``start`` would run past the tile, and past the end of ``b`` for its last tile (a region whose
    lanes or reduction steps start inside a tile: ``W[.., j + 3, k + 2]``): the bytes of lanes ``l < lanes_extent``
    and steps ``t < used`` are loaded under a mask, the others are zeros and never read."""
    analyzer = tvm.sym.Analyzer()
    if _packed_in_whole_tiles(b) and all(analyzer.can_prove_equal(index, 0) for index in start[-2:]):
        return _weight_tile(b, start)
    byte = tirx.Ramp(tirx.const(0, "int32"), tirx.const(1, "int32"), 64)
    four = tirx.Broadcast(tirx.const(4, "int32"), 64)
    inside = tirx.And(tirx.LT(tirx.FloorDiv(byte, four), tirx.Broadcast(_as_int32(lanes_extent), 64)),
                      tirx.LT(tirx.FloorMod(byte, four), tirx.Broadcast(_as_int32(used), 64)))
    return _masked_load(b, start, inside, 64)


def _weight_tile(b: tirx.Buffer, start) -> tvm.ir.PrimExpr:
    """The 64 bytes of the 16 x 4 weight tile at ``start`` (a tile of ``b`` packed whole)."""
    return tirx.BufferLoad(b, [*start[:-1], tirx.Ramp(start[-1], tirx.const(1, start[-1].ty.dtype), 64)])


def _as_int32(extent: tvm.ir.PrimExpr) -> tvm.ir.PrimExpr:
    return extent if extent.ty.dtype == "int32" else tirx.Cast("int32", extent)


def _register(name: str, description, implementation) -> None:
    if s_tir.TensorIntrin.get(name, allow_missing=True) is None:
        s_tir.TensorIntrin.register(name, description, implementation)


def _register_tail_forms(name: str, **forms) -> None:
    """The package's tail forms of ``name``, unless tail forms are registered for it already (a user's
    ``register_tail_intrinsics`` made before the first ``register_intrinsics`` is kept, as a user's
    ``TensorIntrin`` of one of these names is)."""
    if tail_intrinsics(name) is None:
        register_tail_intrinsics(name, **forms)


@functools.lru_cache(maxsize=1)
def _register_once() -> tuple[str, ...]:
    for name, op in ((MUL_16, "mul"), (ADD_16, "add")):
        _register(name, *_elementwise_intrinsic(op))
        _register_tail_forms(name, variable_length=emit_masked_elementwise(op))
    _register(MATMUL_8x16x16, *_matmul_intrinsic(MATMUL_TILE[0], MATMUL_TILE[1], MATMUL_TILE[2]))
    for rows, name in MATMUL_TAILS.items():
        _register(name, *_matmul_intrinsic(rows, MATMUL_TILE[1], MATMUL_TILE[2]))
    _register_tail_forms(MATMUL_8x16x16, by_extent=dict(MATMUL_TAILS), variable_length=emit_masked_matmul)
    _register(MATMUL_8x16_ANY_DEPTH, *_matmul_intrinsic(*MATMUL_PANEL_TILE, depth=None))
    _register_tail_forms(MATMUL_8x16_ANY_DEPTH, variable_length=emit_masked_matmul_from_zero)
    _register(VNNI_DOT_16x4_LLVM22, _vnni_description, _vnni_implementation)
    _register_tail_forms(VNNI_DOT_16x4_LLVM22, variable_length=emit_masked_vnni)
    _register(VNNI_DENSE_8x16_ANY_DEPTH, *_vnni_dense_intrinsic(VNNI_PANEL_TILE[0]))
    _register_tail_forms(VNNI_DENSE_8x16_ANY_DEPTH, variable_length=emit_masked_vnni_dense)
    return (MUL_16, ADD_16, MATMUL_8x16x16, *MATMUL_TAILS.values(), MATMUL_8x16_ANY_DEPTH, VNNI_DOT_16x4_LLVM22,
            VNNI_DENSE_8x16_ANY_DEPTH)


def register_intrinsics() -> list[str]:
    """Register this package's intrinsics and their tail forms (idempotent); returns their names. A name already
    registered keeps its ``TensorIntrin``, and a mark whose tail forms are registered already (a user's
    ``register_tail_intrinsics``) keeps them.

    The built-ins named here (``VNNI_DOT_16x4``, ``WMMA_*``) are registered by ``import tvm.s_tir.tensor_intrin``,
    which parses a few hundred TVMScript functions (seconds); it is not done here, but
    ``ensure_builtin_registered`` (called by ``tensorize_marked`` for marks naming a built-in) does it on demand."""
    return list(_register_once())


BUILTIN_NAMES = frozenset(
    {
        VNNI_DOT_16x4,
        WMMA_SYNC_F16F16F32,
        WMMA_FILL_F32,
        WMMA_LOAD_F16_A,
        WMMA_LOAD_F16_B,
        WMMA_STORE_F32_GLOBAL,
        WMMA_STORE_F32_SHARED,
    }
)


@contextlib.contextmanager
def _frames_of_frozen_code_have_no_module():
    """Make ``inspect.getmodule`` answer ``None`` at once for a frame of frozen code (``<frozen importlib...>``).

    Every ``@T.prim_func`` calls ``inspect.stack()``, which asks ``getmodule`` for the module of each frame. During
    an import the stack holds ``<frozen importlib._bootstrap>`` frames, whose file no module has: ``getmodule``
    then rescans all of ``sys.modules`` before answering ``None``, for every such frame of each of the few hundred
    functions ``tvm.s_tir.tensor_intrin`` parses (most of its 20-35 s import). The answer is the same ``None``
    (a frame has no ``__module__`` or ``__name__``), so the parsed intrinsics are unchanged."""
    original = inspect.getmodule

    def getmodule(obj, _filename=None):
        if (_filename is not None and _filename.startswith("<") and _filename.endswith(">")
                and inspect.isframe(obj)):
            return None
        return original(obj, _filename)

    inspect.getmodule = getmodule
    try:
        yield
    finally:
        inspect.getmodule = original


def ensure_builtin_registered(name: str) -> bool:
    """Import ``tvm.s_tir.tensor_intrin`` (slow, once) when ``name`` is a TVM built-in intrinsic that is not
    registered yet, or any name of that package's families (``dot_*``, ``wmma_*``, ``mma_*``); returns whether
    ``name`` is registered afterwards."""
    if s_tir.TensorIntrin.get(name, allow_missing=True) is not None:
        return True
    if name in BUILTIN_NAMES or name.startswith(("dot_", "wmma_", "mma_", "ldmatrix_")):
        with _frames_of_frozen_code_have_no_module():
            import tvm.s_tir.tensor_intrin  # noqa: F401 - registers the built-ins (VNNI, WMMA, MMA, ...)
    return s_tir.TensorIntrin.get(name, allow_missing=True) is not None
