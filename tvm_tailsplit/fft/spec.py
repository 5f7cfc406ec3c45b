"""The FFT request shared by `plan()` and `te_fft()`: what to compute, validated once.

Algorithm: `FFTSpec(n, kind, direction, norm, dtype, codelet_limit, radix_limit)` checks every argument when it
is built (a wrong type raises TypeError, a wrong value ValueError, each naming the argument and what is
expected) and normalizes it (numpy integers to int, numpy dtypes to their names), so that a spec is frozen,
hashable and valid. Everything else derives from it:

* `layouts(batch, istride, idist, ostride, odist)`: the input and output layouts (`template.ExternalLayout`):
  c2c is n complex elements in and out, r2c n reals in (read as n/2 complex pairs when n is even) and n//2 + 1
  complex out, c2r the reverse. The strides are checked: an output whose transforms would write over each
  other (e.g. `odist=1` with `batch=2`) is refused, the arguments named; so is a layout that reaches beyond
  `MAX_BUFFER_FLOATS` floats (`batch·distance`, `elements·stride` or its last element): the generated operator
  indexes its buffers with 32-bit integers (TVM refused such layouts with an internal error, or, for a plan of any
  batch, whose batch is an int32 variable, the offsets wrapped around);
* `check_passes_indexable(n, passes, lanes)`: the same limit for the operator's constant tables, index table and
  a lane group's scratch (a Bluestein size's tables reach it from n ≈ 2.1e8 on, before its input does);
* kind "conv" is the circular convolution pipeline of `convolve` (n reals in and out, laid out as r2c's input
  and c2r's output; direction "forward", norm "backward": the 1/n is in the filter's spectrum);
* `tree()`: the breakdown of the complex transform (`factor.breakdown`; n/2 points for even real transforms);
* `passes()`: the passes over memory (`passes.build_passes`), cached per spec.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .factor import Breakdown, breakdown
from .passes import PassList, build_passes
from .template import ExternalLayout, largest_scratch_floats
from .tuning import CODELET_LIMIT, MAX_CODELET_LIMIT, RADIX_LIMIT

__all__ = ["DIRECTIONS", "KINDS", "MAX_BUFFER_FLOATS", "NORMS", "PIPELINE_KINDS", "REAL_DTYPES", "FFTSpec",
           "check_choice", "check_int", "check_length", "check_passes_indexable", "first_overlap", "indexable_batch",
           "layout_reach", "requested_direction"]

KINDS = ("c2c", "r2c", "c2r")
# the transforms and the convolution pipeline of `convolve` (planned by it, not by `plan()` or `te_fft()`)
PIPELINE_KINDS = KINDS + ("conv",)
_NAMED = {"c2c": "a c2c", "r2c": "an r2c", "c2r": "a c2r", "conv": "a conv"}
DIRECTIONS = ("forward", "backward")
NORMS = ("backward", "ortho", "forward")
REAL_DTYPES = {"complex64": "float32", "complex128": "float64"}
# the floats a parameter buffer may reach: the generated operator's indices are 32-bit integers
MAX_BUFFER_FLOATS = 2**31 - 1


def requested_direction(kind: str, direction: str) -> str:
    """The direction a request of `kind` means: a c2r transform is the backward one, so the entry points' default
    "forward" is read as "backward" for it (any other direction is left for `FFTSpec` to check)."""
    return "backward" if kind == "c2r" and direction == "forward" else direction


def check_int(name: str, value: Any, minimum: int | None = None) -> int:
    """`value` as an int: TypeError unless it is an integer (not a bool), ValueError when below `minimum`. An
    integer is anything with `__index__`, as numpy and scipy take it (a 0-d integer array `np.array(8)` too)."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_length(name: str, value: Any, default: int, source: str) -> int:
    """A transform length `value` (an integer of at least 1, `check_int`), or `default` for None, `source` saying
    where it comes from (numpy's 2·(m - 1) output points of a c2r transform of m input points): like numpy, a
    default of no points is a ValueError naming the argument to give, not an empty result."""
    if value is None:
        if default < 1:
            raise ValueError(f"invalid number of data points ({default}): {name} defaults to {source}; a transform "
                             f"needs at least 1 point (give {name})")
        return default
    return check_int(name, value, 1)


def check_codelet_limit(value: Any) -> int:
    """`value` as a codelet limit: an integer from 2 to `tuning.MAX_CODELET_LIMIT` (TypeError, ValueError naming
    `codelet_limit` otherwise)."""
    value = check_int("codelet_limit", value, 2)
    if value > MAX_CODELET_LIMIT:
        raise ValueError(f"codelet_limit must be at most {MAX_CODELET_LIMIT}, got {value}: a codelet is compiled as "
                         "straight-line code whose compile time grows about 7x per doubling of its size "
                         "(tuning.MAX_CODELET_LIMIT); larger sizes are split into passes")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """`value` if it is one of the strings `choices`, as a `str` (a numpy string, `np.str_`, is normalized: the
    request keeps no numpy scalar): TypeError unless a string, else ValueError."""
    expected = ", ".join(map(repr, choices))
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {expected} (a string), got {value!r} ({type(value).__name__})")
    if value not in choices:
        raise ValueError(f"{name} must be one of {expected}, got {value!r}")
    return str(value)


def _check_dtype(dtype: Any) -> str:
    """The complex dtype's name: a string, numpy dtype or scalar type of complex64 or complex128."""
    if not isinstance(dtype, str):
        try:
            if dtype is None:  # (numpy's dtype(None) is float64)
                raise TypeError
            dtype = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"dtype must be 'complex64' or 'complex128' (a string or numpy dtype), got {dtype!r} "
                            f"({type(dtype).__name__})") from None
    return check_choice("dtype", dtype, tuple(REAL_DTYPES))


@dataclass(frozen=True)
class FFTSpec:
    """A transform request: `n` logical points of `kind` ("c2c", "r2c" forward only, "c2r" backward only) in
    `direction` with numpy's `norm`, in precision `dtype` (complex64/complex128; real sides use the matching
    float type), planned with codelets of at most `codelet_limit` points and radices of at most `radix_limit`."""

    n: int
    kind: str = "c2c"
    direction: str = "forward"
    norm: str = "backward"
    dtype: str = "complex64"
    codelet_limit: int = CODELET_LIMIT
    radix_limit: int = RADIX_LIMIT

    def __post_init__(self) -> None:
        normalized = {
            "n": check_int("n", self.n, 1),
            "kind": check_choice("kind", self.kind, PIPELINE_KINDS),
            "direction": check_choice("direction", self.direction, DIRECTIONS),
            "norm": check_choice("norm", self.norm, NORMS),
            "dtype": _check_dtype(self.dtype),
            "codelet_limit": check_codelet_limit(self.codelet_limit),
            "radix_limit": check_int("radix_limit", self.radix_limit, 2),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)
        if self.radix_limit > self.codelet_limit:
            raise ValueError(f"radix_limit must be at most codelet_limit={self.codelet_limit}, got {self.radix_limit}")
        if self.kind == "r2c" and self.direction != "forward":
            raise ValueError("direction must be 'forward' for kind='r2c' (the inverse is kind='c2r')")
        if self.kind == "c2r" and self.direction != "backward":
            raise ValueError("direction must be 'backward' for kind='c2r' (the forward is kind='r2c')")
        if self.kind == "conv" and (self.direction, self.norm) != ("forward", "backward"):
            raise ValueError("kind='conv' has direction 'forward' and norm 'backward' (its 1/n is in the filter)")

    @property
    def real_dtype(self) -> str:
        return REAL_DTYPES[self.dtype]

    @property
    def sign(self) -> int:
        """The sign of the exponent of the transform's roots of unity: -1 forward, +1 backward."""
        return 1 if self.direction == "backward" else -1

    @property
    def scale(self) -> float:
        """numpy's normalization factor of this direction and `norm`."""
        if self.norm == "ortho":
            return 1.0 / math.sqrt(self.n)
        if (self.norm == "backward") == (self.direction == "backward"):
            return 1.0 / self.n
        return 1.0

    @property
    def complex_size(self) -> int:
        """Points of the complex transform: n/2 for real transforms of even n (pairs of reals), else n."""
        return self.n // 2 if self.kind != "c2c" and self.n % 2 == 0 else self.n

    def tree(self) -> Breakdown:
        """The breakdown of the complex transform (`factor.breakdown`)."""
        return breakdown(self.complex_size, self.codelet_limit, self.radix_limit)

    def passes(self) -> PassList:
        """The passes over memory with their codelets, twiddles and constant tables (cached per spec)."""
        return _passes(self)

    def layouts(self, batch: int = 1, istride: int = 1, idist: int | None = None, ostride: int = 1,
                odist: int | None = None) -> tuple[ExternalLayout, ExternalLayout]:
        """The input and output layouts of `batch` transforms with the given element strides and distances
        between transforms (in buffer elements; a distance of None is the compact one)."""
        batch = check_int("batch", batch, 1)
        half = self.n // 2 + 1
        pairs = "real_pairs" if self.n % 2 == 0 else "real"
        complex_n = ("complex", self.n)
        reals = (pairs, self.n)
        in_kind, in_elements = {"c2c": complex_n, "c2r": ("complex", half), "r2c": reals, "conv": reals}[self.kind]
        out_kind, out_elements = {"c2c": complex_n, "r2c": ("complex", half), "c2r": reals, "conv": reals}[self.kind]
        istride = check_int("istride", istride, 1)
        ostride = check_int("ostride", ostride, 1)
        idist = check_int("idist", in_elements * istride if idist is None else idist, 1)
        odist = check_int("odist", out_elements * ostride if odist is None else odist, 1)
        if in_kind == "real_pairs" and istride != 1:
            raise ValueError(f"istride must be 1 for {_NAMED[self.kind]} plan of even n, got {istride}")
        if out_kind == "real_pairs" and ostride != 1:
            raise ValueError(f"ostride must be 1 for {_NAMED[self.kind]} plan of even n, got {ostride}")
        output = ExternalLayout(out_kind, out_elements, odist, ostride)
        _check_disjoint(output, batch)
        layouts = ExternalLayout(in_kind, in_elements, idist, istride), output
        for name, layout in zip(("input", "output"), layouts, strict=True):
            _check_indexable(name, layout, batch)
        return layouts

    def transforms_per_call(self, istride: int = 1, idist: int | None = None, ostride: int = 1,
                            odist: int | None = None) -> int:
        """The most transforms one operator call takes in these layouts (`indexable_batch` of the input and the
        output); 0 when one transform alone reaches beyond the operator's 32-bit indices (`layouts` refuses it)."""
        try:
            layouts = self.layouts(1, istride, idist, ostride, odist)
        except ValueError:
            return 0
        return min(indexable_batch(layout) for layout in layouts)


def first_overlap(elements: int, stride: int, distance: int, batch: int) -> tuple[int, int] | None:
    """Whether `batch` transforms of `elements` elements, `stride` apart, transforms `distance` apart, share memory:
    (element e, transform b) such that element e of transform 0 is element 0 of transform b, or None when every
    element is its own. Element e of transform b is at `b·distance + e·stride`, so two coincide when
    `Δb·distance = Δe·stride` for some 0 < Δb < batch and 0 < Δe < elements, whose smallest solution is
    `Δb = stride/g`, `Δe = distance/g` with g their gcd."""
    if batch == 1 or elements == 1:
        return None
    g = math.gcd(stride, distance)
    transform, element = stride // g, distance // g
    return (element, transform) if transform < batch and element < elements else None


def _check_disjoint(layout: ExternalLayout, batch: int) -> None:
    """ValueError when two output elements of the batch are the same memory (`first_overlap`)."""
    overlap = first_overlap(layout.elements, layout.stride, layout.distance, batch)
    if overlap is not None:
        element, transform = overlap
        unit = "complex element" if layout.kind == "complex" else "real"
        raise ValueError(
            f"ostride={layout.stride} and odist={layout.distance} make the outputs of the {batch} transforms "
            f"overlap: element {element} of transform 0 is element 0 of transform {transform} (the same {unit}); "
            f"the output needs odist >= {layout.elements}·ostride (or ostride >= batch·odist)")


def layout_reach(layout: ExternalLayout, batch: int) -> int:
    """The floats that the buffer of `batch` transforms in `layout` spans: the furthest of `batch` distances, one
    transform's elements and the last element, from the buffer's start."""
    last = (batch - 1) * layout.distance + (layout.elements - 1) * layout.stride + 1
    return max(batch * layout.distance, layout.elements * layout.stride, last) * (2 if layout.kind == "complex" else 1)


def indexable_batch(layout: ExternalLayout) -> int:
    """The most transforms whose buffer in `layout` reaches at most `MAX_BUFFER_FLOATS` floats (`layout_reach`;
    0 when one transform reaches further)."""
    floats = MAX_BUFFER_FLOATS // (2 if layout.kind == "complex" else 1)
    if layout.elements * layout.stride > floats or (layout.elements - 1) * layout.stride + 1 > floats:
        return 0
    return min(floats // layout.distance, (floats - (layout.elements - 1) * layout.stride - 1) // layout.distance + 1)


def _check_indexable(name: str, layout: ExternalLayout, batch: int) -> None:
    """ValueError when the buffer of `batch` transforms in `layout` reaches beyond `MAX_BUFFER_FLOATS` floats."""
    reach = layout_reach(layout, batch)
    if reach > MAX_BUFFER_FLOATS:
        fit = indexable_batch(layout)
        advice = (f"transform the batch in parts of at most {fit}" if fit else
                  f"one transform of {layout.elements} elements at stride {layout.stride} already reaches beyond "
                  "it: this size and stride cannot be built")
        raise ValueError(
            f"the {name} of {batch} transforms (distance {layout.distance}, stride {layout.stride}) reaches {reach} "
            f"floats; the generated operator indexes its buffers with 32-bit integers (at most {MAX_BUFFER_FLOATS}): "
            f"{advice}")


def check_passes_indexable(n: int, passes: PassList, lanes: int) -> None:
    """ValueError naming `n` when the operator of `passes` would index its constant tables (twiddle factors,
    Rader and Bluestein kernels, chirps: `passes.table_size` complex values), its index table or the scratch
    of a lane group of `lanes` transforms beyond `MAX_BUFFER_FLOATS`: it indexes them with 32-bit integers, and
    TVM stopped the build with an internal error ("Literal value ... exceeds range of int32"). The tables are
    about 5n complex values for a Bluestein size (its chirp, kernel and the twiddles of its m ≥ 2n - 1 points),
    so from n ≈ 2.1e8 on, below the external layouts' limit. (The global scratch of a multi-kernel CUDA plan
    depends on its batch: `Plan`.)"""
    sizes = (("constant tables", 2 * passes.table_size), ("index table", passes.index_size),
             ("a lane group's scratch", largest_scratch_floats(passes, lanes)))
    for what, count in sizes:
        if count > MAX_BUFFER_FLOATS:
            raise ValueError(f"n={n}: the operator's {what} would hold {count} values; the generated operator "
                             f"indexes it with 32-bit integers (at most {MAX_BUFFER_FLOATS}): a transform of this "
                             "size cannot be built")


@functools.lru_cache(maxsize=256)
def _passes(spec: FFTSpec) -> PassList:
    tree_for = functools.partial(breakdown, codelet_limit=spec.codelet_limit, radix_limit=spec.radix_limit)
    return build_passes(spec.kind, spec.n, spec.sign, spec.scale, tree_for)
