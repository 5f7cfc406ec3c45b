"""The tails of the tensor-core matmul (``mma_schedule``) without padded copies in global memory.

The kernel keeps every tile of the mma loop a whole 16 x 16 (x 16 deep) instruction tile and handles the edges of
``A``, ``B`` and ``C`` where they meet memory, by this rule:

1. **Loads** (global -> shared, ``cp.async``): ``pad_einsum``'s padding is inlined into the shared-memory copies,
   so a copy reads ``if_then_else(i < M and k < K, A[i, k], 0)``. ``mma_schedule.copy_lanes`` picks the widest
   vector that divides the row length, so a vector (a 4-, 8- or 16-byte chunk) lies wholly inside or wholly
   outside the matrix and its predicate is one boolean: TVM's ``InjectPTXAsyncCopy`` turns the copy into a
   predicated ``cp_async_raw``, and ``ZeroFillBySourceSize`` (a device finalization pass) rewrites that into
   ``cp.async [dst], [src], cp_size, src_size`` with ``src_size = pred ? cp_size : 0``: PTX zero-fills the
   ``cp_size - src_size`` bytes it does not read (TVM's own form is ``@p cp.async`` plus ``@!p st.shared`` of
   zeros: two instructions). No chunk straddles the edge, so ``src_size`` is never a partial count. A row length
   that is odd (``K`` or ``N`` odd) gives rows that are only 2-byte aligned, and cp.async moves at least 4 aligned
   bytes, so those copies stay element-wise synchronous loads with ``if_then_else`` (the same zero-padded tiles).
   The ``K`` tail is the last ``block_k`` slice, zero-filled like the others: no separate scalar loop (when
   ``K mod 32`` is at most 16, its second 16-deep mma step multiplies zeros).
2. **Compute** (fill, ``ldmatrix``, ``mma.sync``): tiles that overlap ``[0, M) x [0, N)`` run whole on the
   zero-padded shared tiles (the rows and columns past the edge compute zeros, at most 15 per dimension); tiles
   wholly outside are dropped by TailSplit's guard chain above the marks.
3. **Stores** (accumulator -> ``C``): the copy back of the padded result is folded into the accumulator store
   (``reverse_compute_inline``), which writes ``C`` under ``T.where(i < M and j < N)``. TailSplit leaves main
   tiles (the whole 16 x 16 inside ``C``) condition-free, tensorized with TVM's ``mma_store_16x16_f32_global_``;
   a tail tile (``rows x cols`` of the tile inside ``C``, one of them < 16) gets ``emit_predicated_store``: the
   same per-thread store of the 8 fragment elements, each under ``row < rows and col < cols`` (TVM folds a bound
   that is a multiple of 8 into the register index, e.g. ``local_id < 4``).

The choice between the forms of a tile is fixed by where the tile lies, so the mapping cost (``split/cost.py``)
is not consulted for it: a tail tile has exactly one correct form here at each stage (the whole-tile mma on
zero-filled operands costs what a main tile costs; a narrower mma shape would save work only in the last 8
columns of ``N`` and is not used).
"""

from __future__ import annotations

import functools
import logging

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from .mma_schedule import FRAGMENT_ELEMENTS, MMA_MARKS, WARP_SIZE
from .tail_forms import TailMatch, TailMismatch, register_tail_intrinsics

__all__ = ["ZeroFillBySourceSize", "emit_predicated_store", "register_mma_tail_forms"]

logger = logging.getLogger("tvm_tailsplit.split.mma_tails")

_CP_ASYNC_RAW = "tirx.s_tir.cp_async_raw"


def emit_predicated_store(match: TailMatch) -> tirx.Stmt:
    """The accumulator store of a tail tile: TVM's per-thread store (``mma_store_16x16_f32_global_``: lane ``tx``
    writes its 8 fragment elements to ``ldmatrix_32x8_to_shared_16x16_layout(tx, local_id)``) with each element
    guarded by ``row < rows and col < cols``, where ``rows x cols`` are the tail's extents (constants or
    expressions such as ``T.min(16, m - i * 16)``)."""
    from tvm.s_tir.tensor_intrin.cuda import ldmatrix_32x8_to_shared_16x16_layout

    if set(match.buffers) != {"C", "C_warp"} or len(match.extents) != 2:
        raise TailMismatch(f"{match.intrinsic}: not a store of a 16 x 16 accumulator tile")
    (target, starts), (fragment, fragment_starts) = match.buffers["C"], match.buffers["C_warp"]
    lane = tirx.Var("tx", "int32")
    element = tirx.Var("local_id", "int32")
    row, col = ldmatrix_32x8_to_shared_16x16_layout(lane, element)
    rows, cols = match.extents
    store = tirx.BufferStore(target, tirx.BufferLoad(fragment, [*fragment_starts[:-2], lane, element]),
                             [*starts[:-2], starts[-2] + row, starts[-1] + col])
    guarded = tirx.IfThenElse(tirx.And(row < rows, col < cols), store, None)
    per_element = tirx.For(element, 0, FRAGMENT_ELEMENTS, tirx.ForKind.SERIAL, guarded)
    return tirx.For(lane, 0, WARP_SIZE, tirx.ForKind.THREAD_BINDING, per_element,
                    thread_binding=tirx.IterVar(None, lane, tirx.IterVar.ThreadIndex, "threadIdx.x"))


@functools.cache
def register_mma_tail_forms() -> None:
    """Register ``emit_predicated_store`` as the variable-length tail form of the accumulator store's mark (once;
    called where the marks are tensorized, not at import: importing TVM's CUDA intrinsics parses hundreds of
    TVMScript functions, about 30 s on a 2-core machine)."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the intrinsic the mark names

    register_tail_intrinsics(MMA_MARKS["store"], variable_length=emit_predicated_store)


def _zero_fill(call: tvm.ir.Call) -> tirx.Stmt:
    """The src-size ``cp.async`` of a predicated ``cp_async_raw(dst, dst_offset, src, src_offset, size, pred)``
    (offsets in elements of each pointer's type), with the two flat buffers it addresses declared before it."""
    dst, dst_offset, src, src_offset, size, predicate = call.args
    cp_size = int(size.value)
    views = [tirx.decl_buffer((1,), pointer.ty.element_type.dtype, f"zero_fill_{side}")
             for pointer, side in ((dst, "dst"), (src, "src"))]
    addresses = [tirx.address_of(tirx.BufferLoad(view, [offset]))
                 for view, offset in zip(views, (dst_offset, src_offset), strict=True)]
    src_size = tirx.Cast("uint32", tirx.if_then_else(predicate, cp_size, 0))
    cache = "cg" if cp_size == 16 else "ca"
    copy = T.ptx[f"cp.async.{cache}.shared.global"](*addresses, cp_size, src_size)
    declarations = [tirx.DeclBuffer(view, data=pointer) for view, pointer in zip(views, (dst, src), strict=True)]
    return tirx.SeqStmt([*declarations, tirx.Evaluate(copy)])


def ZeroFillBySourceSize() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Each predicated ``cp_async_raw`` (TVM's ``@p cp.async`` + ``@!p st.shared`` zeros) as one ``cp.async``
    whose src-size operand is ``cp_size`` or 0 (see the module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="ZeroFillBySourceSize")
    def rewrite(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        count = [0]

        def on_evaluate(stmt: tirx.Evaluate):
            call = stmt.value
            if isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) and call.op.name == _CP_ASYNC_RAW \
                    and len(call.args) == 6:
                count[0] += 1
                return _zero_fill(call)
            return stmt

        functions = {}
        for global_var, func in mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post"))
            functions[global_var] = func
        logger.debug("ZeroFillBySourceSize: %d predicated cp.async rewritten", count[0])
        return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)

    return rewrite
