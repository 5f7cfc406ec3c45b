"""ir_utils.dispatch_by_intervals: one PrimFunc that runs, on each interval of a symbolic extent, the body built
for it. On llvm: the body of each interval runs (every value of the extent from 0 to past the last boundary, the
output canary-guarded; below the first interval none runs); on CUDA each case is a kernel with its own launch
shape, and the host code TVM lowers the function to launches it alone, under the case's condition. Bad cases are
refused by name."""

import re
import threading
import time

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.script import tirx as T

from tvm_tailsplit.cuda import cuda_target, executable_cuda_source
from tvm_tailsplit.ir_utils import (
    DispatchCase,
    default_passes,
    default_passes_with,
    dispatch_by_intervals,
    launched_extent,
    require_bools,
    require_sizes,
    touches,
)
from tvm_tailsplit.testing import evaluate, guarded_array, host_after_packed_api, host_launches, to_tvm


def add_func() -> tirx.PrimFunc:
    """``B[i] = A[i] + 1`` over a symbolic ``n``."""
    n = tirx.Var("n", "int32")
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] + tirx.const(1.0, "float32"), name="B")
    return te.create_prim_func([a, b]).with_attr("global_symbol", "main")


def other_func(shape: tuple | None, dtype: str = "float32") -> tirx.PrimFunc:
    """``B[i] = A[i] + 1`` with ``A`` of another shape or dtype (``None``: a symbolic ``m``)."""
    extent = tirx.Var("m", "int32") if shape is None else shape[0]
    a = te.placeholder((extent,), dtype, name="A")
    b = te.compute((extent,), lambda i: a[i] + tirx.const(1.0, dtype), name="B")
    return te.create_prim_func([a, b])


def adding(func: tirx.PrimFunc, addend: float) -> tirx.PrimFunc:
    """``func`` (same parameters) adding ``addend`` instead of 1: tells which case ran."""
    def on_float(value):
        return tirx.FloatImm("float32", addend) if value.value == 1.0 else value

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.FloatImm, on_float), order="post"))


def threads(func: tirx.PrimFunc, per_block: int) -> tirx.PrimFunc:
    sch = s_tir.Schedule(func)
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    block, thread = sch.split(loop, [None, per_block])
    sch.bind(block, "blockIdx.x")
    sch.bind(thread, "threadIdx.x")
    return sch.mod["main"]


def n_of(func: tirx.PrimFunc) -> tirx.Var:
    return func.params[0].shape[0]


def test_each_interval_runs_its_body_and_none_below_the_first():
    base = add_func()
    one, two = base, adding(base, 2.0)
    cases = [DispatchCase(1, 3, "one", one), DispatchCase(4, 7, "two", two), DispatchCase(8, None, "one", one)]
    func = dispatch_by_intervals(n_of(base), cases)
    script = func.script()
    assert script.count("T.tvm_thread_invariant(") == 2  # "one" runs on the union of its intervals: one body
    assert s_tir.Schedule(func).get_sblock("B_one") and s_tir.Schedule(func).get_sblock("B_two")
    executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    empty = tvm.runtime.tensor(np.zeros(0, "float32"))
    executable["main"](empty, empty)  # n = 0: below the first interval, no case runs
    for n in range(1, 14):
        a = np.arange(n, dtype="float32")
        out = guarded_array((n,), "float32", canary=-5.0)
        out.array[:] = 0
        executable["main"](tvm.runtime.tensor(a), to_tvm(out.array))
        out.check_canaries("B")
        want = a + (2.0 if 4 <= n <= 7 else 1.0)
        np.testing.assert_array_equal(out.array, want, err_msg=f"n = {n}")


def test_cuda_cases_are_kernels_with_their_own_launch_shapes():
    base = add_func()
    func = dispatch_by_intervals(n_of(base), [DispatchCase(1, 100, "narrow", threads(base, 32)),
                                              DispatchCase(101, None, "wide", threads(base, 256))])
    host, executable = host_after_packed_api(tvm.IRModule({"main": func}), cuda_target("sm_80"), "default")
    source = executable_cuda_source(executable)
    kernels = set(re.findall(r"__launch_bounds__\((\d+)\) (\w+)\(", source))  # declarations and definitions
    assert sorted(kernels) == [("256", "main_kernel_1"), ("32", "main_kernel")], kernels
    launches = host_launches(host)  # the host code: each case launches its kernel alone, under its condition
    assert [kernels for _, kernels in launches] == [["main_kernel"], ["main_kernel_1"]]
    for n, want in ((0, []), (1, ["main_kernel"]), (100, ["main_kernel"]), (101, ["main_kernel_1"]),
                    (10**6, ["main_kernel_1"])):
        assert [k[0] for condition, k in launches if evaluate(condition, {"n": n})] == want, n


def test_functions_of_one_signature_are_mapped_onto_the_first():
    """Cases built separately (their own parameters and ``n``): each body runs on the first case's parameters."""
    first, second = add_func(), adding(add_func(), 2.0)
    func = dispatch_by_intervals(n_of(first), [DispatchCase(1, 5, "a", first), DispatchCase(6, None, "b", second)])
    executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    for n in (1, 5, 6, 20):
        a = np.arange(n, dtype="float32")
        out = tvm.runtime.tensor(np.zeros(n, "float32"))
        executable["main"](tvm.runtime.tensor(a), out)
        np.testing.assert_array_equal(out.numpy(), a + (1.0 if n <= 5 else 2.0))


def test_blocks_of_shared_schedules_are_defined_once_per_case():
    """Two schedules of one PrimFunc share the blocks they leave alone; each case gets its own variables, so the
    result is well-formed and each case still schedules."""
    base = add_func()
    func = dispatch_by_intervals(n_of(base), [DispatchCase(1, 9, "a", base), DispatchCase(10, None, "b", base)])
    defined = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda block: defined.extend(v.var for v in block.iter_vars)))
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda loop: defined.append(loop.loop_var)))
    assert len(defined) == 4
    assert not any(v.same_as(w) for i, v in enumerate(defined) for w in defined[i + 1:])
    sch = s_tir.Schedule(func)
    for name in ("B_a", "B_b"):
        sch.split(sch.get_loops(sch.get_sblock(name))[0], [None, 4])


@pytest.mark.parametrize(("make_cases", "error", "message"), [
    (lambda f: [], ValueError, "no cases"),
    (lambda f: [DispatchCase(1, 4, "a", f), DispatchCase(6, None, "b", f)], ValueError,
     r"case 'b' starts at 6, not right after the previous case's end 4"),
    (lambda f: [DispatchCase(1, 4, "a", f)], ValueError, r"the last case 'a' ends at 4; it must be open"),
    (lambda f: [DispatchCase(5, 4, "a", f), DispatchCase(5, None, "b", f)], ValueError,
     r"case 'a' has an empty interval \[5, 4\]"),
    (lambda f: [DispatchCase(1, 4, "a", f), DispatchCase(5, None, "b", other_func((8,)))], ValueError,
     r"the function of case 'b' does not have the first case's signature \(A, B\): parameter A has the extent 8, "
     r"not n"),
    (lambda f: [DispatchCase(1, 4, "a", f), DispatchCase(5, None, "b", other_func(None, "float16"))], ValueError,
     r"case 'b' does not have the first case's signature \(A, B\): parameter A is float16\[m\], not "
     r"float32\[n\]"),
    (lambda f: [DispatchCase(1, 4, "a", f), DispatchCase(5, None, "a", adding(f, 3.0))], ValueError,
     r"label 'a' names two different functions"),
    (lambda f: [(1, None, "a", f)], TypeError, "case 0 must be a DispatchCase holding a PrimFunc"),
])
def test_bad_cases_are_refused_by_name(make_cases, error, message):
    base = add_func()
    with pytest.raises(error, match=message):
        dispatch_by_intervals(n_of(base), make_cases(base))


def test_the_variable_must_be_the_first_cases():
    base = add_func()
    with pytest.raises(ValueError, match=r"var k is not a parameter of the first case's function, nor a variable of "
                                         r"its parameters' extents \(A, B\)"):
        dispatch_by_intervals(tirx.Var("k", "int32"), [DispatchCase(1, None, "a", base)])


def test_cases_with_other_attributes_are_refused():
    base = add_func()
    other = base.with_attr("tirx.noalias", False)
    with pytest.raises(ValueError, match=r"the function of case 'b' has the attributes .*noalias.*, not the first "
                                         r"case's"):
        dispatch_by_intervals(n_of(base), [DispatchCase(1, 4, "a", base), DispatchCase(5, None, "b", other)])


def test_a_root_block_with_annotations_is_refused():
    base = add_func()
    root = base.body.block
    annotated = base.with_body(s_tir.SBlockRealize([], tirx.const(True, "bool"), s_tir.SBlock(
        [], [], [], "root", root.body, None, root.alloc_buffers, [], {"note": 1})))
    with pytest.raises(ValueError, match="the root block of case 'b' has annotations or match buffers"):
        dispatch_by_intervals(n_of(base), [DispatchCase(1, 4, "a", base), DispatchCase(5, None, "b", annotated)])


def test_the_variable_must_be_a_var():
    base = add_func()
    with pytest.raises(TypeError, match="var must be a tirx.Var, got int"):
        dispatch_by_intervals(3, [DispatchCase(1, None, "a", base)])


def half_func(addend: float = 1.0) -> tirx.PrimFunc:
    """``B[i] = A[2 i] + addend`` with ``B`` (``k // 2`` long) the first parameter: its extent is an expression
    of ``k``, which ``A`` (``k`` long) defines."""
    k = tirx.Var("k", "int32")
    a = te.placeholder((k,), "float32", name="A")
    b = te.compute((k // 2,), lambda i: a[2 * i] + tirx.const(addend, "float32"), name="B")
    return te.create_prim_func([b, a])


def test_an_extent_that_is_an_expression_maps_its_variable():
    """A variable first met inside an extent (``k`` of ``k // 2``) is mapped onto the first case's at its place;
    extents that are not equal up to such a mapping are still refused."""
    first, second = half_func(), half_func(2.0)
    func = dispatch_by_intervals(first.params[1].shape[0], [DispatchCase(1, 5, "a", first),
                                                            DispatchCase(6, None, "b", second)])
    executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    for k in (4, 5, 6, 11):
        a = np.arange(k, dtype="float32")
        out = tvm.runtime.tensor(np.zeros(k // 2, "float32"))
        executable["main"](out, tvm.runtime.tensor(a))
        np.testing.assert_array_equal(out.numpy(), a[0:k // 2 * 2:2] + (1.0 if k <= 5 else 2.0), err_msg=f"k = {k}")
    with pytest.raises(ValueError, match=r"parameter B has the extent k // 3, not k // 2"):
        k = tirx.Var("k", "int32")
        a = te.placeholder((k,), "float32", name="A")
        other = te.create_prim_func([te.compute((k // 3,), lambda i: a[3 * i], name="B"), a])
        dispatch_by_intervals(first.params[1].shape[0], [DispatchCase(1, 5, "a", first),
                                                         DispatchCase(6, None, "b", other)])
    with pytest.raises(ValueError, match=r"parameter B has the extent m, not q"):  # (m, m) is not (p, q)
        p, q = tirx.Var("p", "int32"), tirx.Var("q", "int32")
        a = te.placeholder((p,), "float32", name="A")
        two = te.create_prim_func([a, te.compute((q,), lambda i: a[0], name="B")])
        dispatch_by_intervals(two.params[0].shape[0], [DispatchCase(1, 5, "a", two),
                                                       DispatchCase(6, None, "b", other_func(None))])


def test_require_sizes_names_the_function_and_the_argument():
    assert require_sizes("f", ("m",), m=None, n=1, k=4096) == (None, 1, 4096)  # a symbolic m, positive sizes
    # numpy's integers, as numpy takes sizes, come back as ints (they were refused: "n must be a positive int")
    checked = require_sizes("f", n=np.int64(16), k=np.intp(4), lanes=np.array(8), tile=np.uint8(2))
    assert checked == (16, 4, 8, 2) and all(type(size) is int for size in checked)
    assert require_sizes("f", least=0, tiles=np.int64(0)) == (0,)  # counts that may be empty
    with pytest.raises(ValueError, match=re.escape("f: tiles must be a non-negative int, got -1")):
        require_sizes("f", least=0, tiles=-1)
    for sizes, message in [({"n": 0}, "f: n must be a positive int, got 0"),
                           ({"n": True}, "f: n must be a positive int, got True"),
                           ({"n": 2.0}, "f: n must be a positive int, got 2.0"),
                           ({"m": -1}, "f: m must be a positive int or None, got -1"),
                           ({"n": None}, "f: n must be a positive int, got None"),
                           ({"n": np.True_}, "f: n must be a positive int, got np.True_"),
                           ({"n": np.int64(0)}, "f: n must be a positive int, got np.int64(0)"),
                           ({"n": np.float64(2.0)}, "f: n must be a positive int, got np.float64(2.0)")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            require_sizes("f", ("m",), **sizes)


def test_require_bools_names_the_function_and_the_argument():
    assert require_bools("f", verbose=False, pipeline=True) == (False, True)
    # a numpy bool (a flag computed by numpy) was refused: 'f: pipeline must be a bool, got bool True'
    flags = require_bools("f", verbose=np.False_, pipeline=np.int64(17) > 16)
    assert flags == (False, True) and all(type(flag) is bool for flag in flags)
    for flags, message in [({"verbose": "yes"}, "f: verbose must be a bool, got str 'yes'"),
                           ({"pipeline": 1}, "f: pipeline must be a bool, got int 1"),
                           ({"pipeline": None}, "f: pipeline must be a bool, got NoneType None")]:
        with pytest.raises(TypeError, match=re.escape(message)):
            require_bools("f", **flags)


def _builders() -> list:
    from tvm_tailsplit.split import examples, mma_schedule, workloads
    from tvm_tailsplit.warpspec import examples as warpspec_examples

    return [
        (examples.elementwise_multiply_nc1hwc0, dict(c1=3, h=20, w=4, c0=16, h_tile=8)),
        (examples.matmul, dict(m=16, n=8, k=4)),
        (examples.vector_scale_1d, dict(n=100, lanes=16)),
        (examples.symbolic_vector_multiply, dict(lanes=16)),
        (examples.gpu_vector_add_one, dict(n=1000, threads=32, vector=8)),
        (workloads.dense_int8_vnni, dict(m=127, n=1000, k=255)),
        (workloads.matmul_fp32, dict(m=127, n=255, k=129)),
        (workloads.elementwise_nc1hwc0, dict(n=2, c1=3, h=30, w=28, c0=16, h_tile=8)),
        (workloads.matmul_wmma_cuda, dict(m=1000, n=1000, k=1000)),
        (mma_schedule.choose_tiling, dict(m=33, n=4096, k=4096, sm_count=132)),
        (mma_schedule.matmul_mma_cuda, dict(m=100, n=64, k=48)),
        (mma_schedule.matmul_mma_cuda_dispatch, dict(n=256, k=128, sm_count=132)),
        (warpspec_examples.streaming_kernel, dict(tiles=8, tile=16, stages=2)),
        (warpspec_examples.symbolic_streaming_kernel, dict(tile=16, stages=2)),
        (warpspec_examples.persistent_ctas, dict(tiles=300, sms=132)),
        (warpspec_examples.scheduled_scale_kernel, dict(n=256, tile=32)),
        (warpspec_examples.gemm_kernel, dict(m=64, n=64, k=128, block_m=32, block_n=32, block_k=16, stages=3)),
        (warpspec_examples.hopper_gemm_kernel, dict(m=256, n=256, block_m=128, block_n=256, block_k=64, stages=4)),
        (warpspec_examples.symbolic_k_gemm_kernel, dict(m=64, n=64, block_m=32, block_n=32, block_k=16, stages=3)),
    ]


def test_builders_take_numpy_integer_sizes():
    """Every builder whose sizes require_sizes checks builds the same IR from numpy integers as from ints (they were
    refused: "vector_scale_1d: n must be a positive int, got np.int64(100)", and passed on, TVM's schedule refused
    them as split factors)."""
    for builder, sizes in _builders():
        numpy_sizes = {name: np.int64(size) for name, size in sizes.items()}
        built, from_numpy = builder(**sizes), builder(**numpy_sizes)
        if isinstance(built, (tvm.IRModule, tirx.PrimFunc)):
            assert tvm_ffi.structural_equal(built, from_numpy), builder.__name__
        else:
            assert built == from_numpy, builder.__name__


def test_default_passes_with_places_passes_next_to_one_of_tvms():
    mine = tvm.tirx.transform.RemoveNoOp()
    with tvm.transform.PassContext(opt_level=3):
        names = [p.info.name for p in default_passes()]
        before = [p.info.name for p in default_passes_with([mine], before="tirx.VectorizeLoop")]
        after = [p.info.name for p in default_passes_with([mine, mine], after="tirx.VectorizeLoop")]
    position = names.index("tirx.VectorizeLoop")
    assert before == [*names[:position], "tirx.RemoveNoOp", *names[position:]]
    assert after == [*names[:position + 1], "tirx.RemoveNoOp", "tirx.RemoveNoOp", *names[position + 1:]]
    with pytest.raises(RuntimeError, match="has no tirx.NoSuchPass pass .* 'tirx.RemoveNoOp'"):
        default_passes_with([mine], after="tirx.NoSuchPass")
    with pytest.raises(TypeError, match="exactly one of before and after"):
        default_passes_with([mine], before="tirx.VectorizeLoop", after="tirx.VectorizeLoop")


def test_default_passes_lets_other_threads_build_their_pipelines(monkeypatch):
    """While one thread reads TVM's pass list, another thread compiling (dask's threaded scheduler running FFT
    plans) builds a real Sequential: it got the recorder, which skipped its lowering ("Cannot codegen
    BufferType-annotated parameter") and made the reader fail ("built 2 Sequential pass lists")."""
    real, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")
    built = []

    def pipeline(mod):
        def compile_elsewhere():
            built.append(tvm.ir.transform.Sequential([tvm.tirx.transform.RemoveNoOp()]))

        other = threading.Thread(target=compile_elsewhere)
        other.start()
        other.join()
        return real(mod)

    monkeypatch.setattr(tvm.tirx, "get_tir_pipeline", lambda name: (pipeline, finalize_host, finalize_device))
    with tvm.transform.PassContext(opt_level=3):
        names = [p.info.name for p in default_passes()]
    assert "tirx.VectorizeLoop" in names
    assert isinstance(built[0], tvm.ir.transform.Sequential)


def test_default_passes_from_two_threads_leave_tvm_s_sequential(monkeypatch):
    """A second reader that took TVM's `Sequential` while the first one had replaced it restored the first one's
    recorder: the module attribute stayed a function after both returned."""
    real, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")
    sequential, second, lists = tvm.ir.transform.Sequential, [], []

    def pipeline(mod):
        if not second:  # the first reader starts the second one and lets it reach the lock
            second.append(threading.Thread(target=lambda: lists.append(default_passes())))
            second[0].start()
            time.sleep(0.3)
        return real(mod)

    monkeypatch.setattr(tvm.tirx, "get_tir_pipeline", lambda name: (pipeline, finalize_host, finalize_device))
    lists.append(default_passes())
    second[0].join()
    assert tvm.ir.transform.Sequential is sequential
    assert len(lists) == 2 and [p.info.name for p in lists[0]] == [p.info.name for p in lists[1]]


def launch_loop(tag: str, extent) -> tirx.For:
    var = tirx.Var("v", "int32")
    return tirx.For(var, 0, extent, tirx.ForKind.THREAD_BINDING, tirx.Evaluate(0),
                    tirx.IterVar(None, tirx.Var(tag, "int32"), tirx.IterVar.ThreadIndex, tag))


@pytest.mark.parametrize("tag", ["blockIdx.x", "blockIdx.z", "threadIdx.y"])
def test_a_launch_dimension_runs_at_least_once(tag):
    """``launched_extent``: a loop bound to a launch dimension takes ``max(extent, 1)`` values, a constant extent
    of at least 1 is kept as it is, and other loops keep their extents."""
    n = tirx.Var("n", "int32")
    symbolic = launched_extent(launch_loop(tag, (n + 255) // 256))
    assert [evaluate(symbolic, {"n": value}) for value in (0, 1, 256, 257)] == [1, 1, 1, 2]
    constant = launch_loop(tag, tirx.const(4, "int32"))
    assert launched_extent(constant).same_as(constant.extent)
    assert launched_extent(launch_loop(tag, tirx.const(0, "int32"))).value == 1
    serial = tirx.For(tirx.Var("i", "int32"), 0, n, tirx.ForKind.SERIAL, tirx.Evaluate(0))
    assert launched_extent(serial).same_as(n)
    assert launched_extent(launch_loop("vthread", n)).same_as(n)


@pytest.mark.gpu
def test_tvm_launches_a_grid_extent_of_zero_as_one_block():
    """The fact ``launched_extent`` states, on the GPU: a kernel whose grid extent is ``n`` runs block 0 at
    ``n = 0`` (it stores ``n + 1`` into ``flag``, which has one element whatever ``n`` is)."""

    @T.prim_func(s_tir=True)
    def main(a: T.handle, flag: T.Buffer((1,), "int32")):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")  # noqa: F841 (only its shape binds n)
        for bx in T.thread_binding(n, thread="blockIdx.x"):
            for tx in T.thread_binding(1, thread="threadIdx.x"):
                if bx == 0 and tx == 0:
                    flag[0] = n + 1

    device = tvm.cuda(0)
    arch = "sm_" + device.compute_version.replace(".", "")
    executable = tvm.compile(tvm.IRModule({"main": main}), target=tvm.target.Target({"kind": "cuda", "arch": arch}))
    for n in (0, 3):
        flag = tvm.runtime.tensor(np.array([-1], "int32"), device)
        executable["main"](tvm.runtime.empty((n,), "float32", device), flag)
        assert flag.numpy()[0] == n + 1


def test_touches_sees_loads_and_stores_of_the_buffer_alone():
    func = add_func()
    loads: list = []
    stores: list = []
    tvm_ffi.structural_walk(func.body, [(tvm.ir.TensorLoad, loads.append), (tirx.BufferStore, stores.append)])
    a, b = loads[0].source, stores[0].buffer
    assert touches(func.body, a) and touches(func.body, b) and touches(stores[0].value, a)
    assert not touches(stores[0].value, b) and not touches(func.body, tirx.decl_buffer((4,), name="A"))
