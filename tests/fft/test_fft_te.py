"""te_fft: the FFT as a TE stage inside a user's TE graph, compiled on llvm and compared to numpy.fft."""

import numpy as np
import pytest
import tvm
from tvm import s_tir, te

from tvm_tailsplit.fft import te_fft, te_fft_constants

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


@pytest.mark.parametrize(("n", "batch"), [(2, 5), (15, 1), (60, 5), (1024, 1)])
def test_te_graph_r2c_then_c2r_round_trip(n, batch):
    X = te.placeholder((batch, n), "float64", name="X")
    spectrum = te_fft(X, kind="r2c", norm="ortho")
    magnitude = te.compute(spectrum.shape[:-1], lambda b, k: spectrum[b, k, 0] * spectrum[b, k, 0]
                           + spectrum[b, k, 1] * spectrum[b, k, 1], name="power")
    x = random_real((batch, n), "float64")
    power = _compile_and_run([X], magnitude, x)
    assert np.allclose(power, np.abs(np.fft.rfft(x, norm="ortho")) ** 2, rtol=1e-12, atol=1e-12)

    back = te_fft(spectrum, n=n, kind="c2r", direction="backward", norm="ortho")
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


@pytest.mark.parametrize(("shape", "kwargs", "message"), [
    ((4, 8), {}, "trailing dimension of 2"),
    ((4, 8, 2), {"n": 9}, "needs 9"),
    ((4, 8, 2), {"axis": 2}, "out of range"),
    ((4, 8, 2), {"kind": "r2c", "direction": "backward"}, "direction must be 'forward'"),
    ((4, 8, 2), {"norm": "none"}, "norm must be one of"),
])
def test_te_fft_rejects_bad_requests(shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        te_fft(te.placeholder(shape, "float32", name="X"), **kwargs)


def test_te_fft_rejects_integer_tensors():
    with pytest.raises(ValueError, match="float32 or float64"):
        te_fft(te.placeholder((4, 8, 2), "int32", name="X"))
