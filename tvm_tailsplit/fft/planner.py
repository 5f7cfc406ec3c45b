"""plan(): compile an FFT operator once and call it on numpy arrays or TVM tensors.

Algorithm: validate the request once as a `spec.FFTSpec` (size, kind, direction, norm, precision, limits) and
its layouts (batch, strides; overlapping outputs refused); choose the plan's `variants.Variant` (effort
"estimate": the rules of `tuning`; "measure"/"patient": the wisdom's variant for this problem, else the fastest
variant a `search` times on this machine, then recorded in the wisdom); take from the spec and the variant the
breakdown of the complex transform (`factor.breakdown`) and the passes over memory with their codelets, twiddles
and index maps (`passes.build_passes`), emit the TIR template (`template.build_primfunc`),
schedule it for the target (`schedule`) and compile it (on llvm with `lowering`'s pipeline: TVM's default one
plus contiguous vector access to interleaved complex data and hoisted scratch allocations). On CUDA, a plan
whose scratch fits in one thread block's shared memory (that of the target's architecture, `cuda.CudaLimits`:
163 KiB on sm_80, 227 KiB on sm_90) is one kernel, whose passes the template separates with
barriers (it is compiled with TVM's default pipeline without `ThreadSync`); beyond, a c2c Cooley-Tukey chain runs
in two (or three) kernels over columns, each a batched in-shared-memory FFT (four-step / six-step), and other
plans one kernel per pass over memory, the kernels exchanging data through global scratch (`multikernel`).
`input_shape` and `output_shape` are the parameters' buffer shapes (the layouts'), `workspace_bytes` is read from
the IR (the scratch allocations left after TVM's buffer compaction). Plans are cached by their validated parameters
(effort included) in the process, so the numpy/scipy functions compile each shape once, and compiled llvm plans on
disk (`cache`, keyed by the request and its variant), so that a later process loads them instead of compiling: a
loaded plan builds its passes and IR only when asked for them (`describe`, `workspace_bytes`, `module`). Plans
pickle as their `plan()` arguments and variant. Inputs may be read-only arrays (np.memmap, np.frombuffer): they are
passed without a copy.
Every tuning constant comes from `tuning`; on the `tvm_tailsplit.fft` logger a compile and searches are logged at
INFO (shown on stderr with `verbose=True`), each plan's breakdown and variant at DEBUG.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import sys
import threading
import time
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir

from ..cuda import (
    DEFAULT_ARCH,
    CudaLimits,
    device_arch,
    gpu_available,
    register_pipeline_without_thread_sync,
    shared_memory_per_block,
)
from ..ir_utils import require_bools
from . import cache
from .factor import Breakdown
from .formula import Formula, formula_of
from .lowering import register_pipeline
from .multikernel import (
    KernelGroup,
    choose_kernel_groups,
    schedule_cuda_grouped,
    schedule_cuda_multikernel,
    shared_bytes,
)
from .passes import PassList
from .schedule import cuda_staging, schedule_cuda, schedule_llvm, staged_bytes
from .search import EFFORTS, ROUNDS, SearchReport, label, search
from .spec import (
    KINDS,
    MAX_BUFFER_FLOATS,
    FFTSpec,
    check_choice,
    check_int,
    check_passes_indexable,
    requested_direction,
)
from .template import ExternalLayout, build_primfunc, lane_groups, largest_scratch_floats
from .tuning import (
    ANY_BATCH_SCRATCH_BYTES,
    CODELET_LIMIT,
    CUDA_STATIC_SHARED_LIMIT,
    RADIX_LIMIT,
)
from .variants import Variant, estimate_variant, scratch_bytes
from .wisdom import lookup, problem_key, record

__all__ = ["CUDA_PIPELINE", "Plan", "plan"]

logger = logging.getLogger("tvm_tailsplit.fft")

TARGET_KINDS = ("llvm", "cuda")


@functools.lru_cache(maxsize=16)
def _named_target(name: str) -> tvm.target.Target:
    if name == "llvm":
        return tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
    return tvm.target.Target({"kind": "cuda", "arch": device_arch() or DEFAULT_ARCH})


def _target_argument(target: tvm.target.Target) -> str | dict:
    """The `target=` argument that gives `target` again, for pickling: "llvm"/"cuda" for the named targets (the
    unpickling host's CPU or GPU), else the target's dict."""
    kind = target.kind.name
    return kind if str(target) == str(_named_target(kind)) else json.loads(str(target))


def _resolve_target(target: Any) -> tvm.target.Target:
    """`target` as a TVM Target of kind llvm or cuda: "llvm" (the host CPU), "cuda" (the GPU present, else
    `cuda.DEFAULT_ARCH`), a target dict or a tvm.target.Target."""
    if isinstance(target, str):
        if target not in TARGET_KINDS:
            raise ValueError(f"target must be 'llvm', 'cuda', a target dict or a tvm.target.Target, got {target!r}")
        return _named_target(target)
    if isinstance(target, dict):
        try:
            target = tvm.target.Target(target)
        except Exception as error:  # TVM reports a bad target dict with its own error types
            raise ValueError(f"target {target!r} is not a valid target dict: {error}") from None
    if not isinstance(target, tvm.target.Target):
        raise TypeError(f"target must be 'llvm', 'cuda', a target dict or a tvm.target.Target, got {target!r} "
                        f"({type(target).__name__})")
    if target.kind.name not in TARGET_KINDS:
        raise ValueError(f"target must be of kind 'llvm' or 'cuda', got {target.kind.name!r}")
    return target


class Plan:
    """A compiled FFT operator; build it with `plan(...)`."""

    def __init__(self, spec: FFTSpec, batch: int, target: tvm.target.Target, input_layout: ExternalLayout,
                 output_layout: ExternalLayout, variant: Variant | None = None, store: bool = True,
                 lanes: int | None = None) -> None:
        """The plan of `spec` for `batch` transforms in the layouts of `spec.layouts`, built as `variant` says
        (None: `estimate_variant`, the rules of `tuning`, with `lanes` per group when given); use `plan()`. A
        compiled llvm plan is written to the plan cache unless `store` is False (a search's candidates:
        `store_in_cache` writes the winner)."""
        started = time.perf_counter()
        self.spec, self.batch, self.target = spec, batch, target
        self.input_layout, self.output_layout = input_layout, output_layout
        self.is_cuda = self.target.kind.name == "cuda"
        # the launch limits of the CUDA target's architecture (shared memory and threads per block), None on llvm
        self.cuda_limits: CudaLimits | None = CudaLimits.of(target) if self.is_cuda else None
        # how the variant was chosen (`search.SearchReport`; None: by the rules, without timing)
        self.search = None
        self._device_constants: dict[str, list] = {}
        # an llvm plan compiled before, by this process or another, is loaded from the plan cache (`cache`): the
        # plan of any batch (`symbolic_batch`) or of this batch. A plan of the rules is keyed by the request (the
        # rules are a function of it and of the generator's sources, which the key hashes), so that loading it
        # does not derive its passes to choose its variant (27 ms at n = 65536)
        self._chosen = {"rules": "estimate", "lanes": lanes} if variant is None else variant.to_dict()
        self._cache_keys = [] if self.is_cuda else [cache.plan_key(self._request(symbolic, self._chosen), target)
                                                    for symbolic in ((True, False) if batch > 1 else (False,))]
        cached = cache.load(*self._cache_keys, check_variant=self._variant_problem) if self._cache_keys else None
        if cached is not None:
            variant = Variant(**cached.variant)
        elif variant is None:
            variant = estimate_variant(spec, batch, self.cuda_limits, lanes, (input_layout, output_layout))
        self.variant: Variant = variant
        self.tree: Breakdown = self.variant.tree(spec)
        self.lanes = self.variant.lanes
        if self.is_cuda and self.kernels == 1 and self._scratch_bytes() > self.cuda_limits.shared:
            raise ValueError(f"variant {self.variant} needs {self._scratch_bytes()} bytes of shared memory per "
                             f"block (at most {self.cuda_limits.shared} on {self.cuda_limits.arch}): it must have "
                             "kernel_per_pass=True")
        if cached is None:
            self._check_scratch_indexable()
            self.symbolic_batch = self._serves_any_batch()
            # compiles take from a tenth of a second to seconds (large primes): progress at INFO (`verbose=True`)
            logger.info("fft: building the %s plan of n=%d (%s), batch %d, for %s", self.kind, self.n, self.tree,
                        batch, target.kind.name)
            self.executable = None if self.is_cuda else _compile(self.module, self.target, self._pair_buffers())
            logger.info("fft: built the %s plan of n=%d in %.2f s", self.kind, self.n, time.perf_counter() - started)
            tables, indices = self.passes.constants()
            self._constants = []
            if self.passes.table_size:
                self._constants.append(tables.astype(self.real_dtype))
            if self.passes.index_size:
                self._constants.append(indices)
            self._stored = False
            if store:
                self.store_in_cache()
        else:
            self.executable, self._constants = cached.module, cached.constants
            self.symbolic_batch = cached.key["request"]["batch"] is None
            self._stored = True
        # looking a function up in the executable costs more than running a small transform: do it once
        self._function = None if self.is_cuda else self.executable["main"]
        self.build_seconds = time.perf_counter() - started
        logger.debug("%r: breakdown %s, %d lanes per group (variant %s), %s in %.3f s", self, self.tree, self.lanes,
                     self.variant, "loaded" if cached else "built", self.build_seconds)

    def _check_scratch_indexable(self) -> None:
        """ValueError naming the batch (or n) when a scratch allocation or the constant tables would reach beyond
        `MAX_BUFFER_FLOATS` floats (`spec.check_passes_indexable`): the operator indexes it with 32-bit integers,
        and TVM stopped the build with an internal error on an int32 literal (at the first call of a CUDA plan). A
        CUDA plan of one kernel per pass over memory has its scratch in global memory, one allocation per buffer for
        the whole batch: for a Rader or Bluestein size up to twice as long as its data (Bluestein's m >= 2n - 1
        points); there TVM's `FlattenBuffer` also forms the offset of one transform past the last (Bluestein 10007:
        batch 53260 builds, 53261 fails on 53262·2m). The global buffers between kernels over columns hold one
        transform's data each (within the external check); other plans allocate their scratch per lane group."""
        per_pass = self.is_cuda and self.kernels > 1 and not self.kernel_groups
        global_scratch = self.is_cuda and self.kernels > 1
        # the constant tables, and the scratch of a lane group where each group allocates its own
        check_passes_indexable(self.n, self.passes, 1 if global_scratch else self.lanes)
        if not global_scratch:
            return
        transforms = self.batch + 1 if per_pass else self.batch
        floats = largest_scratch_floats(self.passes, transforms)
        if floats <= MAX_BUFFER_FLOATS:
            return
        fit = MAX_BUFFER_FLOATS // largest_scratch_floats(self.passes, 1) - (transforms - self.batch)
        raise ValueError(f"batch={self.batch}: the global scratch between this CUDA plan's {self.kernels} kernels "
                         f"would reach {floats} floats; the generated operator indexes it with 32-bit integers (at "
                         f"most {MAX_BUFFER_FLOATS}): plan at most {fit} transforms and run the batch in parts")

    def _variant_problem(self, fields: dict[str, Any]) -> str | None:
        """Why the variant `fields` of a plan cache entry cannot build this plan (None: they can)."""
        try:
            variant = Variant(**fields)
            if variant.radices:  # (without, the breakdown of valid limits always exists: not derived twice)
                variant.tree(self.spec)
        except (TypeError, ValueError) as error:
            return f"{type(error).__name__}: {error}"
        return None

    def store_in_cache(self) -> None:
        """Write the compiled llvm plan to the plan cache (`cache`), once; CUDA plans are not cached."""
        if self._stored or not self._cache_keys:
            return
        key = self._cache_keys[0 if self.symbolic_batch else -1]
        cache.store(key, self.executable, self.variant.to_dict(), self._constants,
                    tvm_ffi.structural_hash(self.module))
        self._stored = True

    # ---- the IR, built on demand for a plan loaded from the cache ----------------------------------------
    @functools.cached_property
    def formula(self) -> Formula:
        """The formula tree of the breakdown (`formula.formula_of`)."""
        return formula_of(self.tree)

    @functools.cached_property
    def passes(self) -> PassList:
        """The passes over memory (`passes.build_passes`) of the variant's breakdown."""
        return self.variant.passes(self.spec)

    @functools.cached_property
    def kernel_groups(self) -> list[KernelGroup] | None:
        """The kernels over columns of a multi-kernel CUDA plan (`multikernel.choose_kernel_groups`: a c2c
        Cooley-Tukey chain cut into few kernels), or None (one kernel, or one kernel per pass over memory)."""
        if not (self.is_cuda and self.variant.kernel_per_pass):
            return None
        return choose_kernel_groups(self.passes, self.tree, self.real_dtype, self.variant.cuda_threads,
                                    self.cuda_limits)

    @functools.cached_property
    def kernels(self) -> int:
        """CUDA kernels of the plan: one; or, beyond shared memory (the variant's `kernel_per_pass`), one per
        group of `kernel_groups`, else one per pass over memory. A tail lane group (`batch % lanes` transforms)
        is compiled as a kernel of its own beside these, not counted here."""
        if not (self.is_cuda and self.variant.kernel_per_pass):
            return 1
        return len(self.kernel_groups) if self.kernel_groups else len(self.passes.passes)

    def _scratch_bytes(self) -> int:
        return scratch_bytes(self.spec, self.variant)

    def _block_shared_bytes(self) -> int:
        """The most shared memory a thread block of the CUDA plan's kernels uses: a one-kernel plan's scratch and
        staged rows, the largest of its kernel groups', or none (one kernel per pass: global scratch)."""
        if self.kernels == 1:
            return self._scratch_bytes() + staged_bytes((self.input_layout, self.output_layout), self.staged,
                                                        self.lanes, self.real_dtype)
        return max((shared_bytes(self.passes, group, self.real_dtype) for group in self.kernel_groups or ()),
                   default=0)

    @functools.cached_property
    def template(self) -> tvm.tirx.PrimFunc:
        """The unscheduled TIR template (`template.build_primfunc`)."""
        scope = "global"
        if self.is_cuda and self.kernels == 1:
            scope = "shared" if self._block_shared_bytes() <= CUDA_STATIC_SHARED_LIMIT else "shared.dyn"
        batch = tvm.tirx.Var("batch", "int32") if self.symbolic_batch else self.batch
        if self.kernel_groups:
            scopes = tuple("shared" if shared_bytes(self.passes, group, self.real_dtype) <= CUDA_STATIC_SHARED_LIMIT
                           else "shared.dyn" for group in self.kernel_groups)
            return build_primfunc(self.passes, self.real_dtype, batch, 1, self.input_layout, self.output_layout,
                                  kernel_groups=self.kernel_groups, shared_scopes=scopes)
        return build_primfunc(self.passes, self.real_dtype, batch, self.lanes, self.input_layout,
                              self.output_layout, scratch_scope=scope, kernel_per_pass=self.kernels > 1,
                              prefetch_bytes=self.variant.prefetch_bytes,
                              prefetch_distance=self.variant.prefetch_distance, loop_orders=not self.is_cuda,
                              parallel_tasks=self.variant.parallel_tasks,
                              pass_barriers=self.is_cuda and self.kernels == 1, staged=self.staged,
                              complex_vectors=self.is_cuda and self.kernels == 1)

    @functools.cached_property
    def staged(self) -> tuple[str, ...]:
        """The external buffers ("input", "output") whose rows a one-kernel CUDA plan copies through shared memory
        (`schedule.cuda_staging`: both for blocks of several transforms, the input alone for blocks of one with the
        variant's `stage_input`), else ()."""
        if not (self.is_cuda and self.kernels == 1):
            return ()
        return cuda_staging((self.input_layout, self.output_layout), self.lanes, self.real_dtype,
                            self._scratch_bytes(), self.cuda_limits, self.variant.stage_input)

    @functools.cached_property
    def schedule(self) -> s_tir.Schedule:
        """The template scheduled for the target (`schedule`, `multikernel`)."""
        if self.kernel_groups:
            return schedule_cuda_grouped(self.template, [group.threads for group in self.kernel_groups])
        if self.kernels > 1:
            return schedule_cuda_multikernel(self.template, self.variant.cuda_threads)
        if self.is_cuda:
            return schedule_cuda(self.template, self.variant.cuda_threads)
        return schedule_llvm(self.template, self.variant.vector_width, self.variant.inner_vector_scale,
                             self.variant.parallel_tasks)

    @property
    def module(self) -> tvm.IRModule:
        """The scheduled IRModule that is compiled."""
        return self.schedule.mod

    def _serves_any_batch(self) -> bool:
        """Whether the plan is compiled for any batch (a symbolic batch): on llvm, when its lane groups hold one
        transform (no tail group) and the batch is not 1 (a batch of 1 keeps its serial group loop: launching a
        parallel loop costs more than a small transform), while its group's scratch is at most
        `ANY_BATCH_SCRATCH_BYTES`. Measured in bench/results/fft_cache.md: there the plan of any batch runs as fast
        as the plan of its batch (0.99-1.04x up to n = 4096); at n = 65536 (1 MiB of scratch) batch 16 it once ran
        1.9x slower (not investigated; the latest run measured 1.00-1.01x at batches 2, 5 and 16), so larger
        transforms keep one plan per batch."""
        return (not self.is_cuda and self.lanes == 1 and self.batch > 1
                and self._scratch_bytes() <= ANY_BATCH_SCRATCH_BYTES)

    def _request(self, symbolic_batch: bool, variant: dict[str, Any]) -> dict[str, Any]:
        """The plan's request as JSON values (the plan cache's key, with the target); the batch is None for the
        plan of any batch."""
        return {"spec": dataclasses.asdict(self.spec), "batch": None if symbolic_batch else self.batch,
                "input": dataclasses.asdict(self.input_layout), "output": dataclasses.asdict(self.output_layout),
                "variant": variant}

    def __reduce__(self):
        """Pickled as the arguments of `plan()` with the plan's variant: unpickling plans again (loaded from the
        plan cache once compiled there); the host CPU target ("llvm") stays the unpickling host's CPU."""
        arguments = {"n": self.n, "batch": self.batch, "kind": self.kind, "direction": self.direction,
                     "norm": self.norm, "dtype": self.dtype, "target": _target_argument(self.target),
                     "istride": self.input_layout.stride, "idist": self.input_layout.distance,
                     "ostride": self.output_layout.stride, "odist": self.output_layout.distance,
                     # the request's limits: a variant's own (a search's breakdown winner) are in the variant, and the
                     # request's spec is part of the plan cache's key
                     "codelet_limit": self.spec.codelet_limit, "radix_limit": self.spec.radix_limit}
        if "rules" in self._chosen:
            arguments["lanes"] = self._chosen["lanes"]
        else:
            arguments["variant"] = self.variant
        return functools.partial(plan, **arguments), ()

    # ---- the request, from the spec ----------------------------------------------------------------------
    n = property(lambda self: self.spec.n, doc="Logical transform size.")
    kind = property(lambda self: self.spec.kind, doc='"c2c", "r2c" or "c2r".')
    direction = property(lambda self: self.spec.direction, doc='"forward" or "backward".')
    norm = property(lambda self: self.spec.norm, doc="numpy's normalization mode.")
    dtype = property(lambda self: self.spec.dtype, doc='"complex64" or "complex128".')
    real_dtype = property(lambda self: self.spec.real_dtype, doc="The float type of the real and imaginary parts.")
    codelet_limit = property(lambda self: self.variant.codelet_limit, doc="The largest DFT of one codelet.")
    radix_limit = property(lambda self: self.variant.radix_limit, doc="The largest radix of a pass.")
    sign = property(lambda self: self.spec.sign, doc="-1 forward, +1 backward.")
    scale = property(lambda self: self.spec.scale, doc="The normalization factor applied to the output.")
    complex_size = property(lambda self: self.spec.complex_size, doc="Points of the complex transform.")

    def _pair_buffers(self) -> frozenset[str]:
        """Buffers whose complex pairs start at even float offsets (see `lowering`)."""
        names = {"tables"}
        for name, layout in (("input", self.input_layout), ("output", self.output_layout)):
            if layout.kind == "complex" or (layout.kind == "real_pairs" and layout.distance % 2 == 0):
                names.add(name)
        return frozenset(names)

    # ---- shapes and memory, read from the IR -------------------------------------------------------------
    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of the input as a float array (complex data has a trailing dimension of 2): the shape of the
        operator's first parameter (`template.build_primfunc`)."""
        return self.input_layout.shape(self.batch)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the output as a float array (complex data has a trailing dimension of 2)."""
        return self.output_layout.shape(self.batch)

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
    def cuda_source(self, arch: str | None = None) -> str:
        """CUDA C++ generated by TVM for this plan (requires a plan made with target='cuda'), for `arch` (None: the
        plan's target's). An `arch` whose blocks have less shared memory than the plan's kernels use is refused
        (the source would compile and fail at launch): plan for it, `target={"kind": "cuda", "arch": arch}`."""
        from ..cuda import cuda_source

        if not self.is_cuda:
            raise ValueError("cuda_source needs a plan made with target='cuda'")
        if arch is not None:
            limit, used = shared_memory_per_block(arch), self._block_shared_bytes()
            if used > limit:
                raise ValueError(f"arch {arch!r}: the plan's kernels use {used} bytes of shared memory per block "
                                 f"(planned for {self.cuda_limits.arch}), more than the {limit} of {arch}; plan for "
                                 f"it with target={{'kind': 'cuda', 'arch': {arch!r}}}")
        with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
            return cuda_source(self.module, arch or self.cuda_limits.arch,
                               tir_pipeline=_pipeline(self.target, kernels=self.kernels))

    # ---- calling ------------------------------------------------------------------------------------------
    def _as_float_view(self, name: str, array: np.ndarray, layout: ExternalLayout) -> np.ndarray:
        real = np.dtype(self.real_dtype)
        expected = layout.shape(self.batch)
        as_floats = array.dtype == real and array.shape == expected
        as_complex = layout.kind == "complex" and array.dtype == np.dtype(self.dtype) and array.shape == expected[:-1]
        if layout.is_compact() and array.flags.c_contiguous and (as_floats or as_complex):
            # the common case, without the stride checks: a contiguous array of the right size
            return array.view(real).reshape(expected)
        given = array.shape
        # the shapes the plan takes, in the caller's terms: complex elements (a vector too for one transform), floats
        logical = expected[:-1] if layout.kind == "complex" else expected
        takes = f"{logical}" + (f" or {logical[1:]}" if self.batch == 1 else "")
        if layout.kind == "complex":
            takes = f"{takes} of {self.dtype} (or {expected} of {self.real_dtype})"
            if array.dtype == np.dtype(self.dtype):
                if array.ndim == 1 and self.batch == 1:
                    array = array[np.newaxis]
                if array.shape != logical:
                    # (named in its complex shape: its float view's, with a trailing 2, is not the caller's)
                    raise ValueError(f"{name} has shape {given} of {array.dtype}, the plan expects {takes}")
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
            raise ValueError(f"{name} has shape {given} of {array.dtype}, the plan expects {takes}")
        strides = tuple(s // real.itemsize for s in array.strides)
        if any(s % real.itemsize for s in array.strides):
            _refuse_strides(name, strides, layout, self.batch)
        _check_strides(name, strides, layout, self.batch)
        if self.batch == 1 and strides[0] != layout.strides()[0]:
            array = np.lib.stride_tricks.as_strided(array, strides=(layout.strides()[0] * real.itemsize,)
                                                    + array.strides[1:])
        return array

    def _allocate(self, layout: ExternalLayout) -> tuple[np.ndarray, np.ndarray]:
        """(result returned to the caller, float view passed to the operator) of a fresh, uninitialized buffer in
        `layout` (the plan's output layout or input layout, strides included)."""
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
        if not array.flags.writeable:
            # DLPack before 1.0 (what tvm_ffi imports) cannot mark memory read-only, so numpy refuses to export
            # it: export a writable alias of the same memory instead; the operator only reads its input
            array = np.asarray(_WritableAlias(array))
        return tvm_ffi.from_dlpack(array, require_alignment=0, require_contiguous=False)

    def __call__(self, x: Any, out: Any = None) -> Any:
        """Run the operator. `x` is a numpy array (complex, or float with a trailing 2) or a TVM tensor.

        Returns `out`, allocated when None: a complex numpy array for complex output, a float array for real
        output, or a TVM tensor when `x` is a TVM tensor (a compact one: a plan of a strided output layout needs
        `out` then; on llvm `out` may also be a numpy array, as for a numpy `x`). `out` may be `x` itself (in-place
        c2c). Arrays and tensors of another shape, dtype or strides than the plan's layouts are refused, naming the
        argument. A plan of one transform takes `x` as a vector too (shape (n,) instead of (1, n)), and then returns
        a vector, as numpy.fft does.
        """
        if isinstance(x, tvm.runtime.Tensor):
            for name, tensor, layout in (("x", x, self.input_layout), ("out", out, self.output_layout)):
                if isinstance(tensor, tvm.runtime.Tensor):
                    _check_tensor(name, tensor, layout, self.batch, self.real_dtype)
            if out is None and not self.output_layout.is_compact():
                layout = self.output_layout
                raise ValueError(f"out is needed: the plan's output layout (ostride={layout.stride}, "
                                 f"odist={layout.distance}) is strided and a new TVM tensor is compact; pass out, a "
                                 "tensor of those strides (e.g. a strided view through DLPack)")
            if out is not None and not isinstance(out, tvm.runtime.Tensor) and \
                    (self.is_cuda or not isinstance(out, np.ndarray)):
                raise TypeError(f"out must be a TVM tensor with a TVM tensor x (or, on llvm, a numpy array), got "
                                f"{type(out).__name__}")
        if self.is_cuda:
            return self._call_cuda(x, out)
        if isinstance(x, tvm.runtime.Tensor):
            if out is None:
                out = tvm.runtime.empty(self.output_shape, self.real_dtype, x.device)
            elif isinstance(out, np.ndarray):
                # checked and viewed as for a numpy x (a complex array was refused by TVM as 'output.ndim')
                _check_writable_out(out)
                self.run(x, self._as_float_view("out", out, self.output_layout))
                return out
            self.run(x, out)
            return out
        array = np.asarray(x)
        x_view = self._as_float_view("x", array, self.input_layout)
        if out is None:
            result, out_view = self._allocate(self.output_layout)
            result = result[0] if array.ndim == 1 else result  # (batch 1: the vector x's transform as one)
        else:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"out must be a numpy array (or a TVM tensor with x), got {type(out).__name__}")
            _check_writable_out(out)
            result, out_view = out, self._as_float_view("out", out, self.output_layout)
            _check_in_place(x_view, out_view)
        self.run(x_view, out_view)
        return result

    @property
    def constants(self) -> list[np.ndarray]:
        """The constant tables the compiled operator reads after its input and output (twiddles and index maps,
        in the plan's real dtype or int32; a convolution pipeline's first table is its filter's spectrum)."""
        return list(self._constants)

    def run(self, x: Any, out: Any, constants: list[tvm.runtime.Tensor] | None = None) -> None:
        """The compiled operator on buffers already in its layout: `x` and `out` are TVM tensors on the plan's device
        (float views of `input_shape` and `output_shape` in the plan's real dtype) or, on llvm, numpy arrays of those
        shapes, wrapped without a copy (checked by TVM's calling convention only, but for a read-only `out`, which is
        refused; `plan(x, out)` checks and names them). `constants`: tensors of `constants` on the same device, e.g.
        other tables of the same shapes (default: the plan's own, uploaded once per device)."""
        if constants is not None and len(constants) != len(self._constants):
            raise ValueError(f"constants must hold {len(self._constants)} tensors (one per table of "
                             f"plan.constants), got {len(constants)}")
        if not self.is_cuda:
            # (a read-only input is wrapped as a writable alias, which an output must not be: it was written through)
            _check_writable_out(out)
            x, out = (self._wrap(a) if isinstance(a, np.ndarray) else a for a in (x, out))
        function = self._cuda_executable()["main"] if self.is_cuda else self._function
        function(x, out, *(self._constant_tensors("cuda" if self.is_cuda else "cpu") if constants is None
                           else constants))

    def _constant_tensors(self, device: str = "cpu") -> list:
        if device not in self._device_constants:
            dev = tvm.cpu(0) if device == "cpu" else tvm.cuda(0)
            self._device_constants[device] = [tvm.runtime.tensor(c, dev) for c in self._constants]
        return self._device_constants[device]

    def _call_cuda(self, x: Any, out: Any) -> Any:
        if not isinstance(x, tvm.runtime.Tensor) and not (self.input_layout.is_compact()
                                                           and self.output_layout.is_compact()):
            raise ValueError("a CUDA plan with istride/idist/ostride/odist runs on device tensors with those strides "
                             "(TVM tensors, e.g. through DLPack from torch or cupy); for numpy arrays make the plan "
                             "with compact layouts (numpy strided views are copied to the device compact anyway)")
        self._require_gpu()
        dev = tvm.cuda(0)
        x_tensor = x if isinstance(x, tvm.runtime.Tensor) else tvm.runtime.tensor(
            np.ascontiguousarray(self._as_float_view("x", np.asarray(x), self.input_layout)), dev)
        out_tensor = tvm.runtime.empty(self.output_shape, self.real_dtype, dev) if out is None else out
        self.run(x_tensor, out_tensor)
        if isinstance(x, tvm.runtime.Tensor):
            return out_tensor
        result = out_tensor.numpy()
        if self.output_layout.kind == "complex":
            result = result.view(self.dtype)[..., 0]
        return result[0] if np.ndim(x) == 1 else result  # (batch 1: the vector x's transform as one)

    def _require_gpu(self) -> None:
        """A RuntimeError saying so where a CUDA plan is called with numpy arrays on a machine without a GPU
        (TVM's own error: 'Device API cuda is not enabled')."""
        if not gpu_available():
            raise RuntimeError(f"this plan runs on a CUDA GPU (target {self.cuda_limits.arch}) and this machine has "
                               "none (tvm_tailsplit.cuda.gpu_available() is false); plan.cuda_source() gives its CUDA, "
                               "or plan with target='llvm'")

    @functools.cache  # noqa: B019 - one executable per plan, plans live in the plan cache
    def _cuda_executable(self):
        return _compile(self.module, self.target, kernels=self.kernels)

    # ---- description ----------------------------------------------------------------------------------
    def codelets(self) -> list[tuple[int, int]]:
        """The (size, sign) of every distinct codelet the passes run."""
        return sorted({p.codelet for p in self.passes.passes if p.codelet is not None})

    def describe(self) -> str:
        """The factorization, the formula, the variant (with the variants a search timed, their times and why the
        winner won), the passes over memory and the codelets of this plan."""
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
            f"variant: {self.variant}",
            f"lanes per group: {self.lanes}{' (compiled once for every batch but 1)' if self.symbolic_batch else ''}"
            "; groups: "
            + ", ".join(f"{name} {groups}x{width}" for name, _, groups, width in lane_groups(self.batch,
                                                                                          self.lanes)),
            f"workspace: {self.workspace_bytes} bytes "
            + ("of global memory for all groups" if self.kernels > 1 else "per group")
            + f"; constant tables: {self.table_bytes} bytes",
        ]
        if self.is_cuda:
            if self.kernel_groups:
                how = " (" + "; ".join(
                    (f"pass {g.start}" if g.stop - g.start == 1 else f"passes {g.start}-{g.stop - 1}")
                    + f" over {g.columns} column{'s' * (g.columns != 1)}, {g.columns_per_block} per block, "
                    f"{shared_bytes(self.passes, g, self.real_dtype)} bytes of shared memory"
                    for g in self.kernel_groups) + "; scratch between kernels in global memory)"
            else:
                how = (" (one per pass over memory, scratch in global memory)" if self.kernels > 1
                       else " (scratch in shared memory)")
            lines.append(f"CUDA kernels: {self.kernels}{how}; {self.cuda_limits.arch}: at most "
                         f"{self.cuda_limits.shared} bytes of shared memory per block")
            if self.staged:
                plural = "s" * (self.lanes > 1)
                lines.append(f"CUDA blocks of {self.lanes} transform{plural} copy their {' and '.join(self.staged)} "
                             f"row{plural} through shared memory in coalesced vectors")
        if self.search is not None:
            lines.extend(self.search.describe())
        lines.append(f"passes over memory ({len(self.passes.passes)}):")
        for index, p in enumerate(self.passes.passes):
            lines.append(f"  {index}. {p.name} loops {list(p.loops)}: {p.text}")
        lines.append("codelets:")
        for size, sign in self.codelets():
            codelet = derive_codelet(size, sign)
            lines.append(f"  DFT_{size} sign {sign:+d}: {codelet.operation_counts()} formula {codelet.formula}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        # the layouts' steps where they are not compact (plans of other strides are other plans)
        steps = "".join(f", {prefix}stride={layout.stride}, {prefix}dist={layout.distance}"
                        for prefix, layout in (("i", self.input_layout), ("o", self.output_layout))
                        if not layout.is_compact())
        return (f"Plan(n={self.n}, batch={self.batch}, kind={self.kind!r}, direction={self.direction!r}, "
                f"norm={self.norm!r}, dtype={self.dtype!r}, target={self.target.kind.name!r}{steps})")


def _refuse_strides(name: str, strides: tuple[int, ...], layout: ExternalLayout, batch: int) -> None:
    """A ValueError naming `name`: a plan of matching steps takes strides of at least 1 (the batch stride of one
    transform is never read), and no plan takes a negative or zero step (a flipped or broadcast view)."""
    steps = strides[0 if batch > 1 else 1:]
    if any(s <= 0 for s in steps):
        remedy = ("a copy such as np.ascontiguousarray(x)" if name == "x" else
                  "a compact out, or none (a new array is returned)")
        raise ValueError(f"{name} has element strides {strides}, the plan expects {layout.strides()}; a negative "
                         f"or zero step (a flipped or broadcast view) has no plan (istride/idist/ostride/odist are "
                         f"at least 1): pass {remedy}")
    raise ValueError(f"{name} has element strides {strides}, the plan expects {layout.strides()}; "
                     f"make a plan with matching istride/idist/ostride/odist")


def _check_strides(name: str, strides: tuple[int, ...], layout: ExternalLayout, batch: int) -> None:
    """A ValueError naming `name` when an array's element `strides` are not `layout`'s (the batch stride of one
    transform is not compared: a plan of one transform declares the compact one)."""
    if strides[1:] != layout.strides()[1:] or (batch > 1 and strides[0] != layout.strides()[0]):
        _refuse_strides(name, strides, layout, batch)


def _check_tensor(name: str, tensor: tvm.runtime.Tensor, layout: ExternalLayout, batch: int, dtype: str) -> None:
    """A ValueError naming `name` when a TVM tensor is not of the plan's float shape, `dtype` and strides in `layout`
    (TVM's own check names the first parameter that a symbolic batch cannot bind, a wrong length as a stride, and a
    compact tensor for a strided layout by the parameter's stride only)."""
    if str(tensor.dtype) != dtype:
        raise ValueError(f"{name} must be a {dtype} tensor, got {tensor.dtype}")
    shape = layout.shape(batch)
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, the plan expects {shape}")
    _check_strides(name, tuple(int(s) for s in tensor.strides), layout, batch)


def _check_writable_out(out: Any) -> None:
    """A ValueError when the output `out` is a read-only numpy array (e.g. a memmap opened with mode "r")."""
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise ValueError("out must be writable (it is a read-only array)")


class _WritableAlias:
    """A read-only array's memory described as writable (numpy's array interface), kept alive by `base`."""

    def __init__(self, array: np.ndarray) -> None:
        self.base = array
        self.__array_interface__ = {**array.__array_interface__, "data": (array.ctypes.data, False)}


def _check_in_place(x: np.ndarray, out: np.ndarray) -> None:
    """An output that shares memory with the input must be the input itself (an in-place transform)."""
    if not np.may_share_memory(x, out):
        return
    same = x.__array_interface__["data"][0] == out.__array_interface__["data"][0] and x.shape == out.shape \
        and x.strides == out.strides and x.dtype == out.dtype
    if same:
        return
    try:
        overlap = np.shares_memory(x, out, max_work=1_000_000)
    except np.exceptions.TooHardError:
        overlap = True
    if overlap:
        raise ValueError("out overlaps x without being x itself: an in-place transform needs out to be x (the same "
                         "memory, shape and strides); otherwise pass disjoint arrays")


# CUDA plans place their own barriers (`template`, `pass_barriers`): TVM's default pipeline without ThreadSync
# A one-kernel plan's shared buffers are laid out by the template (physical scratch buffers by live range, the
# staged rows), and StorageRewrite, which relies on ThreadSync's barriers, would reuse a buffer that a pass reads for
# one that the same pass writes (one round of threads: the input's rows for the output's at n = 16), a race between
# threads: one-kernel plans (and `te_fft` stages, through the public name) compile without it.
CUDA_PIPELINE = register_pipeline_without_thread_sync(
    "tailsplit_fft_cuda_one_kernel", "TailsplitFFTCudaOneKernelPipeline", {"tirx.disable_storage_rewrite": True})
_CUDA_MULTI_KERNEL_PIPELINE = register_pipeline_without_thread_sync("tailsplit_fft_cuda", "TailsplitFFTCudaPipeline")


def _pipeline(target: tvm.target.Target, pair_buffers: frozenset[str] = frozenset(), kernels: int = 1) -> str:
    """The TIR pipeline of a plan: on llvm, `lowering`'s; on CUDA, TVM's default without `ThreadSync` (a one-kernel
    plan has a barrier between consecutive passes and none inside them, and no `StorageRewrite`; multi-kernel plans
    need no barrier)."""
    if target.kind.name == "llvm":
        return register_pipeline(pair_buffers)
    return CUDA_PIPELINE if kernels == 1 else _CUDA_MULTI_KERNEL_PIPELINE


def _compile(module: tvm.IRModule, target: tvm.target.Target, pair_buffers: frozenset[str] = frozenset(),
             kernels: int = 1):
    """tvm.compile without TIR's common-subexpression pass: codelets arrive with their CSE done, and the
    pass is quadratic in the size of a straight-line block (most of the compile time of a 31-point codelet).
    On llvm, strided accesses to interleaved complex data become contiguous loads and stores with shuffles
    (`lowering`); on CUDA, TVM places no barriers (`_pipeline`)."""
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        return tvm.compile(module, target=target, tir_pipeline=_pipeline(target, pair_buffers, kernels))


class _TargetKey:
    """A Target as a key of the plan cache: equal when their JSON texts are."""

    def __init__(self, target: tvm.target.Target) -> None:
        self.target, self.text = target, str(target)

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TargetKey) and self.text == other.text


@functools.lru_cache(maxsize=256)
def _cached_plan(spec: FFTSpec, batch: int, target: _TargetKey, input_layout: ExternalLayout,
                 output_layout: ExternalLayout, effort: str, rounds: int, lanes: int | None,
                 variant: Variant | None) -> Plan:
    cuda = target.target.kind.name == "cuda"
    if variant is not None:
        return Plan(spec, batch, target.target, input_layout, output_layout, variant)
    if effort == "estimate":
        return Plan(spec, batch, target.target, input_layout, output_layout, lanes=lanes)
    estimate = estimate_variant(spec, batch, CudaLimits.of(target.target) if cuda else None, lanes,
                                (input_layout, output_layout))

    def candidate(variant: Variant) -> Plan:
        # a search's candidates stay out of the plan cache; the winner is stored below
        return Plan(spec, batch, target.target, input_layout, output_layout, variant, store=False)

    def build(variant: Variant | None = None) -> Plan:
        # None: the rules' plan, under the same cache key as an estimate plan's
        return Plan(spec, batch, target.target, input_layout, output_layout, variant, lanes=lanes)

    threads = 1 if cuda else tvm.runtime.num_threads()
    key = problem_key(spec, batch, input_layout, output_layout, target.target, threads)
    known = lookup(key, effort)
    if known is not None:
        # the estimate variant's plan is the rules' plan, cached under the rules' key
        result = build(None if known == estimate else known)
        result.search = SearchReport(effort, "wisdom", label(known, estimate),
                                     "recorded by an earlier search (wisdom), not timed again")
        logger.info("fft plan (%s) of %r from wisdom: %s", effort, result, result.search.winner)
        return result
    result, report = search(effort, build(), candidate, estimate, threads, rounds)
    result.store_in_cache()
    result.search = report
    if report.source == "timed":
        record(key, effort, result.variant)
    return result


class _Progress:
    """The state of the `verbose` calls in progress (`_progress`): one stderr handler and the logger's own level, kept
    while any runs, under a lock (plans are made from several threads)."""

    lock = threading.Lock()
    calls = 0
    level = logging.NOTSET
    handler: logging.Handler | None = None


@contextlib.contextmanager
def _progress(verbose: bool):
    """With `verbose`, the `tvm_tailsplit.fft` logger's INFO records go to stderr for the duration. Calls that overlap
    (threads) share one handler, and the last to end restores the logger's level (each call restored the level it
    found, so the one that ended last left INFO set, and one that ended first silenced the other)."""
    if not verbose:
        yield
        return
    with _Progress.lock:
        if _Progress.calls == 0:
            _Progress.handler = logging.StreamHandler(sys.stderr)
            _Progress.handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            _Progress.level = logger.level
            logger.addHandler(_Progress.handler)
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
        _Progress.calls += 1
    try:
        yield
    finally:
        with _Progress.lock:
            _Progress.calls -= 1
            if _Progress.calls == 0:
                logger.removeHandler(_Progress.handler)
                logger.setLevel(_Progress.level)
                _Progress.handler = None


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
    codelet_limit: int = CODELET_LIMIT,
    radix_limit: int = RADIX_LIMIT,
    lanes: int | None = None,
    effort: str = "estimate",
    verbose: bool = False,
    rounds: int = ROUNDS,
    variant: Variant | None = None,
) -> Plan:
    """Compile (once; plans are cached by their parameters) an FFT operator for `batch` transforms of size n.

    kind: "c2c", "r2c" (forward only) or "c2r" (backward only); direction: "forward" or "backward" (r2c refuses
    "backward"; c2r is the backward transform whatever `direction` says); norm: numpy's "backward", "ortho", "forward";
    dtype: "complex64" or "complex128" (r2c/c2r use the matching float type for the real side); target:
    "llvm" (the host CPU), "cuda" (the architecture of the GPU present, sm_80 without one) or a target dict or
    Target (a CUDA one's `arch`, e.g. "sm_90", sets the shared memory and threads per block the plan may use:
    `cuda.CudaLimits`). istride/idist and ostride/odist are the steps between elements and between transforms of
    the input and output, in elements (complex or real); the output's transforms must not overlap. codelet_limit:
    the largest DFT computed by one codelet; radix_limit: the largest radix of a pass of a larger transform (see
    `factor`); a search tries other limits up to codelet_limit. lanes: transforms per lane group on llvm in the
    rules' variant (vectorized side by side; default: `schedule.choose_lanes`, which may also put one transform per
    group, vectorized inside).
    effort (FFTW's planner flags): "estimate" builds the variant of the rules of `tuning`; "measure" compiles a
    handful of variants (breakdown, lanes, vectors, prefetch, parallel tasks; on CUDA threads per block and
    kernels) and times them on this machine, side by side on buffers of the plan's layouts (`rounds` rounds,
    median), keeping the fastest (never the estimate variant's inferior); "patient" searches wider (`search`).
    A searched problem whose winner is in the wisdom (`import_wisdom`) is built from it without timing.
    verbose: show the search's progress (INFO records of the `tvm_tailsplit.fft` logger) on stderr.
    variant: build exactly this `Variant` (e.g. another plan's `plan.variant`), without rules or search.
    A wrong type raises TypeError, a wrong value ValueError, naming the argument.
    """
    # kind "conv" is `convolve`'s pipeline, planned by `plan_convolve` with its filter
    kind = check_choice("kind", kind, KINDS)
    direction = requested_direction(kind, direction)
    # every argument is validated (and normalized) before the plan cache hashes it
    spec = FFTSpec(n, kind, direction, norm, dtype, codelet_limit, radix_limit)
    batch = check_int("batch", batch, 1)
    input_layout, output_layout = spec.layouts(batch, istride, idist, ostride, odist)
    if batch == 1:
        # one transform has no distance: the compact one is declared, so that the operator's check of the batch
        # stride holds whatever stride an exporter writes for a dimension of one (numpy before 2.4 writes the
        # compact one through DLPack, 2.4 the array's own, which `Plan._as_float_view` sets to the declared one;
        # a strided layout's operator takes any batch stride: `template.build_primfunc`)
        input_layout, output_layout = (dataclasses.replace(layout, distance=layout.elements * layout.stride)
                                       for layout in (input_layout, output_layout))
    effort = check_choice("effort", effort, EFFORTS)
    require_bools("plan", verbose=verbose)
    rounds = check_int("rounds", rounds, 1)
    if lanes is not None:
        lanes = min(check_int("lanes", lanes, 1), batch)
    if variant is not None:
        if not isinstance(variant, Variant):
            raise TypeError(f"variant must be a tvm_tailsplit.fft.Variant, got {variant!r} ({type(variant).__name__})")
        if lanes is not None or effort != "estimate":
            raise ValueError("variant fixes every choice of the plan: give it without lanes= or a searching effort=")
    with _progress(verbose):
        return _cached_plan(spec, batch, _TargetKey(_resolve_target(target)), input_layout, output_layout, effort,
                            rounds, lanes, variant)

