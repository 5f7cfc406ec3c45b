"""Helpers for tests and benchmarks that run generated code on llvm.

`guarded_array` embeds an array in a larger 64-byte-aligned allocation filled with canary values, so that a
compiled function writing outside its buffer is caught (TVM 0.27's `instrument_bound_checkers` checks nothing
in the default pipeline). `page_guarded_array` catches reads: the array ends at an unreadable page, so a
function reading past its end (a load whose extra lanes are never used changes no result) faults; run it in a
child process. Pass `to_tvm(view)` to the compiled function (zero-copy through DLPack) and call
`GuardedArray.check_canaries()` after every call. `guarded_device_tensor` does the same in a device's memory (a
GPU's): the view's DLPack data pointer is moved past the leading canaries (TVM's kernels refuse a tensor whose
`byte_offset` is not 0, which is what `Tensor._create_view` would give). `dispatched_labels` reads which cases of
an `ir_utils.dispatch_by_intervals` function run for a value of its variable; `host_after_packed_api`,
`host_launches` and `host_values` read the host code TVM lowers a CUDA module to (its kernel launches under each
condition, and the integers it computes and passes to the kernels).
"""

from __future__ import annotations

import ctypes
import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import tvm
import tvm_ffi

from .ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation, launched_extent, map_loops, substitute, with_loop

__all__ = [
    "GuardedArray",
    "GuardedDeviceTensor",
    "assert_same_results",
    "default_canary",
    "guarded_array",
    "guarded_device_tensor",
    "page_guarded_array",
    "random_like",
    "run_guarded",
    "run_with_guarded_output",
    "cuda_schedule_for_llvm",
    "dispatched_labels",
    "evaluate",
    "host_after_packed_api",
    "host_launches",
    "host_values",
    "grids_as_launched",
    "threads_as_serial_loops",
    "to_tvm",
]

_ALIGNMENT = 64
# Guard bytes around an empty buffer: a kernel run at size 0 writes whole tiles past it when it writes at all.
_EMPTY_GUARD_BYTES = 4096


def _values(array: np.ndarray) -> np.ndarray:
    """`array` as the values its canaries are written and compared in: its bytes for bool (whose canary is a byte
    that is neither False nor True), else itself."""
    return array.view(np.uint8) if array.dtype == np.bool_ else array


def _check_guards(whole: np.ndarray, guard_elements: int, size: int, canary: float | int, what: str) -> None:
    """Raise `AssertionError` naming `what` if an element of the guards around ``whole``'s middle ``size``
    elements differs from ``canary``."""
    for side, region in (("before", whole[:guard_elements]), ("after", whole[guard_elements + size :])):
        bad = _values(region) != canary
        if bad.any():
            raise AssertionError(f"out-of-bounds write {side} {what}: {int(bad.sum())} canary elements changed")


@dataclass
class GuardedArray:
    """A numpy view (`array`) surrounded by canary bytes inside `whole`."""

    whole: np.ndarray
    array: np.ndarray
    guard_elements: int
    canary: float | int

    def check_canaries(self, what: str = "buffer") -> None:
        """Raise `AssertionError` naming `what` if anything outside the view was written."""
        _check_guards(self.whole, self.guard_elements, self.array.size, self.canary, what)

    def numpy(self, what: str = "buffer") -> np.ndarray:
        """A copy of the view's values; raises `AssertionError` naming `what` if anything outside the view was
        written (as `GuardedDeviceTensor.numpy`)."""
        self.check_canaries(what)
        return self.array.copy()


def default_canary(dtype: str) -> float | int:
    """A canary value the dtype can hold and random test data (``random_like``, within ±100) never takes:
    the largest value of unsigned integers, the smallest of 8-bit signed ones, -12345 otherwise; for bool the
    byte 255 (neither False nor True: bool guards are written and compared as bytes)."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        return 255
    if kind == "u":
        return int(np.iinfo(dtype).max)
    if kind == "i" and np.iinfo(dtype).max < 12345:
        return int(np.iinfo(dtype).min)
    return -12345


def guarded_array(
    shape: tuple[int, ...], dtype: str, canary: float | int | None = None, guard_bytes: int = 256
) -> GuardedArray:
    """Allocate an array of `shape` whose surroundings (`guard_bytes` on each side, a multiple of 64) hold `canary`
    (default: ``default_canary(dtype)``); the view starts 64-byte aligned."""
    if canary is None:
        canary = default_canary(dtype)
    if guard_bytes % _ALIGNMENT:
        raise ValueError(f"guard_bytes must be a multiple of {_ALIGNMENT}, got {guard_bytes}")
    item_size = np.dtype(dtype).itemsize
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * item_size + 2 * guard_bytes + _ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % _ALIGNMENT + guard_bytes
    whole = raw[start - guard_bytes : start + count * item_size + guard_bytes].view(dtype)
    _values(whole)[:] = canary
    view = raw[start : start + count * item_size].view(dtype).reshape(shape)
    return GuardedArray(whole=whole, array=view, guard_elements=guard_bytes // item_size, canary=canary)


def page_guarded_array(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A zeroed array of `shape` and `dtype` whose memory ends where an unreadable, unwritable page begins: a
    compiled function that reads (or writes) past its end faults (SIGSEGV, which ends the process: run such a check
    in a child process). TVM needs a 64-byte-aligned start, so the end abuts the page exactly when the size is a
    multiple of 64 bytes; otherwise an access faults from ``(-size) % 64`` bytes past the end. The mapping lives as
    long as the array (its ``base``). POSIX only (``mprotect``)."""
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    page = mmap.PAGESIZE
    pages = -(-size // page) + 1
    mapping = mmap.mmap(-1, (pages + 1) * page)
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(address + pages * page, page, 0) != 0:  # PROT_NONE
        raise OSError(ctypes.get_errno(), "page_guarded_array: mprotect of the guard page failed")
    start = (pages * page - size) // _ALIGNMENT * _ALIGNMENT
    return np.frombuffer(mapping, np.uint8)[start : start + size].view(dtype).reshape(shape)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # DLPack's DLTensor (the head of a "dltensor" capsule's DLManagedTensor)
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


@dataclass
class GuardedDeviceTensor:
    """A device tensor (`tensor`, pass it to the kernel) inside `whole`, a flat device allocation whose
    `guard_elements` first and last elements hold `canary`."""

    whole: tvm.runtime.Tensor
    tensor: tvm.runtime.Tensor
    guard_elements: int
    canary: float | int
    _shape: object = field(repr=False, default=None)  # the view's DLPack shape array, alive as long as the view

    def numpy(self, what: str = "buffer") -> np.ndarray:
        """The view's values; raises `AssertionError` naming `what` if anything outside the view was written."""
        whole = self.whole.numpy()
        size = int(np.prod(self.tensor.shape, dtype=np.int64))
        _check_guards(whole, self.guard_elements, size, self.canary, what)
        return whole[self.guard_elements : self.guard_elements + size].reshape(self.tensor.shape)


def guarded_device_tensor(shape: tuple[int, ...], dtype: str, device: tvm.runtime.Device,
                          canary: float | int | None = None, guard_bytes: int = 256) -> GuardedDeviceTensor:
    """A tensor of `shape` on `device`, surrounded by `guard_bytes` of `canary` (default
    ``default_canary(dtype)``) on each side; it starts `guard_bytes` after the allocation (keep that a multiple
    of the kernel's alignment)."""
    if canary is None:
        canary = default_canary(dtype)
    guard = guard_bytes // np.dtype(dtype).itemsize
    count = int(np.prod(shape, dtype=np.int64))
    initial = np.empty(count + 2 * guard, dtype)
    _values(initial)[:] = canary
    whole = tvm.runtime.tensor(initial, device)
    capsule = whole.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    head = _DLTensor.from_address(get_pointer(capsule, b"dltensor"))
    dims = (ctypes.c_int64 * len(shape))(*shape)
    head.data += guard_bytes
    head.ndim = len(shape)
    head.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    head.strides = None
    return GuardedDeviceTensor(whole, tvm.runtime.from_dlpack(capsule), guard, canary, dims)


def to_tvm(array: np.ndarray) -> tvm.runtime.Tensor:
    """Wrap a numpy array as a TVM tensor without copying (the data must be 64-byte aligned)."""
    return tvm.runtime.from_dlpack(array)


def _buffer_params(func: tvm.tirx.PrimFunc) -> list:
    return [p for p in func.params if not isinstance(p.ty, tvm.ir.PrimType)]


def _concrete_shape(buffer, scalar_args: dict) -> tuple[int, ...]:
    analyzer = tvm.sym.Analyzer()
    shape = []
    for dim in buffer.shape:

        def value_of(var):
            if var.name in scalar_args and isinstance(var.ty, tvm.ir.PrimType):
                return tvm.tirx.const(int(scalar_args[var.name]), var.ty.dtype)
            return var

        concrete = analyzer.simplify(tvm_ffi.structural_map(dim, (tvm.ir.Var, value_of), order="post"))
        if not isinstance(concrete, tvm.tirx.IntImm):
            raise ValueError(f"buffer {buffer.name} has dimension {dim}: give its variables values in scalar_args")
        shape.append(max(int(concrete.value), 0))
    return tuple(shape)


def random_like(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random data of a dtype and `shape` from the generator `rng`: floats in [-1, 1), integers in a small range,
    bools."""
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1, 1, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dtype)


def run_guarded(
    executable, func: tvm.tirx.PrimFunc, inputs: list[np.ndarray], scalar_args: dict, func_name: str = "main"
) -> list[np.ndarray]:
    """Run function ``func_name`` of ``executable`` (``func`` compiled) on canary-guarded copies of ``inputs`` (one
    per buffer parameter of ``func``, in order) and return every buffer afterwards.

    Scalar parameters are taken from ``scalar_args`` by name. Raises ``AssertionError`` naming the buffer
    when the function wrote outside it.
    """
    guarded: list[tuple[GuardedArray | GuardedDeviceTensor, str]] = []
    arguments = []
    buffers = iter(inputs)
    for param in func.params:
        if isinstance(param.ty, tvm.ir.PrimType):
            if param.name not in scalar_args:  # (a bare KeyError: 'm')
                raise ValueError(f"scalar_args gives no value for the scalar parameter {param.name!r} of function "
                                 f"{func_name} (it gives {sorted(scalar_args)})")
            arguments.append(scalar_args[param.name])
            continue
        data = next(buffers)
        if data.size == 0:  # numpy gives empty views no aligned data pointer: a guarded TVM tensor instead
            holder = guarded_device_tensor(data.shape, str(data.dtype), tvm.cpu(), guard_bytes=_EMPTY_GUARD_BYTES)
            arguments.append(holder.tensor)
        else:
            holder = guarded_array(data.shape, str(data.dtype))
            holder.array[...] = data
            arguments.append(to_tvm(holder.array))
        guarded.append((holder, f"buffer {param.name}"))
    executable[func_name](*arguments)
    return [holder.numpy(what) for holder, what in guarded]


def assert_same_results(
    before: tvm.IRModule,
    after: tvm.IRModule,
    scalar_args: dict | None = None,
    trials: int = 2,
    seed: int = 0,
    func_name: str = "main",
    target: str = "llvm",
    executables: tuple | None = None,
) -> None:
    """Compile `before` and `after` for `target` (llvm) and check that every buffer of function `func_name` ends
    equal, on random data (outputs start equal too, so an element one version fails to write is caught) and with
    canaries around every buffer, in `trials` runs drawn from `seed` (a write outside a buffer is an
    ``AssertionError`` naming the module that wrote it, ``'before'`` or ``'after'``). Marks are removed before
    compiling (they only name instructions). `scalar_args` gives the scalar parameters (and the symbolic shapes)
    by name; `executables`: the two modules already compiled, as a pair (then they are not compiled again)."""
    scalar_args = dict(scalar_args or {})
    built_before, built_after = executables or (
        tvm.compile(drop_loop_annotation(before, EMIT_INSN_PRAGMA), target=target),
        tvm.compile(drop_loop_annotation(after, EMIT_INSN_PRAGMA), target=target),
    )
    func = before[func_name]
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        inputs = [random_like(b.dtype, _concrete_shape(b, scalar_args), rng) for b in _buffer_params(func)]
        expected = _run_named(built_before, func, inputs, scalar_args, func_name, "before", trial)
        actual = _run_named(built_after, after[func_name], inputs, scalar_args, func_name, "after", trial)
        for param, want, got in zip(_buffer_params(func), expected, actual, strict=True):
            np.testing.assert_array_equal(
                got, want, err_msg=f"buffer {param.name} differs (trial {trial}, scalars {scalar_args})"
            )


def _run_named(executable, func: tvm.tirx.PrimFunc, inputs: list[np.ndarray], scalar_args: dict, func_name: str,
               which: str, trial: int) -> list[np.ndarray]:
    """``run_guarded``, its out-of-bounds error naming the module that wrote (``which``: before or after), the trial
    and the scalars."""
    try:
        return run_guarded(executable, func, inputs, scalar_args, func_name)
    except AssertionError as error:
        raise AssertionError(f"module {which!r} (function {func_name}): {error} (trial {trial}, scalars "
                             f"{scalar_args})") from error


def threads_as_serial_loops(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with every thread-bound loop turned into a serial loop, so that a GPU schedule's
    meaning can be checked on llvm (each thread's work runs one after the other)."""

    def unbind(loop: tvm.tirx.For) -> tvm.tirx.For:
        if loop.kind != tvm.tirx.ForKind.THREAD_BINDING:
            return loop
        return with_loop(loop, kind=tvm.tirx.ForKind.SERIAL, thread_binding=None)

    return map_loops(mod, unbind)


def grids_as_launched(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every ``blockIdx`` / ``threadIdx`` loop running at least once, as TVM's CUDA
    runtime launches a kernel: an extent of 0 (a symbolic one evaluated to 0) launches as 1
    (``ir_utils.launched_extent``).
    Apply before ``threads_as_serial_loops`` / ``cuda_schedule_for_llvm`` to check a kernel at such a size."""

    def launched(loop: tvm.tirx.For) -> tvm.tirx.For:
        extent = launched_extent(loop)
        return loop if extent.same_as(loop.extent) else with_loop(loop, extent=extent)

    return map_loops(mod, launched)


SHARED_SCOPES = ("shared", "shared.dyn")


def cuda_schedule_for_llvm(mod: tvm.IRModule, scopes: tuple[str, ...] = SHARED_SCOPES) -> tvm.IRModule:
    """A scheduled CUDA module `mod` made runnable on llvm with the same meaning: thread-bound loops become serial
    loops (`threads_as_serial_loops`), shared-memory buffers global ones (one per block, as the block loop is
    serial) and the thread-block barriers (`tvm_storage_sync`) nothing. Exact for kernels whose barriers separate
    phases (every thread's work of a phase runs before the next phase); a barrier inside a thread's loop would
    be a sign of a schedule this does not model. `scopes` names the buffer scopes made global: add ``"warp"``
    for tensor-core fragments before tensorize (indexed by thread and register, as TVM's mma layouts are, each
    warp's own elements)."""
    buffers: dict = {}

    def on_var(var):
        scope = var.scope() if isinstance(var.ty, tvm.tirx.BufferType) else None
        if scope not in scopes:
            return var
        if var not in buffers:
            # strides, offset and its factor kept: a match buffer of a tensorized tile keeps its binding
            buffers[var] = tvm.tirx.decl_buffer(var.shape, var.dtype, var.name, strides=var.strides,
                                                elem_offset=var.elem_offset, scope="global",
                                                offset_factor=var.offset_factor)
        return buffers[var]

    def on_evaluate(stmt):
        value = stmt.value
        if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and \
                value.op.name == "tirx.tvm_storage_sync" and value.args[0].value in SHARED_SCOPES:
            return tvm.tirx.Evaluate(0)
        return stmt

    functions = {}
    for global_var, func in threads_as_serial_loops(mod).functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            func = func.with_body(tvm_ffi.structural_map(func.body, [(tvm.ir.Var, on_var),
                                                                     (tvm.tirx.Evaluate, on_evaluate)],
                                                         order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs)


def run_with_guarded_output(executable, inputs: list[np.ndarray], out_shape: tuple[int, ...],
                            out_dtype: str = "float32") -> np.ndarray:
    """Call `executable["main"](*inputs, out)` with `out` (of `out_shape` and `out_dtype`) zeroed inside canaries
    and return a copy of `out`.

    The inputs are passed zero-copy (64-byte aligned, e.g. from `guarded_array`). Raises `AssertionError` if the
    kernel wrote outside `out`.
    """
    out = guarded_array(out_shape, out_dtype, canary=-7.0)
    out.array[:] = 0
    executable["main"](*[to_tvm(x) for x in inputs], to_tvm(out.array))
    out.check_canaries("output")
    return out.array.copy()


def _invariant_cases(body: tvm.tirx.Stmt) -> list[tuple[tvm.ir.PrimExpr, tvm.tirx.Stmt]]:
    """``(condition, then_case)`` of each outermost ``if tvm_thread_invariant(condition)`` in ``body``: the cases
    of an ``ir_utils.dispatch_by_intervals`` function, before or after lowering (the ``ir_utils.host_if``s inside a
    case, e.g. its grid's ``extent > 0``, are part of its body)."""
    invariant: list[tvm.tirx.IfThenElse] = []

    def on_if(node: tvm.tirx.IfThenElse):
        condition = node.condition
        if isinstance(condition, tvm.ir.expr.Call) and condition.op.name == "tirx.tvm_thread_invariant":
            invariant.append(node)

    tvm_ffi.structural_walk(body, (tvm.tirx.IfThenElse, on_if))
    nested: list[tvm.tirx.IfThenElse] = []
    for node in invariant:
        tvm_ffi.structural_walk(node.then_case, (tvm.tirx.IfThenElse, nested.append))
    return [(node.condition.args[0], node.then_case) for node in invariant
            if not any(node.same_as(inner) for inner in nested)]


def dispatched_labels(func: tvm.tirx.PrimFunc, var: tvm.tirx.Var, value: int, labels: Iterable[str]) -> list[str]:
    """Which of `labels` (the cases of `func`, built by `ir_utils.dispatch_by_intervals`) run for `var = value`:
    each case is an `if` on `tvm_thread_invariant(...)` whose blocks carry `_label` in their names; its condition
    is evaluated with `var` bound to `value`."""
    labels = list(labels)
    running = []
    for condition, body in _invariant_cases(func.body):
        names: list[str] = []
        tvm_ffi.structural_walk(body, (tvm.s_tir.SBlock, lambda block, names=names: names.append(block.name_hint)))
        found = [label for label in labels
                 if any(re.search(rf"_{re.escape(label)}(?![0-9A-Za-z])", name) for name in names)]
        if len(found) != 1:
            raise ValueError(f"dispatched_labels: a case's blocks carry the labels {found}, not one")
        if evaluate(condition, {var.name: value}):
            running.append(found[0])
    return running


def host_after_packed_api(mod: tvm.IRModule, target: tvm.target.Target,
                          tir_pipeline: str) -> tuple[tvm.tirx.PrimFunc, tvm.runtime.Executable]:
    """`tvm.compile(mod, target, tir_pipeline)` (no GPU needed) and its host function as lowered right after
    `tirx.MakePackedAPI` (its kernel launches are `call_ffi_kernel` calls)."""
    captured = {}

    @tvm.instrument.pass_instrument
    class _Capture:
        def run_after_pass(self, module, info):
            if info.name == "tirx.MakePackedAPI":
                captured["module"] = module

    with tvm.transform.PassContext(instruments=[_Capture()]):
        executable = tvm.compile(mod, target=target, tir_pipeline=tir_pipeline)
    hosts = [func for func in captured["module"].functions.values()
             if isinstance(func, tvm.tirx.PrimFunc) and str(func.attrs.get("target", "")).find("cuda") < 0]
    (host,) = [func for func in hosts if func.attrs.get("global_symbol", "").startswith("__tvm_ffi_")]
    return host, executable


def host_launches(host: tvm.tirx.PrimFunc) -> list[tuple[tvm.ir.PrimExpr, list[str]]]:
    """Each `if tvm_thread_invariant(condition)` of `host` (an `ir_utils.dispatch_by_intervals` case, lowered)
    with the names of the kernels it launches, in order."""
    cases = []
    for condition, body in _invariant_cases(host.body):
        kernels: list[str] = []

        def on_call(call, kernels=kernels):
            if call.op.name == "tirx.call_ffi_kernel":
                kernels.append(str(call.args[0].value))

        tvm_ffi.structural_walk(body, (tvm.ir.expr.Call, on_call))
        cases.append((condition, kernels))
    return cases


def _named_values(node: tvm.ir.Node, values: dict[str, int]) -> dict:
    """Each variable of ``node`` whose name is a key of ``values``, mapped to that value (an ``IntImm``)."""
    known: dict = {}

    def on_var(var):
        if var.name in values and not any(key.same_as(var) for key in known):
            known[var] = tvm.tirx.IntImm(var.ty.dtype, values[var.name])

    tvm_ffi.structural_walk(node, (tvm.tirx.Var, on_var))
    return known


def host_values(host: tvm.tirx.PrimFunc, values: dict[str, int]) -> dict[str, int]:
    """The integer variables `host` binds (`T.let`, e.g. the common subexpressions it passes to kernels), by
    name, evaluated with the variables named in `values` (e.g. `{"M": 65, "K": 136}`) set to those values; a
    binding that does not reduce to an integer is left out."""
    analyzer = tvm.sym.Analyzer()
    known = _named_values(host.body, values)
    result = {}

    def on_bind(node: tvm.tirx.Bind):
        if not str(getattr(node.var.ty, "dtype", "")).startswith("int"):
            return  # a handle, a tensor map
        value = analyzer.simplify(substitute(node.value, known))
        if isinstance(value, tvm.tirx.IntImm):
            known[node.var] = value
            result[node.var.name] = int(value.value)

    tvm_ffi.structural_walk(host.body, (tvm.tirx.Bind, on_bind))
    return result


def evaluate(expr: tvm.ir.PrimExpr, values: dict[str, int]) -> int:
    """The integer (a condition: 0 or 1) `expr` simplifies to with the variables named in `values` set to them;
    `ValueError` if it does not reduce to a constant."""
    value = tvm.sym.Analyzer().simplify(substitute(expr, _named_values(expr, values)))
    if not isinstance(value, tvm.tirx.IntImm):
        raise ValueError(f"evaluate: {expr} with {values} is {value}, not a constant")
    return int(value.value)
