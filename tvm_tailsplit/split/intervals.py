"""Per-variable interval analysis: always-true, fuzzy and always-false intervals of a loop range.

For a loop variable ``v`` over ``[lo, hi)`` and the guard atoms that mention it, the range is cut into maximal
intervals on which every atom has one status:

- *always-true*: the atom holds for every ``v`` in the interval, whatever values the other variables take;
- *always-false*: the atom fails for every ``v`` in the interval, whatever the other variables are;
- *fuzzy*: the atom's truth depends on the other variables.

The other variables range over the loop ranges currently bound in a ``RangeContext``: enclosing loops
narrowed to the piece being planned, inner loops over their whole range. For an atom ``linear >= 0`` with
``linear = c * v + rest`` and ``rest`` in ``[r_min, r_max]``, the atom is always-true where
``c * v + r_min >= 0`` and always-false where ``c * v + r_max < 0``; these two thresholds are the split
points. Opaque atoms give no split point. Each interval is then classified by proof (``tvm.sym``), so a
status is never assumed: an interval is always-true or always-false only when the analyzer proves it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import tvm
from tvm import sym, tirx
from tvm.ir import Range

from .conditions import Atom, substitute

__all__ = ["Interval", "RangeContext", "Status", "decompose_range", "split_points"]

# tvm.sym's ConstIntBound uses these sentinels for unbounded ends.
_POS_INF = 2**62
_NEG_INF = -(2**62)


class Status(enum.Enum):
    """How an atom behaves on an interval."""

    ALWAYS_TRUE = "always-true"
    FUZZY = "fuzzy"
    ALWAYS_FALSE = "always-false"


def _as_int(expr) -> int | None:
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    return None


class RangeContext:
    """Loop variables bound to ranges, with proofs over them (a thin layer on ``tvm.sym.Analyzer``).

    A fresh analyzer is built whenever the ranges change: ``Analyzer.bind`` cannot be undone (a variable once
    bound to a single value stays substituted by that value), and intervals are narrowed and restored all the
    time here.
    """

    def __init__(self) -> None:
        self.ranges: dict = {}
        self._analyzer: sym.Analyzer | None = None

    @property
    def analyzer(self) -> sym.Analyzer:
        if self._analyzer is None:
            self._analyzer = sym.Analyzer()
            for var, (low, extent) in self.ranges.items():
                self._analyzer.bind(var, Range.from_min_extent(low, extent))
        return self._analyzer

    def bind(self, var, low, extent) -> None:
        """Bind ``var`` to ``[low, low + extent)`` (replacing an earlier binding)."""
        self.ranges[var] = (low, extent)
        self._analyzer = None

    def constant_range(self, var) -> tuple[int, int] | None:
        """``(lo, hi)`` of ``var`` when both ends are constants, else ``None``."""
        low, extent = self.ranges[var]
        low_value, extent_value = _as_int(self.analyzer.simplify(low)), _as_int(self.analyzer.simplify(extent))
        if low_value is None or extent_value is None:
            return None
        return low_value, low_value + extent_value

    @contextmanager
    def narrowed(self, var, lo: int, hi: int) -> Iterator[None]:
        """Temporarily bind ``var`` to the constant interval ``[lo, hi)``."""
        previous = self.ranges[var]
        self.bind(var, tirx.const(lo, var.ty.dtype), tirx.const(hi - lo, var.ty.dtype))
        try:
            yield
        finally:
            self.bind(var, *previous)

    def bounds(self, expr) -> tuple[int, int]:
        """Constant lower and upper bound of an integer expression (the sentinels mean unbounded)."""
        bound = self.analyzer.const_int_bound(self.analyzer.simplify(expr))
        return int(bound.min_value), int(bound.max_value)

    def status(self, atom: Atom, binding: dict | None = None) -> Status:
        """Prove the atom always-true or always-false on the bound ranges, else fuzzy."""
        expr = atom.expr
        linear = atom.linear
        if binding:
            expr = substitute(expr, binding)
            linear = substitute(linear, binding) if linear is not None else None
        if linear is not None:
            low, high = self.bounds(linear)
            if low != _NEG_INF and low >= 0:
                return Status.ALWAYS_TRUE
            if high != _POS_INF and high < 0:
                return Status.ALWAYS_FALSE
        if self.analyzer.can_prove(expr):
            return Status.ALWAYS_TRUE
        if self.analyzer.can_prove(tirx.Not(expr)):
            return Status.ALWAYS_FALSE
        return Status.FUZZY


@dataclass(frozen=True)
class Interval:
    """``[lo, hi)`` of one loop variable with the status of each atom on it (same order as the atoms)."""

    lo: int
    hi: int
    statuses: tuple[Status, ...]

    @property
    def size(self) -> int:
        return self.hi - self.lo

    @property
    def status(self) -> Status:
        """Combined status of the conjunction of the atoms."""
        if Status.ALWAYS_FALSE in self.statuses:
            return Status.ALWAYS_FALSE
        if all(s is Status.ALWAYS_TRUE for s in self.statuses):
            return Status.ALWAYS_TRUE
        return Status.FUZZY

    def __str__(self) -> str:
        span = f"{self.lo}" if self.size == 1 else f"[{self.lo},{self.hi - 1}]"
        return f"{span} {self.status.value}"


def _floor_div(a: int, b: int) -> int:
    return a // b


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def split_points(atom: Atom, var, context: RangeContext) -> list[int]:
    """The values of ``var`` where the atom may change status (start of the always-true / always-false parts)."""
    if atom.linear is None:
        return []
    linear = context.analyzer.simplify(atom.linear)
    coefficients = sym.detect_linear_equation(linear, [var])
    if len(coefficients) != 2:
        return []
    coefficient = _as_int(context.analyzer.simplify(coefficients[0]))
    if not coefficient:
        return []
    rest_min, rest_max = context.bounds(coefficients[1])
    points = []
    if coefficient > 0:
        if rest_min != _NEG_INF:
            points.append(_ceil_div(-rest_min, coefficient))  # always-true from here on
        if rest_max != _POS_INF:
            points.append(_ceil_div(-rest_max, coefficient))  # always-false below this
    else:
        magnitude = -coefficient
        if rest_min != _NEG_INF:
            points.append(_floor_div(rest_min, magnitude) + 1)  # always-true below this
        if rest_max != _POS_INF:
            points.append(_floor_div(rest_max, magnitude) + 1)  # always-false from here on
    return points


def decompose_range(var, lo: int, hi: int, atoms: Sequence[Atom], context: RangeContext) -> list[Interval]:
    """Cut ``[lo, hi)`` of ``var`` into maximal intervals on which every atom has one status."""
    if hi <= lo:
        return []
    cuts = {lo, hi}
    for atom in atoms:
        cuts.update(p for p in split_points(atom, var, context) if lo < p < hi)
    bounds = sorted(cuts)
    intervals: list[Interval] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        with context.narrowed(var, start, end):
            statuses = tuple(context.status(atom) for atom in atoms)
        if intervals and intervals[-1].statuses == statuses:
            intervals[-1] = Interval(intervals[-1].lo, end, statuses)
        else:
            intervals.append(Interval(start, end, statuses))
    return intervals


def is_integer_var(var) -> bool:
    """True for scalar integer variables (loop variables)."""
    return isinstance(var.ty, tvm.ir.PrimType) and var.ty.dtype.startswith(("int", "uint"))
