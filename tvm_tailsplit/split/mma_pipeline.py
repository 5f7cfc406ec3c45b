"""The ``"tailsplit_mma"`` TIR pipeline: the tensor-core matmul of ``mma_schedule`` from marks to CUDA.

Stages: ``TailSplit(strategy=mma_schedule.TAILSPLIT_STRATEGY)`` (guard chains above the marks), ``merge_equal_cases``
(the chain's cases that hold the same main tile become one ``if``), ``tensorize_marked``, then TVM's default
pipeline run inside a nested ``PassContext`` equal to the caller's plus ``mma_schedule.MMA_PASS_CONFIG``
(``tirx.use_async_copy``: the shared-memory copies become ``cp.async``). Host finalization is TVM's; device
finalization is TVM's preceded by ``LowerAllWarpMemory``.

``LowerAllWarpMemory`` works around TVM 0.27's ``tirx.LowerWarpMemory`` (src/tirx/transform/lower_warp_memory.cc,
``WarpMemoryRewriter::VisitStmt_(const SeqStmtNode*)``): it rewrites the *first* ``warp`` allocation of a
statement sequence and hands the rest of the sequence to the access rewriter of that buffer, so a second or third
``warp`` allocation in the same sequence (the software pipeline hoists the ``A`` and ``B`` fragments next to the
accumulator) stays a whole-warp array: 2048 halves per thread in local memory instead of 64 in registers. The
pass runs ``LowerWarpMemory`` again while a ``warp`` allocation is left (each run lowers one more per sequence;
a buffer already lowered has scope ``local``), at most ``MAX_WARP_LOWERINGS`` times, then folds the register
indices it wrote with truncating divisions (``_floor_nonnegative_divisions``).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.ir import Range

from .merge_cases import merge_equal_cases
from .mma_schedule import MMA_PASS_CONFIG, TAILSPLIT_STRATEGY
from .pass_ import TailSplit
from .tensorize import tensorize_marked

__all__ = ["MAX_WARP_LOWERINGS", "MMA_PIPELINE", "LowerAllWarpMemory", "mma_pipeline", "prepare_mma"]

MMA_PIPELINE = "tailsplit_mma"
MAX_WARP_LOWERINGS = 8  # warp buffers per statement sequence the pass lowers at most (the matmul has 3)


def prepare_mma(mod: tvm.IRModule, report: list | None = None) -> tvm.IRModule:
    """TailSplit, the merge of equal cases and ``tensorize_marked`` (its records appended to ``report``)."""
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


def _with_mma_config(outer: tvm.transform.PassContext) -> tvm.transform.PassContext:
    instruments = [i for i in outer.instruments if i.name != "PassTimingInstrument"]  # see tvm_tailsplit.cuda
    return tvm.transform.PassContext(opt_level=outer.opt_level, required_pass=list(outer.required_pass),
                                     disabled_pass=list(outer.disabled_pass), instruments=instruments,
                                     config={**dict(outer.config), **MMA_PASS_CONFIG})


def mma_pipeline() -> tuple[tvm.transform.Pass, object, object]:
    """``(pass, finalize_host_passes, finalize_device_passes)`` for ``tvm.tirx.register_tir_pipeline``."""
    default, finalize_host, finalize_device = tirx.get_tir_pipeline("default")

    @tvm.transform.module_pass(opt_level=0, name="TailSplitMmaPipeline")
    def pipeline(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        mod = prepare_mma(mod)
        with _with_mma_config(tvm.transform.PassContext.current()):
            return default(mod)

    def finalize_device_with_warp_memory():
        return tvm.transform.Sequential([LowerAllWarpMemory(), finalize_device()], name="MmaFinalizeDevice")

    return pipeline, finalize_host, finalize_device_with_warp_memory


tirx.register_tir_pipeline(MMA_PIPELINE, mma_pipeline)
