"""Codelets: straight-line DFT code derived by multiplying a formula by a symbolic vector.

Algorithm: the formula of a small DFT (a Cooley-Tukey factorization, or the dense `DFT_p` for a prime) is
applied to a vector of symbolic complex inputs, matrix by matrix from the right: a stride permutation `L`
reorders symbols, a twiddle diagonal `T` multiplies by constants, `I ⊗ A` and `A ⊗ I` apply `A` to
contiguous blocks or strided slices, and a dense `DFT` leaf multiplies by its matrix. Every value is a node
of one expression DAG over real numbers, and nodes are built through simplifying constructors:

* multiplication by 0, ±1 disappears, by ±i becomes a swap with a negation, by `c·(1 ± i)` (the (1±i)/√2
  family) costs two multiplications instead of four; negations are pushed into additions and subtractions;
* a dense matrix uses its conjugate symmetry: columns j, j' with `M[:, j'] = conj(M[:, j])` are combined as
  `x_j + x_j'` and `x_j - x_j'` first, rows k, k' with `M[k'] = conj(M[k])` share their real and imaginary
  halves (`y_k = A + B`, `y_k' = A - B`);
* identical nodes are created once (hash-consing), which is common-subexpression elimination.

For a codelet size the formula is chosen by the number of real operations among the dense matrix and every
Cooley-Tukey split whose factors are themselves chosen that way. The DAG is turned into TIR expressions
(`DerivedCodelet.emit`): shared nodes become `Bind` statements, the others are inlined.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tvm import tirx

from .formula import (
    DFT,
    Formula,
    Identity,
    Kronecker,
    Product,
    StridePermutation,
    Twiddle,
    cooley_tukey,
    unit_root,
)

__all__ = ["DerivedCodelet", "ExpressionGraph", "apply_formula", "codelet_formula", "derive_codelet"]

Node = int | None  # index into ExpressionGraph.nodes; None is the constant zero
Complex = tuple[Node, Node]


class ExpressionGraph:
    """A DAG of real-valued nodes: ("input", index, part), ("add"|"sub", a, b), ("neg", a), ("mul", c, a)."""

    def __init__(self) -> None:
        self.nodes: list[tuple] = []
        self._index: dict[tuple, int] = {}

    def _intern(self, key: tuple) -> int:
        found = self._index.get(key)
        if found is None:
            found = len(self.nodes)
            self.nodes.append(key)
            self._index[key] = found
        return found

    def input(self, index: int, part: int) -> int:
        return self._intern(("input", index, part))

    def _op(self, node: Node) -> str:
        return "zero" if node is None else self.nodes[node][0]

    def neg(self, a: Node) -> Node:
        if a is None:
            return None
        op = self.nodes[a]
        if op[0] == "neg":
            return op[1]
        if op[0] == "sub":
            return self._intern(("sub", op[2], op[1]))
        return self._intern(("neg", a))

    def add(self, a: Node, b: Node) -> Node:
        if a is None:
            return b
        if b is None:
            return a
        a_neg, b_neg = self._op(a) == "neg", self._op(b) == "neg"
        if a_neg and b_neg:
            return self.neg(self.add(self.nodes[a][1], self.nodes[b][1]))
        if b_neg:
            return self.sub(a, self.nodes[b][1])
        if a_neg:
            return self.sub(b, self.nodes[a][1])
        return self._intern(("add", min(a, b), max(a, b)))

    def sub(self, a: Node, b: Node) -> Node:
        if b is None:
            return a
        if a is None:
            return self.neg(b)
        if a == b:
            return None
        if self._op(b) == "neg":
            return self.add(a, self.nodes[b][1])
        if self._op(a) == "neg":
            return self.neg(self.add(self.nodes[a][1], b))
        return self._intern(("sub", a, b))

    def scale(self, c: float, a: Node) -> Node:
        if a is None or c == 0.0:
            return None
        if c == 1.0:
            return a
        if c < 0.0:
            return self.neg(self.scale(-c, a))
        op = self.nodes[a]
        if op[0] == "neg":
            return self.neg(self.scale(c, op[1]))
        if op[0] == "mul":
            return self.scale(c * op[1], op[2])
        return self._intern(("mul", c, a))

    def cadd(self, x: Complex, y: Complex) -> Complex:
        return self.add(x[0], y[0]), self.add(x[1], y[1])

    def csub(self, x: Complex, y: Complex) -> Complex:
        return self.sub(x[0], y[0]), self.sub(x[1], y[1])

    def cmul_const(self, x: Complex, c: float, s: float) -> Complex:
        """`x · (c + i·s)` with the ±1, ±i and c·(1±i) simplifications."""
        re, im = x
        if s == 0.0:
            return self.scale(c, re), self.scale(c, im)
        if c == 0.0:
            return self.scale(-s, im), self.scale(s, re)
        if abs(c) == abs(s):
            if s == c:
                return self.scale(c, self.sub(re, im)), self.scale(c, self.add(im, re))
            return self.scale(c, self.add(re, im)), self.scale(c, self.sub(im, re))
        return (self.sub(self.scale(c, re), self.scale(s, im)), self.add(self.scale(s, re), self.scale(c, im)))

    def reachable(self, roots: Sequence[Node]) -> list[int]:
        """Nodes reachable from `roots` in creation (topological) order."""
        seen: set[int] = set()
        stack = [r for r in roots if r is not None]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            op = self.nodes[node]
            if op[0] in ("add", "sub"):
                stack.extend((op[1], op[2]))
            elif op[0] == "neg":
                stack.append(op[1])
            elif op[0] == "mul":
                stack.append(op[2])
        return sorted(seen)


def _dense_multiply(graph: ExpressionGraph, matrix: np.ndarray, x: list[Complex]) -> list[Complex]:
    """`matrix @ x` using the conjugate symmetry of the columns and rows of `matrix`."""
    n = matrix.shape[0]
    column_partner = {}
    for j in range(n):
        for j2 in range(j + 1, n):
            if j2 not in column_partner and np.allclose(matrix[:, j2], np.conj(matrix[:, j]), rtol=0, atol=1e-15):
                column_partner[j], column_partner[j2] = j2, j
                break
    # per column: the operand used with the real part and with the imaginary part of the coefficient
    # unpaired columns first: their partial sums are shared between rows whose coefficients only differ there
    terms = [(j, x[j], x[j]) for j in range(n) if j not in column_partner]
    for j in range(n):
        partner = column_partner.get(j)
        if partner is not None and partner > j:
            terms.append((j, graph.cadd(x[j], x[partner]), graph.csub(x[j], x[partner])))
    outputs: list[Complex | None] = [None] * n
    for k in range(n):
        if outputs[k] is not None:
            continue
        real_half: Complex = (None, None)
        imag_half: Complex = (None, None)
        for j, with_real, with_imag in terms:
            c, s = matrix[k, j].real, matrix[k, j].imag
            real_half = graph.cadd(real_half, graph.cmul_const(with_real, float(c), 0.0))
            imag_half = graph.cadd(imag_half, graph.cmul_const(with_imag, 0.0, float(s)))
        outputs[k] = graph.cadd(real_half, imag_half)
        for k2 in range(k + 1, n):
            if outputs[k2] is None and np.allclose(matrix[k2], np.conj(matrix[k]), rtol=0, atol=1e-15):
                outputs[k2] = graph.csub(real_half, imag_half)
                break
    return outputs  # type: ignore[return-value]


def apply_formula(graph: ExpressionGraph, formula: Formula, x: list[Complex], sign: int) -> list[Complex]:
    """Multiply the formula's matrix by the symbolic vector `x`, factor by factor."""
    if isinstance(formula, Product):
        for factor in reversed(formula.factors):
            x = apply_formula(graph, factor, x, sign)
        return x
    if isinstance(formula, Identity):
        return list(x)
    if isinstance(formula, StridePermutation):
        return [x[formula.source(p)] for p in range(formula.size)]
    if isinstance(formula, Twiddle):
        return [graph.cmul_const(x[p], *unit_root(formula.exponent(p), formula.size, sign))
                for p in range(formula.size)]
    if isinstance(formula, DFT):
        return _dense_multiply(graph, formula.dense(sign), x)
    if isinstance(formula, Kronecker):
        left, right = formula.left, formula.right
        if isinstance(left, Identity):
            m = right.size
            return [y for b in range(left.size) for y in apply_formula(graph, right, x[b * m:(b + 1) * m], sign)]
        if isinstance(right, Identity):
            m = right.size
            result: list[Complex] = [(None, None)] * formula.size
            for j in range(m):
                for i, y in enumerate(apply_formula(graph, left, x[j::m], sign)):
                    result[i * m + j] = y
            return result
        return apply_formula(graph, Product((Kronecker(left, Identity(right.size)),
                                             Kronecker(Identity(left.size), right))), x, sign)
    raise TypeError(f"cannot apply {formula!r}")


@dataclass
class DerivedCodelet:
    """A straight-line DFT of size `n`: `outputs[k]` are the DAG nodes of output k (real, imag)."""

    n: int
    sign: int
    formula: Formula
    graph: ExpressionGraph
    outputs: list[Complex]

    def operation_counts(self) -> dict[str, int]:
        """Real additions/subtractions, multiplications and negations of the codelet."""
        counts = {"add": 0, "mul": 0, "neg": 0}
        for node in self.graph.reachable([p for out in self.outputs for p in out]):
            op = self.graph.nodes[node][0]
            if op in ("add", "sub"):
                counts["add"] += 1
            elif op in ("mul", "neg"):
                counts[op] += 1
        return counts

    def flops(self) -> int:
        counts = self.operation_counts()
        return counts["add"] + counts["mul"]

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """Run the codelet in float64 on complex vectors `x` of shape (..., n) (the dense-matrix check)."""
        values: dict[int, np.ndarray] = {}
        roots = [p for out in self.outputs for p in out]
        for node in self.graph.reachable(roots):
            op = self.graph.nodes[node]
            if op[0] == "input":
                values[node] = x[..., op[1]].real if op[2] == 0 else x[..., op[1]].imag
            elif op[0] == "add":
                values[node] = values[op[1]] + values[op[2]]
            elif op[0] == "sub":
                values[node] = values[op[1]] - values[op[2]]
            elif op[0] == "neg":
                values[node] = -values[op[1]]
            else:
                values[node] = op[1] * values[op[2]]
        zero = np.zeros(x.shape[:-1])
        columns = [(values[re] if re is not None else zero) + 1j * (values[im] if im is not None else zero)
                   for re, im in self.outputs]
        return np.stack(columns, axis=-1)

    def _use_counts(self, roots: list[int]) -> dict[int, int]:
        uses = dict.fromkeys(roots, 0)
        for node in self.graph.reachable(roots):
            op = self.graph.nodes[node]
            children = (op[1], op[2]) if op[0] in ("add", "sub") else (op[1],) if op[0] == "neg" else \
                (op[2],) if op[0] == "mul" else ()
            for child in children:
                uses[child] = uses.get(child, 0) + 1
        for root in roots:
            uses[root] += 1
        return uses

    def emit(
        self,
        inputs: Sequence[tuple[tirx.PrimExpr, tirx.PrimExpr]],
        dtype: str,
        bind: Callable[[tirx.PrimExpr], tirx.PrimExpr],
    ) -> list[tuple[tirx.PrimExpr, tirx.PrimExpr]]:
        """TIR expressions of the outputs; nodes used more than once are bound with `bind` (a Bind statement)."""
        roots = [p for out in self.outputs for p in out if p is not None]
        uses = self._use_counts(roots)
        exprs: dict[int, tirx.PrimExpr] = {}
        for node in self.graph.reachable(roots):
            op = self.graph.nodes[node]
            if op[0] == "input":
                expr = inputs[op[1]][op[2]]
            elif op[0] == "add":
                expr = exprs[op[1]] + exprs[op[2]]
            elif op[0] == "sub":
                expr = exprs[op[1]] - exprs[op[2]]
            elif op[0] == "neg":
                expr = tirx.const(0.0, dtype) - exprs[op[1]]
            else:
                expr = tirx.const(op[1], dtype) * exprs[op[2]]
            exprs[node] = bind(expr) if uses.get(node, 0) > 1 and op[0] != "input" else expr
        zero = tirx.const(0.0, dtype)
        return [(exprs[re] if re is not None else zero, exprs[im] if im is not None else zero)
                for re, im in self.outputs]

    def to_text(self) -> str:
        """The codelet as straight-line pseudo-code (`t<k>` are shared temporaries)."""
        roots = [p for out in self.outputs for p in out if p is not None]
        uses = self._use_counts(roots)
        names: dict[int, str] = {}
        lines = [f"codelet DFT_{self.n} (sign {self.sign:+d}), formula {self.formula}, "
                 f"{self.operation_counts()}"]
        for node in self.graph.reachable(roots):
            op = self.graph.nodes[node]
            if op[0] == "input":
                text = f"x{op[1]}.{'re' if op[2] == 0 else 'im'}"
            elif op[0] in ("add", "sub"):
                text = f"({names[op[1]]} {'+' if op[0] == 'add' else '-'} {names[op[2]]})"
            elif op[0] == "neg":
                text = f"-{names[op[1]]}"
            else:
                text = f"{op[1]:.17g} * {names[op[2]]}"
            if uses.get(node, 0) > 1 and op[0] != "input":
                lines.append(f"  t{node} = {text}")
                text = f"t{node}"
            names[node] = text
        for k, (re, im) in enumerate(self.outputs):
            lines.append(f"  y{k} = ({names.get(re, '0')}, {names.get(im, '0')})")
        return "\n".join(lines)


def _derive(formula: Formula, n: int, sign: int) -> DerivedCodelet:
    graph = ExpressionGraph()
    x = [(graph.input(j, 0), graph.input(j, 1)) for j in range(n)]
    return DerivedCodelet(n, sign, formula, graph, apply_formula(graph, formula, x, sign))


@functools.cache
def codelet_formula(n: int) -> Formula:
    """The formula with the fewest real operations: the dense DFT_n or a Cooley-Tukey split of it."""
    best: Formula = DFT(n)
    best_flops = _derive(best, n, -1).flops()
    for k in range(2, n):
        if n % k:
            continue
        candidate = cooley_tukey(codelet_formula(k), codelet_formula(n // k))
        flops = _derive(candidate, n, -1).flops()
        if flops < best_flops:
            best, best_flops = candidate, flops
    return best


@functools.cache
def derive_codelet(n: int, sign: int) -> DerivedCodelet:
    """The derived codelet for DFT_n with exponent sign `sign` (-1 forward, +1 backward)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    if sign not in (-1, 1):
        raise ValueError(f"sign must be -1 or +1, got {sign}")
    return _derive(codelet_formula(n), n, sign)
