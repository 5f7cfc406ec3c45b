"""`cuda.scope_dynamic_shared_loads`: a kernel whose threads run a pass in exactly one round binds its loads from
dynamic shared memory in the sequence that allocates the buffers, outside any statement that TVM 0.27's
`MergeSharedMemoryAllocations` counts as a scope, which then stops ("Load memory in places other than store"); the
pass puts those statements in a loop of one iteration. TVMScript before/after, and TVM's pass on both (the FFT plan
that needs it: tests/fft/test_fft_cuda_input_staging.py; the pipelines that run it: test_warpspec_pipeline.py)."""

import pytest
import tvm
from tvm.script import tirx as T

from tvm_tailsplit.cuda import cuda_target, scope_dynamic_shared_loads
from tvm_tailsplit.ir_utils import default_passes

MERGE_ERROR = "Load memory in places other than store"


def _kernel(scope: str, scoped: bool) -> tvm.IRModule:
    """A block that stages 128 floats in two shared buffers of `scope` and reads them back in one round of its 128
    threads (`scoped`: as the pass leaves it)."""
    if scoped:
        @T.prim_func
        def main(a: T.Buffer((256,), "float32"), b: T.Buffer((256,), "float32")):
            with T.launch_thread("blockIdx.x", 2) as bx:
                tx = T.launch_thread("threadIdx.x", 128)
                low = T.alloc_buffer((64,), "float32", scope=scope)
                high = T.alloc_buffer((64,), "float32", scope=scope)
                if tx < 64:
                    low[tx] = a[bx * 128 + tx]
                else:
                    high[tx - 64] = a[bx * 128 + tx]
                T.tvm_storage_sync("shared")
                for _ in range(1):
                    v: T.let[T.float32] = low[tx % 64]
                    w: T.let[T.float32] = high[63 - tx % 64]
                    b[bx * 128 + tx] = v * T.float32(2) + w
    else:
        @T.prim_func
        def main(a: T.Buffer((256,), "float32"), b: T.Buffer((256,), "float32")):
            with T.launch_thread("blockIdx.x", 2) as bx:
                tx = T.launch_thread("threadIdx.x", 128)
                low = T.alloc_buffer((64,), "float32", scope=scope)
                high = T.alloc_buffer((64,), "float32", scope=scope)
                if tx < 64:
                    low[tx] = a[bx * 128 + tx]
                else:
                    high[tx - 64] = a[bx * 128 + tx]
                T.tvm_storage_sync("shared")
                v: T.let[T.float32] = low[tx % 64]
                w: T.let[T.float32] = high[63 - tx % 64]
                b[bx * 128 + tx] = v * T.float32(2) + w
    return tvm.IRModule({"main": main.with_attr("target", cuda_target("sm_80"))})


def _merge_pass() -> tvm.transform.Pass:
    return next(p for p in default_passes() if p.info.name == "s_tir.MergeSharedMemoryAllocations")


def test_loads_bound_beside_their_dynamic_allocation_are_scoped_and_merge():
    before = _kernel("shared.dyn", scoped=False)
    with pytest.raises(tvm.error.InternalError, match=MERGE_ERROR):
        _merge_pass()(before)
    after = scope_dynamic_shared_loads(before)
    tvm.ir.assert_structural_equal(after, _kernel("shared.dyn", scoped=True))
    merged = _merge_pass()(after).script()
    # one buffer of both, live together: 2 x 64 floats
    assert merged.count("T.alloc_buffer(") == 1 and 'T.alloc_buffer((512,), "uint8", scope="shared.dyn"' in merged


def test_static_shared_buffers_are_scoped_where_the_config_merges_them():
    before = _kernel("shared", scoped=False)
    tvm.ir.assert_structural_equal(scope_dynamic_shared_loads(before), before)  # TVM leaves them alone by default
    with tvm.transform.PassContext(config={"tirx.merge_static_smem": True}):
        with pytest.raises(tvm.error.InternalError, match=MERGE_ERROR):
            _merge_pass()(before)
        after = scope_dynamic_shared_loads(before)
        tvm.ir.assert_structural_equal(after, _kernel("shared", scoped=True))
        _merge_pass()(after)


def test_kernels_with_a_scope_around_their_loads_are_unchanged():
    scoped = _kernel("shared.dyn", scoped=True)
    tvm.ir.assert_structural_equal(scope_dynamic_shared_loads(scoped), scoped)
