"""The ``"tailsplit_mma"`` TIR pipeline: the tensor-core matmul of ``mma_schedule`` from marks to CUDA.

Stages: ``TailSplit(strategy=mma_schedule.TAILSPLIT_STRATEGY)`` (guard chains above the marks), ``merge_equal_cases``
(the chain's cases that hold the same main tile become one ``if``), ``tensorize_marked``, then TVM's default
pipeline run inside a nested ``PassContext`` equal to the caller's plus ``mma_schedule.MMA_PASS_CONFIG``
(``tirx.use_async_copy``: the shared-memory copies become ``cp.async``). Host finalization is TVM's; device
finalization is TVM's preceded by ``mma_tails.ZeroFillBySourceSize`` (predicated copies as one src-size
``cp.async``) and ``LowerAllWarpMemory``.

``LowerAllWarpMemory`` works around TVM 0.27's ``tirx.LowerWarpMemory`` (src/tirx/transform/lower_warp_memory.cc,
``WarpMemoryRewriter::VisitStmt_(const SeqStmtNode*)``): it rewrites the *first* ``warp`` allocation of a
statement sequence and hands the rest of the sequence to the access rewriter of that buffer, so a second or third
``warp`` allocation in the same sequence (the software pipeline hoists the ``A`` and ``B`` fragments next to the
accumulator) stays a whole-warp array: 2048 halves per thread in local memory instead of 64 in registers. The
pass first gives every ``warp`` allocation of symbolic size its constant upper bound (``_bound_warp_allocations``),
then runs ``LowerWarpMemory`` again while a ``warp`` allocation is left (each run lowers one more per sequence;
a buffer already lowered has scope ``local``), at most ``MAX_WARP_LOWERINGS`` times, then folds the register
indices it wrote with truncating divisions (``_floor_nonnegative_divisions``).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock

from ..cuda import nested_pass_context
from .merge_cases import merge_equal_cases
from .mma_schedule import MMA_PASS_CONFIG, TAILSPLIT_STRATEGY
from .mma_tails import ZeroFillBySourceSize, register_mma_tail_forms
from .pass_ import TailSplit
from .tensorize import tensorize_marked

__all__ = ["MAX_WARP_LOWERINGS", "MMA_PIPELINE", "LowerAllWarpMemory", "mma_pipeline", "prepare_mma"]

MMA_PIPELINE = "tailsplit_mma"
MAX_WARP_LOWERINGS = 8  # warp buffers per statement sequence the pass lowers at most (the matmul has 3)


def prepare_mma(mod: tvm.IRModule, report: list | None = None) -> tvm.IRModule:
    """TailSplit, the merge of equal cases and ``tensorize_marked`` (its records appended to ``report``)."""
    register_mma_tail_forms()
    split = TailSplit(strategy=TAILSPLIT_STRATEGY)(mod)
    return tensorize_marked(merge_equal_cases(split), report=report)


def _warp_allocations(mod: tvm.IRModule) -> int:
    found = []

    def on_alloc(node: tirx.AllocBuffer):
        if node.buffer.scope() == "warp":
            found.append(node)

    for func in mod.functions.values():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    return len(found)


def LowerAllWarpMemory() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """``tirx.transform.LowerWarpMemory`` until no ``warp`` allocation is left (see the module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="LowerAllWarpMemory")
    def lower(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        mod = _bound_warp_allocations(mod)
        for _ in range(MAX_WARP_LOWERINGS):
            if not _warp_allocations(mod):
                break
            mod = tirx.transform.LowerWarpMemory()(mod)
        functions = {}
        for global_var, func in mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                func = func.with_body(_floor_nonnegative_divisions(func.body))
            functions[global_var] = func
        return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)

    return lower


# TVM's first lowering passes (its default pipeline runs them again, with no further effect): they place and
# compact the allocations, so that _constant_fragments sees the per-warp fragment sizes
_COMPACT = tvm.transform.Sequential([s_tir.transform.LowerInitBlock(),
                                     s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
                                     s_tir.transform.ConvertBlocksToOpaque(),
                                     s_tir.transform.CompactBufferAllocation()], name="MmaCompact")


def _constant_fragments(mod: tvm.IRModule) -> tvm.IRModule:
    """Each ``warp`` or shared buffer a block allocates with a symbolic shape (a symbolic ``M``: the compacted
    accumulator is ``min((m + 15) // 16 - tile, 4)`` tiles, the ``A`` tile ``min((m + 15) // 16, 8)`` row
    groups) given the shape's constant upper bound, before the software pipeline multiplies its buffers.

    - ``warp``: a symbolic buffer size would become the symbolic stride between pipeline versions, and the
      fragments' register indices would not be constants.
    - ``shared``: the kernel's dynamic shared memory would be a function of ``m``. TVM 0.27's CUDA runtime
      raises a kernel's dynamic shared-memory limit above 48 KiB only at its first launch, for that launch's
      size (``CUDAWrappedFunc``, src/backend/cuda/runtime/cuda_module.cc: "dyn_shmem_size doesn't change
      across different invocations"), so a later launch with a larger ``m`` failed with
      ``CUDA_ERROR_INVALID_VALUE``. At the constant bound every launch asks for the same size."""
    functions = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            replaced: dict = {}

            def on_block(block: SBlock, replaced=replaced):
                buffers = [_bounded(b, replaced) for b in block.alloc_buffers]
                if all(new.same_as(old) for new, old in zip(buffers, block.alloc_buffers, strict=True)):
                    return block
                return SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, block.body, block.init,
                              buffers, block.match_buffers, block.annotations)

            body = tvm_ffi.structural_map(func.body, (SBlock, on_block), order="post")
            if replaced:
                func = func.with_body(tvm_ffi.structural_map(body, (tvm.ir.Var, lambda v, r=replaced: r.get(v, v)),
                                                             order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


# the scopes whose symbolic allocations _constant_fragments bounds (see there)
_BOUNDED_SCOPES = ("warp", "shared", "shared.dyn")


def _bounded(buffer, replaced: dict):
    """``buffer``, or (recorded in ``replaced``) a buffer like it of a ``_BOUNDED_SCOPES`` scope with each
    symbolic extent at its constant upper bound."""
    if buffer.scope() not in _BOUNDED_SCOPES or all(isinstance(d, tirx.IntImm) for d in buffer.shape):
        return buffer
    analyzer = sym.Analyzer()
    bounds = [analyzer.const_int_bound(d).max_value for d in buffer.shape]
    if any(b >= sym.ConstIntBound.POS_INF for b in bounds):
        return buffer
    new = tirx.decl_buffer(bounds, buffer.dtype, buffer.name, scope=buffer.scope())
    replaced[buffer] = new
    return new


def _bound_warp_allocations(mod: tvm.IRModule) -> tvm.IRModule:
    """Each ``warp`` allocation whose size is an expression (a symbolic ``M``: TVM's buffer compaction gives the
    accumulator ``min((m + 15) // 16 - tile, 4) * 768`` elements) allocated at the expression's constant upper
    bound instead; ``LowerWarpMemory`` needs a constant size. The buffer is only accessed inside the smaller
    size, so the meaning is unchanged."""
    functions = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            analyzer = sym.Analyzer()
            replaced: dict = {}

            def on_alloc(node: tirx.AllocBuffer, replaced=replaced, analyzer=analyzer):
                buffer = node.buffer
                if buffer.scope() != "warp" or all(isinstance(d, tirx.IntImm) for d in buffer.shape):
                    return node
                bounds = [analyzer.const_int_bound(d).max_value for d in buffer.shape]
                if any(b >= sym.ConstIntBound.POS_INF for b in bounds):
                    return node
                new = tirx.decl_buffer(bounds, buffer.dtype, buffer.name, scope="warp")
                replaced[buffer] = new
                return tirx.AllocBuffer(new, node.annotations)

            body = tvm_ffi.structural_map(func.body, (tirx.AllocBuffer, on_alloc), order="post")
            if replaced:
                body = tvm_ffi.structural_map(body, (tvm.ir.Var, lambda v, r=replaced: r.get(v, v)), order="post")
                func = func.with_body(body)
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def _floor_nonnegative_divisions(body: tirx.Stmt) -> tirx.Stmt:
    """Each truncating division of a provably non-negative value by a positive constant, as a floor division,
    simplified under the ranges of the enclosing thread extents and loops. ``LowerWarpMemory`` writes the
    register index of a warp buffer as ``(offset + tx * 8) / 256 * 8 + ...`` with C's truncating ``/``, which
    TVM's simplifier does not fold even where ``tx < 32`` makes it a constant; an index that is not a constant
    keeps the fragments and accumulators out of registers (local memory)."""
    analyzer = sym.Analyzer()

    def on_attr(node: tirx.AttrStmt, mutator):
        if node.attr_key == "thread_extent" and isinstance(node.value, tirx.IntImm):
            analyzer.bind(node.node.var, Range(0, node.value), allow_override=True)
        return mutator.default_mutate(node)

    def on_for(node: tirx.For, mutator):
        if isinstance(node.min, tirx.IntImm) and isinstance(node.extent, tirx.IntImm):
            analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent), allow_override=True)
        return mutator.default_mutate(node)

    def on_div(node: tirx.Div, mutator):
        node = mutator.default_mutate(node)
        if isinstance(node, tirx.Div) and isinstance(node.b, tirx.IntImm) and node.b.value > 0 \
                and analyzer.can_prove(node.a >= 0):
            return analyzer.simplify(tirx.floordiv(node.a, node.b))
        return node

    return tvm_ffi.structural_mutate(body, [(tirx.AttrStmt, on_attr), (tirx.For, on_for), (tirx.Div, on_div)])


def _require_cuda_targets(mod: tvm.IRModule) -> None:
    """A ``ValueError`` naming the function and its target unless every PrimFunc of ``mod`` is compiled for CUDA
    (the pipeline's intrinsics are ``mma.sync``, ``ldmatrix`` and ``cp.async``; ``"tailsplit"`` is the pipeline for
    llvm)."""
    for global_var, func in mod.functions.items():
        target = func.attrs.get("target") if isinstance(func, tirx.PrimFunc) and func.attrs else None
        if target is not None and target.kind.name != "cuda":
            raise ValueError(f"{MMA_PIPELINE}: function {global_var.name_hint} is compiled for "
                             f"{target.kind.name}; this pipeline lowers tensor-core matmuls for CUDA (use "
                             "tir_pipeline=\"tailsplit\" on llvm)")


def mma_pipeline() -> tuple[tvm.transform.Pass, object, object]:
    """``(pass, finalize_host_passes, finalize_device_passes)`` for ``tvm.tirx.register_tir_pipeline``."""
    default, finalize_host, finalize_device = tirx.get_tir_pipeline("default")

    @tvm.transform.module_pass(opt_level=0, name="TailSplitMmaPipeline")
    def pipeline(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        _require_cuda_targets(mod)
        mod = prepare_mma(mod)
        with nested_pass_context(tvm.transform.PassContext.current(), config=MMA_PASS_CONFIG):
            mod = _constant_fragments(_COMPACT(mod))
            return default(mod)

    def finalize_device_with_warp_memory():
        return tvm.transform.Sequential([ZeroFillBySourceSize(), LowerAllWarpMemory(), finalize_device()],
                                        name="MmaFinalizeDevice")

    return pipeline, finalize_host, finalize_device_with_warp_memory


tirx.register_tir_pipeline(MMA_PIPELINE, mma_pipeline)
