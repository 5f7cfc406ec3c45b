"""The llvm lowering of plans: contiguous vector access to interleaved complex data, prefetching, and results
that stay exact in the layouts where the rewrite must not apply (odd distances, tails, strides)."""

import dataclasses
import threading
import time
import uuid

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft import lowering
from tvm_tailsplit.fft.template import PREFETCH_BLOCK
from tvm_tailsplit.ir_utils import default_passes
from tvm_tailsplit.testing import guarded_array

from .fft_reference import random_complex, random_real, relative_error, tolerance


def _vectorized(plan):
    """The plan's module lowered up to and including the contiguous-access rewrite."""
    passes = [
        s_tir.transform.CanonicalizeLoop(), s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(), s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation(), s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(), s_tir.transform.LowerOpaqueBlock(), tirx.transform.FlattenBuffer(),
        tirx.transform.NarrowDataType(32), s_tir.transform.LoopPartition(), tirx.transform.VectorizeLoop(True),
        lowering.contiguous_complex_access(plan._pair_buffers()),
    ]
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        module = tvm.tirx.transform.BindTarget(plan.target)(plan.module)
        return tvm.transform.Sequential(passes)(module)["main"]


def _strided_external_accesses(func) -> list[str]:
    found = []

    def check(name, indices):
        if name in ("input", "output") and len(indices) == 1 and isinstance(indices[0], tirx.Ramp):
            stride = indices[0].stride
            if not (isinstance(stride, tirx.IntImm) and stride.value == 1):
                found.append(f"{name}[{indices[0]}]")

    tvm_ffi.structural_walk(func.body, [(tvm.ir.TensorLoad, lambda load: check(load.source.name, load.indices)),
                                        (tirx.BufferStore, lambda store: check(store.buffer.name, store.indices))])
    return found


@pytest.mark.parametrize("n,batch,kind", [(8, 6, "c2c"), (60, 7, "c2c"), (64, 8, "c2c"), (1000, 5, "c2c"),
                                          (4096, 2, "c2c"), (1024, 4, "r2c"), (1024, 4, "c2r")])
def test_interleaved_data_is_accessed_with_contiguous_vectors(n, batch, kind):
    # batch lanes (8, 60 with a tail group of 3, 1000) and vectors inside a transform (64, 4096, r2c/c2r,
    # whose post/pre-processing reads and writes X[n/2 - k] with negative strides)
    plan = tfft.plan(n, batch, kind=kind, direction="backward" if kind == "c2r" else "forward")
    assert _strided_external_accesses(_vectorized(plan)) == []


def test_lanes_stay_scalar_without_the_pair_guarantee():
    # r2c input rows at an odd distance: its pairs do not all start at even offsets, loads are left alone
    plan = tfft.plan(64, 4, kind="r2c", idist=65)
    assert "input" not in plan._pair_buffers()
    base = random_real((4, 65), "float32", seed=3)
    assert relative_error(plan(base[:, :64]), np.fft.rfft(base[:, :64].astype(np.float64))) \
        <= tolerance(64, "complex64")


@pytest.mark.parametrize("n,batch", [(16, 9), (64, 13), (1000, 9), (97, 9)])
def test_prefetching_plans_stay_inside_their_buffers(n, batch):
    # the last groups prefetch beyond the batch: addresses are clamped, and nothing outside is written
    plan = tfft.plan(n, batch)
    assert any(PREFETCH_BLOCK in block.name_hint for block in _blocks(plan.module["main"]))
    x = random_complex((batch, n), "complex64", seed=n)
    guarded = guarded_array((batch, n, 2), "float32")
    plan(x, out=guarded.array)
    guarded.check_canaries("fft output")
    result = guarded.array.view(np.complex64)[..., 0]
    assert relative_error(result, np.fft.fft(x.astype(np.complex128))) <= tolerance(n, "complex64")


def _blocks(func):
    blocks = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, blocks.append))
    return blocks


@pytest.mark.parametrize("n", [1024, 4096])
def test_scratch_stores_of_lane_tuples_are_contiguous(n):
    # the first pass writes each instance's outputs contiguously, the instances far apart: the strided stores
    # of its vector over instances become one contiguous store per instance after a transpose
    func = _vectorized(tfft.plan(n, 2))
    strided = []

    def on_store(store):
        ramp = store.indices[0] if len(store.indices) == 1 else None
        if isinstance(ramp, tirx.Ramp) and not (isinstance(ramp.stride, tirx.IntImm) and ramp.stride.value == 1):
            strided.append(store.buffer.name)

    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, on_store))
    assert strided == []
    x = random_complex((2, n), "complex64", seed=n)
    assert relative_error(tfft.plan(n, 2)(x), np.fft.fft(x.astype(np.complex128))) <= tolerance(n, "complex64")


def _row_accesses(func, lanes: int) -> tuple[int, int]:
    """(loads, stores) of `lanes` contiguous floats of the caller's arrays."""
    counts = {"load": 0, "store": 0}

    def count(kind, name, indices):
        ramp = indices[0] if len(indices) == 1 else None
        if name in ("input", "output") and isinstance(ramp, tirx.Ramp) and isinstance(ramp.stride, tirx.IntImm) \
                and ramp.stride.value == 1 and int(ramp.lanes) == lanes:
            counts[kind] += 1

    tvm_ffi.structural_walk(func.body, [(tvm.ir.TensorLoad, lambda load: count("load", load.source.name, load.indices)),
                                        (tirx.BufferStore, lambda store: count("store", store.buffer.name,
                                                                               store.indices))])
    return counts["load"], counts["store"]


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("n", [2, 3, 5, 6, 8, 12, 16])
def test_lane_rows_are_loaded_and_stored_as_transposed_blocks(n, lanes):
    # a single-codelet plan with lanes across the batch: every whole block of `lanes` floats of a lane's 2n
    # floats is read and written as contiguous vectors of the lanes' rows and transposed, the floats after the
    # last whole block with pair accesses. Exact in every case: full groups and a tail group, out of place
    # (guarded) and in place.
    batch = 2 * lanes + 3
    base = tfft.plan(n, batch)
    plan = tfft.plan(n, batch, variant=dataclasses.replace(base.variant, lanes=lanes, prefetch_bytes=0))
    func = _vectorized(plan)
    assert _strided_external_accesses(func) == []
    loads, stores = _row_accesses(func, lanes)
    blocks = 2 * n // lanes
    assert (loads, stores) == (blocks * lanes, blocks * lanes)
    x = random_complex((batch, n), "complex64", seed=n + lanes)
    expected = np.fft.fft(x.astype(np.complex128))
    guarded = guarded_array((batch, n, 2), "float32")
    plan(x, out=guarded.array)
    guarded.check_canaries("fft output")
    assert relative_error(guarded.array.view(np.complex64)[..., 0], expected) <= tolerance(n, "complex64")
    y = x.copy()
    plan(y, out=y)
    assert relative_error(y, expected) <= tolerance(n, "complex64")


@pytest.mark.parametrize("n,lanes", [(8, 8), (16, 4), (12, 4)])
def test_transposed_blocks_with_strided_rows(n, lanes):
    # rows farther apart than a transform (idist, odist): the blocks read and write only the transforms' floats
    batch = 3 * lanes + 1
    base = tfft.plan(n, batch, idist=n + 3, odist=n + 5)
    plan = tfft.plan(n, batch, idist=n + 3, odist=n + 5,
                     variant=dataclasses.replace(base.variant, lanes=lanes, prefetch_bytes=0))
    assert _row_accesses(_vectorized(plan), lanes) == (2 * n, 2 * n)
    x = random_complex((batch, n + 3), "complex64", seed=n)
    guarded = guarded_array((batch, n + 5, 2), "float32")
    plan(x[:, :n], out=guarded.array[:, :n])
    guarded.check_canaries("fft output")
    result = guarded.array.view(np.complex64)[..., 0]
    assert relative_error(result[:, :n], np.fft.fft(x[:, :n].astype(np.complex128))) <= tolerance(n, "complex64")


@tvm.instrument.pass_instrument
class _PassNames:
    """Records the name of every pass that runs."""

    def __init__(self):
        self.names = []

    def run_before_pass(self, mod, info):
        self.names.append(info.name)


_WRAPPERS = {"_pipeline", lowering.PIPELINE_PASS}


def _passes_run(plan, pipeline: str) -> list[str]:
    recorder = _PassNames()
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}, instruments=[recorder]):
        tvm.compile(plan.module, target=plan.target, tir_pipeline=pipeline)
    return [name for name in recorder.names if name not in _WRAPPERS]


def _with_fft_passes(names: list[str], last_pass: str) -> list[str]:
    # the hoist right after VectorizeLoop; the access rewrite right after `last_pass`, the last of TVM's list
    # (before the finalization passes)
    position = names.index(lowering.INSERT_AFTER) + 1
    with_hoist = names[:position] + ["HoistScratchAllocation"] + names[position:]
    last = with_hoist.index(last_pass) + 1
    return with_hoist[:last] + ["ContiguousComplexAccess", "tirx.StmtSimplify"] + with_hoist[last:]


def test_pipeline_is_tvm_default_with_the_fft_passes():
    plan = tfft.plan(64, 8)
    default = _passes_run(plan, "default")
    assert "tirx.VectorizeLoop" in default and "tirx.MakePackedAPI" in default
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        last_pass = default_passes()[-1].info.name
    assert default.count(last_pass) == 1
    assert _passes_run(plan, lowering.register_pipeline(plan._pair_buffers())) == _with_fft_passes(default, last_pass)


def test_pipeline_follows_a_changed_tvm_default(monkeypatch):
    # a TVM whose default pipeline has another pass list: the FFT's pipeline runs that list, not a copy of today's
    from tvm.tirx import compilation_pipeline

    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        changed = [tirx.transform.RemoveNoOp()] + [p for p in default_passes()
                                                   if p.info.name != "s_tir.HoistIfThenElse"]
    original = compilation_pipeline.PIPELINE_MAP["s_tir"]

    def changed_default():
        _, finalize_host, finalize_device = original()

        @tvm.transform.module_pass(opt_level=0, name="_pipeline")
        def pipeline(mod, _ctx):
            return tvm.ir.transform.Sequential(list(changed))(mod)

        return pipeline, finalize_host, finalize_device

    monkeypatch.setitem(compilation_pipeline.PIPELINE_MAP, "s_tir", changed_default)
    plan = tfft.plan(60, 7)
    default = _passes_run(plan, "default")
    assert default[:3] == ["tirx.BindTarget", "sequential", "tirx.RemoveNoOp"]
    assert "s_tir.HoistIfThenElse" not in default
    assert _passes_run(plan, lowering.register_pipeline(plan._pair_buffers())) == _with_fft_passes(
        default, changed[-1].info.name)


def test_pipelines_registered_from_two_threads_at_once_are_distinct(monkeypatch):
    # the name of a new set of pair buffers was taken before registering it: two threads registering two sets at
    # once named both alike, and TVM's registry kept one factory, the other set's plans compiled with its pipeline
    register = tirx.register_tir_pipeline

    def slow_register(name, factory):
        time.sleep(0.2)  # a registration in progress while the other thread names its set
        register(name, factory)

    monkeypatch.setattr(tirx, "register_tir_pipeline", slow_register)
    sets = [frozenset({f"buffer_{uuid.uuid4().hex}"}) for _ in range(2)]
    names: dict[frozenset[str], str] = {}
    threads = [threading.Thread(target=lambda s=s: names.__setitem__(s, lowering.register_pipeline(s))) for s in sets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert names[sets[0]] != names[sets[1]]
    assert all(lowering.register_pipeline(s) == names[s] for s in sets)


def _ramp_store(buffer, value, base: int, stride: int) -> tirx.BufferStore:
    return tirx.BufferStore(buffer, value, [tirx.Ramp(base, stride, 8)])


def _stores_into_their_own_floats():
    """B's odd floats computed from the even ones just stored (a user's kernel in a module built with the FFT's
    pipeline): the two stores were interleaved into one, the second value reading B before the first store."""
    a, b = tirx.decl_buffer((16,), "float32", "A"), tirx.decl_buffer((16,), "float32", "B")
    doubled = tirx.BufferLoad(a, [tirx.Ramp(0, 2, 8)]) * tirx.const(2, "float32x8")
    plus_one = tirx.BufferLoad(b, [tirx.Ramp(0, 2, 8)]) + tirx.const(1, "float32x8")
    return [a, b], [_ramp_store(b, doubled, 0, 2), _ramp_store(b, plus_one, 1, 2)]


def _stores_around_a_store(duplicate: bool):
    """Four bound vectors stored 4 floats apart (a set that the rewrite transposes, stored at its last member), with
    a store between the members that writes a float of an earlier member: a scalar (`duplicate` False) or a
    vector over the first member's floats; the set's stores were moved past it."""
    a, b = tirx.decl_buffer((32,), "float32", "A"), tirx.decl_buffer((32,), "float32", "B")
    vectors = [tirx.Var(f"v{e}", "float32x8") for e in range(5)]
    stmts = [tirx.Bind(v, tirx.BufferLoad(a, [tirx.Ramp(e % 4, 4, 8)]) + tirx.const(e // 4, "float32x8"))
             for e, v in enumerate(vectors)]
    between = _ramp_store(b, vectors[4], 0, 4) if duplicate else tirx.BufferStore(b, tirx.const(100, "float32"), [4])
    # offsets 0, 2, (0,) 3, 1: no two in a row are a pair of floats (the pair interleave would take them first)
    stmts += [_ramp_store(b, vectors[0], 0, 4), _ramp_store(b, vectors[2], 2, 4), between,
              _ramp_store(b, vectors[3], 3, 4), _ramp_store(b, vectors[1], 1, 4)]
    return [a, b], stmts


@pytest.mark.parametrize("make", [_stores_into_their_own_floats, lambda: _stores_around_a_store(False),
                                  lambda: _stores_around_a_store(True)], ids=["raw", "scalar-between", "set-between"])
def test_the_rewrite_keeps_the_order_of_dependent_accesses_in_any_kernel(make):
    # the pipeline (`register_pipeline`, as emit_fft's Relax models and te_fft graphs are built) rewrites every
    # PrimFunc of the module, not only the FFT's: it must keep what any kernel computes
    params, stmts = make()
    func = tirx.PrimFunc(params, tirx.SeqStmt(stmts)).with_attr("global_symbol", "main")
    rewritten = lowering.contiguous_complex_access(frozenset())(tvm.IRModule({"main": func}))
    x = np.arange(int(params[0].shape[0]), dtype="float32") + 1
    results = []
    for module in (tvm.IRModule({"main": func}), rewritten):
        for pipeline in ("default", lowering.register_pipeline(frozenset())):
            out = tvm.runtime.tensor(np.zeros(int(params[1].shape[0]), "float32"))
            tvm.compile(module, target="llvm", tir_pipeline=pipeline)["main"](tvm.runtime.tensor(x), out)
            results.append(out.numpy())
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
