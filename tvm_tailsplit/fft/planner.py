"""plan(): compile an FFT operator once and call it on numpy arrays or TVM tensors; numpy-like functions.

Algorithm: parse and validate the request (size, kind, direction, norm, precision, batch, strides), choose
the breakdown of the complex transform (`factor.breakdown`), derive the passes over memory with their
codelets, twiddles and index maps (`passes.build_passes`), emit the TIR template (`template.build_primfunc`),
schedule it for the target (`schedule`) and compile it (on llvm with `lowering`'s pipeline: TVM's default one
plus contiguous vector access to interleaved complex data and hoisted scratch allocations). On CUDA, a plan
whose scratch fits in one thread block's shared memory is one kernel; beyond, it runs one kernel per pass
over memory, the passes exchanging data through global scratch (`multikernel`). Everything the caller needs
before the first call is read from the IR: `input_shape`, `output_shape` (the parameters' buffer shapes) and
`workspace_bytes` (the scratch allocations left after TVM's buffer compaction). Plans are cached by their parameters, so
`fft`, `ifft`, `rfft` and `irfft` (numpy's signatures and `norm` conventions) compile each shape once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir

from .factor import Breakdown, breakdown
from .formula import Formula, formula_of
from .lowering import register_pipeline
from .multikernel import schedule_cuda_multikernel
from .passes import PassList, build_passes
from .schedule import schedule_cuda, schedule_llvm
from .template import ExternalLayout, build_primfunc, lane_groups, physical_scratch_elements

__all__ = ["Plan", "fft", "ifft", "irfft", "plan", "rfft"]

KINDS = ("c2c", "r2c", "c2r")
DIRECTIONS = ("forward", "backward")
NORMS = ("backward", "ortho", "forward")
REAL_DTYPES = {"complex64": "float32", "complex128": "float64"}
# transforms per vector (one 128-bit register): measured faster than 8 or 16 lanes for every benchmarked size
# on AVX-512, where wider vectors make the gathers of the first pass and the codelets spill-bound
VECTOR_LANES = {"float32": 4, "float64": 2}
# Above this many bytes of scratch per lane group, a transform whose passes all have an innermost loop that is
# a multiple of the vector width runs one transform per group and vectorizes inside it (measured on AVX-512:
# n = 2048, 4096, 16384, 65536 gain 1.3x-1.9x; n = 1000 or Rader sizes, whose loops are not multiples, lose).
# Since the interleaved complex data of the first and last passes is read and written with contiguous vectors
# (`lowering`), this holds for any scratch size: 1 thread, 16 MiB batches, n = 64 8.5 -> 14.3 GFLOP/s,
# n = 1024 10.9 -> 12.3 (single-codelet plans have no scratch and keep the batch in the vector lanes).
INNER_VECTOR_SCRATCH = 0
# a lane group whose input (and output) is at most this many bytes prefetches the next group's (template)
PREFETCH_BYTES = 32 * 1024
# ... of the group at least this many bytes ahead
PREFETCH_DISTANCE = 2048
# a lane group's scratch is kept within this many bytes in any case
GROUP_SCRATCH_LIMIT = 4 * 1024 * 1024
CUDA_THREADS = 128
CUDA_STATIC_SHARED_LIMIT = 48 * 1024
# dynamic shared memory per thread block on sm_80 (sm_90 allows 227 KiB)
CUDA_SHARED_LIMIT = 163 * 1024


def _resolve_target(target: Any) -> tvm.target.Target:
    if isinstance(target, tvm.target.Target):
        return target
    if target == "llvm":
        return tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
    if target == "cuda":
        return tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    if isinstance(target, dict):
        return tvm.target.Target(target)
    raise ValueError(f"target must be 'llvm', 'cuda', a dict or a tvm.target.Target, got {target!r}")


def _norm_scale(n: int, norm: str, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "backward") == inverse:
        return 1.0 / n
    return 1.0


class Plan:
    """A compiled FFT operator; build it with `plan(...)`."""

    def __init__(self, n: int, batch: int, kind: str, direction: str, norm: str, dtype: str, target: Any,
                 istride: int, idist: int | None, ostride: int, odist: int | None, codelet_limit: int,
                 radix_limit: int) -> None:
        _check_int("n", n, 1)
        _check_int("batch", batch, 1)
        _check_int("codelet_limit", codelet_limit, 2)
        _check_int("radix_limit", radix_limit, 2)
        if radix_limit > codelet_limit:
            raise ValueError(f"radix_limit must be at most codelet_limit={codelet_limit}, got {radix_limit}")
        _check_choice("kind", kind, KINDS)
        _check_choice("direction", direction, DIRECTIONS)
        _check_choice("norm", norm, NORMS)
        _check_choice("dtype", dtype, tuple(REAL_DTYPES))
        if kind == "r2c" and direction != "forward":
            raise ValueError("direction must be 'forward' for kind='r2c' (the inverse is kind='c2r')")
        if kind == "c2r" and direction != "backward":
            raise ValueError("direction must be 'backward' for kind='c2r' (the forward is kind='r2c')")
        self.n, self.batch, self.kind, self.direction, self.norm = n, batch, kind, direction, norm
        self.dtype, self.real_dtype = dtype, REAL_DTYPES[dtype]
        self.target = _resolve_target(target)
        self.codelet_limit, self.radix_limit = codelet_limit, radix_limit
        inverse = direction == "backward"
        self.sign = 1 if inverse else -1
        self.scale = _norm_scale(n, norm, inverse)

        half = n // 2 + 1
        in_kind, in_elements = {"c2c": ("complex", n), "c2r": ("complex", half),
                                "r2c": ("real_pairs" if n % 2 == 0 else "real", n)}[kind]
        out_kind, out_elements = {"c2c": ("complex", n), "r2c": ("complex", half),
                                  "c2r": ("real_pairs" if n % 2 == 0 else "real", n)}[kind]
        _check_int("istride", istride, 1)
        _check_int("ostride", ostride, 1)
        idist = in_elements * istride if idist is None else idist
        odist = out_elements * ostride if odist is None else odist
        _check_int("idist", idist, 1)
        _check_int("odist", odist, 1)
        if in_kind == "real_pairs" and istride != 1:
            raise ValueError(f"istride must be 1 for an r2c plan of even n, got {istride}")
        if out_kind == "real_pairs" and ostride != 1:
            raise ValueError(f"ostride must be 1 for a c2r plan of even n, got {ostride}")
        self.input_layout = ExternalLayout(in_kind, in_elements, idist, istride)
        self.output_layout = ExternalLayout(out_kind, out_elements, odist, ostride)

        self.complex_size = n // 2 if kind != "c2c" and n % 2 == 0 else n
        self.tree: Breakdown = breakdown(self.complex_size, codelet_limit, radix_limit)
        self.formula: Formula = formula_of(self.tree)
        self.passes: PassList = build_passes(kind, n, self.sign, self.scale,
                                             lambda size: breakdown(size, codelet_limit, radix_limit))
        self.is_cuda = self.target.kind.name == "cuda"
        self.lanes = 1 if self.is_cuda else choose_lanes(self.passes, self.real_dtype, batch)
        scratch_bytes = 2 * np.dtype(self.real_dtype).itemsize * self.lanes * physical_scratch_elements(self.passes)
        scope = "global"
        # a CUDA plan whose scratch does not fit in one thread block's shared memory runs one kernel per pass
        self.kernels = 1
        if self.is_cuda:
            if scratch_bytes > CUDA_SHARED_LIMIT:
                self.kernels = len(self.passes.passes)
            else:
                scope = "shared" if scratch_bytes <= CUDA_STATIC_SHARED_LIMIT else "shared.dyn"
        func = build_primfunc(self.passes, self.real_dtype, batch, self.lanes, self.input_layout,
                              self.output_layout, scratch_scope=scope, kernel_per_pass=self.kernels > 1,
                              prefetch_bytes=0 if self.is_cuda else PREFETCH_BYTES,
                              prefetch_distance=PREFETCH_DISTANCE, loop_orders=not self.is_cuda)
        self.template = func
        if self.kernels > 1:
            self.schedule = schedule_cuda_multikernel(func, CUDA_THREADS)
        elif self.is_cuda:
            self.schedule = schedule_cuda(func, CUDA_THREADS, whole_rounds=scope == "shared.dyn")
        else:
            self.schedule = schedule_llvm(func, VECTOR_LANES[self.real_dtype], scratch_bytes)
        self.module: tvm.IRModule = self.schedule.mod
        self.executable = None if self.is_cuda else _compile(self.module, self.target, self._pair_buffers())
        # looking a function up in the executable costs more than running a small transform: do it once
        self._function = None if self.is_cuda else self.executable["main"]
        tables, indices = self.passes.constants()
        self._constants = []
        if self.passes.table_size:
            self._constants.append(tables.astype(self.real_dtype))
        if self.passes.index_size:
            self._constants.append(indices)
        self._device_constants: dict[str, list] = {}

    def _pair_buffers(self) -> frozenset[str]:
        """Buffers whose complex pairs start at even float offsets (see `lowering`)."""
        names = {"tables"}
        for name, layout in (("input", self.input_layout), ("output", self.output_layout)):
            if layout.kind == "complex" or (layout.kind == "real_pairs" and layout.distance % 2 == 0):
                names.add(name)
        return frozenset(names)

    # ---- shapes and memory, read from the IR -------------------------------------------------------------
    def _param_shape(self, index: int) -> tuple[int, ...]:
        return tuple(int(d) for d in self.module["main"].params[index].shape)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of the input as a float array (complex data has a trailing dimension of 2)."""
        return self._param_shape(0)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the output as a float array (complex data has a trailing dimension of 2)."""
        return self._param_shape(1)

    @functools.cached_property
    def workspace_bytes(self) -> int:
        """Scratch bytes of one lane group (one thread on llvm, one thread block's shared memory on CUDA), or
        of the whole batch for a multi-kernel CUDA plan (global memory shared by its kernels), summed over
        the allocations that remain after TVM plans and compacts the buffers."""
        lowered = tvm.transform.Sequential([
            s_tir.transform.LowerInitBlock(),
            s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
            s_tir.transform.ConvertBlocksToOpaque(),
            s_tir.transform.CompactBufferAllocation(),
        ])(self.module)
        # the lane-group variants (full groups, tail group) run one after the other: take the larger one
        per_block: list[int] = []

        def on_block(block):
            per_block.append(sum(math.prod(int(d) for d in buffer.shape) * np.dtype(buffer.dtype).itemsize
                                 for buffer in block.alloc_buffers))

        tvm_ffi.structural_walk(lowered["main"].body, (s_tir.SBlock, on_block))
        return max(per_block, default=0)

    @property
    def table_bytes(self) -> int:
        """Bytes of the constant tables (twiddles, kernels, permutations) passed to the operator."""
        return sum(c.nbytes for c in self._constants)

    # ---- CUDA ---------------------------------------------------------------------------------------------
    def cuda_source(self, arch: str = "sm_80") -> str:
        """CUDA C++ generated by TVM for this plan (requires a plan made with target='cuda')."""
        from ..cuda import cuda_source

        if not self.is_cuda:
            raise ValueError("cuda_source needs a plan made with target='cuda'")
        with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
            return cuda_source(self.module, arch)

    # ---- calling ------------------------------------------------------------------------------------------
    def _as_float_view(self, name: str, array: np.ndarray, layout: ExternalLayout) -> np.ndarray:
        real = np.dtype(self.real_dtype)
        expected = layout.shape(self.batch)
        as_floats = array.dtype == real and array.shape == expected
        as_complex = layout.kind == "complex" and array.dtype == np.dtype(self.dtype) and array.shape == expected[:-1]
        if layout.is_compact() and array.flags.c_contiguous and (as_floats or as_complex):
            # the common case, without the stride checks: a contiguous array of the right size
            return array.view(real).reshape(expected)
        if layout.kind == "complex":
            if array.dtype == np.dtype(self.dtype):
                if array.ndim == 1 and self.batch == 1:
                    array = array[np.newaxis]
                array = np.lib.stride_tricks.as_strided(array.real, array.shape + (2,),
                                                        array.strides + (real.itemsize,))
            elif array.dtype != real:
                raise ValueError(f"{name} must be {self.dtype} (or {self.real_dtype} with a trailing dimension "
                                 f"of 2), got {array.dtype}")
        else:
            if array.dtype != real:
                raise ValueError(f"{name} must be {self.real_dtype} for a {self.kind} plan, got {array.dtype}")
            if array.ndim == 1 and self.batch == 1:
                array = array[np.newaxis]
        if array.shape != expected:
            raise ValueError(f"{name} has shape {array.shape}, the plan expects {expected}")
        strides = tuple(s // real.itemsize for s in array.strides)
        if any(s % real.itemsize for s in array.strides) or (strides[1:] != layout.strides()[1:]) or \
                (self.batch > 1 and strides[0] != layout.strides()[0]):
            raise ValueError(f"{name} has element strides {strides}, the plan expects {layout.strides()}; "
                             f"make a plan with matching istride/idist/ostride/odist")
        if self.batch == 1 and strides[0] != layout.strides()[0]:
            array = np.lib.stride_tricks.as_strided(array, strides=(layout.strides()[0] * real.itemsize,)
                                                    + array.strides[1:])
        return array

    def _allocate_output(self) -> tuple[np.ndarray, np.ndarray]:
        """(result returned to the caller, float view passed to the operator) of a fresh output."""
        layout = self.output_layout
        shape = layout.shape(self.batch)
        strides = layout.strides()
        if layout.kind == "complex":
            span = 1 + sum((d - 1) * s for d, s in zip(shape[:2], layout.strides()[:2], strict=True)) // 2
            storage = np.empty(span, self.dtype)
            step = storage.itemsize // 2
            result = np.lib.stride_tricks.as_strided(storage, shape[:2], tuple(s * step for s in strides[:2]))
            return result, np.lib.stride_tricks.as_strided(result.real, shape, result.strides + (step,))
        span = 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
        storage = np.empty(span, self.real_dtype)
        result = np.lib.stride_tricks.as_strided(storage, shape, tuple(s * storage.itemsize for s in strides))
        return result, result

    def _wrap(self, array: np.ndarray) -> tvm.runtime.Tensor:
        return tvm_ffi.from_dlpack(array, require_alignment=0, require_contiguous=False)

    def __call__(self, x: Any, out: Any = None) -> Any:
        """Run the operator. `x` is a numpy array (complex, or float with a trailing 2) or a TVM tensor.

        Returns `out`, allocated when None: a complex numpy array for complex output, a float array for real
        output, or a TVM tensor when `x` is a TVM tensor. `out` may be `x` itself (in-place c2c).
        """
        if self.is_cuda:
            return self._call_cuda(x, out)
        if isinstance(x, tvm.runtime.Tensor):
            if out is None:
                out = tvm.runtime.empty(self.output_shape, self.real_dtype, x.device)
            self._function(x, out, *self._constant_tensors())
            return out
        x_view = self._as_float_view("x", np.asarray(x), self.input_layout)
        if out is None:
            result, out_view = self._allocate_output()
        else:
            result, out_view = out, self._as_float_view("out", out, self.output_layout)
        self._function(self._wrap(x_view), self._wrap(out_view), *self._constant_tensors())
        return result

    def _constant_tensors(self, device: str = "cpu") -> list:
        if device not in self._device_constants:
            dev = tvm.cpu(0) if device == "cpu" else tvm.cuda(0)
            self._device_constants[device] = [tvm.runtime.tensor(c, dev) for c in self._constants]
        return self._device_constants[device]

    def _call_cuda(self, x: Any, out: Any) -> Any:
        executable = self._cuda_executable()
        dev = tvm.cuda(0)
        x_tensor = x if isinstance(x, tvm.runtime.Tensor) else tvm.runtime.tensor(
            np.ascontiguousarray(self._as_float_view("x", np.asarray(x), self.input_layout)), dev)
        out_tensor = tvm.runtime.empty(self.output_shape, self.real_dtype, dev) if out is None else out
        executable["main"](x_tensor, out_tensor, *self._constant_tensors("cuda"))
        if isinstance(x, tvm.runtime.Tensor):
            return out_tensor
        result = out_tensor.numpy()
        if self.output_layout.kind == "complex":
            return result.view(self.dtype)[..., 0]
        return result

    @functools.cache  # noqa: B019 - one executable per plan, plans live in the plan cache
    def _cuda_executable(self):
        return _compile(self.module, self.target)

    # ---- description ----------------------------------------------------------------------------------
    def codelets(self) -> list[tuple[int, int]]:
        """The (size, sign) of every distinct codelet the passes run."""
        return sorted({p.codelet for p in self.passes.passes if p.codelet is not None})

    def describe(self) -> str:
        """The factorization, the formula, the passes over memory and the codelets of this plan."""
        from .codelet import derive_codelet
        from .factor import prime_factors

        factors = " · ".join(map(str, prime_factors(self.complex_size))) or "1"
        lines = [
            f"FFT plan: kind={self.kind} n={self.n} batch={self.batch} direction={self.direction} "
            f"norm={self.norm} dtype={self.dtype} target={self.target.kind.name}",
            f"complex transform size {self.complex_size} = {factors}",
            f"breakdown: {self.tree}",
            f"formula: {self.formula}",
            f"input {self.input_shape} {self.input_layout}",
            f"output {self.output_shape} {self.output_layout}",
            f"lanes per group: {self.lanes}; groups: "
            + ", ".join(f"{name} {groups}x{width}" for name, _, groups, width in lane_groups(self.batch,
                                                                                          self.lanes)),
            f"workspace: {self.workspace_bytes} bytes "
            + ("of global memory for all groups" if self.kernels > 1 else "per group")
            + f"; constant tables: {self.table_bytes} bytes",
        ]
        if self.is_cuda:
            lines.append(f"CUDA kernels: {self.kernels}" + (" (one per pass over memory, scratch in global memory)"
                                                            if self.kernels > 1 else " (scratch in shared memory)"))
        lines.append(f"passes over memory ({len(self.passes.passes)}):")
        for index, p in enumerate(self.passes.passes):
            lines.append(f"  {index}. {p.name} loops {list(p.loops)}: {p.text}")
        lines.append("codelets:")
        for size, sign in self.codelets():
            codelet = derive_codelet(size, sign)
            lines.append(f"  DFT_{size} sign {sign:+d}: {codelet.operation_counts()} formula {codelet.formula}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"Plan(n={self.n}, batch={self.batch}, kind={self.kind!r}, direction={self.direction!r}, "
                f"norm={self.norm!r}, dtype={self.dtype!r}, target={self.target.kind.name!r})")


def _compile(module: tvm.IRModule, target: tvm.target.Target, pair_buffers: frozenset[str] = frozenset()):
    """tvm.compile without TIR's common-subexpression pass: codelets arrive with their CSE done, and the
    pass is quadratic in the size of a straight-line block (most of the compile time of a 31-point codelet).
    On llvm, strided accesses to interleaved complex data become contiguous loads and stores with shuffles
    (`lowering`)."""
    pipeline = register_pipeline(pair_buffers) if target.kind.name == "llvm" else "default"
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        return tvm.compile(module, target=target, tir_pipeline=pipeline)


def choose_lanes(passes: PassList, real_dtype: str, batch: int) -> int:
    """Transforms per lane group on llvm: a vector's width of the batch, or one transform vectorized inside
    when the scratch is large and every pass's innermost loop is a multiple of the vector width."""
    itemsize = np.dtype(real_dtype).itemsize
    per_lane = 2 * itemsize * physical_scratch_elements(passes)
    width = VECTOR_LANES[real_dtype]
    lanes = min(width, batch)
    inner_loops = [p.loops[-1 if p.loop_order is None else p.loop_order[-1]] for p in passes.passes if p.loops]
    if per_lane * lanes > INNER_VECTOR_SCRATCH and all(extent % width == 0 for extent in inner_loops):
        return 1
    while lanes > 1 and per_lane * lanes > GROUP_SCRATCH_LIMIT:
        lanes //= 2
    return lanes


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _target_key(target: Any) -> Any:
    if isinstance(target, dict):
        return tuple(sorted(target.items()))
    if isinstance(target, tvm.target.Target):
        return str(target)
    return target


@functools.lru_cache(maxsize=256)
def _cached_plan(n, batch, kind, direction, norm, dtype, target_key, target, istride, idist, ostride, odist,
                 codelet_limit, radix_limit) -> Plan:
    return Plan(n, batch, kind, direction, norm, dtype, target, istride, idist, ostride, odist, codelet_limit,
                radix_limit)


def plan(
    n: int,
    batch: int = 1,
    kind: str = "c2c",
    direction: str = "forward",
    norm: str = "backward",
    dtype: str = "complex64",
    target: Any = "llvm",
    *,
    istride: int = 1,
    idist: int | None = None,
    ostride: int = 1,
    odist: int | None = None,
    codelet_limit: int = 32,
    radix_limit: int = 8,
) -> Plan:
    """Compile (once; plans are cached by their parameters) an FFT operator for `batch` transforms of size n.

    kind: "c2c", "r2c" (forward only) or "c2r" (backward only); norm: numpy's "backward", "ortho", "forward";
    dtype: "complex64" or "complex128" (r2c/c2r use the matching float type for the real side); target:
    "llvm" (the host CPU), "cuda" (sm_80) or a target dict. istride/idist and ostride/odist are the steps
    between elements and between transforms of the input and output, in elements (complex or real).
    codelet_limit: the largest DFT computed by one codelet; radix_limit: the largest radix of a pass of a
    larger transform (see `factor`).
    """
    if kind == "c2r" and direction == "forward":
        direction = "backward"
    return _cached_plan(n, batch, kind, direction, norm, dtype, _target_key(target), target, istride, idist,
                        ostride, odist, codelet_limit, radix_limit)


def _complex_dtype(array: np.ndarray) -> str:
    return "complex64" if array.dtype in (np.complex64, np.float32) else "complex128"


def _resize(array: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Crop or zero-pad `array` along `axis` to `size` (numpy's `n` argument)."""
    current = array.shape[axis]
    if current == size:
        return array
    if current > size:
        return array.take(np.arange(size), axis=axis)
    padding = [(0, 0)] * array.ndim
    padding[axis] = (0, size - current)
    return np.pad(array, padding)


def _run_along_axis(array: np.ndarray, axis: int, make_plan) -> np.ndarray:
    """Move `axis` last, express the other axes as one batch stride when possible (no copy), run the plan."""
    moved = np.moveaxis(array, axis, -1)
    batch_shape, length = moved.shape[:-1], moved.shape[-1]
    batch = math.prod(batch_shape)
    try:
        flat = moved.reshape((batch, length), copy=False)
    except ValueError:
        flat = np.ascontiguousarray(moved).reshape(batch, length)
    if any(s <= 0 or s % flat.itemsize for s in flat.strides[1:]) or (batch > 1 and flat.strides[0] <= 0):
        flat = np.ascontiguousarray(flat)
    stride = flat.strides[1] // flat.itemsize
    distance = flat.strides[0] // flat.itemsize if batch > 1 else stride * length
    result = make_plan(batch, stride, distance)(flat)
    return np.moveaxis(result.reshape(batch_shape + result.shape[-1:]), -1, axis)


def _check_axis(a: np.ndarray, axis: int) -> int:
    if a.ndim == 0:
        raise ValueError("a must have at least one dimension")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {a.ndim}")
    return axis % a.ndim


def _c2c(a, n, axis, norm, direction) -> np.ndarray:
    a = np.asarray(a)
    axis = _check_axis(a, axis)
    dtype = _complex_dtype(a)
    a = a.astype(dtype, copy=False)
    size = a.shape[axis] if n is None else n
    _check_int("n", size, 1)
    a = _resize(a, size, axis)
    if a.size == 0:
        return np.zeros(a.shape, dtype)
    return _run_along_axis(a, axis, lambda batch, stride, distance: plan(
        size, batch, "c2c", direction, norm or "backward", dtype, istride=stride, idist=distance))


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.fft on a cached plan (complex64 stays complex64; other inputs compute in complex128)."""
    return _c2c(a, n, axis, norm, "forward")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.ifft on a cached plan."""
    return _c2c(a, n, axis, norm, "backward")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.rfft on a cached plan (float32 input gives complex64, other real input complex128)."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        raise ValueError(f"a must be real for rfft, got {a.dtype}")
    axis = _check_axis(a, axis)
    dtype = _complex_dtype(a)
    a = a.astype(REAL_DTYPES[dtype], copy=False)
    size = a.shape[axis] if n is None else n
    _check_int("n", size, 1)
    a = _resize(a, size, axis)
    if a.size == 0:
        return np.zeros(a.shape[:axis] + (size // 2 + 1,) + a.shape[axis + 1:], dtype)
    if size % 2 == 0:
        a = _contiguous_along(a, axis)
    return _run_along_axis(a, axis, lambda batch, stride, distance: plan(
        size, batch, "r2c", "forward", norm or "backward", dtype, istride=stride, idist=distance))


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.irfft on a cached plan: the output has n = 2·(m - 1) real points unless n is given."""
    a = np.asarray(a)
    axis = _check_axis(a, axis)
    dtype = _complex_dtype(a)
    a = a.astype(dtype, copy=False)
    size = 2 * (a.shape[axis] - 1) if n is None else n
    _check_int("n", size, 1)
    a = _resize(a, size // 2 + 1, axis)
    if a.size == 0:
        return np.zeros(a.shape[:axis] + (size,) + a.shape[axis + 1:], REAL_DTYPES[dtype])
    return _run_along_axis(a, axis, lambda batch, stride, distance: plan(
        size, batch, "c2r", "backward", norm or "backward", dtype, istride=stride, idist=distance))


def _contiguous_along(a: np.ndarray, axis: int) -> np.ndarray:
    """Even-size r2c reads real pairs: the transform axis must have unit stride (copy if it has not)."""
    if a.strides[axis] == a.itemsize:
        return a
    return np.moveaxis(np.ascontiguousarray(np.moveaxis(a, axis, -1)), -1, axis)
