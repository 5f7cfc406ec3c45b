"""The plan's passes over memory, derived from the breakdown tree with affine index maps.

Algorithm: a DFT of size n reading a source view and writing a destination view (a view is an affine map
from element index to a complex element of a buffer: `offset + stride·e`, optionally multiplied by a twiddle
factor `ω_N^(factor·(base + step·e))` on load) becomes:

* a **codelet** leaf: one pass; its loops are the enclosing transform loops, its body loads the inputs (with
  their twiddles), runs the derived codelet and stores the outputs;
* a **Cooley-Tukey** node `DFT_km = (DFT_k ⊗ I_m) · T^km_m · (I_k ⊗ DFT_m) · L^km_k`: the stride permutation
  `L` is folded into the index map of the first sub-transform (transform i reads elements `i + k·e`), which
  writes a scratch buffer; the twiddle diagonal `T` is folded into the loads of the second sub-transform
  (transform j reads scratch `i·m + j` times `ω_km^(i·j)`), which writes the destination. No pass only permutes.
* a **Rader** prime: gather `a[q] = x[g^q]`, transform, multiply by the precomputed transform of the
  kernel `b[q] = ω^(g^-q)`, inverse transform, scatter `y[g^-r] = x[0] + c[r]` and `y[0] = x[0] + â[0]`;
* a **Bluestein** size: `a[j] = x[j]·w[j]` zero-padded to m, transform, multiply by the transform of the chirp
  kernel, inverse transform, `y[k] = w[k]·c[k]`, with the chirp `w[j] = ω_2n^(j²)`.

Real transforms add one pass: r2c of even n transforms the n/2 complex pairs `x[2j] + i·x[2j+1]` and
post-processes `X[k] = E_k + ω_n^k·O_k`, `X[n/2-k] = conj(E_k - ω_n^k·O_k)`; c2r of even n pre-processes
`Z[k] = (X[k] + conj X[n/2-k]) + i·ω_n^-k·(X[k] - conj X[n/2-k])` and transforms back into the real pairs.
Odd sizes use the full-length complex transform (real loads, Hermitian extension, real stores).

All tables (twiddles, Rader and Bluestein kernels, chirps) are computed in float64 and rounded once; every
scratch buffer is a logical buffer with a live range, and `assign_buffers` maps logical buffers to few
physical ones by interval colouring.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .codelet import derive_codelet
from .factor import Bluestein, Breakdown, Codelet, CooleyTukey, Rader, generator_powers
from .formula import unit_roots
from .tuning import DERIVED_TWIDDLE_FACTORS, VECTOR_LOOP_MAX_STRIDE

__all__ = ["Affine", "Pass", "PassList", "TwiddleAccess", "View", "build_passes"]


@dataclass(frozen=True)
class Affine:
    """`const + Σ coeff·loop[position]` over the loops of a pass."""

    const: int = 0
    terms: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def loop(position: int, coeff: int = 1) -> Affine:
        return Affine(0, ((position, coeff),))

    def plus(self, other: Affine) -> Affine:
        merged: dict[int, int] = dict(self.terms)
        for position, coeff in other.terms:
            merged[position] = merged.get(position, 0) + coeff
        return Affine(self.const + other.const, tuple(sorted((p, c) for p, c in merged.items() if c)))

    def times(self, factor: int) -> Affine:
        return Affine(self.const * factor, tuple((p, c * factor) for p, c in self.terms if c * factor))

    def expr(self, loop_vars):
        result = self.const
        for position, coeff in self.terms:
            result = result + loop_vars[position] * coeff
        return result

    def __str__(self) -> str:
        parts = [f"{c}·i{p}" if c != 1 else f"i{p}" for p, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


@dataclass(frozen=True)
class TwiddleAccess:
    """Multiply element e by `ω_size^(factor·(base + step·e))`.

    A codelet pass reads the factors from a table of its own (`_PassTwiddles`). Other loads (a Rader or
    Bluestein sub-transform that is the left factor of a Cooley-Tukey node) read them from the table of the
    forward roots ω_size at `table`, and `sign` +1 (backward transform) conjugates them on load.
    """

    size: int
    sign: int
    factor: Affine
    base: Affine
    step: int
    table: int | None = None


@dataclass(frozen=True)
class View:
    """Element e of a transform is complex element `offset + stride·e` of `buffer` (times a twiddle)."""

    buffer: str
    offset: Affine
    stride: int
    twiddle: TwiddleAccess | None = None
    scale: float = 1.0

    def sub(self, start: Affine, step: int) -> View:
        """The view of elements `start + step·e` of this view."""
        twiddle = None
        if self.twiddle is not None:
            t = self.twiddle
            twiddle = replace(t, base=t.base.plus(start.times(t.step)), step=t.step * step)
        return replace(self, offset=self.offset.plus(start.times(self.stride)), stride=self.stride * step,
                       twiddle=twiddle)

    def __str__(self) -> str:
        text = f"{self.buffer}[{self.offset} + {self.stride}·e]"
        if self.twiddle is not None:
            t = self.twiddle
            text += f"·ω_{t.size}^(({t.factor})·({t.base} + {t.step}·e))"
        if self.scale != 1.0:
            text += f"·{self.scale:.6g}"
        return text


@dataclass
class Pass:
    """One pass over memory: a loop nest over `loops` (extents) whose body is emitted by `body`."""

    name: str
    loops: tuple[int, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    body: Callable
    text: str
    codelet: tuple[int, int] | None = None  # (size, sign) of the codelet it runs
    # nesting order of the loops on llvm, outermost first (the schedule vectorizes the innermost one when the
    # group has one lane); None: in order (`_loop_order`)
    loop_order: tuple[int, ...] | None = None


@dataclass
class PassList:
    """Passes in execution order, logical scratch buffers (name -> complex elements) and constant tables."""

    passes: list[Pass] = field(default_factory=list)
    buffers: dict[str, int] = field(default_factory=dict)
    table_chunks: list[np.ndarray] = field(default_factory=list)
    table_offsets: dict[tuple, int] = field(default_factory=dict)
    table_size: int = 0
    index_chunks: list[np.ndarray] = field(default_factory=list)
    index_offsets: dict[tuple, int] = field(default_factory=dict)
    index_size: int = 0

    def new_buffer(self, elements: int) -> str:
        name = f"S{len(self.buffers)}"
        self.buffers[name] = elements
        return name

    def table(self, key: tuple, make: Callable[[], np.ndarray]) -> int:
        """Offset of a complex128 constant table in the concatenated table (created once per key)."""
        if key not in self.table_offsets:
            values = np.asarray(make(), np.complex128)
            self.table_offsets[key] = self.table_size
            self.table_chunks.append(values)
            self.table_size += len(values)
        return self.table_offsets[key]

    def index_table(self, key: tuple, make: Callable[[], list[int]]) -> int:
        if key not in self.index_offsets:
            values = np.asarray(make(), np.int32)
            self.index_offsets[key] = self.index_size
            self.index_chunks.append(values)
            self.index_size += len(values)
        return self.index_offsets[key]

    def twiddle_table(self, size: int) -> int:
        """The table of `ω_size^t`, t < size, for the forward sign; the backward sign conjugates on load."""
        return self.table(("root", size), lambda: unit_roots(np.arange(size), size, -1))

    def constants(self) -> tuple[np.ndarray, np.ndarray]:
        """The concatenated complex table (float64 pairs) and index table."""
        complex_table = np.concatenate(self.table_chunks) if self.table_chunks else np.zeros(0, np.complex128)
        indices = np.concatenate(self.index_chunks) if self.index_chunks else np.zeros(0, np.int32)
        return np.stack([complex_table.real, complex_table.imag], axis=-1), indices


class _PassTwiddles:
    """The twiddle factors of one codelet pass, as a table of their own in the concatenated constant table.

    The exponent `factor·(base + step·e)` depends on a few loops of the pass (usually only the innermost one,
    the transform index j of the left factor `DFT_k ⊗ I_m`). The table holds, per element e, the factors for
    every value of those loops (the innermost loop fastest), real parts then imaginary parts, with the pass's
    sign applied; so when the innermost loop is vectorized inside a transform (batch 1, large n), a vector of
    twiddle factors is one contiguous load instead of a gather of `table[j·e]`. Its size is that of the table
    of ω_size it replaces (n per Cooley-Tukey level). Measurements: bench/results/fft_tuning.md.

    A table of more than `DERIVED_TWIDDLE_FACTORS` factors whose exponent is `factor·step·e` (no base) holds
    only the rows of the elements that are powers of two; the factor of another element is the product of
    those of its binary digits (`ω^(a+b) = ω^a·ω^b`), so that the pass streams fewer table bytes. Every stored
    factor is still computed in float64 and rounded once, and a derived one is a product of at most
    log2(codelet size) of them (no recurrence: a factor is never computed from another computed factor, so
    the error stays O(log n).
    """

    def __init__(self, plan: PassList, twiddle: TwiddleAccess, loops: tuple[int, ...], n: int) -> None:
        self.positions = sorted({p for p, _ in twiddle.factor.terms + twiddle.base.terms})
        extents = [loops[p] for p in self.positions]
        self.count = math.prod(extents)
        self.strides = [math.prod(extents[i + 1:]) for i in range(len(extents))]
        # elements whose exponent is identically 0 (element 0 of the left factor) are not multiplied
        self.unit = {e for e in range(n) if not twiddle.base.terms and twiddle.base.const + twiddle.step * e == 0}
        self.derived = twiddle.base == Affine() and n * self.count > DERIVED_TWIDDLE_FACTORS
        self.rows = [e for e in range(n) if not self.derived or (e and e & (e - 1) == 0)]
        grid = np.indices(extents).reshape(len(extents), -1) if extents else np.zeros((0, 1), np.int64)
        values = dict(zip(self.positions, grid, strict=True))

        def make() -> np.ndarray:
            factor = twiddle.factor.const + sum(c * values[p] for p, c in twiddle.factor.terms)
            base = twiddle.base.const + sum(c * values[p] for p, c in twiddle.base.terms)
            roots = unit_roots(np.arange(twiddle.size), twiddle.size, twiddle.sign)
            table = np.empty((len(self.rows), 2, self.count))
            for row, e in enumerate(self.rows):
                exponent = np.broadcast_to(factor * (base + twiddle.step * e), (self.count,)) % twiddle.size
                table[row, 0], table[row, 1] = roots[exponent].real, roots[exponent].imag
            # consecutive float pairs are the table's complex rows
            return table.reshape(-1).view(np.complex128)

        key = ("pass_twiddles", twiddle.size, twiddle.sign, twiddle.factor, twiddle.base, twiddle.step,
               tuple(extents), n, self.derived)
        self.offset = plan.table(key, make)

    def root(self, em, element: int, loop_vars):
        """The factor of `element` as (re, im) loads (or a product of loaded factors), or None when its exponent
        is 0."""
        if element in self.unit:
            return None
        if element not in self.rows:
            high = 1 << (element.bit_length() - 1)
            return em.cmul(self.root(em, high, loop_vars), self.root(em, element - high, loop_vars))
        index = sum((loop_vars[p] * stride for p, stride in zip(self.positions, self.strides, strict=True)), 0)
        real = 2 * self.offset + 2 * self.count * self.rows.index(element) + index
        imag = real + self.count
        # float f of the table is row f // 2, column f % 2: TVM folds this back to f, a contiguous vector
        return em.tables[real // 2, real % 2], em.tables[imag // 2, imag % 2]


def _loop_order(loops: tuple[int, ...], src: View, dst: View) -> tuple[int, ...] | None:
    """The nesting order (outermost first) of the loops of a codelet pass on llvm, whose innermost loop is
    vectorized in a one-lane group; None keeps the loops in order.

    The first pass of a Cooley-Tukey chain reads the input at the stride of the enclosing radices along its
    last loop and at unit stride along its first one: vectorized across the last loop, every lane loads its
    own complex pair (n = 1024: a stride of 64 elements), and with the first loop outermost, the pass sweeps
    the whole input once per value of it. So when the last loop has no unit stride in the source or the
    destination, a loop that has one (the source's first) is nested innermost (`VECTOR_LOOP_MAX_STRIDE`),
    or else the source's unit-stride loop is nested just outside the last one, so that the pass reads the
    source's cache lines one after the other, with the other loops outside it by decreasing source stride, so
    that the loop just outside steps each of the pass's read streams to the next cache line instead of the next
    page, which the hardware prefetchers follow. Groups of several lanes (the batch in the vector lanes) nest
    their loops in the same order, which reads the input of a group in order. Measurements:
    bench/results/fft_tuning.md."""
    if not loops:
        return None

    def stride(view: View, position: int) -> int:
        return dict(view.offset.terms).get(position, 0)

    last = len(loops) - 1
    if stride(src, last) == 1 or stride(dst, last) == 1:
        return None
    for view, other in ((src, dst), (dst, src)):
        candidates = [p for p in range(last)
                      if stride(view, p) == 1 and loops[p] > 1 and stride(other, p) <= VECTOR_LOOP_MAX_STRIDE]
        if candidates:
            return tuple(p for p in range(len(loops)) if p != candidates[-1]) + (candidates[-1],)
    candidates = [p for p in range(last) if stride(src, p) == 1 and loops[p] > 1]
    if candidates:
        others = sorted((p for p in range(last) if p != candidates[-1]), key=lambda p: -stride(src, p))
        return tuple(others) + (candidates[-1], last)
    return None


def _scratch_base(loops: tuple[int, ...], size: int) -> Affine:
    """Linear offset of the current transform in a scratch buffer holding `size` elements per transform."""
    base = Affine()
    stride = size
    for position in reversed(range(len(loops))):
        base = base.plus(Affine.loop(position, stride))
        stride *= loops[position]
    return base


def _r2c_pair(em, spectrum: View, roots: int, h: int, k, v):
    """`(X[k], conj X[n/2-k])` of an r2c transform of even n from the complex transform Z of its n/2 pairs:
    with a = Z[k] and b = conj Z[n/2-k], E_k = (a + b)/2 and O_k = (a - b)/(2i), they are E_k ± ω_n^k·O_k."""
    a = em.bind_complex(em.load(spectrum, k, v))
    b = em.bind_complex(em.conj(em.load(spectrum, h - k, v)))
    half = em.const(0.5)
    even = em.bind_complex(em.cscale(em.cadd(a, b), half))
    diff = em.cscale(em.csub(a, b), half)
    odd = em.bind_complex(em.cmul(em.constant(roots, k), (diff[1], em.zero - diff[0])))
    return em.cadd(even, odd), em.csub(even, odd)


def _c2r_pair_store(em, spectrum: View, roots: int, h: int, k, a, b, v) -> None:
    """Store Z[k] and Z[n/2-k] of a c2r transform of even n from a = X[k] and b = conj X[n/2-k]: with
    s = a + b and r = ω^-k·(a - b), Z[k] = s + i·r and Z[n/2-k] = conj(s) + i·conj(r), since ω^-(n/2-k) = -ω^k
    (each input is read once, not twice; measured in bench/results/fft_tuning.md)."""
    total = em.bind_complex(em.cadd(a, b))
    rotated = em.bind_complex(em.cmul(em.conj(em.constant(roots, k)), em.csub(a, b)))
    em.store(spectrum, k, (total[0] - rotated[1], total[1] + rotated[0]), v)
    em.store(spectrum, h - k, (total[0] + rotated[1], rotated[0] - total[1]), v)


class _Builder:
    def __init__(self, plan: PassList) -> None:
        self.plan = plan

    def add(self, name, loops, reads, writes, body, text, codelet=None, loop_order=None) -> None:
        if all(extent > 0 for extent in loops):
            self.plan.passes.append(Pass(name, tuple(loops), tuple(reads), tuple(writes), body, text, codelet,
                                         loop_order))

    def dft(self, node: Breakdown, src: View, dst: View, loops: tuple[int, ...], sign: int) -> None:
        if isinstance(node, Codelet):
            self.codelet(node.n, src, dst, loops, sign)
        elif isinstance(node, CooleyTukey):
            self.cooley_tukey(node, src, dst, loops, sign)
        elif isinstance(node, Rader):
            self.rader(node, src, dst, loops, sign)
        else:
            self.bluestein(node, src, dst, loops, sign)

    def rooted(self, view: View) -> View:
        """`view` with its twiddle factors read from the table of the roots (for loads outside codelets)."""
        if view.twiddle is None:
            return view
        return replace(view, twiddle=replace(view.twiddle, table=self.plan.twiddle_table(view.twiddle.size)))

    def codelet(self, n: int, src: View, dst: View, loops: tuple[int, ...], sign: int) -> None:
        codelet = derive_codelet(n, sign)
        twiddles = None if src.twiddle is None else _PassTwiddles(self.plan, src.twiddle, loops, n)
        plain = replace(src, twiddle=None)

        def load(em, e, v):
            value = em.load(plain, e, v)
            root = None if twiddles is None else twiddles.root(em, e, v)
            return value if root is None else em.cmul(value, root)

        def body(em, v):
            inputs = [em.bind_complex(load(em, e, v)) for e in range(n)]
            for k, value in enumerate(codelet.emit(inputs, em.dtype, em.bind)):
                em.store(dst, k, value, v)

        self.add(f"dft{n}", loops, (src.buffer,), (dst.buffer,), body,
                 f"codelet DFT_{n}: {src} -> {dst}", codelet=(n, sign), loop_order=_loop_order(loops, src, dst))

    def cooley_tukey(self, node: CooleyTukey, src: View, dst: View, loops: tuple[int, ...], sign: int) -> None:
        k, m, n = node.left.n, node.right.n, node.n
        scratch = self.plan.new_buffer(n * math.prod(loops))
        base = _scratch_base(loops, n)
        position = len(loops)
        # (I_k ⊗ DFT_m) · L^n_k: transform i reads source elements i + k·e, writes scratch i·m + e
        self.dft(node.right, src.sub(Affine.loop(position), k),
                 View(scratch, base.plus(Affine.loop(position, m)), 1), loops + (k,), sign)
        # (DFT_k ⊗ I_m) · T^n_m: transform j reads scratch e·m + j times ω_n^(e·j), writes destination e·m + j
        twiddle = TwiddleAccess(n, sign, Affine.loop(position), Affine(), 1)
        self.dft(node.left, View(scratch, base.plus(Affine.loop(position)), m, twiddle),
                 dst.sub(Affine.loop(position), m), loops + (m,), sign)

    def rader(self, node: Rader, src: View, dst: View, loops: tuple[int, ...], sign: int) -> None:
        p, g = node.n, node.generator
        src = self.rooted(src)
        count = math.prod(loops)
        gathered, transformed, product, convolved = (self.plan.new_buffer((p - 1) * count) for _ in range(4))
        base = _scratch_base(loops, p - 1)
        element = len(loops)
        powers = generator_powers(g, p)  # g^q; g^-q is g^(p-1-q)
        inverse_powers = powers[-np.arange(p - 1) % (p - 1)]
        gather = self.plan.index_table(("rader_in", p), lambda: powers)
        scatter = self.plan.index_table(("rader_out", p), lambda: inverse_powers)

        def kernel() -> np.ndarray:
            b = unit_roots(inverse_powers, p, sign)
            return np.fft.fft(b) / (p - 1)

        kernel_offset = self.plan.table(("rader_kernel", p, sign), kernel)
        work = base.plus(Affine.loop(element))

        def gather_body(em, v):
            index = em.index(gather, v[element])
            em.store(View(gathered, work, 1), 0, em.load(src, index, v), v)

        self.add(f"rader{p}_gather", loops + (p - 1,), (src.buffer,), (gathered,), gather_body,
                 f"Rader gather {gathered}[q] = x[{g}^q mod {p}] from {src}")
        self.dft(node.sub, View(gathered, base, 1), View(transformed, base, 1), loops, -1)

        def multiply_body(em, v):
            value = em.cmul(em.load(View(transformed, work, 1), 0, v), em.constant(kernel_offset, v[element]))
            em.store(View(product, work, 1), 0, value, v)

        self.add(f"rader{p}_multiply", loops + (p - 1,), (transformed,), (product,), multiply_body,
                 f"Rader pointwise product with the transformed kernel ({product})")
        self.dft(node.sub, View(product, base, 1), View(convolved, base, 1), loops, 1)

        def scatter_body(em, v):
            x0 = em.load(src, 0, v)
            value = em.cadd(x0, em.load(View(convolved, work, 1), 0, v))
            em.store(dst, em.index(scatter, v[element]), value, v)

        def dc_body(em, v):
            em.store(dst, 0, em.cadd(em.load(src, 0, v), em.load(View(transformed, base, 1), 0, v)), v)

        self.add(f"rader{p}_scatter", loops + (p - 1,), (src.buffer, convolved), (dst.buffer,), scatter_body,
                 f"Rader scatter y[{g}^-r mod {p}] = x[0] + c[r] into {dst}")
        self.add(f"rader{p}_dc", loops, (src.buffer, transformed), (dst.buffer,), dc_body,
                 "Rader y[0] = x[0] + â[0]")

    def bluestein(self, node: Bluestein, src: View, dst: View, loops: tuple[int, ...], sign: int) -> None:
        n, m = node.n, node.m
        src = self.rooted(src)
        count = math.prod(loops)
        padded, transformed, product, convolved = (self.plan.new_buffer(m * count) for _ in range(4))
        base = _scratch_base(loops, m)
        element = len(loops)

        def chirp() -> np.ndarray:
            return unit_roots([j * j % (2 * n) for j in range(n)], 2 * n, sign)

        def kernel() -> np.ndarray:
            b = np.zeros(m, np.complex128)
            w = np.conj(chirp())
            b[:n] = w
            b[m - n + 1:] = w[1:][::-1]
            return np.fft.fft(b) / m

        chirp_offset = self.plan.table(("chirp", n, sign), chirp)
        kernel_offset = self.plan.table(("bluestein_kernel", n, m, sign), kernel)
        work = base.plus(Affine.loop(element))

        def premultiply_body(em, v):
            value = em.cmul(em.load(src, v[element], v), em.constant(chirp_offset, v[element]))
            em.store(View(padded, work, 1), 0, value, v)

        def pad_body(em, v):
            em.store(View(padded, work.plus(Affine(n)), 1), 0, (em.zero, em.zero), v)

        self.add(f"bluestein{n}_chirp", loops + (n,), (src.buffer,), (padded,), premultiply_body,
                 f"Bluestein a[j] = x[j]·w[j] from {src}")
        self.add(f"bluestein{n}_pad", loops + (m - n,), (), (padded,), pad_body,
                 f"Bluestein zero padding to {m}")
        self.dft(node.sub, View(padded, base, 1), View(transformed, base, 1), loops, -1)

        def multiply_body(em, v):
            value = em.cmul(em.load(View(transformed, work, 1), 0, v), em.constant(kernel_offset, v[element]))
            em.store(View(product, work, 1), 0, value, v)

        self.add(f"bluestein{n}_multiply", loops + (m,), (transformed,), (product,), multiply_body,
                 "Bluestein pointwise product with the transformed chirp kernel")
        self.dft(node.sub, View(product, base, 1), View(convolved, base, 1), loops, 1)

        def postmultiply_body(em, v):
            value = em.cmul(em.load(View(convolved, work, 1), 0, v), em.constant(chirp_offset, v[element]))
            em.store(dst, v[element], value, v)

        self.add(f"bluestein{n}_unchirp", loops + (n,), (convolved,), (dst.buffer,), postmultiply_body,
                 f"Bluestein y[k] = w[k]·c[k] into {dst}")

    def r2c_even(self, tree: Breakdown, n: int, scale: float) -> None:
        h = n // 2
        spectrum = self.plan.new_buffer(h)
        self.dft(tree, View("input", Affine(), 1), View(spectrum, Affine(), 1), (), -1)
        roots = self.plan.twiddle_table(n)
        out = View("output", Affine(), 1, scale=scale)

        def edges_body(em, v):
            re, im = em.load(View(spectrum, Affine(), 1), 0, v)
            em.store(out, 0, (re + im, em.zero), v)
            em.store(out, h, (re - im, em.zero), v)

        def pairs_body(em, v):
            k = v[0] + 1
            low, high = _r2c_pair(em, View(spectrum, Affine(), 1), roots, h, k, v)
            em.store(out, k, low, v)
            em.store(out, h - k, em.conj(high), v)

        self.add("r2c_edges", (), (spectrum,), ("output",), edges_body, "r2c X[0], X[n/2] from Z[0]")
        self.add("r2c_pairs", (h // 2,), (spectrum,), ("output",), pairs_body,
                 "r2c X[k] = E_k + ω^k·O_k and X[n/2-k] = conj(E_k - ω^k·O_k)")

    def c2r_even(self, tree: Breakdown, n: int, scale: float) -> None:
        h = n // 2
        spectrum = self.plan.new_buffer(h)
        roots = self.plan.twiddle_table(n)
        src = View("input", Affine(), 1)

        def edges_body(em, v):
            first = em.load(src, 0, v)[0]
            last = em.load(src, h, v)[0]
            em.store(View(spectrum, Affine(), 1), 0, (first + last, first - last), v)

        def pairs_body(em, v):
            k = v[0] + 1
            a = em.bind_complex(em.load(src, k, v))
            b = em.bind_complex(em.conj(em.load(src, h - k, v)))
            _c2r_pair_store(em, View(spectrum, Affine(), 1), roots, h, k, a, b, v)

        self.add("c2r_edges", (), ("input",), (spectrum,), edges_body, "c2r Z[0] from X[0], X[n/2] (real parts)")
        self.add("c2r_pairs", (h // 2,), ("input",), (spectrum,), pairs_body,
                 "c2r Z[k] = (X[k] + conj X[n/2-k]) + i·ω^-k·(X[k] - conj X[n/2-k]) and Z[n/2-k]")
        self.dft(tree, View(spectrum, Affine(), 1), View("output", Affine(), 1, scale=scale), (), 1)

    def r2c_odd(self, tree: Breakdown, n: int, scale: float) -> None:
        spectrum = self.plan.new_buffer(n)
        self.dft(tree, View("input", Affine(), 1), View(spectrum, Affine(), 1), (), -1)
        out = View("output", Affine(), 1, scale=scale)

        def copy_body(em, v):
            em.store(out, v[0], em.load(View(spectrum, Affine(), 1), v[0], v), v)

        self.add("r2c_copy", (n // 2 + 1,), (spectrum,), ("output",), copy_body, "r2c keep X[0..n/2]")

    def c2r_odd(self, tree: Breakdown, n: int, scale: float) -> None:
        full = self.plan.new_buffer(n)
        src = View("input", Affine(), 1)

        def dc_body(em, v):
            em.store(View(full, Affine(), 1), 0, (em.load(src, 0, v)[0], em.zero), v)

        def mirror_body(em, v):
            k = v[0] + 1
            value = em.bind_complex(em.load(src, k, v))
            em.store(View(full, Affine(), 1), k, value, v)
            em.store(View(full, Affine(), 1), n - k, em.conj(value), v)

        self.add("c2r_dc", (), ("input",), (full,), dc_body, "c2r H[0] = Re X[0]")
        self.add("c2r_mirror", (n // 2,), ("input",), (full,), mirror_body,
                 "c2r Hermitian extension H[k] = X[k], H[n-k] = conj X[k]")
        self.dft(tree, View(full, Affine(), 1), View("output", Affine(), 1, scale=scale), (), 1)

    def conv_even(self, tree: Breakdown, n: int) -> None:
        """Circular convolution of even n: the r2c passes up to Z = DFT_{n/2}(x pairs), one fused pass
        Z' = c2r-pre(r2c-post(Z)·H), the c2r passes from Z'. H (the filter's spectrum divided by n) is the
        first constant table (offset 0, n/2 + 1 complex values), so the output needs no scale."""
        h = n // 2
        spectrum, product = self.plan.new_buffer(h), self.plan.new_buffer(h)
        filter_table = self.plan.table(("filter", n), lambda: np.zeros(h + 1, np.complex128))
        self.dft(tree, View("input", Affine(), 1), View(spectrum, Affine(), 1), (), -1)
        roots = self.plan.twiddle_table(n)

        def edges_body(em, v):
            re, im = em.load(View(spectrum, Affine(), 1), 0, v)
            first = em.bind((re + im) * em.constant(filter_table, 0)[0])
            last = em.bind((re - im) * em.constant(filter_table, h)[0])
            em.store(View(product, Affine(), 1), 0, (first + last, first - last), v)

        def pairs_body(em, v):
            k = v[0] + 1
            low, high = _r2c_pair(em, View(spectrum, Affine(), 1), roots, h, k, v)
            a = em.bind_complex(em.cmul(low, em.constant(filter_table, k)))
            b = em.bind_complex(em.cmul(high, em.conj(em.constant(filter_table, h - k))))
            _c2r_pair_store(em, View(product, Affine(), 1), roots, h, k, a, b, v)

        self.add("conv_edges", (), (spectrum,), (product,), edges_body,
                 "conv Z'[0] from X[0]·H[0], X[n/2]·H[n/2] (r2c post, product, c2r pre fused)")
        self.add("conv_pairs", (h // 2,), (spectrum,), (product,), pairs_body,
                 "conv Z'[k], Z'[n/2-k] = c2r-pre(r2c-post(Z)·H) (r2c post, product, c2r pre fused)")
        self.dft(tree, View(product, Affine(), 1), View("output", Affine(), 1), (), 1)

    def conv_odd(self, tree: Breakdown, n: int) -> None:
        """Circular convolution of odd n: the full-length complex transform of the reals, one fused pass
        Y[k] = X[k]·H[k] with its Hermitian extension Y[n-k] = conj Y[k], the inverse transform to reals."""
        spectrum, full = self.plan.new_buffer(n), self.plan.new_buffer(n)
        filter_table = self.plan.table(("filter", n), lambda: np.zeros(n // 2 + 1, np.complex128))
        self.dft(tree, View("input", Affine(), 1), View(spectrum, Affine(), 1), (), -1)

        def dc_body(em, v):
            value = em.load(View(spectrum, Affine(), 1), 0, v)[0] * em.constant(filter_table, 0)[0]
            em.store(View(full, Affine(), 1), 0, (value, em.zero), v)

        def mirror_body(em, v):
            k = v[0] + 1
            value = em.bind_complex(em.cmul(em.load(View(spectrum, Affine(), 1), k, v),
                                            em.constant(filter_table, k)))
            em.store(View(full, Affine(), 1), k, value, v)
            em.store(View(full, Affine(), 1), n - k, em.conj(value), v)

        self.add("conv_dc", (), (spectrum,), (full,), dc_body, "conv Y[0] = Re X[0]·H[0]")
        self.add("conv_mirror", (n // 2,), (spectrum,), (full,), mirror_body,
                 "conv Y[k] = X[k]·H[k], Y[n-k] = conj Y[k] (r2c keep, product, c2r extension fused)")
        self.dft(tree, View(full, Affine(), 1), View("output", Affine(), 1), (), 1)


def build_passes(kind: str, n: int, sign: int, scale: float, tree_for: Callable[[int], Breakdown]) -> PassList:
    """The passes of a transform of kind "c2c", "r2c" or "c2r" of logical size n, or of the circular
    convolution pipeline "conv" (its filter spectrum the first constant table, zeros until the caller's).

    `tree_for(size)` returns the breakdown of the complex transform of that size.
    """
    plan = PassList()
    builder = _Builder(plan)
    if kind == "c2c":
        builder.dft(tree_for(n), View("input", Affine(), 1), View("output", Affine(), 1, scale=scale), (), sign)
    elif kind == "r2c" and n % 2 == 0:
        builder.r2c_even(tree_for(n // 2), n, scale)
    elif kind == "r2c":
        builder.r2c_odd(tree_for(n), n, scale)
    elif kind == "conv" and n % 2 == 0:
        builder.conv_even(tree_for(n // 2), n)
    elif kind == "conv":
        builder.conv_odd(tree_for(n), n)
    elif n % 2 == 0:
        builder.c2r_even(tree_for(n // 2), n, scale)
    else:
        builder.c2r_odd(tree_for(n), n, scale)
    return plan
