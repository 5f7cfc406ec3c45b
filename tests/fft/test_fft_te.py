"""te_fft: the FFT as a TE stage inside a user's TE graph, compiled on llvm and compared to numpy.fft; on CUDA with
the caller's element-wise producer inlined into the first pass (run on llvm with the threads serialized, compiled
with nvcc, run on a GPU)."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, s_tir, te

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, device_arch, executable_cuda_source
from tvm_tailsplit.fft import emit_fft, te_fft, te_fft_constants
from tvm_tailsplit.fft.lowering import register_pipeline
from tvm_tailsplit.fft.planner import CUDA_PIPELINE
from tvm_tailsplit.testing import cuda_schedule_for_llvm

from .fft_reference import random_real, relative_error, tolerance


def _compile_and_run(inputs, output, x: np.ndarray, sch_hook=None) -> np.ndarray:
    constants = te_fft_constants(output)
    func = te.create_prim_func([*inputs, *[c for c, _ in constants], output]).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    if sch_hook is not None:
        sch = s_tir.Schedule(mod)
        sch_hook(sch)
        mod = sch.mod
    # as plan() does: the codelets arrive with their CSE done, and TIR's CSE is quadratic in a codelet's size
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(mod, target="llvm")
    result = tvm.runtime.empty(tuple(int(d) for d in output.shape), str(output.dtype))
    executable["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(v) for _, v in constants], result)
    return result.numpy()


def _as_complex(a: np.ndarray) -> np.ndarray:
    return a[..., 0] + 1j * a[..., 1]


@pytest.mark.parametrize(("n", "batch"), [(1, 7), (8, 1), (12, 7), (97, 1), (1000, 7), (4096, 1)])
def test_te_graph_with_pre_and_post_stages_c2c(n, batch):
    X = te.placeholder((batch, n, 2), "float32", name="X")
    shifted = te.compute(X.shape, lambda b, e, c: X[b, e, c] + 1.0, name="pre")
    Y = te_fft(shifted)
    Z = te.compute(Y.shape, lambda b, e, c: Y[b, e, c] * 2.0, name="post")
    x = random_real((batch, n, 2), "float32")
    z = _compile_and_run([X], Z, x)
    reference = 2 * np.fft.fft(_as_complex(x.astype(np.float64) + 1))
    assert relative_error(_as_complex(z), reference) <= tolerance(n, "complex64")


def test_an_r2c_graph_that_tvms_default_pipeline_fails_compiles_with_the_package_pipeline():
    # TVM's default pipeline: LLVM rejects the module ("Instruction does not dominate all uses"), see the README
    X = te.placeholder((1, 64), "float32", name="X")
    spectrum = te_fft(X, kind="r2c")
    power = te.compute(spectrum.shape[:-1], lambda b, k: spectrum[b, k, 0] * spectrum[b, k, 0]
                       + spectrum[b, k, 1] * spectrum[b, k, 1], name="power")
    constants = te_fft_constants(power)
    func = te.create_prim_func([X, *[c for c, _ in constants], power]).with_attr("global_symbol", "main")
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm",
                                 tir_pipeline=register_pipeline(frozenset()))
    x = random_real((1, 64), "float32")
    result = tvm.runtime.empty((1, 33), "float32")
    executable["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(v) for _, v in constants], result)
    np.testing.assert_allclose(result.numpy(), np.abs(np.fft.rfft(x.astype(np.float64))) ** 2, rtol=1e-5,
                               atol=1e-5 * np.abs(np.fft.rfft(x)).max() ** 2)


@pytest.mark.parametrize(("n", "batch"), [(2, 5), (15, 1), (60, 5), (1024, 1)])
def test_te_graph_r2c_then_c2r_round_trip(n, batch):
    X = te.placeholder((batch, n), "float64", name="X")
    spectrum = te_fft(X, kind="r2c", norm="ortho")
    magnitude = te.compute(spectrum.shape[:-1], lambda b, k: spectrum[b, k, 0] * spectrum[b, k, 0]
                           + spectrum[b, k, 1] * spectrum[b, k, 1], name="power")
    x = random_real((batch, n), "float64")
    power = _compile_and_run([X], magnitude, x)
    assert np.allclose(power, np.abs(np.fft.rfft(x, norm="ortho")) ** 2, rtol=1e-12, atol=1e-12)

    # as plan(), kind "c2r" is the backward transform without direction= (it raised for the default "forward")
    back = te_fft(spectrum, n=n, kind="c2r", norm="ortho")
    assert relative_error(_compile_and_run([X], back, x), x) <= tolerance(n, "complex128")


def test_te_fft_along_a_middle_axis_of_a_3d_tensor_with_user_schedule():
    n = 48
    X = te.placeholder((3, n, 4, 2), "float32", name="X")
    Y = te_fft(X, axis=1, direction="backward", norm="forward", schedule=False)
    Z = te.compute(Y.shape, lambda a, e, b, c: Y[a, e, b, c] - 1.0, name="post")
    x = random_real((3, n, 4, 2), "float32")

    def schedule(sch):
        post = sch.get_sblock("post")
        outer = sch.fuse(*sch.get_loops(post)[:2])
        sch.parallel(outer)
        sch.vectorize(sch.get_loops(post)[-1])

    z = _compile_and_run([X], Z, x, schedule)
    reference = np.fft.ifft(_as_complex(x.astype(np.float64)), axis=1, norm="forward") - (1 + 1j)
    assert relative_error(_as_complex(z), reference) <= tolerance(n, "complex64")


def test_te_fft_constants_lists_tables_of_every_fft_stage_round_trip():
    X = te.placeholder((2, 97, 2), "float32", name="X")
    Y = te_fft(te_fft(X), direction="backward")
    constants = te_fft_constants(Y)
    assert [c.name for c, _ in constants].count("fft_tables") == 2
    assert [c.name for c, _ in constants].count("fft_indices") == 2
    x = random_real((2, 97, 2), "float32")
    assert relative_error(_as_complex(_compile_and_run([X], Y, x)), _as_complex(x)) <= 2 * tolerance(97, "complex64")


def test_two_stages_of_one_size_named_apart_are_scheduled_apart():
    # the blocks of two stages of one size had the same names (main_0_dft8 twice): get_sblock found two
    X = te.placeholder((4, 8, 2), "float32", name="X")
    rows = te_fft(X, schedule=False, name="rows")
    back = te_fft(rows, direction="backward", norm="forward", schedule=False, name="back")
    x = random_real((4, 8, 2), "float32")
    found = []

    def schedule(sch):
        for name in ("rows", "back"):
            block = sch.get_sblock(f"main_0_dft8_{name}")
            outer = sch.get_loops(block)[0]
            sch.parallel(outer)
            found.append(sch.get(block).name_hint)

    z = _compile_and_run([X], back, x, schedule)
    assert found == ["main_0_dft8_rows", "main_0_dft8_back"]
    assert relative_error(_as_complex(z), np.fft.ifft(np.fft.fft(_as_complex(x)), norm="forward")) \
        <= 2 * tolerance(8, "complex64")


@pytest.mark.parametrize(("shape", "kwargs", "message"), [
    ((4, 8), {}, "trailing dimension of 2"),
    ((4, 8, 2), {"n": 9}, "needs 9"),
    ((4, 8, 2), {"axis": 2}, "out of range"),
    ((4, 8, 2), {"kind": "r2c", "direction": "backward"}, "direction must be 'forward'"),
    ((4, 8, 2), {"norm": "none"}, "norm must be one of"),
    ((4, 8, 2), {"target": "rocm"}, "target must be 'llvm', 'cuda', a target dict or a tvm.target.Target"),
    ((4, 8, 2), {"target": {"kind": "rocm"}}, "target must be of kind 'llvm' or 'cuda'"),
    ((4, 8), {"kind": "conv"}, "kind must be one of"),
    ((4, 8, 2), {"name": "two words"}, "name must be None or an identifier"),
    # c2r's default n, 2·(m - 1), of one input point is none: said so ('n must be at least 1, got 0', an n never given)
    ((4, 1, 2), {"kind": "c2r"},
     r"invalid number of data points \(0\): n defaults to 2·\(m - 1\) for the m = 1 complex points along axis 1; "
     r".* \(give n\)"),
])
def test_te_fft_rejects_bad_requests(shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        te_fft(te.placeholder(shape, "float32", name="X"), **kwargs)


def _kernel_launches(target) -> int:
    """The kernels (`blockIdx.x` loops) of te_fft's CUDA stage for 2 transforms of 12000 points (187.5 KiB of
    scratch: one kernel within sm_90's 227 KiB of shared memory, two kernels over columns within sm_80's 163)."""
    X = te.placeholder((2, 12000, 2), "float32", name="X")
    Y = te_fft(X, target=target)
    func = te.create_prim_func([X, *[c for c, _ in te_fft_constants(Y)], Y])
    launches = []
    tvm_ffi.structural_walk(func.body, (tvm.tirx.For, lambda loop: launches.append(loop) if (
        loop.thread_binding is not None and loop.thread_binding.thread_tag == "blockIdx.x") else None))
    return len(launches)


def test_te_fft_plans_for_the_cuda_architecture_it_is_given():
    """`target` takes what plan() takes: a target dict or Target with an `arch` gives that architecture's plan (the
    string "cuda" was the only CUDA form, planned for the GPU present or sm_80, so no graph could have sm_90's)."""
    assert _kernel_launches({"kind": "cuda", "arch": "sm_90"}) == 1
    assert _kernel_launches(tvm.target.Target({"kind": "cuda", "arch": "sm_80"})) == 2
    with pytest.raises(TypeError, match="target must be 'llvm', 'cuda', a target dict or a tvm.target.Target"):
        te_fft(te.placeholder((4, 8, 2), "float32", name="X"), target=80)


def test_te_fft_rejects_integer_tensors():
    with pytest.raises(ValueError, match="float32 or float64"):
        te_fft(te.placeholder((4, 8, 2), "int32", name="X"))


def _cuda_graph(n: int, batch: int, kind: str):
    """X -> pre (x 0.5) -> te_fft on CUDA -> post (x 2): the module with `pre` inlined into the FFT's first pass and
    `post` bound to threads of its own kernel, its constants and the reference of x."""
    real = kind == "r2c"
    X = te.placeholder((batch, n) if real else (batch, n, 2), "float32", name="X")
    pre = te.compute(X.shape, lambda *i: X[i] * 0.5, name="pre")
    Y = te_fft(pre, kind=kind, target="cuda")
    Z = te.compute(Y.shape, lambda *i: Y[i] * 2.0, name="post")
    constants = te_fft_constants(Z)
    func = te.create_prim_func([X, *[c for c, _ in constants], Z]).with_attr("global_symbol", "main")
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    sch.compute_inline(sch.get_sblock("pre"))
    blocks, threads = sch.split(sch.fuse(*sch.get_loops(sch.get_sblock("post"))), [None, 128])
    sch.bind(blocks, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")
    x = random_real(tuple(int(d) for d in X.shape), "float32")
    reference = np.fft.rfft(x.astype(np.float64)) if real else np.fft.fft(_as_complex(x.astype(np.float64)))
    return sch, constants, x, reference, tuple(int(d) for d in Z.shape)


@pytest.mark.parametrize(("n", "batch", "kind"), [(1000, 3, "c2c"), (64, 300, "c2c"), (1024, 2, "r2c"),
                                                  (8191, 1, "c2c")])  # one kernel per pass
def test_te_fft_on_cuda_with_the_producer_inlined_into_the_first_pass(n, batch, kind):
    sch, constants, x, reference, shape = _cuda_graph(n, batch, kind)
    names = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (s_tir.SBlock, lambda block: names.append(block.name_hint)))
    assert "pre" not in names  # the producer's loads are in the FFT's first pass
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(cuda_schedule_for_llvm(sch.mod), target="llvm")
    z = tvm.runtime.empty(shape, "float32")
    executable["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(v) for _, v in constants], z)
    assert relative_error(_as_complex(z.numpy()), reference) <= tolerance(n, "complex64")


def test_te_fft_consumer_cannot_be_inlined_into_the_last_pass():
    # the extern stage's block declares no regions and its passes store whole codelets (see te_op's docstring)
    sch, *_ = _cuda_graph(64, 2, "c2c")
    with pytest.raises(tvm.s_tir.ScheduleError, match="reverse-compute-inline"):
        sch.reverse_compute_inline(sch.get_sblock("post"))


@pytest.mark.parametrize(("n", "batch"), [(16, 3), (1000, 2)])  # scratch staged in shared memory; one kernel
def test_two_cuda_stages_of_one_plan_in_a_graph(n, batch):
    # the CUDA module is plan()'s cached one: both stages defined its scratch buffers and variables, and the graph
    # did not compile ("buffer has duplicate definitions")
    X = te.placeholder((batch, n, 2), "float32", name="X")
    W = te.placeholder((batch, n, 2), "float32", name="W")
    spectra = [te_fft(X, target="cuda", name="fx"), te_fft(W, target="cuda", name="fw")]
    Z = te.compute(X.shape, lambda *i: spectra[0][i] + spectra[1][i], name="z")
    constants = te_fft_constants(Z)
    func = te.create_prim_func([X, W, *[c for c, _ in constants], Z]).with_attr("global_symbol", "main")
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(cuda_schedule_for_llvm(tvm.IRModule({"main": func})), target="llvm")
    x, w = random_real((batch, n, 2), "float32", seed=1), random_real((batch, n, 2), "float32", seed=2)
    z = tvm.runtime.empty((batch, n, 2), "float32")
    executable["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w), *[tvm.runtime.tensor(v) for _, v in constants],
                       z)
    reference = np.fft.fft(_as_complex(x.astype(np.float64))) + np.fft.fft(_as_complex(w.astype(np.float64)))
    assert relative_error(_as_complex(z.numpy()), reference) <= 2 * tolerance(n, "complex64")


@pytest.mark.nvcc
def test_te_fft_graph_compiles_for_sm80_and_sm90_as_two_kernels():
    sch, *_ = _cuda_graph(1000, 3, "c2c")
    for arch in ("sm_80", "sm_90"):
        with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
            source = cuda_source(sch.mod, arch, tir_pipeline=CUDA_PIPELINE)
        usages = compile_cuda_source(source, arch)
        # the FFT with the producer fused (shared scratch, barriers between passes) and the consumer
        assert len(usages) == 2 and all(u.spill_store_bytes == 0 for u in usages)
        assert sorted(u.barriers for u in usages) == [0, 1]


@pytest.mark.gpu
def test_te_fft_graph_runs_on_the_gpu():
    sch, constants, x, reference, shape = _cuda_graph(1000, 3, "c2c")
    # built for the GPU present (te_fft planned for it): an sm_80 cubin does not load on an sm_90 GPU
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": device_arch()}),
                                 tir_pipeline=CUDA_PIPELINE)
    dev = tvm.cuda(0)
    z = tvm.runtime.empty(shape, "float32", dev)
    executable["main"](tvm.runtime.tensor(x, dev), *[tvm.runtime.tensor(v, dev) for _, v in constants], z)
    assert relative_error(_as_complex(z.numpy()), reference) <= tolerance(1000, "complex64")


def _relax_fft_model(shape, dtype, **fft_arguments):
    """A Relax function main(x) = 2 * fft(x + 1) with the FFT emitted by emit_fft."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, dtype))
    with builder.function("main", [x]):
        with builder.dataflow():
            shifted = builder.emit(relax.op.add(x, relax.const(1.0, dtype)))
            y = emit_fft(builder, shifted, **fft_arguments)
            result = builder.emit_output(relax.op.multiply(y, relax.const(2.0, dtype)))
        builder.emit_func_output(result)
    return builder.get()


@pytest.mark.parametrize(("shape", "dtype", "arguments", "reference"), [
    ((3, 97, 2), "float32", {}, lambda z: np.fft.fft(z)),  # Rader: twiddle tables and permutations
    ((4, 97, 3, 2), "float64", {"axis": 1, "norm": "ortho"}, lambda z: np.fft.fft(z, axis=1, norm="ortho")),
    ((2, 1000), "float32", {"kind": "r2c"}, lambda z: np.fft.rfft(z)),
    ((2, 33, 2), "float64", {"kind": "c2r", "n": 64}, lambda z: np.fft.irfft(z, 64)),
])
def test_emit_fft_puts_the_fft_in_a_relax_model_that_exports(shape, dtype, arguments, reference, tmp_path):
    mod = _relax_fft_model(shape, dtype, **arguments)
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.relax.build(mod, "llvm", tir_pipeline=register_pipeline(frozenset()))
    executable.export_library(tmp_path / "model.so")
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(tmp_path / "model.so")), tvm.cpu())
    x = random_real(shape, dtype)
    y = vm["main"](tvm.runtime.tensor(x)).numpy()
    z = x + 1
    expected = 2 * reference(_as_complex(z) if arguments.get("kind", "c2c") != "r2c" else z)
    got = y if arguments.get("kind") == "c2r" else _as_complex(y)
    complex_dtype = "complex64" if dtype == "float32" else "complex128"
    assert relative_error(got, expected) < tolerance(1000, complex_dtype)


def test_emit_fft_takes_an_expression_not_yet_emitted():
    # emit_fft(builder, relax.op.add(x, 1)) was refused as 'x must be a Relax tensor of known shape, got ir.Type':
    # an expression that no builder has normalized has no type yet (builder.emit deduces it)
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((3, 16, 2), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            y = builder.emit_output(emit_fft(builder, relax.op.add(x, relax.const(1.0, "float32")), norm="ortho"))
        builder.emit_func_output(y)
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.relax.build(builder.get(), "llvm", tir_pipeline=register_pipeline(frozenset()))
    signal = random_real((3, 16, 2), "float32")
    result = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(signal)).numpy()
    assert relative_error(_as_complex(result), np.fft.fft(_as_complex(signal + 1), norm="ortho")) <= \
        tolerance(16, "complex64")


def test_emit_fft_refuses_what_it_cannot_emit():
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([tvm.tirx.Var("m", "int64"), 8, 2], "float32"))
    with builder.function("main", [x]):
        with pytest.raises(ValueError, match="static shape"):
            emit_fft(builder, x)
        with pytest.raises(TypeError, match="builder must be a relax.BlockBuilder"):
            emit_fft(None, x)
        builder.emit_func_output(x)


def _relax_cuda_fft_model(arch: str):
    """main(x) = fft(x) of 4 x 1000 complex64 points, emitted for a CUDA target of `arch`, and that target."""
    target = tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm")
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 1000, 2), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            y = builder.emit_output(emit_fft(builder, x, target=target))
        builder.emit_func_output(y)
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        return tvm.relax.build(builder.get(), target, tir_pipeline=CUDA_PIPELINE)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_emit_fft_on_cuda_compiles_with_nvcc(arch):
    (usage,) = compile_cuda_source(executable_cuda_source(_relax_cuda_fft_model(arch)), arch)
    assert usage.spill_store_bytes == 0 and usage.barriers == 1  # one kernel, a barrier between its passes


@pytest.mark.gpu
def test_emit_fft_on_cuda_runs_on_the_gpu():
    vm = relax.VirtualMachine(_relax_cuda_fft_model(device_arch()), tvm.cuda(0))
    x = random_real((4, 1000, 2), "float32")
    y = vm["main"](tvm.runtime.tensor(x, tvm.cuda(0))).numpy()
    assert relative_error(_as_complex(y), np.fft.fft(_as_complex(x))) <= tolerance(1000, "complex64")
