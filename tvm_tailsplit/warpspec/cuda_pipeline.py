"""The TIR pipeline for warp-specialized CUDA kernels: TVM's default TIR pipeline with `ThreadSync` disabled.

The generated kernel synchronizes itself (mbarrier channels between warp roles, named barriers inside a role).
TVM's `ThreadSync` would try to insert `__syncthreads()` for the shared rings inside the role branches and fails
("Cannot insert syncs inside condition"); a CTA-wide barrier there would also deadlock the roles.

Algorithm: nothing is copied from TVM. The pipeline runs TVM's own default pipeline
(`tvm.tirx.get_tir_pipeline("default")`, which builds its pass list at run time from the PassContext config) inside
a nested `PassContext` equal to the caller's (opt level, required passes, config, instruments) except that
`s_tir.ThreadSync` is added to the disabled passes; the host and device finalization passes are TVM's default ones.
One exception for instruments: TVM's `PassTimingInstrument` clears its profile when a context exits, which would
free the record of the still running pipeline pass, so it is not carried into the nested context (it times the
whole pipeline as one pass); every other instrument sees each lowering pass as under the default pipeline (and
its `enter_pass_ctx` / `exit_pass_ctx` run once more, for the nested context).

Compile with `tvm.compile(mod, target, tir_pipeline=WARP_SPECIALIZED_PIPELINE)` (registered when this module is
imported).
"""

from __future__ import annotations

import tvm
from tvm import tirx

__all__ = ["DISABLED_PASSES", "WARP_SPECIALIZED_PIPELINE"]

WARP_SPECIALIZED_PIPELINE = "warp_specialized"

DISABLED_PASSES = ("s_tir.ThreadSync",)
"""The passes of TVM's default pipeline that the warp-specialized pipeline leaves out (by pass name)."""

_CONTEXT_CLEARING_INSTRUMENTS = ("PassTimingInstrument",)


def _without_thread_sync(outer: tvm.transform.PassContext) -> tvm.transform.PassContext:
    """`outer` with `DISABLED_PASSES` added to its disabled passes (see the module doc for the instruments)."""
    instruments = [i for i in outer.instruments if i.name not in _CONTEXT_CLEARING_INSTRUMENTS]
    return tvm.transform.PassContext(
        opt_level=outer.opt_level,
        required_pass=list(outer.required_pass),
        disabled_pass=[*outer.disabled_pass, *DISABLED_PASSES],
        instruments=instruments,
        config=dict(outer.config),
    )


def _warp_specialized_pipeline():
    default, finalize_host, finalize_device = tirx.get_tir_pipeline("default")

    @tvm.transform.module_pass(opt_level=0, name="WarpSpecializedPipeline")
    def pipeline(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        with _without_thread_sync(tvm.transform.PassContext.current()):
            return default(mod)

    return pipeline, finalize_host, finalize_device


tirx.register_tir_pipeline(WARP_SPECIALIZED_PIPELINE, _warp_specialized_pipeline)
