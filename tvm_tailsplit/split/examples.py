"""Built-in examples of marked, tail-tiled TensorIR used by the demo, the tutorials and the tests."""

from __future__ import annotations

import tvm
from tvm import s_tir, te
from tvm.script import tirx as T

from ..ir_utils import require_sizes
from .conditions import MARK_KEY

__all__ = [
    "elementwise_multiply_nc1hwc0",
    "gpu_vector_add_one",
    "matmul",
    "register_vector_scale_intrinsic",
    "symbolic_vector_multiply",
    "vector_scale_1d",
]


def _require_instruction(who: str, instruction: object) -> None:
    """A ``TypeError`` naming ``who`` unless ``instruction`` (the mark's value) is a non-empty str."""
    if not isinstance(instruction, str) or not instruction:
        raise TypeError(f"{who}: instruction must be the name of an instruction (a non-empty str), got {instruction!r}")


def elementwise_multiply_nc1hwc0(
    c1: int = 3, h: int = 20, w: int = 4, c0: int = 16, h_tile: int = 8, instruction: str = "vmuls"
) -> tvm.IRModule:
    """The seed's headline: ``C = A * B`` over an NC1HWC0 tensor whose ``h`` axis is cut into tiles of
    ``h_tile`` (for ``h=20``: two full tiles and a tail of 4), loops ``c1, h_o, w, h_i, c0`` and the mark on
    ``w`` (one instruction covers ``w x h_i x c0``)."""
    c1, h, w, c0, h_tile = require_sizes("elementwise_multiply_nc1hwc0", c1=c1, h=h, w=w, c0=c0, h_tile=h_tile)
    _require_instruction("elementwise_multiply_nc1hwc0", instruction)
    shape = (c1, h, w, c0)
    a = te.placeholder(shape, "float32", name="A")
    b = te.placeholder(shape, "float32", name="B")
    c = te.compute(shape, lambda i, j, k, l: a[i, j, k, l] * b[i, j, k, l], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    block = sch.get_sblock("C")
    loop_c1, loop_h, loop_w, loop_c0 = sch.get_loops(block)
    h_outer, h_inner = sch.split(loop_h, [None, h_tile])
    sch.reorder(loop_c1, h_outer, loop_w, h_inner, loop_c0)
    sch.annotate(loop_w, MARK_KEY, instruction)
    return sch.mod


def matmul(m: int | tvm.ir.PrimExpr, n: int | tvm.ir.PrimExpr, k: int | tvm.ir.PrimExpr,
           dtype: str = "float32") -> tvm.tirx.PrimFunc:
    """``C[i, j] = sum_r A[i, r] * B[r, j]`` as an unscheduled PrimFunc (block ``C``), ready for a schedule; each size
    a positive int or symbolic (a ``tirx.Var`` or an integer expression)."""
    constant = {name: size for name, size in (("m", m), ("n", n), ("k", k)) if not isinstance(size, tvm.ir.Expr)}
    sizes = {"m": m, "n": n, "k": k} | dict(zip(constant, require_sizes("matmul", **constant), strict=True))
    m, n, k = sizes.values()
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")


def vector_scale_1d(n: int = 100, lanes: int = 16, instruction: str = "vmul16") -> tvm.IRModule:
    """``B = A * 2`` over ``n`` elements split by the vector length ``lanes``, the mark on the inner loop."""
    n, lanes = require_sizes("vector_scale_1d", n=n, lanes=lanes)
    _require_instruction("vector_scale_1d", instruction)
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * tvm.tirx.const(2.0, "float32"), name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    _, inner = sch.split(loop, [None, lanes])
    sch.annotate(inner, MARK_KEY, instruction)
    return sch.mod


def symbolic_vector_multiply(lanes: int = 16, instruction: str = "tailsplit_avx512_fp32_mul_16") -> tvm.IRModule:
    """``C = A * B`` over ``n`` elements, ``n`` symbolic (a buffer dimension known only at run time), split by
    ``lanes`` with the mark on the inner loop (by default the 16-lane AVX-512 multiply of ``intrinsics``)."""
    (lanes,) = require_sizes("symbolic_vector_multiply", lanes=lanes)
    _require_instruction("symbolic_vector_multiply", instruction)
    n = te.var("n")
    a = te.placeholder((n,), "float32", name="A")
    b = te.placeholder((n,), "float32", name="B")
    c = te.compute((n,), lambda i: a[i] * b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(loop, [None, lanes])
    sch.annotate(inner, MARK_KEY, instruction)
    return sch.mod


def register_vector_scale_intrinsic(lanes: int = 16, name: str | None = None) -> str:
    """Register (once) a ``TensorIntrin`` computing ``B[0:lanes] = A[0:lanes] * 2`` as one vector operation
    on llvm, matching the marked loop of ``vector_scale_1d``; returns its name (default ``vmul{lanes}``)."""
    (lanes,) = require_sizes("register_vector_scale_intrinsic", lanes=lanes)
    name = name or f"vmul{lanes}"
    if s_tir.TensorIntrin.get(name, allow_missing=True) is not None:
        return name

    @T.prim_func(s_tir=True)
    def description(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (lanes,), "float32", offset_factor=1)
        B = T.match_buffer(b, (lanes,), "float32", offset_factor=1)
        with T.sblock("root"):
            T.reads(A[0:lanes])
            T.writes(B[0:lanes])
            for i in T.serial(lanes):
                with T.sblock("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi] * T.float32(2.0)

    @T.prim_func(s_tir=True)
    def implementation(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (lanes,), "float32", offset_factor=1)
        B = T.match_buffer(b, (lanes,), "float32", offset_factor=1)
        with T.sblock("root"):
            T.reads(A[0:lanes])
            T.writes(B[0:lanes])
            B[T.ramp(0, 1, lanes)] = A[T.ramp(0, 1, lanes)] * T.broadcast(T.float32(2.0), lanes)

    s_tir.TensorIntrin.register(name, description, implementation)
    return name


def gpu_vector_add_one(n: int | None = 1000, threads: int = 32, vector: int = 8,
                       instruction: str = "vadd8") -> tvm.IRModule:
    """``B = A + 1`` scheduled for CUDA: ``blockIdx.x`` x ``threadIdx.x`` x a marked inner loop of ``vector``
    elements; for ``n`` not a multiple of ``threads * vector`` the last block has a tail. ``n=None`` makes the
    length a symbolic variable ``n`` (one kernel for every length; its grid extent is 0 at ``n = 0``)."""
    n, threads, vector = require_sizes("gpu_vector_add_one", ("n",), n=n, threads=threads, vector=vector)
    _require_instruction("gpu_vector_add_one", instruction)
    length = tvm.tirx.Var("n", "int32") if n is None else n
    a = te.placeholder((length,), "float32", name="A")
    b = te.compute((length,), lambda i: a[i] + tvm.tirx.const(1.0, "float32"), name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    block_x, thread_x, inner = sch.split(loop, [None, threads, vector])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    sch.annotate(inner, MARK_KEY, instruction)
    return sch.mod
