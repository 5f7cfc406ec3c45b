"""fuse_consumers: element-wise consumers of a te_fft stage computed in the stores of its last pass, against numpy, on
llvm and on CUDA (run on llvm with the threads serialized, compiled with nvcc, run on a GPU), for every store form
of the passes (scalar and vector complex elements, an output staged through shared memory and copied float by
float, one kernel per pass); what it cannot fuse is left unchanged, with the reason in the report."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, device_arch
from tvm_tailsplit.fft import fuse_consumers, te_fft, te_fft_constants
from tvm_tailsplit.fft.planner import CUDA_PIPELINE
from tvm_tailsplit.testing import cuda_schedule_for_llvm

from .fft_reference import random_real, relative_error, tolerance

CUDA = {"kind": "cuda", "arch": "sm_90"}


def _consumer(kind: str, y: te.Tensor, w: te.Tensor) -> te.Tensor:
    """The consumer of the FFT output `y` (complex, trailing 2) by kind, reading the weights `w` of `y`'s shape."""
    if kind == "component":  # each float on its own
        return te.compute(y.shape, lambda b, k, c: y[b, k, c] * w[b, k, c] + 1.0, name="z")
    if kind == "product":  # the complex product y * w: both parts of an element for each float of the result
        return te.compute(y.shape, lambda b, k, c: tvm.tirx.if_then_else(
            c == 0, y[b, k, 0] * w[b, k, 0] - y[b, k, 1] * w[b, k, 1],
            y[b, k, 0] * w[b, k, 1] + y[b, k, 1] * w[b, k, 0]), name="z")
    return te.compute(y.shape[:-1], lambda b, k: y[b, k, 0] * y[b, k, 0] + y[b, k, 1] * y[b, k, 1], name="z")


def _reference(kind: str, spectrum: np.ndarray, w: np.ndarray) -> np.ndarray:
    if kind == "component":
        return np.stack([spectrum.real * w[..., 0] + 1, spectrum.imag * w[..., 1] + 1], -1)
    if kind == "product":
        product = spectrum * (w[..., 0] + 1j * w[..., 1])
        return np.stack([product.real, product.imag], -1)
    return np.abs(spectrum) ** 2


def _run(func: tvm.tirx.PrimFunc, cuda: bool, arguments: list[np.ndarray], shape, constants) -> np.ndarray:
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    if cuda:
        mod = cuda_schedule_for_llvm(mod)
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(mod, target="llvm")
    result = tvm.runtime.empty(tuple(int(d) for d in shape), "float32")
    executable["main"](*[tvm.runtime.tensor(a) for a in arguments],
                       *[tvm.runtime.tensor(v) for _, v in constants], result)
    return result.numpy()


def _block_names(func: tvm.tirx.PrimFunc) -> list[str]:
    names: list[str] = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda block: names.append(block.name_hint)))
    return names


def _root_buffers(func: tvm.tirx.PrimFunc) -> list[str]:
    return [buffer.name for buffer in func.body.block.alloc_buffers]


@pytest.mark.parametrize(("target", "n", "batch", "kind"), [
    ("llvm", 8, 4, "component"), ("llvm", 8, 4, "product"), ("llvm", 8, 4, "power"),  # scalar stores
    ("llvm", 97, 3, "product"), ("llvm", 1024, 4, "power"),  # Rader; Cooley-Tukey over two passes
    ("cuda", 16, 64, "component"), ("cuda", 16, 64, "product"), ("cuda", 16, 64, "power"),  # staged float copy
    ("cuda", 1024, 4, "product"), ("cuda", 1024, 4, "power"),  # vector stores of complex elements
    ("cuda", 8191, 1, "product"),  # one kernel per pass
])
def test_a_fused_consumer_computes_what_the_graph_means(target, n, batch, kind):
    x_in = te.placeholder((batch, n, 2), "float32", name="x")
    w_in = te.placeholder((batch, n, 2), "float32", name="w")
    y = te_fft(x_in, target=CUDA if target == "cuda" else "llvm")
    z = _consumer(kind, y, w_in)
    constants = te_fft_constants(z)
    func = te.create_prim_func([x_in, w_in, *[c for c, _ in constants], z])
    report: list = []
    fused = fuse_consumers(func, report)
    assert report == [f"stage {y.op.name}: block z ({'component' if kind == 'component' else 'pair'} consumer) "
                      "fused into the stores of the last pass, writing z"]
    assert "z" not in _block_names(fused) and y.op.name not in _root_buffers(fused)
    x, w = random_real((batch, n, 2), "float32", seed=1), random_real((batch, n, 2), "float32", seed=2)
    result = _run(fused, target == "cuda", [x, w], z.shape, constants)
    reference = _reference(kind, np.fft.fft(x[..., 0].astype(np.float64) + 1j * x[..., 1]), w)
    assert relative_error(result, reference) <= 2 * tolerance(n, "complex64")


@pytest.mark.parametrize("target", ["llvm", "cuda"])
@pytest.mark.parametrize(("kind", "n", "batch"), [("r2c", 64, 3), ("c2r", 64, 3)])
def test_real_transforms_fuse_their_consumer(target, kind, n, batch):
    shape = (batch, n) if kind == "r2c" else (batch, n // 2 + 1, 2)
    x_in = te.placeholder(shape, "float32", name="x")
    y = te_fft(x_in, n=n, kind=kind, target=CUDA if target == "cuda" else "llvm")
    if kind == "r2c":  # the power spectrum (both parts of each element)
        z = te.compute(y.shape[:-1], lambda b, k: y[b, k, 0] * y[b, k, 0] + y[b, k, 1] * y[b, k, 1], name="z")
    else:  # a real output: each float on its own
        z = te.compute(y.shape, lambda b, t: te.max(y[b, t], 0.0), name="z")
    constants = te_fft_constants(z)
    report: list = []
    fused = fuse_consumers(te.create_prim_func([x_in, *[c for c, _ in constants], z]), report)
    assert len(report) == 1 and "fused into the stores of the last pass" in report[0]
    x = random_real(shape, "float32", seed=3)
    result = _run(fused, target == "cuda", [x], z.shape, constants)
    if kind == "r2c":
        reference = np.abs(np.fft.rfft(x.astype(np.float64))) ** 2
    else:
        reference = np.maximum(np.fft.irfft(x[..., 0].astype(np.float64) + 1j * x[..., 1], n), 0)
    assert relative_error(result, reference) <= 2 * tolerance(n, "complex64")


@pytest.mark.parametrize(("target", "kind", "shape"), [
    ("llvm", "c2c", (1000, 2)), ("cuda", "c2c", (1000, 2)),  # a 1-D signal: no batch axis
    ("llvm", "c2c", (3, 4, 16, 2)), ("cuda", "c2c", (3, 4, 16, 2)),  # two batch axes (staged copy on CUDA)
    ("cuda", "r2c", (2, 3, 64)), ("llvm", "c2r", (33, 2)),
])
def test_a_transform_of_a_tensor_not_batch_by_n_fuses_its_consumer(target, kind, shape):
    # te_fft gives the output its shape back in a stage of its own (fft_scatter, a reshape of the batch axis):
    # that stage fuses first, then the consumer of its output
    x_in = te.placeholder(shape, "float32", name="x")
    n = 2 * (shape[-2] - 1) if kind == "c2r" else shape[-1] if kind == "r2c" else shape[-2]
    y = te_fft(x_in, n=n, kind=kind, target=CUDA if target == "cuda" else "llvm")
    if kind == "c2r":
        z = te.compute(y.shape, lambda *i: te.max(y[i], 0.0), name="z")
    else:  # the power spectrum
        z = te.compute(y.shape[:-1], lambda *i: y[(*i, 0)] * y[(*i, 0)] + y[(*i, 1)] * y[(*i, 1)], name="z")
    constants = te_fft_constants(z)
    report: list = []
    fused = fuse_consumers(te.create_prim_func([x_in, *[c for c, _ in constants], z]), report)
    assert [line.split(": ")[1].split(" (")[0] for line in report] == ["block fft_scatter", "block z"]
    assert not {f"fft_{kind}{n}", "fft_scatter"} & set(_root_buffers(fused))  # (the input's fft_gather stays)
    x = random_real(shape, "float32", seed=8)
    result = _run(fused, target == "cuda", [x], z.shape, constants)
    signal = x.astype(np.float64)
    if kind == "c2r":
        reference = np.maximum(np.fft.irfft(signal[..., 0] + 1j * signal[..., 1], n), 0)
    else:
        reference = np.abs(np.fft.rfft(signal) if kind == "r2c" else np.fft.fft(signal[..., 0] + 1j * signal[..., 1]))
        reference = reference ** 2
    assert relative_error(result, reference) <= 2 * tolerance(n, "complex64")


def test_a_chain_of_consumers_fuses_one_after_another():
    x_in = te.placeholder((5, 60, 2), "float32", name="x")
    y = te_fft(x_in, direction="backward", norm="ortho")
    scaled = te.compute(y.shape, lambda b, k, c: y[b, k, c] * 3.0, name="scaled")
    power = te.compute(y.shape[:-1], lambda b, k: scaled[b, k, 0] * scaled[b, k, 0]
                       + scaled[b, k, 1] * scaled[b, k, 1], name="power")
    constants = te_fft_constants(power)
    report: list = []
    fused = fuse_consumers(te.create_prim_func([x_in, *[c for c, _ in constants], power]), report)
    assert [line.split(": ")[1].split(" (")[0] for line in report] == ["block scaled", "block power"]
    assert _root_buffers(fused) == []
    x = random_real((5, 60, 2), "float32", seed=4)
    result = _run(fused, False, [x], power.shape, constants)
    reference = np.abs(3 * np.fft.ifft(x[..., 0].astype(np.float64) + 1j * x[..., 1], norm="ortho")) ** 2
    assert relative_error(result, reference) <= 2 * tolerance(60, "complex64")


def _refused(graph) -> tuple[tvm.tirx.PrimFunc, tvm.tirx.PrimFunc, list]:
    """The PrimFunc of `graph()` (inputs, output), what fuse_consumers made of it, and its report."""
    inputs, output = graph()
    constants = te_fft_constants(*output)
    func = te.create_prim_func([*inputs, *[c for c, _ in constants], *output])
    report: list = []
    return func, fuse_consumers(func, report), report


def _two_readers():
    x_in = te.placeholder((2, 8, 2), "float32", name="x")
    y = te_fft(x_in)
    return [x_in], [te.compute(y.shape, lambda *i: y[i] * 2.0, name="z"),
                    te.compute(y.shape, lambda *i: y[i] + 1.0, name="q")]


def _middle_axis_square():
    x_in = te.placeholder((3, 8, 8, 2), "float32", name="x")
    y = te_fft(x_in, axis=1)  # the stage moving the axis back has the shape of a batch reshape, not its reads
    return [x_in], [te.compute(y.shape, lambda *i: y[i] * 2.0, name="z")]


def _reversed_read():
    x_in = te.placeholder((2, 8, 2), "float32", name="x")
    y = te_fft(x_in)
    return [x_in], [te.compute(y.shape, lambda b, k, c: y[b, 7 - k, c], name="z")]


def _middle_axis():
    x_in = te.placeholder((3, 8, 4, 2), "float32", name="x")
    y = te_fft(x_in, axis=1)  # its output moves back in a stage of its own, the consumer reads that stage
    return [x_in], [te.compute(y.shape, lambda *i: y[i] * 2.0, name="z")]


def _reduction():
    x_in = te.placeholder((2, 8, 2), "float32", name="x")
    y = te_fft(x_in)
    k = te.reduce_axis((0, 8), name="k")
    return [x_in], [te.compute((2,), lambda b: te.sum(y[b, k, 0], axis=k), name="z")]


def _fft_of_fft():
    x_in = te.placeholder((2, 8, 2), "float32", name="x")
    return [x_in], [te_fft(te_fft(x_in), direction="backward", name="back")]


@pytest.mark.parametrize(("graph", "reason"), [
    (_two_readers, "2 statements read fft_c2c8; only a single consumer is fused"),
    (_fft_of_fft, "block back: it is an FFT stage (its passes read fft_c2c8), not an element-wise consumer"),
    (_reversed_read, "block z: it reads fft_c2c8[v_b, 7 - v_k, v_c], not at its own element"),
    (_middle_axis, "block fft_scatter: it reads fft_c2c8[v_i0 * 4 + v_i2, v_i1, v_i3], not at its own element "
                   "(it moves the output of a transform along another axis than the last back"),
    (_middle_axis_square, "block fft_scatter: it reads fft_c2c8[v_i0 * 8 + v_i2, v_i1, v_i3], not at its own "
                          "element (it moves the output of a transform along another axis than the last back"),
    (_reduction, "block z: it has a reduction iterator"),
])
def test_what_cannot_be_fused_is_left_unchanged_with_the_reason(graph, reason):
    func, fused, report = _refused(graph)
    assert fused.same_as(func)
    assert len(report) == 1 and report[0].startswith("stage fft_c2c8: ") and reason in report[0]


def _weighted_graph():
    """z = fft(x) * w2 with w2 = 2 * w: create_prim_func puts the stage computing w2 between the FFT and z."""
    x_in = te.placeholder((3, 8, 2), "float32", name="x")
    w_in = te.placeholder((3, 8, 2), "float32", name="w")
    y = te_fft(x_in)
    w2 = te.compute(w_in.shape, lambda *i: w_in[i] * 2.0, name="w2")
    z = te.compute(y.shape, lambda *i: y[i] * w2[i], name="z")
    return x_in, w_in, z, te.create_prim_func([x_in, w_in, z])


def test_a_statement_between_the_stage_and_its_consumer_moves_before_the_stage():
    x_in, w_in, z, func = _weighted_graph()
    report: list = []
    fused = fuse_consumers(func, report)
    assert report == ["stage fft_c2c8: block z (component consumer) fused into the stores of the last pass, "
                      "writing z"]
    x, w = random_real((3, 8, 2), "float32", seed=6), random_real((3, 8, 2), "float32", seed=7)
    result = _run(fused, False, [x, w], z.shape, [])
    spectrum = np.fft.fft(x[..., 0].astype(np.float64) + 1j * x[..., 1])
    reference = np.stack([spectrum.real, spectrum.imag], -1) * 2 * w
    assert relative_error(result, reference) <= 2 * tolerance(8, "complex64")


def _buffer_named(func: tvm.tirx.PrimFunc, name: str) -> tvm.tirx.Buffer:
    loads: list = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.TensorLoad, loads.append))
    return next(load.source for load in loads if load.source.name == name)


def _rename_buffer(func: tvm.tirx.PrimFunc, name: str, to: tvm.tirx.Buffer) -> tvm.tirx.PrimFunc:
    """`func` with every load of and store to the buffer `name` made on `to`."""
    def on_store(store: tvm.tirx.BufferStore) -> tvm.tirx.BufferStore:
        return tvm.tirx.BufferStore(to, store.value, store.indices) if store.buffer.name == name else store

    def on_load(load: tvm.ir.TensorLoad):
        return tvm.tirx.BufferLoad(to, load.indices) if load.source.name == name else load

    return func.with_body(tvm_ffi.structural_map(func.body, [(tvm.tirx.BufferStore, on_store),
                                                             (tvm.ir.TensorLoad, on_load)], order="post"))


def test_a_consumer_reading_what_a_later_statement_writes_over_the_stage_input_is_not_fused():
    # the statement between writes 2 * w over x, which the stage reads: it cannot move before the stage, and z
    # reads x after it
    *_, func = _weighted_graph()
    func = _rename_buffer(func, "w2", _buffer_named(func, "x"))
    report: list = []
    assert fuse_consumers(func, report).same_as(func)
    assert report == ["stage fft_c2c8: block z: it reads x, which block w2 between the stage and it writes, and "
                      "the statements between stay after the stage (block w2 writes x, which the stage reads)"]


def test_a_stage_output_another_statement_writes_is_not_fused():
    # w2's stage edited to write 2 * w over the FFT's output and z to read it twice: z = (2 w)^2; fused, z read
    # the FFT's values and w2's stage stored to the buffer fusion removed
    x_in, w_in, z, func = _weighted_graph()
    output = func.body.block.alloc_buffers[0]
    assert output.name == "fft_c2c8"
    func = _rename_buffer(func, "w2", output)
    report: list = []
    assert fuse_consumers(func, report).same_as(func)
    assert report == ["stage fft_c2c8: block w2 writes fft_c2c8 too; only a buffer the stage alone writes is fused "
                      "away"]
    w = random_real((3, 8, 2), "float32", seed=7)
    result = _run(fuse_consumers(func), False, [random_real((3, 8, 2), "float32", seed=6), w], z.shape, [])
    np.testing.assert_allclose(result, (2 * w) ** 2, rtol=1e-6)


def test_a_pair_consumer_of_a_float_copy_whose_element_depends_on_the_parity_is_not_fused():
    # the staged copy Y[b, f // 2, f % 2] = row[f] edited to Y[b + f % 2, f // 2, f % 2]: the two floats of a
    # pair are no longer one element, so the float of the other parity holds no part of this one
    x_in = te.placeholder((64, 16, 2), "float32", name="x")
    y = te_fft(x_in, target=CUDA)
    power = _consumer("power", y, None)
    func = te.create_prim_func([x_in, power])

    def skewed(store: tvm.tirx.BufferStore) -> tvm.tirx.BufferStore:
        last = store.indices[-1]
        if store.buffer.name != y.op.name or not isinstance(last, tvm.tirx.FloorMod):
            return store
        return tvm.tirx.BufferStore(store.buffer, store.value, [store.indices[0] + last, *store.indices[1:]])

    edited = func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.BufferStore, skewed), order="post"))
    report: list = []
    fuse_consumers(func, report)
    assert len(report) == 1 and "fused into the stores of the last pass" in report[0]  # unedited
    report.clear()
    assert fuse_consumers(edited, report).same_as(edited)
    assert len(report) == 1 and "alone, and a consumer of both parts of an element needs them" in report[0]


def test_a_consumer_writing_what_the_stage_reads_is_not_fused():
    # z = 2 * fft(x) stored over x: computed in the last pass, it would overwrite inputs of the lane groups after it
    x_in = te.placeholder((6, 8, 2), "float32", name="x")
    y = te_fft(x_in)
    z = te.compute(y.shape, lambda *i: y[i] * 2.0, name="z")
    func = te.create_prim_func([x_in, z])
    in_place = _rename_buffer(func, "z", _buffer_named(func, "x"))
    report: list = []
    assert fuse_consumers(in_place, report).same_as(in_place)
    assert report == ["stage fft_c2c8: block z: the stage accesses x, which it writes"]


def test_fuse_consumers_checks_its_arguments():
    x_in = te.placeholder((2, 8, 2), "float32", name="x")
    func = te.create_prim_func([x_in, te_fft(x_in)])
    with pytest.raises(TypeError, match=r"fuse_consumers: func must be a tirx.PrimFunc, got IRModule"):
        fuse_consumers(tvm.IRModule({"main": func}))
    with pytest.raises(TypeError, match="fuse_consumers: report must be a list"):
        fuse_consumers(func, report="lines")
    assert fuse_consumers(func).same_as(func)  # the FFT's output is the function's: nothing consumes it


def _fused_cuda_graph(n: int, batch: int):
    """X -> pre (x 0.5) -> te_fft on CUDA -> power spectrum: pre inlined into the first pass, the power spectrum
    fused into the last; its constants, an input and the reference."""
    x_in = te.placeholder((batch, n, 2), "float32", name="x")
    pre = te.compute(x_in.shape, lambda *i: x_in[i] * 0.5, name="pre")
    y = te_fft(pre, target="cuda")
    power = te.compute(y.shape[:-1], lambda b, k: y[b, k, 0] * y[b, k, 0] + y[b, k, 1] * y[b, k, 1], name="power")
    constants = te_fft_constants(power)
    func = fuse_consumers(te.create_prim_func([x_in, *[c for c, _ in constants], power]))
    sch = s_tir.Schedule(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))
    sch.compute_inline(sch.get_sblock("pre"))
    x = random_real((batch, n, 2), "float32", seed=5)
    reference = np.abs(np.fft.fft(0.5 * (x[..., 0].astype(np.float64) + 1j * x[..., 1]))) ** 2
    return sch.mod, constants, x, reference


@pytest.mark.nvcc
def test_the_fused_graph_compiles_for_sm80_and_sm90_as_one_kernel():
    mod, *_ = _fused_cuda_graph(1000, 3)
    for arch in ("sm_80", "sm_90"):
        with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
            source = cuda_source(mod, arch, tir_pipeline=CUDA_PIPELINE)
        (usage,) = compile_cuda_source(source, arch)  # producer, FFT and consumer: one kernel
        assert usage.spill_store_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "batch"), [(1000, 3), (16, 512)])
def test_the_fused_graph_runs_on_the_gpu(n, batch):
    mod, constants, x, reference = _fused_cuda_graph(n, batch)
    # built for the GPU present (te_fft planned for it): an sm_80 cubin does not load on an sm_90 GPU
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": device_arch()}),
                                 tir_pipeline=CUDA_PIPELINE)
    dev = tvm.cuda(0)
    power = tvm.runtime.empty((batch, n), "float32", dev)
    executable["main"](tvm.runtime.tensor(x, dev), *[tvm.runtime.tensor(v, dev) for _, v in constants], power)
    assert relative_error(power.numpy(), reference) <= 2 * tolerance(n, "complex64")


def _consumer_nest(func: tvm.tirx.PrimFunc, name: str) -> tuple[list, s_tir.SBlockRealize]:
    """The loops around the block `name` of `func` (a root statement) and the block's realize."""
    statement = next(s for s in func.body.block.body.seq if name in _block_names(tvm.tirx.PrimFunc([], s)))
    loops = []
    while isinstance(statement, tvm.tirx.For):
        loops.append(statement)
        statement = statement.body
    return loops, statement


def _shrunk_loop(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """z's loop over its axis 1 runs 8 of 16 times: z[:, 8:] keeps what it held."""
    loops, _ = _consumer_nest(func, "z")

    def on_loop(loop: tvm.tirx.For) -> tvm.tirx.For:
        return (tvm.tirx.For(loop.loop_var, loop.min, 8, loop.kind, loop.body)
                if loop.loop_var.same_as(loops[1].loop_var) else loop)

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.For, on_loop), order="post"))


def _diagonal(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """z's iterators over axes 0 and 1 both bound to the loop of axis 0: z[b, b, c] only."""
    loops, realize = _consumer_nest(func, "z")

    def on_realize(node: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        if not node.same_as(realize):
            return node
        values = list(node.iter_values)
        values[1] = loops[0].loop_var
        return s_tir.SBlockRealize(values, node.predicate, node.block)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlockRealize, on_realize), order="post"))


def _predicated(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """z computed where its loop over axis 1 is below 8 (a predicate on its block)."""
    loops, realize = _consumer_nest(func, "z")

    def on_realize(node: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        if not node.same_as(realize):
            return node
        return s_tir.SBlockRealize(list(node.iter_values), loops[1].loop_var < 8, node.block)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlockRealize, on_realize), order="post"))


@pytest.mark.parametrize(("edit", "reason"), [
    (_predicated, "block z: it has the predicate i1 < 8: it does not write every element"),
    (_shrunk_loop, "block z: its iterator v_i1 (loop i1) runs over 8 of the 16 elements of z along axis 1, not all"),
    (_diagonal, "block z: two of its iterators are bound to loop i0, so it does not write every element of z"),
])
def test_a_consumer_not_writing_every_element_of_its_output_is_not_fused(edit, reason):
    # the fused stores write every element of z: fused, these consumers would overwrite the elements they leave
    x_in = te.placeholder((16, 16, 2), "float32", name="x")
    y = te_fft(x_in)
    func = edit(te.create_prim_func([x_in, te.compute(y.shape, lambda *i: y[i] * 2.0, name="z")]))
    report: list = []
    assert fuse_consumers(func, report).same_as(func)
    assert report == [f"stage fft_c2c16: {reason}"]
