"""CUDA without a GPU: generate CUDA source from an IRModule and compile it with nvcc.

`tvm.compile` never runs nvcc on a machine without a CUDA driver (it returns a fallback module that only holds
the source), so every capability checks its CUDA path here: generate the source with TVM, compile it with nvcc
for each architecture, and read the ptxas resource usage (registers, barriers, shared memory) that TVM's own
wrapper discards.

Kernels that place their own barriers (the FFT's one-kernel plans, warp-specialized kernels) compile with a TIR
pipeline registered by `register_pipeline_without_thread_sync`: the pass list of TVM's own default pipeline (which
TVM builds at run time from the PassContext config; nothing is copied from TVM) with `scope_dynamic_shared_loads`
inserted before `s_tir.MergeSharedMemoryAllocations` (`ir_utils.default_passes_with`), run inside a nested
`PassContext` equal to the caller's (opt level, required passes, config, instruments) except that `s_tir.ThreadSync`
is added to the disabled passes; the host and device finalization passes are TVM's default ones. One exception
for instruments: TVM's `PassTimingInstrument` clears its profile when a context exits, which would free the record
of the still running pipeline pass, so it is not carried into the nested context (it times the whole pipeline as
one pass); every other instrument sees each lowering pass as under the default pipeline (and its `enter_pass_ctx` /
`exit_pass_ctx` run once more, for the nested context).

`scope_dynamic_shared_loads` works around a limit of TVM 0.27's `MergeSharedMemoryAllocations`, which computes the
live ranges of dynamic shared buffers over the statements that open a scope (loops, conditions, stores,
evaluations): a `Bind` whose value loads such a buffer in the sequence where the buffer is allocated (a pass whose
loop the thread binding removed, because its threads run it in exactly one round) lies in none, and the pass stops
("Load memory in places other than store"). The statements from that `Bind` to the end of their sequence are put in
a loop of one iteration: every value and every use of a bound variable stays as it was, and the buffers that the
loop touches are live across all of it.

`exact_float64_constants` runs first in that pipeline's device finalization: TVM 0.27's CUDA code generator prints
a float64 constant as fixed-point text with 15 decimals, so a double-precision kernel computed with rounded constants
(1/2879 kept 12 significant digits); each constant whose text would not read back exactly is written as
`__hiloint2double(hi, lo)` of its bits.

The hardware facts that the wings' rules read live here too, once: the launch limits of each architecture
(`CudaLimits`: shared memory and threads per block; `DEFAULT_ARCH` for a target without a GPU) and the
multiprocessor count (`multiprocessor_count`, `DEFAULT_MULTIPROCESSORS` without a GPU), and the intervals of M
on which a tiling rule makes one choice (`rule_intervals`: a symbolic M dispatched by M to the rule's kernel).
"""

from __future__ import annotations

import ctypes.util
import functools
import logging
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tvm
import tvm_ffi
from tvm import tirx

from .ir_utils import default_passes_with, uses_var

__all__ = [
    "CUDA_FLOAT64_DECIMALS",
    "DEFAULT_ARCH",
    "DEFAULT_MULTIPROCESSORS",
    "EXACT_FINALIZE_DEVICE",
    "FILL_FRACTION",
    "MAX_REGISTERS_PER_THREAD",
    "MAX_THREADS_PER_BLOCK",
    "MERGE_SHARED_MEMORY_PASS",
    "SHARED_MEMORY_PER_BLOCK",
    "STATIC_SHARED_MEMORY_PER_BLOCK",
    "SYMBOLIC_M",
    "THREAD_SYNC_DISABLED_PASSES",
    "CudaLimits",
    "PtxasUsage",
    "compile_cuda_source",
    "cuda_ptx",
    "cuda_source",
    "device_arch",
    "exact_float64",
    "exact_float64_constants",
    "executable_cuda_source",
    "gpu_available",
    "multiprocessor_count",
    "nested_pass_context",
    "nvcc_available",
    "register_pipeline_without_thread_sync",
    "rule_intervals",
    "scope_dynamic_shared_loads",
    "shared_memory_per_block",
]

THREAD_SYNC_DISABLED_PASSES = ("s_tir.ThreadSync",)
"""The passes of TVM's default pipeline that a pipeline of `register_pipeline_without_thread_sync` leaves out."""

logger = logging.getLogger("tvm_tailsplit.cuda")

_CONTEXT_CLEARING_INSTRUMENTS = ("PassTimingInstrument",)


def nested_pass_context(outer: tvm.transform.PassContext, disabled_pass: tuple[str, ...] = (),
                        config: dict | None = None) -> tvm.transform.PassContext:
    """A PassContext equal to `outer` (opt level, required and disabled passes, config, instruments) with
    `disabled_pass` added to its disabled passes and `config` to its config; TVM's `PassTimingInstrument` is not
    carried (see the module doc)."""
    instruments = [i for i in outer.instruments if i.name not in _CONTEXT_CLEARING_INSTRUMENTS]
    return tvm.transform.PassContext(
        opt_level=outer.opt_level,
        required_pass=list(outer.required_pass),
        disabled_pass=[*outer.disabled_pass, *disabled_pass],
        instruments=instruments,
        config={**dict(outer.config), **(config or {})},
    )


def _scope_sequence(seq, scopes: tuple[str, ...]):
    """`seq` with the statements from its first `Bind` that loads a buffer of one of `scopes` allocated in `seq` to
    its end in a loop of one iteration (unchanged if there is none)."""
    merged = [stmt.buffer for stmt in seq.seq if isinstance(stmt, tirx.AllocBuffer) and stmt.buffer.scope() in scopes]
    if not merged:
        return seq
    for position, stmt in enumerate(seq.seq):
        if isinstance(stmt, tirx.Bind) and any(uses_var(stmt.value, buffer) for buffer in merged):
            rest = list(seq.seq[position:])
            loop = tirx.For(tirx.Var("scope", "int32"), 0, 1, tirx.ForKind.SERIAL,
                            rest[0] if len(rest) == 1 else tirx.SeqStmt(rest))
            return tirx.SeqStmt([*seq.seq[:position], loop])
    return seq


@tirx.transform.prim_func_pass(opt_level=0, name="tvm_tailsplit.ScopeDynamicSharedLoads")
def scope_dynamic_shared_loads(func: tirx.PrimFunc, mod: tvm.IRModule,
                               ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
    """Put the statements from a `Bind` that loads a dynamic shared buffer in the sequence that allocates it to the
    end of that sequence in a loop of one iteration, which `s_tir.MergeSharedMemoryAllocations` needs (see the
    module doc); static shared buffers too where the PassContext's `tirx.merge_static_smem` has that pass merge
    them. A function without such a `Bind` is returned unchanged."""
    scopes = ("shared.dyn", "shared") if ctx.config.get("tirx.merge_static_smem", False) else ("shared.dyn",)
    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.SeqStmt, lambda seq: _scope_sequence(seq, scopes)),
                                                 order="post"))


MERGE_SHARED_MEMORY_PASS = "s_tir.MergeSharedMemoryAllocations"
"""The pass of TVM's default pipeline before which `scope_dynamic_shared_loads` runs."""


# TVM 0.27's CUDA code generator prints a float64 constant as fixed-point text with 15 decimals
# (`PrintConst`, src/backend/cuda/codegen/codegen_cuda.cc): 1/2879 became 0.000347342827370, 12 significant digits
CUDA_FLOAT64_DECIMALS = 15
# the name of the device finalization sequence of `register_pipeline_without_thread_sync`
EXACT_FINALIZE_DEVICE = "FinalizeDeviceWithExactFloat64"


def _int32(bits: int) -> int:
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def exact_float64(value: float) -> tirx.PrimExpr:
    """`value` as a float64 expression whose CUDA text is exact: the constant itself where its fixed-point text
    (`CUDA_FLOAT64_DECIMALS` decimals) reads back as `value`, else `__hiloint2double(hi, lo)` of its bits."""
    if math.isnan(value) or math.isinf(value) or float(f"{value:.{CUDA_FLOAT64_DECIMALS}f}") == value:
        return tirx.FloatImm("float64", value)
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return tirx.call_pure_extern("float64", "__hiloint2double", tirx.IntImm("int32", _int32(bits >> 32)),
                                 tirx.IntImm("int32", _int32(bits & 0xFFFFFFFF)))


@tvm.transform.module_pass(opt_level=0, name="ExactFloat64Constants")
def exact_float64_constants(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
    """Every float64 constant of the CUDA kernels of `mod` as `exact_float64` writes it (a device finalization
    pass: no simplification after it folds the bits back into a constant). Without it a double-precision kernel
    computes with constants rounded to 15 decimals: an error of 1e-12 relative to the result where 1e-15 is
    due."""
    functions = {}
    for global_var, func in mod.functions.items():
        target = func.attrs.get("target") if isinstance(func, tirx.PrimFunc) and func.attrs is not None else None
        if target is not None and target.kind.name == "cuda":
            def on_float(node: tirx.FloatImm):
                return exact_float64(node.value) if node.ty.dtype == "float64" else node

            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.FloatImm, on_float), order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def register_pipeline_without_thread_sync(name: str, wrapper: str, config: dict | None = None) -> str:
    """Register (under `name`) TVM's default TIR pipeline without `s_tir.ThreadSync`, for kernels that place
    their own barriers, with `scope_dynamic_shared_loads` before `MERGE_SHARED_MEMORY_PASS`; its lowering runs as
    one module pass named `wrapper`, with `config` added to the caller's PassContext config. The device
    finalization is TVM's after `exact_float64_constants`. Returns `name`."""

    def factory():
        _, finalize_host, default_finalize_device = tirx.get_tir_pipeline("default")

        def finalize_device():
            return tvm.transform.Sequential([exact_float64_constants, default_finalize_device()],
                                            name=EXACT_FINALIZE_DEVICE)

        @tvm.transform.module_pass(opt_level=0, name=wrapper)
        def pipeline(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
            with nested_pass_context(tvm.transform.PassContext.current(), THREAD_SYNC_DISABLED_PASSES, config):
                passes = default_passes_with([scope_dynamic_shared_loads], before=MERGE_SHARED_MEMORY_PASS)
                return tvm.ir.transform.Sequential(passes)(mod)

        return pipeline, finalize_host, finalize_device

    tirx.register_tir_pipeline(name, factory)
    return name


@dataclass(frozen=True)
class PtxasUsage:
    """Resource usage of one kernel as reported by `ptxas -v`."""

    kernel: str
    arch: str
    registers: int
    barriers: int
    shared_memory_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_frame_bytes: int = 0  # local memory per thread (arrays indexed at run time, spills)
    performance_losses: tuple[str, ...] = ()
    """ptxas' "Potential Performance Loss" notes on the kernel, e.g. (C7511) wgmma instructions serialized."""

    def __str__(self) -> str:
        return (
            f"{self.kernel} [{self.arch}]: {self.registers} registers, {self.barriers} barriers, "
            f"{self.shared_memory_bytes} bytes smem, {self.spill_store_bytes}/{self.spill_load_bytes} "
            f"bytes spill store/load, {self.stack_frame_bytes} bytes stack frame"
        )


def nvcc_available() -> bool:
    """True when an `nvcc` executable is on PATH."""
    return shutil.which("nvcc") is not None


@functools.cache
def gpu_available() -> bool:
    """True when a CUDA driver is present and TVM sees a device (tests marked `gpu` need this; asked once per
    process)."""
    if ctypes.util.find_library("cuda") is None:
        return False
    try:
        return bool(tvm.cuda(0).exist)
    except Exception:  # noqa: BLE001 - TVM raises various errors when the CUDA runtime is absent
        return False


DEFAULT_MULTIPROCESSORS = 132
"""Rule: the multiprocessor count that grid rules (thin mma tiles, persistent CTAs) assume when no GPU is at hand:
an H100 SXM5 or an H200, 132 each (NVIDIA's H100 datasheet; both GPUs lent to this project's sessions). TVM's cuda
target has no multiprocessor count (arch, shared memory, threads, registers, L2 size only)."""
FILL_FRACTION = 0.9
"""Rule: a grid of at least this x the multiprocessor count of thread blocks fills the GPU (128 on 132 SMs do); the
tiling rules of both tensor-core GEMMs (mma.sync, Hopper) prefer the largest tile whose grid fills it."""
SYMBOLIC_M = 1024
"""Rule: a GEMM whose M is symbolic is tiled as this static M by the tiling rules: one kernel serves every M, and
the large ones carry the work."""


Choice = TypeVar("Choice")


def rule_intervals(rule: Callable[[int], Choice]) -> list[tuple[int, int | None, Choice]]:
    """A tiling rule of M (``rule(m)``, e.g. ``lambda m: choose_tiling(m, n, k)``) as ``(first, last, choice)``
    intervals, in order: ``rule(m) == choice`` for ``first <= m <= last``, from M = 1; the last interval, the one
    holding ``SYMBOLIC_M``, is open (``last=None``): a symbolic M above it keeps the large-M choice, as the rules
    do for a symbolic M. Adjacent intervals have different choices."""
    intervals: list[tuple[int, int | None, Choice]] = []
    for m in range(1, SYMBOLIC_M + 1):
        choice = rule(m)
        if intervals and intervals[-1][2] == choice:
            intervals[-1] = (intervals[-1][0], m, choice)
        else:
            intervals.append((m, m, choice))
    first, _, choice = intervals[-1]
    intervals[-1] = (first, None, choice)
    return intervals


def multiprocessor_count() -> int:
    """The multiprocessor count of GPU 0, `DEFAULT_MULTIPROCESSORS` without a GPU."""
    if not gpu_available():
        return DEFAULT_MULTIPROCESSORS
    return int(tvm.cuda(0).multi_processor_count)


def device_arch() -> str | None:
    """The architecture of GPU 0 as TVM's targets name it (e.g. ``"sm_90"``), or None without a GPU."""
    if not gpu_available():
        return None
    return "sm_" + tvm.cuda(0).compute_version.replace(".", "")


def cuda_target(arch: str) -> tvm.target.Target:
    """The CUDA target for one architecture, e.g. `cuda_target("sm_90")`."""
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def cuda_source(mod: tvm.IRModule, arch: str = "sm_80", tir_pipeline: str = "default") -> str:
    """Compile `mod` for CUDA (architecture `arch`) with TVM's TIR pipeline `tir_pipeline` and return the generated
    CUDA C++ source (no nvcc involved)."""
    return executable_cuda_source(tvm.compile(mod, target=cuda_target(arch), tir_pipeline=tir_pipeline))


def executable_cuda_source(executable: tvm.runtime.Executable) -> str:
    """The CUDA C++ source of `executable`, a module `tvm.compile` or `relax.build` built for a cuda target: its
    device modules' sources, wherever they are imported (a Relax executable imports them through its host module)."""
    pending, sources = list(executable.mod.imports), []
    while pending:
        module = pending.pop(0)
        if module.kind in ("cuda", "fallback", "cuda_fallback"):
            sources.append(module.inspect_source())
        pending.extend(module.imports)
    return "\n".join(sources) if sources else executable.mod.imports[0].inspect_source()


_PTXAS_FUNCTION = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_BARRIERS = re.compile(r"used (\d+) barriers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame")
_PTXAS_LOSS = re.compile(r"(\(C\d+\) Potential Performance Loss: .*) in (?:the )?function '([^']+)'")


def parse_ptxas_report(text: str, arch: str) -> list[PtxasUsage]:
    """Parse the `ptxas info` lines of `nvcc -Xptxas -v` into one `PtxasUsage` per kernel."""
    usages: list[PtxasUsage] = []
    kernel = None
    spill = (0, 0)
    stack = 0
    losses: dict[str, list[str]] = {}  # printed before the kernel's "Compiling entry function" line
    for match in _PTXAS_LOSS.finditer(text):
        losses.setdefault(match.group(2), []).append(match.group(1))
    for line in text.splitlines():
        match = _PTXAS_FUNCTION.search(line)
        if match:
            kernel = match.group(1)
            spill, stack = (0, 0), 0
            continue
        match = _PTXAS_SPILL.search(line)
        if match:
            spill = (int(match.group(1)), int(match.group(2)))
            frame = _PTXAS_STACK.search(line)
            stack = int(frame.group(1)) if frame else 0
            continue
        used = _PTXAS_USED.search(line)
        if used and kernel is not None:
            barriers = _PTXAS_BARRIERS.search(line)
            smem = _PTXAS_SMEM.search(line)
            usages.append(
                PtxasUsage(
                    kernel=kernel,
                    arch=arch,
                    registers=int(used.group(1)),
                    barriers=int(barriers.group(1)) if barriers else 0,
                    shared_memory_bytes=int(smem.group(1)) if smem else 0,
                    spill_store_bytes=spill[0],
                    spill_load_bytes=spill[1],
                    stack_frame_bytes=stack,
                    performance_losses=tuple(losses.get(kernel, ())),
                )
            )
            kernel = None
    return usages


def _run_nvcc(source: str, arch: str, output: str, options: tuple[str, ...]) -> tuple[bytes, str]:
    """Compile `source` with nvcc for `arch` to an `output` ("cubin" or "ptx") with `options`: (the output file,
    nvcc's stderr). Raises `RuntimeError` with nvcc's complete output when compilation fails."""
    if not nvcc_available():
        raise RuntimeError("nvcc is not on PATH; CUDA sources cannot be compiled on this machine")
    with tempfile.TemporaryDirectory(prefix="tvm_tailsplit_nvcc_") as workdir:
        source_path, output_path = os.path.join(workdir, "kernel.cu"), os.path.join(workdir, f"kernel.{output}")
        with open(source_path, "w") as handle:
            handle.write(source)
        command = ["nvcc", f"--{output}", f"-arch={arch}", "-O3", "--expt-relaxed-constexpr", *options,
                   "-o", output_path, source_path]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"nvcc failed for {arch} (exit {result.returncode}):\n{result.stderr}\n{result.stdout}")
        with open(output_path, "rb") as handle:
            return handle.read(), result.stderr


def cuda_ptx(source: str, arch: str) -> str:
    """The PTX that nvcc generates from CUDA source for `arch` (to read the memory instructions of a kernel).

    Raises `RuntimeError` with nvcc's complete output when compilation fails.
    """
    return _run_nvcc(source, arch, "ptx", ())[0].decode()


def compile_cuda_source(source: str, arch: str, extra_options: tuple[str, ...] = ()) -> list[PtxasUsage]:
    """Compile CUDA source to a cubin with nvcc for `arch` (plus nvcc's `extra_options`) and return the ptxas usage
    of every kernel.

    Raises `RuntimeError` with nvcc's complete output when compilation fails.
    """
    return parse_ptxas_report(_run_nvcc(source, arch, "cubin", ("-Xptxas", "-v", *extra_options))[1], arch)


# ---- the launch limits of each architecture ----------------------------------------------------------------------
DEFAULT_ARCH = "sm_80"
"""Rule: the architecture of `target="cuda"` without a GPU, and of a CUDA target whose architecture
`SHARED_MEMORY_PER_BLOCK` lacks (or that names none, logged): the oldest the package's kernels are built for."""
MAX_THREADS_PER_BLOCK = 1024
"""Threads of one thread block on every architecture since sm_20."""
STATIC_SHARED_MEMORY_PER_BLOCK = 48 * 1024
"""Bytes of `__shared__` arrays declared in one kernel (static shared memory) on every architecture: ptxas refuses
more ("uses too much shared data"); beyond it only dynamic shared memory."""
MAX_REGISTERS_PER_THREAD = 255
"""32-bit registers of one thread on every architecture since sm_35 (more live values spill to local memory)."""
SHARED_MEMORY_PER_BLOCK = {
    70: 96 * 1024, 72: 96 * 1024,  # Volta
    75: 64 * 1024,  # Turing
    80: 163 * 1024, 87: 163 * 1024,  # A100, Orin
    86: 99 * 1024, 89: 99 * 1024,  # GA10x, Ada
    90: 227 * 1024,  # Hopper
    100: 227 * 1024, 103: 227 * 1024, 110: 227 * 1024,  # Blackwell (B200, B300, Thor)
    120: 99 * 1024, 121: 99 * 1024,  # Blackwell GeForce, DGX Spark
}
"""The most shared memory of one thread block by compute capability (major·10 + minor): the row "Maximum amount of
shared memory per thread block" of the CUDA C++ Programming Guide's table "Technical Specifications per Compute
Capability" (docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html); above 48 KiB only
as dynamic shared memory, with the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize raised (see `CudaLimits`)."""

# the unknown architectures already warned about
_warned_architectures: set[str] = set()


def shared_memory_per_block(arch: str) -> int:
    """`SHARED_MEMORY_PER_BLOCK` of `arch` ("sm_90", "sm_90a", "sm_100f", ...); an architecture the table lacks gets
    `DEFAULT_ARCH`'s, with a warning on the `tvm_tailsplit.cuda` logger (once per architecture and process)."""
    match = re.fullmatch(r"sm_(\d+)[af]?", arch)
    capability = int(match.group(1)) if match else None
    if capability not in SHARED_MEMORY_PER_BLOCK:
        if arch not in _warned_architectures:
            _warned_architectures.add(arch)
            logger.warning("CUDA architecture %r is not in cuda.SHARED_MEMORY_PER_BLOCK: using the limits of %s",
                           arch, DEFAULT_ARCH)
        capability = int(DEFAULT_ARCH.removeprefix("sm_"))
    return SHARED_MEMORY_PER_BLOCK[capability]


@dataclass(frozen=True)
class CudaLimits:
    """The launch limits of one CUDA architecture that generated kernels obey: `max_threads` per block (the target's
    `max_num_threads`) and `shared` bytes of shared memory per block (`shared_memory_per_block`: dynamic shared memory
    above 48 KiB, the static limit of every architecture).

    The opt-in needs no code of ours: TVM's CUDA runtime raises a kernel's
    `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` to its dynamic shared memory (the size of its `shared.dyn`
    allocations, a launch parameter) when that is at least 48 KiB, on the kernel's first launch on each device
    (`CUDAWrappedFunc::operator()` in src/backend/cuda/runtime/cuda_module.cc of TVM 0.27; the message "Failed to
    set the allowed dynamic shared memory size" is in the wheel's libtvm_runtime_cuda.so)."""

    arch: str
    max_threads: int
    shared: int

    @classmethod
    def of(cls, target: tvm.target.Target) -> CudaLimits:
        """The limits of a CUDA target: its `arch` picks the shared memory (`shared_memory_per_block`)."""
        arch = str(target.attrs.get("arch", ""))
        return cls(arch, int(target.attrs["max_num_threads"]), shared_memory_per_block(arch))
