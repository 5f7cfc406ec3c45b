"""Bad and unusual requests (issue #12): read-only inputs, overlapping output layouts and aliasing outputs,
wrong argument types and unknown names, each a clear error naming the argument, or a result equal to numpy."""

import itertools

import numpy as np
import pytest
from tvm import te

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft.spec import FFTSpec

from .fft_reference import random_complex, random_real, relative_error, tolerance


# ---- read-only inputs -----------------------------------------------------------------------------------------
def _read_only_inputs(tmp_path, x: np.ndarray) -> dict:
    path = tmp_path / "x.bin"
    x.tofile(path)
    flagged = x.copy()
    flagged.setflags(write=False)
    return {"memmap": np.memmap(path, x.dtype, mode="r", shape=x.shape),
            "frombuffer": np.frombuffer(x.tobytes(), x.dtype).reshape(x.shape),
            "setflags": flagged}


@pytest.mark.parametrize("source", ["memmap", "frombuffer", "setflags"])
def test_read_only_complex_input(tmp_path, source):
    x = random_complex((3, 60), "complex64", seed=1)
    array = _read_only_inputs(tmp_path, x)[source]
    assert not array.flags.writeable
    reference = np.fft.fft(x.astype(np.complex128))
    assert relative_error(tfft.plan(60, 3)(array), reference) <= tolerance(60, "complex64")
    assert relative_error(tfft.fft(array), reference) <= tolerance(60, "complex64")
    assert np.array_equal(array, x)  # the input is only read


@pytest.mark.parametrize("source", ["memmap", "frombuffer", "setflags"])
@pytest.mark.parametrize("n", [64, 15])
def test_read_only_real_input(tmp_path, source, n):
    x = random_real((2, n), "float64", seed=n)
    array = _read_only_inputs(tmp_path, x)[source]
    assert relative_error(tfft.rfft(array), np.fft.rfft(x)) <= tolerance(n, "complex128")
    spectrum = _read_only_inputs(tmp_path, np.fft.rfft(x))[source]
    assert relative_error(tfft.irfft(spectrum, n=n), x) <= 2 * tolerance(n, "complex128")


@pytest.mark.parametrize(("kind", "n"), [("c2c", 60), ("r2c", 64), ("r2c", 15), ("c2r", 15)])
def test_a_plan_of_one_transform_gives_a_vector_for_a_vector(kind, n):
    # it returned shape (1, m) for the vector x (numpy.fft: (m,)), unlike the same call with out=
    plan = tfft.plan(n, 1, kind=kind, dtype="complex128")
    if kind == "r2c":
        x = random_real(n, "float64", seed=4)
        reference = np.fft.rfft(x)
    elif kind == "c2r":
        x = random_complex(n // 2 + 1, "complex128", seed=4)
        reference = np.fft.irfft(x, n)
    else:
        x = random_complex(n, "complex128", seed=4)
        reference = np.fft.fft(x)
    result = plan(x)
    assert result.shape == reference.shape and relative_error(result, reference) <= tolerance(n, "complex128")
    assert plan(x[np.newaxis]).shape == (1,) + reference.shape  # a batch of one stays one


def test_read_only_input_is_not_copied():
    x = random_complex((2, 16), "complex64", seed=2)
    x.setflags(write=False)
    plan = tfft.plan(16, 2)
    wrapped = np.from_dlpack(plan._wrap(plan._as_float_view("x", x, plan.input_layout)))
    assert np.shares_memory(wrapped, x)


def test_read_only_output_is_refused():
    out = np.zeros((2, 16), np.complex64)
    out.setflags(write=False)
    with pytest.raises(ValueError, match="out must be writable"):
        tfft.plan(16, 2)(random_complex((2, 16), "complex64"), out=out)


def test_run_refuses_a_read_only_output():
    # Plan.run wrapped a read-only out as a writable alias (as it does for inputs) and wrote through it: a
    # setflags(write=False) array was silently changed, a memmap opened with mode "r" crashed the process (SIGSEGV)
    plan = tfft.plan(16, 2)
    x = random_complex((2, 16), "complex64").view(np.float32).reshape(plan.input_shape)
    out = np.zeros(plan.output_shape, np.float32)
    out.setflags(write=False)
    with pytest.raises(ValueError, match="out must be writable"):
        plan.run(x, out)
    assert not out.any()



@pytest.mark.parametrize(("x_shape", "out_shape", "dtype", "message"), [
    ((4, 8, 2), None, "float32", r"x has shape \(4, 8, 2\), the plan expects \(4, 16, 2\)"),  # TVM: 'strides'
    ((3, 16, 2), None, "float32", r"x has shape \(3, 16, 2\), the plan expects \(4, 16, 2\)"),  # TVM: 'output'
    ((4, 16, 2), None, "float64", "x must be a float32 tensor, got float64"),
    ((4, 16, 2), (4, 8, 2), "float32", r"out has shape \(4, 8, 2\), the plan expects \(4, 16, 2\)"),
])
def test_tvm_tensors_of_another_shape_or_dtype_are_refused_by_name(x_shape, out_shape, dtype, message):
    # TVM's own argument checks blamed the output for a wrong input batch of a symbolic-batch plan, and called a
    # wrong length a stride mismatch
    import tvm

    plan = tfft.plan(16, 4)
    x = tvm.runtime.tensor(np.zeros(x_shape, dtype))
    out = None if out_shape is None else tvm.runtime.empty(out_shape, "float32")
    with pytest.raises(ValueError, match=message):
        plan(x, out)
    symbolic = tfft.plan(64, 8)
    assert symbolic.symbolic_batch
    with pytest.raises(ValueError, match=r"x has shape \(3, 64, 2\), the plan expects \(8, 64, 2\)"):
        symbolic(tvm.runtime.tensor(np.zeros((3, 64, 2), np.float32)))
    signal = random_complex((8, 64), "complex64")
    result = symbolic(tvm.runtime.tensor(signal.view(np.float32).reshape(8, 64, 2))).numpy()
    assert relative_error(result.view(np.complex64)[..., 0], np.fft.fft(signal.astype(np.complex128))) <= \
        tolerance(64, "complex64")

def test_tvm_tensors_in_a_strided_plan_are_checked_against_its_layout():
    # a compact TVM tensor for a strided input was refused by TVM as 'Invalid input.strides[1] ... expected 4', and a
    # TVM input to a plan of a strided output allocated a compact output that TVM then refused in the same words
    import tvm
    import tvm_ffi

    strided_in = tfft.plan(8, 3, istride=2, idist=17)
    with pytest.raises(ValueError, match=r"x has element strides \(16, 2, 1\), the plan expects \(34, 4, 1\)"):
        strided_in(tvm.runtime.tensor(np.zeros((3, 8, 2), np.float32)))
    signal = random_complex(3 * 17, "complex64", seed=6)
    view = np.lib.stride_tricks.as_strided(signal, (3, 8), (17 * 8, 2 * 8))
    floats = np.lib.stride_tricks.as_strided(view.real, (3, 8, 2), view.strides + (4,))
    result = strided_in(tvm_ffi.from_dlpack(floats, require_alignment=0, require_contiguous=False)).numpy()
    assert relative_error(result.view(np.complex64)[..., 0], np.fft.fft(view.astype(np.complex128))) <= \
        tolerance(8, "complex64")
    strided_out = tfft.plan(8, 3, ostride=2, odist=17)
    x = tvm.runtime.tensor(np.zeros((3, 8, 2), np.float32))
    with pytest.raises(ValueError, match=r"out is needed: the plan's output layout \(ostride=2, odist=17\)"):
        strided_out(x)
    with pytest.raises(ValueError, match=r"out has element strides \(16, 2, 1\), the plan expects \(34, 4, 1\)"):
        strided_out(x, tvm.runtime.empty((3, 8, 2), "float32"))



def test_flipped_and_broadcast_views_are_refused_with_a_remedy_that_exists():
    # a negative or zero step was refused with "make a plan with matching istride/idist/ostride/odist", which no plan
    # has (they are at least 1); a plan of one transform never reads the batch stride, a flipped row of one is taken
    signal = random_complex(16, "complex64", seed=7)
    one, two = tfft.plan(8), tfft.plan(8, 2)
    refusals = [(one, signal[:8][::-1], None, r"x has element strides \(0, -2, 1\)"),
                (two, signal.reshape(2, 8)[::-1], None, r"x has element strides \(-16, 2, 1\)"),
                (two, np.broadcast_to(signal[:8], (2, 8)), None, r"x has element strides \(0, 2, 1\)"),
                (one, signal[:8], np.empty(16, np.complex64)[::-2], r"out has element strides \(0, -4, 1\)")]
    for plan, x, out, match in refusals:
        with pytest.raises(ValueError, match=match + ".*a negative or zero step .* has no plan") as refused:
            plan(x, out)
        assert "make a plan with matching" not in str(refused.value)
        assert ("np.ascontiguousarray(x)" if out is None else "a compact out, or none") in str(refused.value)
    flipped_row = signal[:8].reshape(1, 8)[::-1]
    assert relative_error(one(flipped_row)[0], np.fft.fft(signal[:8].astype(np.complex128))) <= \
        tolerance(8, "complex64")
    with pytest.raises(ValueError, match=r"x has element strides \(0, 4, 1\).*make a plan with matching istride"):
        one(signal[::2])

def test_a_strided_tvm_tensor_of_one_transform_may_have_any_row_stride():
    # a plan of one transform declared the compact batch stride, which TVM checks exactly for a strided layout: a
    # row of a larger array (idist=20 given, as the tensor's) was refused as 'Invalid input.strides[0] ... expected 32'
    import tvm_ffi

    plan = tfft.plan(8, 1, istride=2, idist=20, ostride=3)
    rows = random_complex((3, 20), "complex64", seed=8)
    x = rows[1:2, :16:2]
    out = np.zeros((2, 30), np.complex64)
    y = out[1:2, :24:3]

    def tensor(view):
        floats = np.lib.stride_tricks.as_strided(view.real, view.shape + (2,), view.strides + (4,))
        return tvm_ffi.from_dlpack(floats, require_alignment=0, require_contiguous=False)

    plan(tensor(x), tensor(y))
    assert relative_error(y, np.fft.fft(x.astype(np.complex128))) <= tolerance(8, "complex64")
    assert not out[0].any()


def test_a_tvm_input_with_a_numpy_output_is_checked_like_a_numpy_input():
    # a complex numpy out with a TVM x went to TVM unchecked: 'Mismatched output.ndim on argument #1'
    import tvm

    plan = tfft.plan(8, 3)
    signal = random_complex((3, 8), "complex64", seed=7)
    x = tvm.runtime.tensor(signal.view(np.float32).reshape(3, 8, 2))
    out = np.zeros((3, 8), np.complex64)
    assert plan(x, out) is out
    assert relative_error(out, np.fft.fft(signal.astype(np.complex128))) <= tolerance(8, "complex64")
    with pytest.raises(ValueError, match=r"out has shape \(3, 7\) of complex64, the plan expects \(3, 8\) of complex64 "
                                         r"\(or \(3, 8, 2\) of float32\)"):
        plan(x, np.zeros((3, 7), np.complex64))
    with pytest.raises(TypeError, match="out must be a TVM tensor with a TVM tensor x"):
        plan(x, [0.0] * 48)


@pytest.mark.parametrize(("plan_args", "x", "out", "message"), [
    ((8, 3), np.zeros((2, 8), np.complex64), None,
     r"x has shape \(2, 8\) of complex64, the plan expects \(3, 8\) of complex64 \(or \(3, 8, 2\) of float32\)"),
    ((8, 3), np.zeros(8, np.complex64), None, r"x has shape \(8,\) of complex64, the plan expects \(3, 8\)"),
    ((8, 3), np.zeros((3, 8), np.complex64), np.zeros((3, 7), np.complex64), r"out has shape \(3, 7\) of complex64"),
    ((8,), np.zeros(7, np.complex64), None,
     r"x has shape \(7,\) of complex64, the plan expects \(1, 8\) or \(8,\) of complex64"),
    ((8, 1, "r2c"), np.zeros(7, np.float32), None,
     r"x has shape \(7,\) of float32, the plan expects \(1, 8\) or \(8,\)$"),
    ((8, 2, "c2r"), np.zeros((2, 5), np.complex64), np.zeros((2, 7), np.float32),
     r"out has shape \(2, 7\) of float32, the plan expects \(2, 8\)$"),
])
def test_a_numpy_array_of_another_shape_is_named_in_its_own_shape(plan_args, x, out, message):
    # a complex array was named by its float view: plan(8, 3) refused a (2, 8) complex64 x as 'x has shape (2, 8, 2),
    # the plan expects (3, 8, 2)', shapes the caller never wrote (and a vector x of a plan of one transform as (1, 7))
    with pytest.raises(ValueError, match=message):
        tfft.plan(*plan_args)(x, out)


# ---- overlapping layouts ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n": 16, "batch": 2, "odist": 1}, "ostride=1 and odist=1 make the outputs of the 2 transforms overlap"),
    ({"n": 16, "batch": 3, "ostride": 2, "odist": 1}, "ostride=2 and odist=1"),
    ({"n": 16, "batch": 2, "odist": 8}, "odist=8"),
    ({"n": 16, "batch": 2, "kind": "r2c", "odist": 5}, "odist=5"),
    ({"n": 16, "batch": 2, "kind": "c2r", "odist": 15}, "odist=15"),
])
def test_overlapping_output_layouts_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tfft.plan(**kwargs)


def test_output_overlap_rule_matches_brute_force():
    for n, batch, ostride, odist in itertools.product(range(1, 7), range(1, 5), range(1, 6), range(1, 13)):
        offsets = [b * odist + e * ostride for b in range(batch) for e in range(n)]
        overlapping = len(set(offsets)) < len(offsets)
        try:
            FFTSpec(n).layouts(batch, ostride=ostride, odist=odist)
            refused = False
        except ValueError:
            refused = True
        assert refused == overlapping, (n, batch, ostride, odist)


def test_interleaved_disjoint_output_layout_is_accepted():
    # transforms interleaved element by element (ostride = batch, odist = 1): no element is shared
    plan = tfft.plan(16, 3, ostride=3, odist=1)
    x = random_complex((3, 16), "complex64", seed=3)
    assert relative_error(plan(x), np.fft.fft(x.astype(np.complex128))) <= tolerance(16, "complex64")


@pytest.mark.parametrize(("call", "message"), [
    # TVM refused it with 'Literal value 2147483648 exceeds range of int32'
    (lambda: tfft.plan(16, 2, idist=2**29), r"the input of 2 transforms \(distance 536870912, stride 1\) reaches "
                                            r"2147483648 floats"),
    # a plan of any batch: its int32 batch variable made the offsets of transforms past 2**24 wrap around
    (lambda: tfft.plan(64, 2**25), "the input of 33554432 transforms"),
    (lambda: tfft.plan(63, 1, kind="c2r", ostride=2**26), "the output of 1 transforms .* reaches 4227858432 floats"),
    (lambda: tfft.te_fft(te.placeholder((2**25, 64, 2), "float32", name="X")), "32-bit integers"),
])
def test_layouts_beyond_32_bit_indices_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    tfft.plan(16, 2, idist=2**29 - 8)   # the largest that fits (2**30 + 16 floats) builds


def test_overlapping_inputs_are_read():
    # sliding windows: the input's transforms may share elements (they are only read)
    base = random_complex(40, "complex64", seed=4)
    windows = np.lib.stride_tricks.sliding_window_view(base, 16)[::4]
    plan = tfft.plan(16, len(windows), idist=4)
    assert relative_error(plan(windows), np.fft.fft(windows.astype(np.complex128))) <= tolerance(16, "complex64")


def test_output_overlapping_the_input_is_refused():
    base = np.zeros(48, np.complex64)
    x, out = base[:32].reshape(2, 16), base[16:].reshape(2, 16)
    with pytest.raises(ValueError, match="out overlaps x without being x itself"):
        tfft.plan(16, 2)(x, out=out)
    interleaved = np.zeros((2, 32), np.complex64)  # disjoint although their bounds overlap
    even, odd = interleaved[:, ::2], interleaved[:, 1::2]
    even[...] = random_complex((2, 16), "complex64", seed=5)
    tfft.plan(16, 2, istride=2, idist=32, ostride=2, odist=32)(even, out=odd)
    assert relative_error(odd, np.fft.fft(even.astype(np.complex128))) <= tolerance(16, "complex64")


# ---- argument types and names -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"n": 16.0}, TypeError, "n must be an integer, got 16.0"),
    ({"n": "16"}, TypeError, "n must be an integer"),
    ({"n": True}, TypeError, "n must be an integer"),
    ({"n": -3}, ValueError, "n must be at least 1"),
    ({"n": 16, "batch": 2.5}, TypeError, "batch must be an integer"),
    ({"n": 16, "batch": [2]}, TypeError, "batch must be an integer"),
    ({"n": 16, "kind": 3}, TypeError, "kind must be one of 'c2c', 'r2c', 'c2r'"),
    ({"n": 16, "kind": "C2C"}, ValueError, "kind must be one of"),
    ({"n": 16, "direction": None}, TypeError, "direction must be one of 'forward', 'backward'"),
    ({"n": 16, "direction": "fwd"}, ValueError, "direction must be one of"),
    ({"n": 16, "norm": 1}, TypeError, "norm must be one of"),
    ({"n": 16, "dtype": "float32"}, ValueError, "dtype must be one of 'complex64', 'complex128'"),
    ({"n": 16, "dtype": 3.5}, TypeError, "dtype must be 'complex64' or 'complex128'"),
    ({"n": 16, "target": 3}, TypeError, "target must be 'llvm', 'cuda', a target dict"),
    ({"n": 16, "target": "rocm"}, ValueError, "target must be 'llvm', 'cuda'"),
    ({"n": 16, "target": {"kind": "no-such-kind"}}, ValueError, "is not a valid target dict"),
    ({"n": 16, "target": {"kind": "c"}}, ValueError, "target must be of kind 'llvm' or 'cuda'"),
    ({"n": 16, "codelet_limit": "32"}, TypeError, "codelet_limit must be an integer"),
    ({"n": 16, "radix_limit": 1}, ValueError, "radix_limit must be at least 2"),
    ({"n": 16, "istride": 1.5}, TypeError, "istride must be an integer"),
    ({"n": 16, "batch": 2, "odist": 0}, ValueError, "odist must be at least 1"),
    # numpy's dtype(None) is float64: it was refused as "got 'float64'", a value the caller never gave
    ({"n": 16, "dtype": None}, TypeError, r"dtype must be 'complex64' or 'complex128' .*got None"),
])
def test_plan_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        tfft.plan(**kwargs)


def test_equivalent_spellings_give_one_plan():
    assert tfft.plan(16, dtype=np.complex128) is tfft.plan(np.int64(16), dtype="complex128")
    assert tfft.plan(16, 2, idist=16) is tfft.plan(16, 2)
    target = {"kind": "llvm", "keys": ["cpu"]}  # a target dict with a list: hashed through its JSON text
    assert tfft.plan(16, target=target) is tfft.plan(16, target=dict(target))


def test_numpy_strings_are_normalized_to_str():
    # a numpy string (np.str_, e.g. read from an array of settings) was kept in the spec: the plan reported
    # norm=np.str_('ortho'), and so did every later plan(..., norm="ortho") of the same request, served from the cache
    first = tfft.plan(12, kind=np.str_("c2c"), direction=np.str_("backward"), norm=np.str_("ortho"))
    assert first is tfft.plan(12, direction="backward", norm="ortho")
    assert all(type(value) is str for value in (first.kind, first.direction, first.norm))
    assert "norm='ortho'" in repr(first) and "np.str_" not in repr(first)
    graph = tfft.plan_nd((4, 6), (0, 1), np.str_("c2c"), norm=np.str_("forward"))
    assert "np.str_" not in repr(graph) and type(graph.norm) is str


@pytest.mark.parametrize(("function", "kwargs", "error", "message"), [
    (tfft.fft, {"n": 4.0}, TypeError, "n must be an integer"),
    (tfft.ifft, {"axis": "0"}, TypeError, "axis must be an integer"),
    (tfft.fft, {"norm": 5}, ValueError, "norm must be one of"),  # numpy's and scipy's type for any bad norm
    (tfft.rfftn, {"norm": b"ortho"}, ValueError, "norm must be one of"),
    (tfft.fft, {"norm": "unitary"}, ValueError, "norm must be one of"),
    (tfft.rfft, {"n": 0}, ValueError, "n must be at least 1"),
    (tfft.irfft, {"n": 8.0}, TypeError, "n must be an integer"),
])
def test_numpy_like_arguments(function, kwargs, error, message):
    with pytest.raises(error, match=message):
        function(np.zeros((2, 8)), **kwargs)


@pytest.mark.parametrize(("x", "kwargs", "error", "message"), [
    (np.zeros((4, 8, 2), np.float32), {}, TypeError, "x must be a te.Tensor"),
    (None, {"n": 8.0}, TypeError, "n must be an integer"),
    (None, {"kind": None}, TypeError, "kind must be one of"),
    (None, {"direction": 1}, TypeError, "direction must be one of"),
    (None, {"axis": 1.0}, TypeError, "axis must be an integer"),
    (None, {"schedule": "yes"}, TypeError, "schedule must be a bool"),
    (None, {"codelet_limit": 8, "radix_limit": 16}, ValueError, "radix_limit must be at most codelet_limit=8"),
    # an empty batch named x (it raised 'batch must be at least 1', an argument te_fft has not)
    (te.placeholder((0, 8, 2), "float32", name="X"), {}, ValueError, r"x has shape \(0, 8, 2\).*no transforms"),
])
def test_te_fft_arguments(x, kwargs, error, message):
    x = te.placeholder((4, 8, 2), "float32", name="X") if x is None else x
    with pytest.raises(error, match=message):
        tfft.te_fft(x, **kwargs)
