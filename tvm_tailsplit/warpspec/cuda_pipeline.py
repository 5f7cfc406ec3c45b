"""The TIR pipeline for warp-specialized CUDA kernels: TVM's default TIR pipeline with `ThreadSync` disabled.

The generated kernel synchronizes itself (mbarrier channels between warp roles, named barriers inside a role).
TVM's `ThreadSync` would try to insert `__syncthreads()` for the shared rings inside the role branches and fails
("Cannot insert syncs inside condition"); a CTA-wide barrier there would also deadlock the roles.

Algorithm: `tvm_tailsplit.cuda.register_pipeline_without_thread_sync` (TVM's own default pipeline in a nested
`PassContext` that disables `s_tir.ThreadSync`; nothing is copied from TVM), registered under
`WARP_SPECIALIZED_PIPELINE`. Compile with `tvm.compile(mod, target, tir_pipeline=WARP_SPECIALIZED_PIPELINE)`
(registered when this module is imported).
"""

from __future__ import annotations

from ..cuda import THREAD_SYNC_DISABLED_PASSES, register_pipeline_without_thread_sync

__all__ = ["DISABLED_PASSES", "WARP_SPECIALIZED_PIPELINE"]

DISABLED_PASSES = THREAD_SYNC_DISABLED_PASSES
"""The passes of TVM's default pipeline that the warp-specialized pipeline leaves out (by pass name)."""

WARP_SPECIALIZED_PIPELINE = register_pipeline_without_thread_sync("warp_specialized", "WarpSpecializedPipeline")
