"""The TIR pipeline for warp-specialized CUDA kernels: TVM's default s_tir pipeline without `ThreadSync`.

The generated kernel synchronizes itself (mbarrier channels between warp roles, named barriers inside a role).
TVM's `ThreadSync` would try to insert `__syncthreads()` for the shared rings inside the role branches and fails
("Cannot insert syncs inside condition"); a CTA-wide barrier there would also deadlock the roles. Compile with
`tvm.compile(mod, target, tir_pipeline=WARP_SPECIALIZED_PIPELINE)` (registered when this module is imported).
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.pipeline import finalize_device_passes, finalize_host_passes

__all__ = ["WARP_SPECIALIZED_PIPELINE"]

WARP_SPECIALIZED_PIPELINE = "warp_specialized"


def _passes() -> list:
    return [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.ManifestSharedMemoryLocalStage(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerAutoCopy(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        s_tir.transform.LoopPartition(),
        tirx.transform.VectorizeLoop(True),
        tirx.transform.StorageRewrite(),
        tirx.transform.UnrollLoop(),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveNoOp(),
        tirx.transform.CommonSubexprElim(),
        tirx.transform.FP8ComputeLegalize(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.FP8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]


def _warp_specialized_pipeline():
    @tvm.transform.module_pass(opt_level=0, name="WarpSpecializedPipeline")
    def pipeline(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        return tvm.transform.Sequential(_passes())(mod)

    return pipeline, finalize_host_passes, finalize_device_passes


tirx.register_tir_pipeline(WARP_SPECIALIZED_PIPELINE, _warp_specialized_pipeline)
