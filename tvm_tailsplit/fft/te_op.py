"""The FFT as a TE operator: `te_fft(x, ...)` returns a `te.Tensor` that composes with other TE stages.

Algorithm: the request is the same validated `spec.FFTSpec` as `plan()`'s, from which the same machinery
derives the operator (layouts, breakdown →
passes over memory with derived codelets → the TIR template of `template.build_primfunc`, scheduled for llvm
by `schedule.schedule_llvm` unless `schedule=False`; for a CUDA target, the module of `plan(..., target=target)`:
one kernel with shared scratch and a barrier between passes, or one kernel per pass). The template's body becomes
the body of one `te.extern` stage, its parameter buffers substituted by the stage's input and output buffers: the
stage holds one block per pass over memory, and `te.create_prim_func` puts it between the caller's stages.

Fusion with the caller's element-wise stages: a producer is inlined into the loads of the first pass by
`sch.compute_inline` (its loads are substituted in every block that reads its buffer). A consumer cannot be
inlined into the stores of the last pass by `sch.reverse_compute_inline`: it needs the block that writes the
consumer's input in the consumer's scope, and the extern stage's block declares no regions (the passes are
blocks of a nested scope); were it declared, its body is not one `BufferStore` (a pass stores every output of its
codelet, lane groups with a tail have two blocks per pass), which TVM's reverse inlining requires.
`fusion.fuse_consumers` does it on the PrimFunc of the graph instead (no kernel of its own on CUDA).

Layout: complex tensors are float tensors with a trailing dimension of 2 (numpy's complex layout). The
transform runs along `axis` (an axis of the complex shape, i.e. not counting the trailing 2); all other axes
are the batch. When the input is not already `(batch, elements[, 2])` with the transform axis last, a TE
stage moves the axis last and flattens the batch (and another moves it back on the output).

Constants: the twiddle tables (float64 values rounded once) and the Rader permutations are placeholders
`fft_tables` / `fft_indices` read by the stage; `te_fft_constants(y)` lists them with their values, which the
caller passes to the compiled function after its own inputs.

Relax: `emit_fft(builder, x, ...)` puts the stage in a Relax function being built: the PrimFunc of `te_fft` on a
placeholder of `x`'s shape (`te.create_prim_func`), added to the module, called with `x` and the constants as
`R.const` (`relax.call_tir`). Relax's `emit_te` cannot do it: the stage's constant placeholders are no Relax values.
The PrimFunc names its complex buffers (`lowering.PAIR_BUFFERS_ATTR`), so that `plan()`'s llvm pipeline,
`lowering.register_pipeline(frozenset())`, rewrites their accesses as a plan's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, s_tir, te

from ..ir_utils import require_bools, suffix_block_names
from .lowering import PAIR_BUFFERS_ATTR
from .passes import PassList
from .planner import _resolve_target, plan
from .schedule import choose_lanes, schedule_llvm
from .spec import (
    KINDS,
    REAL_DTYPES,
    FFTSpec,
    check_choice,
    check_int,
    check_length,
    check_passes_indexable,
    requested_direction,
)
from .template import build_primfunc
from .tuning import CODELET_LIMIT, RADIX_LIMIT, VECTOR_LANES

__all__ = ["emit_fft", "te_fft", "te_fft_constants"]

_STAGE_TAG = "tvm_tailsplit.fft"
# the spec's fields recorded in the stage's attributes (`te_fft_constants` rebuilds the spec from them)
_SPEC_FIELDS = ("n", "kind", "direction", "norm", "dtype", "codelet_limit", "radix_limit")
# the stage moving the transform axis of the output back where it was (a transform along another axis than the last)
SCATTER_STAGE = "fft_scatter"


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

    return te.compute(shape, scatter, name=SCATTER_STAGE)


def te_fft(
    x: te.Tensor,
    n: int | None = None,
    kind: str = "c2c",
    direction: str = "forward",
    norm: str = "backward",
    axis: int = -1,
    schedule: bool = True,
    codelet_limit: int = CODELET_LIMIT,
    radix_limit: int = RADIX_LIMIT,
    target: Any = "llvm",
    name: str | None = None,
) -> te.Tensor:
    """The FFT of `x` along `axis` as a TE tensor (numpy's fft/ifft/rfft/irfft semantics and `norm`).

    `x` is float32 (complex64 transforms) or float64 (complex128); complex tensors have a trailing dimension
    of 2, which `axis` does not count. `n` is the logical transform size: by default the length of `axis`
    (c2c, r2c) or `2·(length - 1)` (c2r); the length of `axis` must be `n` (c2c, r2c) or `n//2 + 1` (c2r).
    The output has the same layout, with `n//2 + 1` complex elements along `axis` for r2c and `n` real ones for c2r.
    `kind`, `direction`, `norm`, `codelet_limit` and `radix_limit` are `plan()`'s; `target` too: "llvm", "cuda" (the
    CUDA plan for the GPU present, sm_80 without one), a target dict or a Target (a CUDA one's `arch`, e.g. "sm_90",
    sets the launch limits the plan derives its kernels from). With `schedule`, the passes are vectorized across the
    batch and parallel over lane groups (target "llvm"), or bound to CUDA threads as `plan(..., target="cuda")` binds
    them (target "cuda": compile the graph with `tir_pipeline=fft.planner.CUDA_PIPELINE`, TVM's default without
    `ThreadSync`, as the stage has its barriers, and without `StorageRewrite`, which would merge scratch buffers one
    pass reads and writes); without, the stage's blocks are left for the caller's schedule.
    `name` names the stage (default `fft_<kind><n>`) and ends the names of its blocks (`<block>_<name>`): two
    stages of one size in a graph get distinct names to be scheduled apart (`sch.get_sblock` by name).
    The stage reads constant placeholders: see `te_fft_constants`. Compile the graph with
    `PassContext(config={"tirx.disable_cse_tir": True})` as `plan()` does: the codelets arrive with their
    common subexpressions eliminated, and TIR's CSE pass is quadratic in the size of a codelet.
    """
    if not isinstance(x, te.Tensor):
        raise TypeError(f"x must be a te.Tensor, got {type(x).__name__}")
    kind = check_choice("kind", kind, KINDS)
    direction = requested_direction(kind, direction)  # as plan()
    axis = check_int("axis", axis)
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise ValueError(f"name must be None or an identifier (it names the stage's blocks), got {name!r}")
    require_bools("te_fft", schedule=schedule)
    target = _resolve_target(target)
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
    if kind == "c2r":  # (numpy's default: a default of no points names n, as numpy_api's functions do)
        n = check_length("n", n, 2 * (length - 1), f"2·(m - 1) for the m = {length} complex points along axis {axis}")
    elif n is None:
        n = length
    complex_dtype = {real: name for name, real in REAL_DTYPES.items()}[dtype]
    spec = FFTSpec(n, kind, direction, norm, complex_dtype, codelet_limit, radix_limit)
    n = spec.n
    expected = n // 2 + 1 if kind == "c2r" else n
    if length != expected:
        raise ValueError(f"the length of axis {axis} is {length}; a {kind} transform of n={n} needs {expected}")

    name = name or f"fft_{kind}{n}"
    passes = spec.passes()
    flat, batch_dims = _to_batch_last(x, axis, in_complex)
    batch = math.prod(batch_dims)
    if batch == 0:
        raise ValueError(f"x has shape {shape}: an axis other than axis {axis} has length 0, so there are no "
                         f"transforms to compute")
    input_layout, output_layout = spec.layouts(batch)
    if schedule and target.kind.name == "cuda":
        func = plan(n, batch, kind, spec.direction, norm, complex_dtype, target, codelet_limit=codelet_limit,
                    radix_limit=radix_limit).module["main"]
    else:
        lanes = choose_lanes(passes, dtype, batch)
        check_passes_indexable(n, passes, lanes)
        func = build_primfunc(passes, dtype, batch, lanes, input_layout, output_layout)
        if schedule:
            func = schedule_llvm(func, VECTOR_LANES[dtype]).mod["main"]
    # variables and buffers defined anew: the CUDA module is plan()'s cached one, and two stages of one plan in a
    # graph would define its scratch buffers and variables twice in one function
    func = s_tir.renew_defs(func)
    params = list(func.params)
    constants = _constant_placeholders(passes, dtype)
    stage_body = suffix_block_names(func.body, f"_{name}")

    def body(ins, outs):
        substitution = dict(zip(params, [ins[0], outs[0], *ins[1:]], strict=True))
        return tvm_ffi.structural_map(stage_body, (tvm.ir.Var, lambda v: substitution.get(v, v)), order="post")

    attrs = {field: getattr(spec, field) for field in _SPEC_FIELDS}
    y = te.extern([output_layout.shape(batch)], [flat, *constants], body, name=name,
                  dtype=dtype, tag=_STAGE_TAG, attrs=attrs)
    return _from_batch_last(y, axis, batch_dims, kind != "c2r")


def _constant_placeholders(passes: PassList, dtype: str) -> list[te.Tensor]:
    constants = []
    if passes.table_size:
        constants.append(te.placeholder((passes.table_size, 2), dtype, name="fft_tables"))
    if passes.index_size:
        constants.append(te.placeholder((passes.index_size,), "int32", name="fft_indices"))
    return constants


def _python_value(value):
    """An attribute of a TE stage (an FFI integer or string) as a Python int or str."""
    return int(value) if isinstance(value, (int, tvm.tirx.IntImm)) else str(value)


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
            spec = FFTSpec(**{name: _python_value(op.attrs[name]) for name in _SPEC_FIELDS})
            passes = spec.passes()
            tables, indices = passes.constants()
            dtype = str(op.output(0).dtype)
            values = ([tables.astype(dtype)] if passes.table_size else []) + \
                ([indices] if passes.index_size else [])
            found.extend(zip(list(op.input_tensors)[1:], values, strict=True))
        stack.extend(op.input_tensors)
    return found


def emit_fft(
    builder: relax.BlockBuilder,
    x: relax.Expr,
    n: int | None = None,
    kind: str = "c2c",
    direction: str = "forward",
    norm: str = "backward",
    axis: int = -1,
    target: Any = "llvm",
) -> relax.Var:
    """Emit the FFT of the Relax tensor `x` in the function `builder` is building; returns the bound result.

    `x` has a static shape and dtype float32 or float64 (complex data with a trailing 2, as for `te_fft`); `n`,
    `kind`, `direction`, `norm`, `axis` and `target` are `te_fft`'s. The stage is a PrimFunc added to the module
    (`fft_<kind><n>`), called with `x` and its constant tables (`relax.call_tir`). Build the module with
    `relax.build(mod, target, tir_pipeline=fft.lowering.register_pipeline(frozenset()))` on llvm (`plan()`'s
    contiguous complex accesses; TVM's default pipeline is correct without them), `fft.planner.CUDA_PIPELINE` on
    CUDA, and `PassContext(config={"tirx.disable_cse_tir": True})` as for `te_fft`.
    """
    if not isinstance(builder, relax.BlockBuilder):
        raise TypeError(f"builder must be a relax.BlockBuilder, got {type(builder).__name__}")
    if not isinstance(x, relax.Expr):
        raise TypeError(f"x must be a Relax expression, got {type(x).__name__}")
    # an expression not yet emitted (`relax.op.add(x, x)`) has its type deduced by normalizing it, as `emit` does
    x = builder.normalize(x)
    info = x.ty
    if not isinstance(info, relax.TensorType) or not isinstance(info.shape, relax.ShapeExpr):
        raise ValueError(f"x must be a Relax tensor of known shape, got {info}")
    placeholder = te.placeholder(_static_shape_of(info.shape.values), info.dtype, name="x")
    y = te_fft(placeholder, n=n, kind=kind, direction=direction, norm=norm, axis=axis, target=target)
    constants = te_fft_constants(y)
    func = te.create_prim_func([placeholder, *[c for c, _ in constants], y])
    pairs = ["fft_tables"] + [name for name, complex_data in (("x", kind != "r2c"), (y.op.name, kind != "c2r"))
                                if complex_data]
    function = builder.add_func(func.with_attr(PAIR_BUFFERS_ATTR, pairs).without_attr("global_symbol"),
                                _fft_stage(y).name)
    result = relax.TensorType([int(d) for d in y.shape], info.dtype)
    tables = [relax.const(value, str(value.dtype)) for _, value in constants]  # (float64 stays float64)
    return builder.emit(relax.call_tir(function, [x, *tables], result))


def _static_shape_of(values) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except TypeError:
        raise ValueError(f"x must have a static shape, got {list(values)}") from None


def _fft_stage(y: te.Tensor) -> te.ExternOp:
    """The FFT stage that computes `y` (itself, or the input of the stage moving its axis back)."""
    stack = [y]
    while stack:
        op = stack.pop().op
        if isinstance(op, te.ExternOp) and op.tag == _STAGE_TAG:
            return op
        stack.extend(op.input_tensors)
    raise AssertionError("te_fft returned no FFT stage")
