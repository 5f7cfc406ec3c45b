"""Plan variants: every choice the planner makes about the generated program, as one frozen record.

Algorithm: a `Variant` holds the knobs that shape a plan's IR beyond the request itself: the breakdown
(`codelet_limit`, `radix_limit`: which sizes are one codelet, which radices the Cooley-Tukey passes use;
`radices`: an explicit order of the top-level radices, the last one the first pass over memory), the
transforms per lane group (`lanes`: the batch vectorized across lanes), the vectors inside one transform
(`vector_width`, `inner_vector_scale`: codelet instances of one transform side by side when a group has fewer
lanes than a vector), the parallel tasks over lane groups (`parallel_tasks`), software prefetch
(`prefetch_bytes`: the largest lane group that prefetches, 0 disables it; `prefetch_distance`: how far ahead),
and on CUDA the threads per block (`cuda_threads`), whether the plan runs in several kernels
(`kernel_per_pass`: kernels over columns where `multikernel.choose_kernel_groups` finds them, else one kernel per
pass over memory) and whether a one-kernel plan of one transform per block copies its input row to shared memory
in coalesced vectors before its first pass (`stage_input`, where `schedule.cuda_staging` allows it; blocks of
several transforms stage their rows by the rule alone). `estimate_variant` applies the rules of `tuning` and
`schedule` (FFTW's ESTIMATE: no timing), so a plan built from it is the plan those rules give. The search
(`search`) builds other variants around it and times them (MEASURE/PATIENT); wisdom (`wisdom`) stores the winner
as the variant's fields.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from ..cuda import CudaLimits
from ..ir_utils import require_bools
from .factor import Breakdown, breakdown, chain
from .passes import PassList, build_passes
from .schedule import (
    choose_cuda_lanes,
    choose_inner_vector_scale,
    choose_lanes,
    cuda_block_threads,
    cuda_staging,
    staged_bytes,
)
from .spec import FFTSpec, check_codelet_limit, check_int
from .template import ExternalLayout, physical_scratch_elements
from .tuning import (
    CUDA_STAGE_INPUT,
    CUDA_THREADS,
    PARALLEL_TASKS,
    PREFETCH_BYTES,
    PREFETCH_DISTANCE,
    VECTOR_LANES,
)

__all__ = ["Variant", "estimate_variant", "scratch_bytes"]


@dataclass(frozen=True)
class Variant:
    """The planner's choices for one plan (see the module docstring); every field is validated when built."""

    codelet_limit: int
    radix_limit: int
    lanes: int
    vector_width: int
    inner_vector_scale: int
    parallel_tasks: int
    prefetch_bytes: int
    prefetch_distance: int = PREFETCH_DISTANCE
    cuda_threads: int = CUDA_THREADS
    kernel_per_pass: bool = False
    # False: as a plan before this field (wisdom recorded without it reads back as the plan it timed)
    stage_input: bool = False
    # the top-level Cooley-Tukey radices in this order (`factor.chain`); empty: the rule's (`factor.breakdown`)
    radices: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "codelet_limit", check_codelet_limit(self.codelet_limit))
        for name, minimum in (("radix_limit", 2), ("lanes", 1), ("vector_width", 1),
                              ("inner_vector_scale", 1), ("parallel_tasks", 1), ("prefetch_bytes", 0),
                              ("prefetch_distance", 0), ("cuda_threads", 1)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))
        if self.radix_limit > self.codelet_limit:
            raise ValueError(f"radix_limit must be at most codelet_limit={self.codelet_limit}, got {self.radix_limit}")
        flags = {"kernel_per_pass": self.kernel_per_pass, "stage_input": self.stage_input}
        for name, flag in zip(flags, require_bools("Variant", **flags), strict=True):
            object.__setattr__(self, name, flag)
        if not isinstance(self.radices, (tuple, list)):
            raise TypeError(f"radices must be a tuple of integers, got {self.radices!r}")
        object.__setattr__(self, "radices", tuple(check_int("radices", r, 2) for r in self.radices))
        if len(self.radices) == 1:
            raise ValueError(f"radices must be empty or have at least two radices, got {self.radices}")

    def spec(self, request: FFTSpec) -> FFTSpec:
        """The request with this variant's breakdown limits."""
        return dataclasses.replace(request, codelet_limit=self.codelet_limit, radix_limit=self.radix_limit)

    def tree(self, request: FFTSpec) -> Breakdown:
        """The breakdown of the request's complex transform in this variant (ValueError when `radices` do not
        multiply to its size)."""
        spec = self.spec(request)
        if not self.radices:
            return spec.tree()
        if math.prod(self.radices) != spec.complex_size:
            raise ValueError(f"radices {self.radices} do not multiply to the complex transform size "
                             f"{spec.complex_size}")
        return chain(list(self.radices), self.codelet_limit, self.radix_limit)

    def passes(self, request: FFTSpec) -> PassList:
        """The passes over memory of the request in this variant (cached)."""
        if not self.radices:
            return self.spec(request).passes()
        return _passes(self.spec(request), self.radices)

    def to_dict(self) -> dict:
        """The fields as JSON values (`radices` a list, as JSON reads it back; `Variant(**d)` rebuilds it)."""
        return {**dataclasses.asdict(self), "radices": list(self.radices)}

    def differences(self, other: Variant) -> str:
        """The fields in which this variant differs from `other`, as `name=value` ("same" if none)."""
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if getattr(self, f.name) != getattr(other, f.name)]
        return ", ".join(changed) or "same"


@functools.lru_cache(maxsize=64)
def _passes(spec: FFTSpec, radices: tuple[int, ...]) -> PassList:
    top = chain(list(radices), spec.codelet_limit, spec.radix_limit)

    def tree_for(size: int) -> Breakdown:
        return top if size == top.n else breakdown(size, spec.codelet_limit, spec.radix_limit)

    return build_passes(spec.kind, spec.n, spec.sign, spec.scale, tree_for)


def scratch_bytes(request: FFTSpec, variant: Variant) -> int:
    """Bytes of one lane group's scratch for the variant's passes and lanes."""
    passes = variant.passes(request)
    return 2 * np.dtype(request.real_dtype).itemsize * variant.lanes * physical_scratch_elements(passes)


def estimate_variant(request: FFTSpec, batch: int, cuda_limits: CudaLimits | None, lanes: int | None = None,
                     layouts: tuple[ExternalLayout, ExternalLayout] | None = None) -> Variant:
    """The variant that the rules of `tuning` give (FFTW's ESTIMATE): the request's limits, `choose_lanes`
    (`choose_cuda_lanes` on CUDA), `choose_inner_vector_scale`, `PARALLEL_TASKS`, `PREFETCH_BYTES` on llvm,
    `PREFETCH_DISTANCE`, and on CUDA (`cuda_limits`: the target's `CudaLimits`; None on llvm) several kernels when a
    block's scratch exceeds the shared memory per block of the target's architecture, else one kernel whose blocks
    stage their input row where `CUDA_STAGE_INPUT` and `schedule.cuda_staging` say (`stage_input`: blocks of one
    transform) and run `schedule.cuda_block_threads` threads (`CUDA_THREADS` times the 48 KiB spans of the block's
    scratch and staged rows; a multi-kernel plan's kernels over columns scale `CUDA_THREADS` by their
    own: `multikernel`). `lanes` (llvm) replaces `choose_lanes`'s choice; `layouts` are the plan's input and output
    layouts (default: compact, `FFTSpec.layouts`)."""
    layouts = layouts or request.layouts(batch)
    if cuda_limits is not None:
        lanes = choose_cuda_lanes(request.passes(), request.real_dtype, batch, CUDA_THREADS, layouts)
    else:
        lanes = lanes or choose_lanes(request.passes(), request.real_dtype, batch)
    base = Variant(request.codelet_limit, request.radix_limit, lanes, VECTOR_LANES[request.real_dtype],
                   1, PARALLEL_TASKS, PREFETCH_BYTES if cuda_limits is None else 0)
    group_scratch = scratch_bytes(request, base)
    kernel_per_pass = cuda_limits is not None and group_scratch > cuda_limits.shared
    threads, stage_input = CUDA_THREADS, False
    if cuda_limits is not None and not kernel_per_pass:
        staged = cuda_staging(layouts, lanes, request.real_dtype, group_scratch, cuda_limits, CUDA_STAGE_INPUT)
        shared = group_scratch + staged_bytes(layouts, staged, lanes, request.real_dtype)
        threads, stage_input = cuda_block_threads(shared, CUDA_THREADS, cuda_limits), staged == ("input",)
    return dataclasses.replace(base, inner_vector_scale=choose_inner_vector_scale(group_scratch),
                               kernel_per_pass=kernel_per_pass, cuda_threads=threads, stage_input=stage_input)
