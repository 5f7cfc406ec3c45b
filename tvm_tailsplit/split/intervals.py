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

**One computation for constant and symbolic ranges.** ``r_min`` and ``r_max`` are the bounds of ``rest``
over the other loop ranges as expressions (``tvm.sym`` interval sets): constants when those ranges are
constant (the simplifier folds them; ``decompose_range`` turns the ends into integers and cuts only at
constant points), expressions when a loop bound or an atom contains a symbolic variable (``n``). A point
that mentions ``v`` itself or another loop not enclosing it (``rest`` over an inner loop whose extent depends
on ``v``) is no cut. Each split point is clamped into the loop range with
``max(lo, min(hi, point))``, so every piece ``[a, b)`` lies inside ``[lo, hi)`` for every value of the symbolic
variables (an empty piece has ``b <= a``). Points are ordered only where the analyzer proves their order; the
atoms whose points cannot be ordered are not split on. Statuses are proved as in the static case, with
``tvm.sym``'s symbolic-bound strength (which falls back to Z3) over the loop ranges as constraints. The proofs
are over the integers; the emitted points are computed in the loop variable's type (int32), as TVM's own tiling
of a symbolic extent is, so they hold for symbolic values a tile plus the nest's range away from its limits.

**Range intersection** (the second method, for a loop at or below a mark): an atom whose other variables are
all defined outside the loop is equivalent to a bound on the loop variable, ``v >= ceil(-rest / c)`` for
``c > 0`` or ``v <= floor(rest / -c)`` for ``c < 0``. Intersecting the loop range with these bounds (new lower
end = max of the lower ends, new upper end = min of the upper ends) makes the atoms always-true on the new
range, so they disappear from the body; each atom is used by one variable only, its innermost one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.ir import Range

from ..ir_utils import conjunction, substitute
from .conditions import Atom, free_vars

__all__ = [
    "Interval",
    "RangeContext",
    "Status",
    "as_expr",
    "decompose_range",
    "decompose_symbolic_range",
    "intersect_range",
    "split_points",
]

# tvm.sym's ConstIntBound uses these sentinels for unbounded ends.
_POS_INF = 2**62
_NEG_INF = -(2**62)
# Z3's budget per proof, in its deterministic resource units (the same answer on a loaded machine): a proof it cannot
# finish within it is treated as not proved (sound, maybe less split). The proofs of the test suite take at most
# ~2,500 units (~3 ms); the wall-clock limit is only a backstop against a pathological query.
_Z3_RLIMIT = 200_000
_Z3_TIMEOUT_MS = 10_000


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


class _StructuralKey:
    """A list of IR nodes as a dictionary key, hashed and compared structurally (variables by identity)."""

    def __init__(self, nodes: list) -> None:
        self.nodes = nodes
        self._hash = tvm_ffi.structural_hash(nodes)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, _StructuralKey) and bool(tvm_ffi.structural_equal(self.nodes, other.nodes))


def _var_order(var) -> tuple:
    return var.name, tvm_ffi.structural_hash(var)


class RangeContext:
    """Loop variables bound to ranges, with proofs over them (a thin layer on ``tvm.sym.Analyzer``).

    A fresh analyzer is built whenever the ranges change: ``Analyzer.bind`` cannot be undone (a variable once
    bound to a single value stays substituted by that value), and intervals are narrowed and restored all the
    time here.
    """

    def __init__(self) -> None:
        self.ranges: dict = {}
        self._analyzer: sym.Analyzer | None = None
        self._proofs: dict = {}  # proof cache: [expression, ranges assumed, assumptions] -> proved
        self.assumptions: list = []  # conditions of the guarded cases being planned (e.g. ``s // 8 <= n // 8``)
        # Variables bound by ``Bind`` statements in the code being planned (``x: T.let = j * 4``). They have no
        # range, and like loop variables they are no symbols: an expression placed above their ``Bind`` (a split
        # point, an end bound above a mark) cannot use them. ``outside`` sets name those in scope.
        self.bound_variables: frozenset = frozenset()

    @property
    def analyzer(self) -> sym.Analyzer:
        if self._analyzer is None:
            self._analyzer = sym.Analyzer()
            for var, (low, extent) in self.ranges.items():
                self._analyzer.bind(var, Range.from_min_extent(low, extent))
        return self._analyzer

    def defined_inside(self) -> set:
        """The variables defined by the code being planned (loops and ``Bind`` statements), the others being
        symbols (``n``): an expression mentioning one of them is valid only where it is defined."""
        return set(self.ranges) | self.bound_variables

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
    def narrowed(self, var, lo, hi) -> Iterator[None]:
        """Temporarily bind ``var`` to ``[lo, hi)`` (constants or expressions)."""
        previous = self.ranges[var]
        dtype = var.ty.dtype
        if isinstance(lo, int) and isinstance(hi, int):
            self.bind(var, tirx.const(lo, dtype), tirx.const(hi - lo, dtype))
        else:
            low = as_expr(lo, dtype)
            self.bind(var, low, self.analyzer.simplify(as_expr(hi, dtype) - low))
        try:
            yield
        finally:
            self.bind(var, *previous)

    @contextmanager
    def assuming(self, condition) -> Iterator[None]:
        """Temporarily add ``condition`` (over symbolic and enclosing variables) to what proofs may assume."""
        self.assumptions.append(condition)
        try:
            yield
        finally:
            self.assumptions.pop()

    def _relevant_ranges(self, expr, over: set | None) -> dict:
        """The ranges a proof about ``expr`` may assume: those of the loop variables in ``expr`` (or in the
        assumptions), and of the variables their ranges depend on, restricted to ``over`` when given.

        Only loops the statement is inside of, or loops inside it that a guard mentions, ever get here: a
        non-empty range of any other loop (a sibling nest's ``range(n - 20)``) says nothing about the code being
        decided, and assuming it would make wrong proofs (``n >= 21``)."""
        pending = list(free_vars(expr))
        for assumption in self.assumptions:
            pending.extend(free_vars(assumption))
        relevant: dict = {}
        while pending:
            var = pending.pop()
            if var in relevant or var not in self.ranges or (over is not None and var not in over):
                continue
            low, extent = self.ranges[var]
            relevant[var] = (low, extent)
            pending.extend(free_vars(low) | free_vars(extent))
        # In the order of the context's ranges (the nest's loops, outermost first), not the order in which the
        # sets of variables above happen to iterate (their objects' addresses): the analyzer is bound, and the
        # constraints are conjoined, in this order, and the proofs that fall back to Z3 may depend on it.
        return {var: relevant[var] for var in self.ranges if var in relevant}

    def prove(self, expr, over: set | None = None) -> bool:
        """Prove ``expr`` for every value of the relevant loop variables in their ranges (see
        ``_relevant_ranges``) and every value of the symbolic variables, under the context's assumptions: first
        with the default strength, then with the symbolic-bound strength (Z3 as a fallback, with a deterministic
        resource limit; a proof that runs out of it is no proof).

        ``over`` restricts the ranges that may be assumed to those of the given variables. Proofs about the
        ends of a loop's pieces must not assume that loop's own range or an inner loop's range (a range
        ``0 <= i < (n + 15) // 16`` would imply ``n >= 1``); they pass the enclosing loops here.
        """
        if isinstance(expr, tirx.IntImm):  # folded already (a comparison of constants)
            return bool(expr.value)
        ranges = self._relevant_ranges(expr, over)
        key = _StructuralKey([expr, *[item for var in sorted(ranges, key=_var_order) for item in (var, *ranges[var])],
                              *self.assumptions])
        if key not in self._proofs:
            self._proofs[key] = self._prove(expr, ranges)
        return self._proofs[key]

    def _prove(self, expr, ranges: dict) -> bool:
        analyzer = sym.Analyzer()
        for var, (low, extent) in ranges.items():
            analyzer.bind(var, Range.from_min_extent(low, extent))
        if analyzer.can_prove(expr):
            return True
        symbolic_ranges = {
            var: (low, extent)
            for var, (low, extent) in ranges.items()
            if not (isinstance(low, tirx.IntImm) and isinstance(extent, tirx.IntImm))
        }
        free = free_vars(expr)
        if not self.assumptions and not symbolic_ranges and all(var in ranges for var in free):
            return False  # constant ranges only: the default strength is exact for the atoms handled here
        terms = list(self.assumptions) + [
            tirx.And(low <= var, var < low + extent) for var, (low, extent) in symbolic_ranges.items()
        ]
        if analyzer.is_z3_enabled:
            analyzer.set_z3_rlimit(_Z3_RLIMIT)
            analyzer.set_z3_timeout_ms(_Z3_TIMEOUT_MS)
        with analyzer.constraint_scope(conjunction(terms) if terms else tirx.const(True, "bool")):
            return bool(analyzer.can_prove(expr, sym.ProofStrength.SYMBOLIC_BOUND))

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
        if self.prove(expr):
            return Status.ALWAYS_TRUE
        if self.prove(tirx.Not(expr)):
            return Status.ALWAYS_FALSE
        return Status.FUZZY

    def symbolic_bounds(self, expr, excluded) -> tuple[object, object]:
        """Lower and upper bound of ``expr`` as expressions, over the ranges of the bound variables other than
        ``excluded`` (``None`` for an unbounded end)."""
        variables = free_vars(expr)  # int_set reads the ranges of these only
        domain = {
            var: sym.IntervalSet(low, self.analyzer.simplify(low + extent - 1))
            for var, (low, extent) in self.ranges.items()
            if var in variables and not var.same_as(excluded)
        }
        bounds = self.analyzer.int_set(expr, domain)
        return _finite(bounds.min_value), _finite(bounds.max_value)


def as_expr(value, dtype: str):
    """An interval end as an expression (a Python integer becomes a constant of ``dtype``)."""
    return tirx.const(value, dtype) if isinstance(value, int) else value


def _finite(bound):
    """``None`` for the infinite ends of a ``tvm.sym`` interval set, else the bound."""
    if isinstance(bound, tvm.ir.Var) and bound.name in ("pos_inf", "neg_inf"):
        return None
    return bound


def is_symbolic(value) -> bool:
    """True for an interval end that is an expression rather than a Python integer."""
    return not isinstance(value, int)


@dataclass(frozen=True)
class Interval:
    """``[lo, hi)`` of one loop variable with the status of each atom on it (same order as the atoms).

    The ends are Python integers in the static case and ``PrimExpr`` in the symbolic one."""

    lo: int | tvm.ir.Expr
    hi: int | tvm.ir.Expr
    statuses: tuple[Status, ...]

    @property
    def size(self) -> int | None:
        """The number of points, ``None`` when the ends are symbolic."""
        if is_symbolic(self.lo) or is_symbolic(self.hi):
            return None
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
        if self.size is None:
            span = f"[{self.lo}, {self.hi})"
        else:
            span = f"{self.lo}" if self.size == 1 else f"[{self.lo},{self.hi - 1}]"
        return f"{span} {self.status.value}"


def _classify(var, cuts: list, atoms: Sequence[Atom], context: RangeContext, outside: set | None):
    """The intervals between consecutive cuts with the proven status of each atom; neighbours with the same
    statuses are merged, and pieces proven empty (over the ranges of the ``outside`` loops, of every loop when
    ``None``) are dropped."""
    intervals: list[Interval] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        if context.prove(end <= start, outside):
            continue
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


def _linear_in(atom: Atom, var) -> tuple[int, object] | None:
    """``(c, rest)`` with ``atom.linear == c * var + rest`` and ``c`` a non-zero constant, else ``None``."""
    if atom.linear is None:
        return None
    # A plain analyzer: the context's one substitutes variables bound to a single point, which would hide
    # ``var`` (or an inner variable) from the linear form.
    analyzer = sym.Analyzer()
    coefficients = sym.detect_linear_equation(analyzer.simplify(atom.linear), [var])
    if len(coefficients) != 2:
        return None
    coefficient = _as_int(analyzer.simplify(coefficients[0]))
    if not coefficient:
        return None
    return coefficient, coefficients[1]


def _ceil_div_expr(numerator, divisor: int):
    return tirx.floordiv(numerator + (divisor - 1), divisor)


def split_points(atom: Atom, var, context: RangeContext) -> list:
    """The values of ``var`` where the atom may change status (start of the always-true / always-false parts),
    as expressions over the ranges of the other bound variables: constants when those ranges are constant
    (the simplifier folds them)."""
    linear = _linear_in(atom, var)
    if linear is None:
        return []
    coefficient, rest = linear
    dtype = var.ty.dtype
    rest_min, rest_max = context.symbolic_bounds(rest, var)
    points = []
    if coefficient > 0:
        for bound in (rest_min, rest_max):
            if bound is not None:
                points.append(_ceil_div_expr(tirx.const(0, dtype) - bound, coefficient))
    else:
        for bound in (rest_min, rest_max):
            if bound is not None:
                points.append(tirx.floordiv(bound, -coefficient) + 1)
    return [context.analyzer.simplify(p) for p in points]


def _clamp(point, lo, hi, context: RangeContext, outside: set):
    """``max(lo, min(hi, point))``, without the ``min`` or ``max`` a proof shows to be unnecessary."""
    if context.prove(point <= lo, outside):
        return lo
    if context.prove(hi <= point, outside):
        return hi
    upper = point if context.prove(point <= hi, outside) else tirx.Min(hi, point)
    return upper if context.prove(lo <= point, outside) else tirx.Max(lo, upper)


def _ordered(points: list, context: RangeContext, outside: set) -> tuple[list | None, tuple | None]:
    """``(points sorted by proof, None)``, or ``(None, (p, q))`` with the first two points that cannot be
    ordered."""
    ordered: list = []
    for point in points:
        position = 0
        while position < len(ordered):
            if context.prove(point <= ordered[position], outside):
                break
            if not context.prove(ordered[position] <= point, outside):
                return None, (ordered[position], point)
            position += 1
        ordered.insert(position, point)
    return ordered, None


def decompose_range(var, lo: int, hi: int, atoms: Sequence[Atom], context: RangeContext) -> list[Interval]:
    """Cut ``[lo, hi)`` of ``var`` (integers) into maximal intervals on which every atom has one status: the
    symbolic decomposition with the constant split points only (one that depends on a symbolic variable is no
    cut here), its ends folded to integers."""
    intervals, _ = decompose_symbolic_range(var, lo, hi, atoms, context, None, constant_points_only=True)
    return [Interval(_as_int(i.lo), _as_int(i.hi), i.statuses) for i in intervals]


def decompose_symbolic_range(
    var, lo, hi, atoms: Sequence[Atom], context: RangeContext, outside: set | None,
    constant_points_only: bool = False,
) -> tuple[list[Interval], tuple | None]:
    """Cut ``[lo, hi)`` (expressions) into pieces on which every atom has one proven status (or is fuzzy).

    The cut points are the symbolic split points of the atoms, clamped into ``[lo, hi)``; an atom whose points
    cannot be ordered against the others' is left out of the cuts (it stays fuzzy where it is fuzzy), and the
    first two points that could not be ordered are returned with the pieces (the planner may split into
    guarded cases on their comparison). Pieces proven empty are dropped; neighbours with the same statuses
    are merged. Proofs about the cut points assume only the ranges of the ``outside`` variables (the
    enclosing loops; every bound loop when ``None``) and the context's assumptions. With
    ``constant_points_only`` the split points that are not constants are no cuts (``decompose_range``);
    otherwise a split point is a cut only when it mentions no loop variable but those of ``outside`` (the
    bounds of ``rest`` over an inner loop whose extent depends on ``var`` or on another inner loop mention
    them: ``range(i // 4 + 1)``).
    """
    dtype = var.ty.dtype
    lo, hi = as_expr(lo, dtype), as_expr(hi, dtype)
    points: list = []
    unordered = None
    loop_vars = context.defined_inside()
    for atom in atoms:
        candidates = split_points(atom, var, context)
        if constant_points_only:
            candidates = [point for point in candidates if isinstance(point, tirx.IntImm)]
        else:  # bounds over an inner loop whose extent depends on other loops mention those: no cut there
            candidates = [point for point in candidates
                          if all(outside is None or v in outside or v not in loop_vars for v in free_vars(point))]
        candidate, pair = _ordered(points + candidates, context, outside)
        if candidate is not None:
            points = candidate
        elif unordered is None:
            unordered = pair
    cuts = [lo] + [_clamp(p, lo, hi, context, outside) for p in points] + [hi]
    return _classify(var, cuts, atoms, context, outside), unordered


def intersect_range(var, lo, hi, atoms: Sequence[Atom], outside: set, context: RangeContext):
    """The range of ``var`` intersected with the bounds its atoms imply: ``(new_lo, new_hi, atoms used)``.

    Only atoms linear in ``var`` whose other variables are all in ``outside`` (defined outside the loop) or
    not loop variables at all (symbolic) are used; ``new_lo = max(lo, lower ends)``, ``new_hi = min(hi, upper
    ends)``. ``None`` when no atom can be used.
    """
    dtype = var.ty.dtype
    new_lo, new_hi = as_expr(lo, dtype), as_expr(hi, dtype)
    used = []
    loop_vars = context.defined_inside()
    for atom in atoms:
        linear = _linear_in(atom, var)
        if linear is None:
            continue
        coefficient, rest = linear
        others = free_vars(rest)
        if var in others or any(v in loop_vars and v not in outside for v in others):
            continue
        if coefficient > 0:
            new_lo = tirx.Max(new_lo, _ceil_div_expr(tirx.const(0, dtype) - rest, coefficient))
        else:
            new_hi = tirx.Min(new_hi, tirx.floordiv(rest, -coefficient) + 1)
        used.append(atom)
    if not used:
        return None
    return context.analyzer.simplify(new_lo), context.analyzer.simplify(new_hi), used
