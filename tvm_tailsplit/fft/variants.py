"""Plan variants: every choice the planner makes about the generated program, as one frozen record.

Algorithm: a `Variant` holds the knobs that shape a plan's IR beyond the request itself: the breakdown
(`codelet_limit`, `radix_limit`: which sizes are one codelet, which radices the Cooley-Tukey passes use), the
transforms per lane group (`lanes`: the batch vectorized across lanes), the vectors inside one transform
(`vector_width`, `inner_vector_scale`: codelet instances of one transform side by side when a group has fewer
lanes than a vector), the parallel tasks over lane groups (`parallel_tasks`), software prefetch
(`prefetch_bytes`: the largest lane group that prefetches, 0 disables it; `prefetch_distance`: how far ahead),
and on CUDA the threads per block (`cuda_threads`) and whether every pass over memory is its own kernel
(`kernel_per_pass`). `estimate_variant` applies the rules of `tuning` and `schedule` (FFTW's ESTIMATE: no
timing), so a plan built from it is the plan those rules give. The search (`search`) builds other variants
around it and times them (MEASURE/PATIENT); wisdom (`wisdom`) stores the winner as the variant's fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .schedule import choose_inner_vector_scale, choose_lanes
from .spec import FFTSpec, check_int
from .template import physical_scratch_elements
from .tuning import (
    CUDA_SHARED_LIMIT,
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

    def __post_init__(self) -> None:
        for name, minimum in (("codelet_limit", 2), ("radix_limit", 2), ("lanes", 1), ("vector_width", 1),
                              ("inner_vector_scale", 1), ("parallel_tasks", 1), ("prefetch_bytes", 0),
                              ("prefetch_distance", 0), ("cuda_threads", 1)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))
        if self.radix_limit > self.codelet_limit:
            raise ValueError(f"radix_limit must be at most codelet_limit={self.codelet_limit}, got {self.radix_limit}")
        if not isinstance(self.kernel_per_pass, bool):
            raise TypeError(f"kernel_per_pass must be a bool, got {self.kernel_per_pass!r}")

    def spec(self, request: FFTSpec) -> FFTSpec:
        """The request with this variant's breakdown limits (its `tree()` and `passes()` are this variant's)."""
        return dataclasses.replace(request, codelet_limit=self.codelet_limit, radix_limit=self.radix_limit)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (`Variant(**d)` rebuilds it)."""
        return dataclasses.asdict(self)

    def differences(self, other: Variant) -> str:
        """The fields in which this variant differs from `other`, as `name=value` ("same" if none)."""
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if getattr(self, f.name) != getattr(other, f.name)]
        return ", ".join(changed) or "same"


def scratch_bytes(request: FFTSpec, variant: Variant) -> int:
    """Bytes of one lane group's scratch for the variant's passes and lanes."""
    passes = variant.spec(request).passes()
    return 2 * np.dtype(request.real_dtype).itemsize * variant.lanes * physical_scratch_elements(passes)


def estimate_variant(request: FFTSpec, batch: int, cuda: bool) -> Variant:
    """The variant that the rules of `tuning` give (FFTW's ESTIMATE): the request's limits, `choose_lanes`
    (one lane per group on CUDA), `choose_inner_vector_scale`, `PARALLEL_TASKS`, `PREFETCH_BYTES` on llvm,
    `PREFETCH_DISTANCE`, `CUDA_THREADS`, and one kernel per pass when a CUDA block's scratch exceeds
    `CUDA_SHARED_LIMIT`."""
    lanes = 1 if cuda else choose_lanes(request.passes(), request.real_dtype, batch)
    base = Variant(request.codelet_limit, request.radix_limit, lanes, VECTOR_LANES[request.real_dtype],
                   1, PARALLEL_TASKS, 0 if cuda else PREFETCH_BYTES)
    group_scratch = scratch_bytes(request, base)
    return dataclasses.replace(base, inner_vector_scale=choose_inner_vector_scale(group_scratch),
                               kernel_per_pass=cuda and group_scratch > CUDA_SHARED_LIMIT)
