"""The FFT as a TE operator: `te_fft(x, ...)` returns a `te.Tensor` that composes with other TE stages.

Algorithm: the request is parsed like `plan()`'s, and the same machinery derives the operator (breakdown →
passes over memory with derived codelets → the TIR template of `template.build_primfunc`, scheduled for llvm
by `schedule.schedule_llvm` unless `schedule=False`). The template's body becomes the body of one
`te.extern` stage, its parameter buffers substituted by the stage's input and output buffers: the stage
holds one block per pass over memory, and `te.create_prim_func` puts it between the caller's stages.

Layout: complex tensors are float tensors with a trailing dimension of 2 (numpy's complex layout). The
transform runs along `axis` (an axis of the complex shape, i.e. not counting the trailing 2); all other axes
are the batch. When the input is not already `(batch, elements[, 2])` with the transform axis last, a TE
stage moves the axis last and flattens the batch (and another moves it back on the output).

Constants: the twiddle tables (float64 values rounded once) and the Rader permutations are placeholders
`fft_tables` / `fft_indices` read by the stage; `te_fft_constants(y)` lists them with their values, which the
caller passes to the compiled function after its own inputs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import tvm
import tvm_ffi
from tvm import te

from .factor import breakdown
from .passes import PassList, build_passes
from .planner import DIRECTIONS, KINDS, NORMS, VECTOR_LANES, _check_choice, _check_int, _norm_scale, choose_lanes
from .schedule import schedule_llvm
from .template import ExternalLayout, build_primfunc

__all__ = ["te_fft", "te_fft_constants"]

_STAGE_TAG = "tvm_tailsplit.fft"


@functools.lru_cache(maxsize=64)
def _passes(kind: str, n: int, sign: int, scale: float, codelet_limit: int, radix_limit: int) -> PassList:
    return build_passes(kind, n, sign, scale, lambda size: breakdown(size, codelet_limit, radix_limit))


def _layouts(kind: str, n: int) -> tuple[ExternalLayout, ExternalLayout]:
    half = n // 2 + 1
    in_kind, in_elements = {"c2c": ("complex", n), "c2r": ("complex", half),
                            "r2c": ("real_pairs" if n % 2 == 0 else "real", n)}[kind]
    out_kind, out_elements = {"c2c": ("complex", n), "r2c": ("complex", half),
                              "c2r": ("real_pairs" if n % 2 == 0 else "real", n)}[kind]
    return (ExternalLayout(in_kind, in_elements, in_elements, 1),
            ExternalLayout(out_kind, out_elements, out_elements, 1))


def _static_shape(tensor: te.Tensor) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in tensor.shape)
    except TypeError:
        raise ValueError(f"te_fft needs a tensor of static shape, got {list(tensor.shape)}") from None


def _to_batch_last(x: te.Tensor, axis: int, is_complex: bool) -> tuple[te.Tensor, tuple[int, ...]]:
    """`x` as `(batch, elements[, 2])` with the transform axis last; also the batch dimensions."""
    shape = _static_shape(x)
    logical = shape[:-1] if is_complex else shape
    batch_dims = logical[:axis] + logical[axis + 1:]
    if len(batch_dims) == 1 and axis == len(logical) - 1:
        return x, batch_dims
    elements = logical[axis]
    tail = (2,) if is_complex else ()

    def gather(b, e, *part):
        index = []
        for extent in reversed(batch_dims):
            index.append(tvm.tirx.floormod(b, extent))
            b = tvm.tirx.floordiv(b, extent)
        index.reverse()
        return x[(*index[:axis], e, *index[axis:], *part)]

    return te.compute((math.prod(batch_dims), elements) + tail, gather, name="fft_gather"), batch_dims


def _from_batch_last(y: te.Tensor, axis: int, batch_dims: tuple[int, ...], is_complex: bool) -> te.Tensor:
    """The inverse of `_to_batch_last` for the output (whose transform axis may have another length)."""
    if len(batch_dims) == 1 and axis == len(batch_dims):
        return y
    elements = _static_shape(y)[1]
    shape = batch_dims[:axis] + (elements,) + batch_dims[axis:] + ((2,) if is_complex else ())

    def scatter(*index):
        logical = index[:-1] if is_complex else index
        part = index[-1:] if is_complex else ()
        batch = 0
        for position, var in enumerate(logical):
            if position != axis:
                batch = batch * shape[position] + var
        return y[(batch, logical[axis], *part)]

    return te.compute(shape, scatter, name="fft_scatter")


def te_fft(
    x: te.Tensor,
    n: int | None = None,
    kind: str = "c2c",
    direction: str = "forward",
    norm: str = "backward",
    axis: int = -1,
    schedule: bool = True,
    codelet_limit: int = 32,
    radix_limit: int = 8,
) -> te.Tensor:
    """The FFT of `x` along `axis` as a TE tensor (numpy's fft/ifft/rfft/irfft semantics and `norm`).

    `x` is float32 (complex64 transforms) or float64 (complex128); complex tensors have a trailing dimension
    of 2, which `axis` does not count. `n` is the logical transform size: by default the length of `axis`
    (c2c, r2c) or `2·(length - 1)` (c2r); the length of `axis` must be `n` (c2c, r2c) or `n//2 + 1` (c2r).
    The output has the same layout, with `n//2 + 1` complex elements along `axis` for r2c and `n` real
    ones for c2r. With `schedule`, the passes are vectorized across the batch and parallel over lane groups
    (llvm); without, the stage's blocks are left for the caller's schedule.
    The stage reads constant placeholders: see `te_fft_constants`. Compile the graph with
    `PassContext(config={"tirx.disable_cse_tir": True})` as `plan()` does: the codelets arrive with their
    common subexpressions eliminated, and TIR's CSE pass is quadratic in the size of a codelet.
    """
    if not isinstance(x, te.Tensor):
        raise ValueError(f"x must be a te.Tensor, got {type(x).__name__}")
    _check_choice("kind", kind, KINDS)
    _check_choice("direction", direction, DIRECTIONS)
    _check_choice("norm", norm, NORMS)
    _check_int("codelet_limit", codelet_limit, 2)
    _check_int("radix_limit", radix_limit, 2)
    if kind == "r2c" and direction != "forward":
        raise ValueError("direction must be 'forward' for kind='r2c' (the inverse is kind='c2r')")
    if kind == "c2r" and direction != "backward":
        raise ValueError("direction must be 'backward' for kind='c2r' (the forward is kind='r2c')")
    dtype = str(x.dtype)
    if dtype not in VECTOR_LANES:
        raise ValueError(f"x must be float32 or float64 (complex data with a trailing 2), got {dtype}")
    shape = _static_shape(x)
    in_complex = kind != "r2c"
    if in_complex and (len(shape) < 2 or shape[-1] != 2):
        raise ValueError(f"a {kind} input must have a trailing dimension of 2 (re, im), got shape {shape}")
    rank = len(shape) - (1 if in_complex else 0)
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a tensor of {rank} complex/real dimensions")
    axis %= rank
    length = shape[axis]
    if n is None:
        n = 2 * (length - 1) if kind == "c2r" else length
    _check_int("n", n, 1)
    expected = n // 2 + 1 if kind == "c2r" else n
    if length != expected:
        raise ValueError(f"the length of axis {axis} is {length}; a {kind} transform of n={n} needs {expected}")

    sign = 1 if direction == "backward" else -1
    scale = _norm_scale(n, norm, direction == "backward")
    passes = _passes(kind, n, sign, scale, codelet_limit, radix_limit)
    flat, batch_dims = _to_batch_last(x, axis, in_complex)
    batch = math.prod(batch_dims)
    input_layout, output_layout = _layouts(kind, n)
    lanes = choose_lanes(passes, dtype, batch)
    func = build_primfunc(passes, dtype, batch, lanes, input_layout, output_layout)
    if schedule:
        func = schedule_llvm(func, VECTOR_LANES[dtype]).mod["main"]
    params = list(func.params)
    constants = _constant_placeholders(passes, dtype)

    def body(ins, outs):
        substitution = dict(zip(params, [ins[0], outs[0], *ins[1:]], strict=True))
        return tvm_ffi.structural_map(func.body, (tvm.ir.Var, lambda v: substitution.get(v, v)), order="post")

    attrs = {"n": n, "kind": kind, "direction": direction, "norm": norm, "codelet_limit": codelet_limit,
             "radix_limit": radix_limit}
    y = te.extern([output_layout.shape(batch)], [flat, *constants], body, name=f"fft_{kind}{n}",
                  dtype=dtype, tag=_STAGE_TAG, attrs=attrs)
    return _from_batch_last(y, axis, batch_dims, kind != "c2r")


def _constant_placeholders(passes: PassList, dtype: str) -> list[te.Tensor]:
    constants = []
    if passes.table_size:
        constants.append(te.placeholder((passes.table_size, 2), dtype, name="fft_tables"))
    if passes.index_size:
        constants.append(te.placeholder((passes.index_size,), "int32", name="fft_indices"))
    return constants


def te_fft_constants(*tensors: te.Tensor) -> list[tuple[te.Tensor, np.ndarray]]:
    """The constant placeholders read by the FFT stages in the graphs of `tensors`, with their values.

    Pass the placeholders to `te.create_prim_func` (e.g. after the graph's inputs) and the values, in the
    same order, to the compiled function.
    """
    found: list[tuple[te.Tensor, np.ndarray]] = []
    seen: list[te.Operation] = []
    stack = list(tensors)
    while stack:
        op = stack.pop().op
        if any(op.same_as(other) for other in seen):
            continue
        seen.append(op)
        if isinstance(op, te.ExternOp) and op.tag == _STAGE_TAG:
            a = op.attrs
            n = int(a["n"])
            sign = 1 if a["direction"] == "backward" else -1
            passes = _passes(str(a["kind"]), n, sign, _norm_scale(n, str(a["norm"]), sign > 0),
                             int(a["codelet_limit"]), int(a["radix_limit"]))
            tables, indices = passes.constants()
            dtype = str(op.output(0).dtype)
            values = ([tables.astype(dtype)] if passes.table_size else []) + \
                ([indices] if passes.index_size else [])
            found.extend(zip(list(op.input_tensors)[1:], values, strict=True))
        stack.extend(op.input_tensors)
    return found
