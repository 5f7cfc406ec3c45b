"""The warp_specialized TIR pipeline is TVM's default pipeline with ThreadSync disabled, composed, not copied.

The passes it runs are recorded with a PassInstrument and compared with those of TVM's default pipeline at run
time, so a change of TVM's default (a pass added, removed, reordered, or added by a config option) that a copied
list would miss makes these tests fail. It runs TVM's list itself (TVM's pipeline pass, `_pipeline`, is not run),
with one pass of its own before `MergeSharedMemoryAllocations` (`cuda.scope_dynamic_shared_loads`) and one first
in the device finalization (`cuda.exact_float64_constants`, in a sequence of its own).
"""

import tvm
from tvm.script import tirx as T

from tvm_tailsplit.cuda import (
    EXACT_FINALIZE_DEVICE,
    MERGE_SHARED_MEMORY_PASS,
    cuda_source,
    cuda_target,
    exact_float64_constants,
    scope_dynamic_shared_loads,
)
from tvm_tailsplit.warpspec import WARP_SPECIALIZED_PIPELINE, WarpSpecialize, examples

THREAD_SYNC = "s_tir.ThreadSync"
WRAPPER = "WarpSpecializedPipeline"
TVM_PIPELINE_PASS = "_pipeline"  # TVM's default pipeline pass, which runs its list as one pass
SCOPE = scope_dynamic_shared_loads.info.name
EXACT = exact_float64_constants.info.name


def _specialized_streaming() -> tvm.IRModule:
    func = examples.streaming_kernel(tiles=8, tile=64, stages=3)
    return WarpSpecialize("cuda", threads_per_role={0: 32, 1: 64})(tvm.IRModule({"main": func}))


def _passes_run(mod: tvm.IRModule, pipeline: str, config: dict | None = None,
                disabled_pass: tuple[str, ...] = ()) -> list[str]:
    names: list[str] = []

    @tvm.ir.instrument.pass_instrument
    class RecordPasses:
        def run_before_pass(self, mod, info):
            names.append(info.name)

    with tvm.transform.PassContext(instruments=[RecordPasses()], config=config, disabled_pass=disabled_pass):
        tvm.compile(mod, target=cuda_target("sm_80"), tir_pipeline=pipeline)
    return names


@T.prim_func(s_tir=True)
def _device_kernel(a: T.Buffer((256,), "float32"), b: T.Buffer((256,), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("b"):
                vi = T.axis.spatial(256, bx * 128 + tx)
                b[vi] = a[vi] * T.float32(2)


def _default_passes(config: dict | None = None) -> list[str]:
    # TVM's default pipeline cannot compile the specialized kernel (ThreadSync fails inside the role branches);
    # its pass list does not depend on the kernel, so record it on a plain kernel with a device part.
    return _passes_run(tvm.IRModule({"main": _device_kernel}), "default", config)


def _same_lowering(specialized: list[str], default: list[str]) -> bool:
    """Whether the specialized pipeline ran TVM's default passes but ThreadSync, its own pass right before
    MergeSharedMemoryAllocations, and EXACT right before TVM's device finalization (the first pass of its own
    sequence, once per device module)."""
    position = specialized.index(SCOPE)
    exact = [i for i, name in enumerate(specialized) if name == EXACT]
    return (specialized[position + 1] == MERGE_SHARED_MEMORY_PASS
            and len(exact) == 1 and specialized[exact[0] - 1] == EXACT_FINALIZE_DEVICE
            and [n for n in specialized if n not in (WRAPPER, SCOPE, EXACT, EXACT_FINALIZE_DEVICE)]
            == [n for n in default if n not in (THREAD_SYNC, TVM_PIPELINE_PASS)])


def test_pipeline_runs_tvm_default_passes_without_thread_sync():
    default = _default_passes()
    specialized = _passes_run(_specialized_streaming(), WARP_SPECIALIZED_PIPELINE)
    assert default.count(THREAD_SYNC) == 3  # shared, shared.dyn, warp
    for kept in ("s_tir.InjectSoftwarePipeline", "s_tir.HoistIfThenElse", "s_tir.InferFragment",
                 "s_tir.LowerThreadAllreduce", "s_tir.InjectDoubleBuffer", "tirx.VectorizeLoop"):
        assert kept in specialized, kept
    assert _same_lowering(specialized, default)


def test_pipeline_follows_the_pass_context_config():
    config = {"tirx.use_async_copy": True, "tirx.disable_cse_tir": True}
    default = _default_passes(config)
    specialized = _passes_run(_specialized_streaming(), WARP_SPECIALIZED_PIPELINE, config)
    assert "s_tir.InjectPTXAsyncCopy" in specialized and "tirx.CommonSubexprElim" not in specialized
    assert _same_lowering(specialized, default)


def test_source_equals_tvm_default_with_thread_sync_disabled():
    mod = _specialized_streaming()
    with tvm.transform.PassContext(disabled_pass=[THREAD_SYNC]):
        reference = cuda_source(mod, "sm_80", tir_pipeline="default")
    assert cuda_source(mod, "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE) == reference


def test_pipeline_keeps_the_callers_disabled_passes():
    names = _passes_run(_specialized_streaming(), WARP_SPECIALIZED_PIPELINE, disabled_pass=("tirx.CommonSubexprElim",))
    assert "tirx.CommonSubexprElim" not in names and "tirx.StorageRewrite" in names


def test_pass_timing_instrument_times_the_pipeline_as_one_pass():
    timing = tvm.ir.instrument.PassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing]):
        cuda_source(_specialized_streaming(), "sm_80", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
        profile = timing.render()
    assert WRAPPER in profile and "tirx.BindTarget" in profile
