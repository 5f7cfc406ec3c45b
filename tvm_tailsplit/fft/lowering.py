"""llvm lowering of a plan: TVM's default pipeline plus contiguous access to interleaved complex data.

Algorithm: after `VectorizeLoop`, a vectorized access to interleaved complex data is a strided ramp
`buffer[Ramp(B, S, w)]` with an even stride S (±2 inside a transform, 2·distance across the batch), which TVM's
llvm code generator scalarizes into w single-float loads (or stores) and inserts. This pass rewrites them:

* a **load** from a buffer whose complex pairs start at even offsets (the caller's complex arrays, real
  pairs with an even distance, the constant tables), when B's parity c is provable (the real part c = 0, the
  imaginary part c = 1): for S = ±2 one contiguous load of 2w floats, for other S one load of the whole pair
  `Ramp(B - c + l·S, 1, 2)` per lane l, and a `Shuffle` of the parts (lanes 2l + c, reversed for S = -2).
  The real and imaginary parts read the same vectors, which LLVM loads once;
* two **stores** in a row to `Ramp(B, S, w)` and `Ramp(B + 1, S, w)` (the real and imaginary parts of one
  value), the second value not reading that buffer (it is computed before the first store): the parts are
  interleaved with one `Shuffle` and stored with one contiguous store of 2w floats
  (S = ±2) or one store of each lane's pair. Stores need no parity: they write the same floats.

Before that, **blocks** of the caller's rows (`_block_transposes`): lanes across the batch (w of them, a power
of two, at least `MIN_BLOCK_LANES`) whose bound loads `buffer[Ramp(O + p, S, w)]` cover the w floats p < w of a
block of every lane (S >= w, O's residue modulo w known) read a w×w block: they become w contiguous w-float loads
of the lanes' rows and a transpose of w·log2(w) two-vector shuffles (`vpermt2ps`/`vunpck*`), and w stores that
cover a block become a transpose and w contiguous stores, instead of one pair load (store) per lane and pair and
the inserts (extracts) that gather them. A single-codelet plan across the batch (n = 8, 16 lanes) thus reads and
writes its rows with whole vectors; the floats after a lane's last whole block keep the pair accesses.

Inside a transform vectorized over codelet instances, a pass that reads (or writes) the elements
`i·S + e` of w instances i for every e < S touches S·w contiguous floats of its split re/im scratch: the S
strided loads (stores) of such a complete set become w-float contiguous ones and a transpose (`Shuffle`).
A pass that writes the elements `i·L + e`, e < S, with L > S (the first pass of a Cooley-Tukey chain: each
instance's outputs are contiguous, the instances far apart) stores S floats per instance: its S strided
stores become one S-float store per lane of the lanes' tuples, built by a transpose network of S·log2(S)
two-vector shuffles (LLVM otherwise builds each tuple with inserts; measured in bench/results/fft_tuning.md).

`hoist_scratch_allocation` moves a lane group's scratch allocation out of the serial loop over the groups
of a parallel task, so that it is allocated once per task instead of once per group.

The pipeline (`register_pipeline`) is TVM's default TIR pipeline composed at run time: its pass list, built by
TVM under the current PassContext's config (`ir_utils.default_passes_with`), with `hoist_scratch_allocation`
inserted after `VectorizeLoop` (`INSERT_AFTER`) and `contiguous_complex_access` appended after the list's last
pass, followed by one `StmtSimplify`; no copy of the list is kept here. The access rewrite runs last because its
transposes are chains of `Bind`s of pure shuffles, which every later pass built on TVM's analyzer
(`IRMutatorWithAnalyzer`: StmtSimplify, RemoveNoOp, HoistIfThenElse, ...) binds and simplifies with each earlier
binding substituted, at a cost that grows with the number of paths through the chains (lanes x lanes x the
codelet's paths). The one `StmtSimplify` after it inlines the shuffles into their uses, the order in which LLVM
schedules the default 16-point plan 5-7% faster than from the bound shuffles (without it the plans of
bench/results/fft.md were otherwise as fast, timed side by side). Measured on the machine of bench/results/fft.md,
compile times after `VectorizeLoop` -> last: a 32-point codelet across 16 lanes 106 s -> 24 s, 17 points across 16
lanes 12-23 s -> 5.8 s, 16 points across 16 lanes 9.7 s -> 4.5 s.

Measured on AVX-512 (the issue's 16 MiB batches, 1 thread): see bench/results/fft.md; in the generated
assembly the boundary passes use `vmovsd`/`vmovups` and `vunpck*`/`vshufps`/`vpermt2ps` instead of `vmovss` and
`vinsertps` per float.
"""

from __future__ import annotations

import logging
import threading

import tvm
import tvm_ffi
from tvm import sym, tirx

from ..ir_utils import default_passes_with, with_loop
from .tuning import MAX_STORE_SET, MIN_BLOCK_LANES

__all__ = ["INSERT_AFTER", "PAIR_BUFFERS_ATTR", "PIPELINE", "PIPELINE_PASS", "contiguous_complex_access",
           "hoist_scratch_allocation", "register_pipeline"]

logger = logging.getLogger("tvm_tailsplit.fft")

PIPELINE = "tailsplit_fft_llvm"
# a PrimFunc attribute (a list of buffer names) overriding the pipeline's pair buffers for that function
PAIR_BUFFERS_ATTR = "tailsplit_fft_pair_buffers"
# the name of the pipeline's module pass (what a PassInstrument sees around the passes it runs)
PIPELINE_PASS = "TailsplitFFTPipeline"


def _int(expr) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _ramp(indices) -> tirx.Ramp | None:
    if len(indices) != 1 or not isinstance(indices[0], tirx.Ramp):
        return None
    ramp = indices[0]
    stride, lanes = _int(ramp.stride), _int(ramp.lanes)
    if stride is None or lanes is None or abs(stride) < 2 or stride % 2 or lanes < 2:
        return None
    return ramp


def _load(buffer, base, stride: int, lanes: int, part: int):
    """The `lanes` floats `buffer[base + l·stride]` (base of parity `part`) from contiguous pair loads."""
    start = base - part
    if abs(stride) == 2:
        # one window of 2·lanes floats; with stride -2 the lanes' pairs are in reverse order
        window = start if stride > 0 else start + (lanes - 1) * stride
        position = range(lanes) if stride > 0 else range(lanes - 1, -1, -1)
        vectors = [tirx.BufferLoad(buffer, [tirx.Ramp(window, 1, 2 * lanes)])]
        return tirx.Shuffle(vectors, [tirx.IntImm("int32", 2 * p + part) for p in position])
    vectors = [tirx.BufferLoad(buffer, [tirx.Ramp(start + lane * stride, 1, 2)]) for lane in range(lanes)]
    return tirx.Shuffle(vectors, [tirx.IntImm("int32", 2 * lane + part) for lane in range(lanes)])


def _interleaved_stores(first: tirx.BufferStore, second: tirx.BufferStore, stride: int, lanes: int) -> list:
    """The stores of `first` (floats B + l·S) and `second` (B + 1 + l·S) as contiguous stores of pairs."""
    buffer, base = first.buffer, first.indices[0].base
    dtype = first.value.ty.dtype
    if abs(stride) == 2:
        # one window of 2·lanes floats; with stride -2 the lanes' pairs go in reverse order
        window = base if stride > 0 else base + (lanes - 1) * stride
        position = range(lanes) if stride > 0 else range(lanes - 1, -1, -1)
        order = [tirx.IntImm("int32", lane + part * lanes) for lane in position for part in (0, 1)]
        value = tirx.Shuffle([first.value, second.value], order)
        return [tirx.BufferStore(buffer, value, [tirx.Ramp(window, 1, 2 * lanes)])]
    order = [tirx.IntImm("int32", lane + part * lanes) for lane in range(lanes) for part in (0, 1)]
    value = tirx.Shuffle([first.value, second.value], order)
    # interleave once (unpcklps/unpckhps), then store each lane's pair (vmovlps/vmovhps)
    pairs = tirx.Var("pairs", str(tvm.runtime.DataType(dtype).with_lanes(2 * lanes)))
    stmts = [tirx.Bind(pairs, value)]
    for lane in range(lanes):
        pair = tirx.Shuffle([pairs], [tirx.IntImm("int32", 2 * lane), tirx.IntImm("int32", 2 * lane + 1)])
        stmts.append(tirx.BufferStore(buffer, pair, [tirx.Ramp(base + lane * stride, 1, 2)]))
    return stmts


def _has_load(node, buffer) -> bool:
    found = []
    tvm_ffi.structural_walk(node, [(tvm.ir.TensorLoad, lambda load: found.append(1) if buffer is None
                                    or load.source.same_as(buffer) else None)])
    return bool(found)


def _zip(first, second, unit: int, lanes: int, half: int):
    """The units (of `unit` floats) of the `half` (0: low, 1: high) halves of two vectors, interleaved."""
    units = lanes // unit // 2
    order = [vector * lanes + (half * units + u) * unit + f
             for u in range(units) for vector in (0, 1) for f in range(unit)]
    return tirx.Shuffle([first, second], [tirx.IntImm("int32", i) for i in order])


def _lane_tuples(vectors: list, lanes: int) -> list:
    """Transpose S vectors of `lanes` floats (S a power of two dividing `lanes`) into S vectors that hold the
    S-float tuples `(v_0[l], ..., v_{S-1}[l])` of `lanes / S` consecutive lanes each, lanes in order: the
    tuples of the two halves of the vectors are built recursively and zipped in units of S/2 floats, S·log2(S)
    two-vector shuffles in all (one `vpermt2ps` or `vunpck*` each) instead of a gather per tuple."""
    if len(vectors) == 1:
        return vectors
    half = len(vectors) // 2
    top, bottom = _lane_tuples(vectors[:half], lanes), _lane_tuples(vectors[half:], lanes)
    result = []
    for first, second in zip(top, bottom, strict=True):
        result.extend(_zip(first, second, half, lanes, part) for part in (0, 1))
    return result


def _store_set(members: list, lanes: int, stride: int) -> list | None:
    """The contiguous stores replacing a set of S stores `buffer[Ramp(B + e, stride, lanes)]`, e < S: a
    complete set (S = stride) covers S·lanes contiguous floats, written by `lanes`-float stores of its
    transpose; a set of S floats per lane (S a power of two dividing `lanes`, below the stride) is written by
    one S-float store per lane of its lane tuples (`_lane_tuples`). None for other sets."""
    by_offset = {o: st for _, st, o in members}
    count = len(members)
    if set(by_offset) != set(range(count)):
        return None
    vectors = [by_offset[e].value for e in range(count)]
    first = by_offset[0]
    buffer, base = first.buffer, first.indices[0].base
    if count == stride:
        stores = []
        for j in range(stride):  # output vector j: floats base + j·w + q, q < w
            order = [((j * lanes + q) % stride) * lanes + (j * lanes + q) // stride for q in range(lanes)]
            stores.append(tirx.BufferStore(buffer, tirx.Shuffle(vectors, [tirx.IntImm("int32", i) for i in order]),
                                           [tirx.Ramp(base + j * lanes, 1, lanes)]))
        return stores
    if count < 2 or count & (count - 1) or lanes % count or count > stride:
        return None
    dtype = str(first.value.ty.dtype)
    stmts, per_vector = [], lanes // count
    for index, value in enumerate(_lane_tuples(vectors, lanes)):
        tuples = tirx.Var("tuples", dtype)
        stmts.append(tirx.Bind(tuples, value))
        for q in range(per_vector):
            lane = index * per_vector + q
            part = tirx.Shuffle([tuples], [tirx.IntImm("int32", q * count + f) for f in range(count)])
            stmts.append(tirx.BufferStore(buffer, part, [tirx.Ramp(base + lane * stride, 1, count)]))
    return stmts


def _splice(stmts: list, replaced: dict[int, list], removed: set[int]) -> list:
    """`stmts` with the statements at the positions in `removed` dropped and the lists of `replaced` put in place
    of the statement at their position."""
    if not replaced:
        return stmts
    result = []
    for position, stmt in enumerate(stmts):
        if position in replaced:
            result.extend(replaced[position])
        elif position not in removed:
            result.append(stmt)
    return result


def _bound_transpose(vectors: list, lanes: int, stmts: list) -> list:
    """The transpose of `lanes` vectors of `lanes` floats (a power of two): vector k of the result holds
    `(v_0[k], ..., v_{lanes-1}[k])`. The zip network of `_lane_tuples` (lanes·log2(lanes) two-vector shuffles),
    every stage's vectors bound (appended to `stmts`) so that no shuffle is emitted twice."""
    if len(vectors) == 1:
        return vectors
    half = len(vectors) // 2
    top = _bound_transpose(vectors[:half], lanes, stmts)
    bottom = _bound_transpose(vectors[half:], lanes, stmts)
    result = []
    for first, second in zip(top, bottom, strict=True):
        for part in (0, 1):
            value = _zip(first, second, half, lanes, part)
            var = tirx.Var("zipped", str(first.ty.dtype))
            stmts.append(tirx.Bind(var, value))
            result.append(var)
    return result


def _block_access(analyzer, indices, buffer, names) -> tuple | None:
    """(stride, lanes, block origin, position) of an access `buffer[Ramp(B, S, w)]` to a buffer in `names` that
    `_block_transposes` may gather: w a power of two of at least `MIN_BLOCK_LANES`, S >= w, B's residue modulo
    w known (position); the block of B is the w floats `origin + l·S + p`, p < w, of each lane l (origin = B -
    position)."""
    if buffer.name not in names or len(indices) != 1 or not isinstance(indices[0], tirx.Ramp):
        return None
    ramp = indices[0]
    stride, lanes = _int(ramp.stride), _int(ramp.lanes)
    if stride is None or lanes is None or lanes < MIN_BLOCK_LANES or lanes & (lanes - 1) or stride < lanes:
        return None
    residue = analyzer.modular_set(ramp.base)
    if residue.coeff % lanes:
        return None
    position = residue.base % lanes
    return stride, lanes, analyzer.simplify(ramp.base - position), position


def _has_store(stmt, buffer=None) -> bool:
    """Whether `stmt` stores (into `buffer`; None: into any buffer)."""
    found = []
    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda store: found.append(1) if buffer is None
                                    or store.buffer.same_as(buffer) else None)])
    return bool(found)


def _accesses(stmt, buffer) -> bool:
    """Whether `stmt` loads from or stores into `buffer`."""
    return _has_load(stmt, buffer) or _has_store(stmt, buffer)


def _block_transposes(stmts: list, analyzer, names) -> list:
    """Blocks of strided accesses to the buffers `names`: w bound loads (or w stores) `buffer[Ramp(O + p, S, w)]`,
    p < w, S >= w (`_block_access`), read (write) the w×w floats `O + l·S + p` of the w lanes l: they become w
    contiguous w-float loads (stores) of the lanes' rows and a transpose (`_bound_transpose`), instead of one
    pair load (store) per lane and float pair and the shuffles that gather them. The loads of a block are
    placed at its first member, so no statement between its members may store; the stores at its last, so no
    statement between them may load or store elsewhere."""
    blocks: list[tuple] = []  # (is_load, buffer, stride, lanes, origin, {position: (index, stmt)})
    complete: list[tuple] = []
    for index, stmt in enumerate(stmts):
        access, is_load = None, False
        if isinstance(stmt, tirx.Bind) and isinstance(stmt.value, tvm.ir.TensorLoad):
            access, is_load = _block_access(analyzer, stmt.value.indices, stmt.value.source, names), True
            buffer = stmt.value.source
        elif isinstance(stmt, tirx.BufferStore) and not _has_load(stmt.value, None):
            access, buffer = _block_access(analyzer, stmt.indices, stmt.buffer, names), stmt.buffer
        # the open blocks that this statement would move across end unrewritten: load blocks at a store, store
        # blocks at a load or at a store that is not theirs
        stores = _has_store(stmt)
        loads = _has_load(stmt, None) or is_load
        block = None
        if access is not None:
            stride, lanes, origin, position = access
            for candidate in blocks:
                if candidate[0] == is_load and candidate[1].same_as(buffer) and candidate[2:4] == (stride, lanes) \
                        and analyzer.can_prove_equal(candidate[4] - origin, 0):
                    block = candidate
                    break
            if block is not None and position in block[5]:
                blocks.remove(block)  # a float accessed twice: not a block
                block = None
            elif block is None:
                block = (is_load, buffer, stride, lanes, origin, {})
                blocks.append(block)
        blocks = [b for b in blocks if b is block or not ((not b[0] and (loads or stores)) or (b[0] and stores))]
        if block is None:
            continue
        block[5][position] = (index, stmt)
        if len(block[5]) == block[3]:
            blocks.remove(block)
            complete.append(block)
    replaced: dict[int, list] = {}
    removed: set[int] = set()
    for is_load, buffer, stride, lanes, origin, members in complete:
        new: list = []
        if is_load:
            rows = []
            for lane in range(lanes):
                row = tirx.Var("row", str(members[0][1].var.ty.dtype))
                new.append(tirx.Bind(row, tirx.BufferLoad(buffer, [tirx.Ramp(origin + lane * stride, 1, lanes)])))
                rows.append(row)
            columns = _bound_transpose(rows, lanes, new)
            new.extend(tirx.Bind(stmt.var, columns[position]) for position, (_, stmt) in sorted(members.items()))
            at = min(index for index, _ in members.values())
        else:
            columns = []
            for position in range(lanes):
                value = members[position][1].value
                if not isinstance(value, tirx.Var):
                    var = tirx.Var("column", str(value.ty.dtype))
                    new.append(tirx.Bind(var, value))
                    value = var
                columns.append(value)
            rows = _bound_transpose(columns, lanes, new)
            new.extend(tirx.BufferStore(buffer, row, [tirx.Ramp(origin + lane * stride, 1, lanes)])
                       for lane, row in enumerate(rows))
            at = max(index for index, _ in members.values())
        removed.update(index for index, _ in members.values())
        replaced.setdefault(at, []).extend(new)
    return _splice(stmts, replaced, removed)


def _may_overlap(members: list, store: tirx.BufferStore, analyzer) -> bool:
    """Whether `store` (a ramp of positive stride) may write a float of the set of stores `members` (offsets from
    the set's first base, one stride and lane count): unless their spans are provably apart."""
    first = members[0][1].indices[0]
    ramp = store.indices[0]
    distance = analyzer.simplify(ramp.base - first.base)
    if not isinstance(distance, tirx.IntImm):
        return True
    span = (_int(first.lanes) - 1) * _int(first.stride) + max(offset for _, _, offset in members) + 1
    return -((_int(ramp.lanes) - 1) * _int(ramp.stride) + 1) < distance.value < span


def _transposed_stores(stmts: list, analyzer) -> list:
    """Sets of S stores `buffer[Ramp(B + e, L, w)]`, e < S, with one stride L and lane count w (the outputs of
    w codelet instances side by side whose results are L apart, e.g. a pass that writes `i·m + e` vectorized
    over i) become contiguous stores of their transpose (`_store_set`): w-float ones when the set covers S·w
    contiguous floats (S = L), else S-float ones per lane, at the set's last member. A set is complete at S = L,
    or when a statement reads or writes its buffer (a store of another set there: where it may write a float of
    the set's, `_may_overlap`) or the sequence ends: its stores never move past an access to their floats. The
    pipeline rewrites every PrimFunc of a module (a Relax model with `emit_fft`), so this holds for any kernel."""
    pending: list[list] = []  # sets of (position, store, offset from the set's first base)
    removed: set[int] = set()
    replaced: dict[int, list] = {}

    def close(members) -> None:
        ramp = members[0][1].indices[0]
        new = _store_set(members, _int(ramp.lanes), _int(ramp.stride))
        if new is not None:
            removed.update(position for position, _, _ in members)
            replaced[max(position for position, _, _ in members)] = new

    for position, stmt in enumerate(stmts):
        if isinstance(stmt, tirx.BufferStore):
            ramp = stmt.indices[0] if len(stmt.indices) == 1 else None
            stride = _int(ramp.stride) if isinstance(ramp, tirx.Ramp) else None
            lanes = _int(ramp.lanes) if isinstance(ramp, tirx.Ramp) else None
            if stride is not None and lanes is not None and stride >= 2 and lanes >= 2 \
                    and not _has_load(stmt.value, None):
                members = None
                for candidate in pending:
                    first = candidate[0][1]
                    if first.buffer.same_as(stmt.buffer) and _int(first.indices[0].stride) == stride \
                            and _int(first.indices[0].lanes) == lanes:
                        offset = analyzer.simplify(ramp.base - first.indices[0].base)
                        if isinstance(offset, tirx.IntImm) and 0 <= offset.value < min(stride, MAX_STORE_SET) \
                                and offset.value not in [o for _, _, o in candidate]:
                            members = candidate
                            members.append((position, stmt, offset.value))
                            break
                if members is None:
                    members = [(position, stmt, 0)]
                    pending.append(members)
                # the other sets of this buffer cannot move past this store where it may write their floats
                for other in [other for other in pending if other is not members
                              and other[0][1].buffer.same_as(stmt.buffer) and _may_overlap(other, stmt, analyzer)]:
                    close(other)
                    pending.remove(other)
                if len(members) == stride:
                    close(members)
                    pending.remove(members)
                continue
        # a statement that reads or writes a buffer with pending stores: those stores cannot move past it
        for members in [members for members in pending if _accesses(stmt, members[0][1].buffer)]:
            close(members)
            pending.remove(members)
    for members in pending:
        close(members)
    return _splice(stmts, replaced, removed)


def _transposed_loads(stmts: list, analyzer) -> list:
    """Sets of S bound loads `buffer[Ramp(B + e, S, w)]`, e < S (the inputs of w codelet instances side by
    side whose elements are S apart) read S·w contiguous floats: each becomes a `Shuffle` of the same w-float
    contiguous loads (which LLVM loads once); a load may read the block wherever it is, as it only uses its
    own floats, and a complete set proves the block is inside the buffer."""
    sets: list[list] = []
    for position, stmt in enumerate(stmts):
        if not (isinstance(stmt, tirx.Bind) and isinstance(stmt.value, tvm.ir.TensorLoad)):
            continue
        load = stmt.value
        ramp = load.indices[0] if len(load.indices) == 1 else None
        if not isinstance(ramp, tirx.Ramp):
            continue
        stride, lanes = _int(ramp.stride), _int(ramp.lanes)
        if stride is None or lanes is None or not 2 <= stride <= 16 or lanes < 2:
            continue
        for candidate in sets:
            first = candidate[0][1].value
            if first.source.same_as(load.source) and _int(first.indices[0].stride) == stride \
                    and _int(first.indices[0].lanes) == lanes:
                offset = analyzer.simplify(ramp.base - first.indices[0].base)
                if isinstance(offset, tirx.IntImm) and 0 <= offset.value < stride \
                        and offset.value not in [o for _, _, o in candidate]:
                    candidate.append((position, stmt, offset.value))
                    break
        else:
            sets.append([(position, stmt, 0)])
    replaced = {}
    for members in sets:
        stride = _int(members[0][1].value.indices[0].stride)
        lanes = _int(members[0][1].value.indices[0].lanes)
        if len(members) != stride:
            continue
        buffer = members[0][1].value.source
        base = members[0][1].value.indices[0].base
        vectors = [tirx.BufferLoad(buffer, [tirx.Ramp(base + j * lanes, 1, lanes)]) for j in range(stride)]
        for position, stmt, offset in members:
            order = [tirx.IntImm("int32", lane * stride + offset) for lane in range(lanes)]
            replaced[position] = tirx.Bind(stmt.var, tirx.Shuffle(vectors, order))
    if not replaced:
        return stmts
    return [replaced.get(position, stmt) for position, stmt in enumerate(stmts)]


def contiguous_complex_access(pair_buffers: frozenset[str]) -> tvm.transform.Pass:
    """The rewrite of the module docstring; loads are rewritten only in buffers named in `pair_buffers`, or in
    those named by the function's `PAIR_BUFFERS_ATTR` attribute where it has one (a module of several plans)."""

    @tirx.transform.prim_func_pass(opt_level=0, name="ContiguousComplexAccess")
    def rewrite(func, mod, ctx):
        analyzer = sym.Analyzer()
        names = pair_buffers
        if func.attrs is not None and PAIR_BUFFERS_ATTR in func.attrs:
            names = frozenset(str(name) for name in func.attrs[PAIR_BUFFERS_ATTR])

        def on_load(load):
            ramp = _ramp(load.indices)
            if ramp is None or load.source.name not in names:
                return load
            parity = analyzer.modular_set(ramp.base)
            if parity.coeff % 2:
                return load
            return _load(load.source, ramp.base, _int(ramp.stride), _int(ramp.lanes), parity.base % 2)

        def on_seq(seq):
            stmts = list(seq.seq)
            result = []
            index = 0
            changed = False
            while index < len(stmts):
                first = stmts[index]
                second = stmts[index + 1] if index + 1 < len(stmts) else None
                # (the second value is computed before the first store: it must not read that buffer)
                if isinstance(first, tirx.BufferStore) and isinstance(second, tirx.BufferStore) \
                        and first.buffer.same_as(second.buffer) and not _has_load(second.value, first.buffer):
                    a, b = _ramp(first.indices), _ramp(second.indices)
                    if a is not None and b is not None and _int(a.stride) == _int(b.stride) \
                            and _int(a.lanes) == _int(b.lanes) \
                            and analyzer.can_prove_equal(b.base - a.base, 1):
                        result.extend(_interleaved_stores(first, second, _int(a.stride), _int(a.lanes)))
                        index += 2
                        changed = True
                        continue
                result.append(first)
                index += 1
            transposed = _transposed_stores(_transposed_loads(result, analyzer), analyzer)
            if not changed and transposed is result:
                return seq
            result = transposed
            return result[0] if len(result) == 1 else tirx.SeqStmt(result)

        def on_block_seq(seq):
            stmts = list(seq.seq)
            result = _block_transposes(stmts, analyzer, names)
            if result is stmts:
                return seq
            return result[0] if len(result) == 1 else tirx.SeqStmt(result)

        body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, on_block_seq)], order="post")
        body = tvm_ffi.structural_map(body, [(tvm.ir.TensorLoad, on_load)], order="post")
        body = tvm_ffi.structural_map(body, [(tirx.SeqStmt, on_seq)], order="post")
        return func.with_body(body)

    return rewrite


@tirx.transform.prim_func_pass(opt_level=0, name="HoistScratchAllocation")
def hoist_scratch_allocation(func, mod, ctx):
    """Move the scratch allocations of a lane group out of serial loops (a group writes its scratch before
    reading it, so consecutive groups of one thread can share it): one workspace allocation per parallel task
    instead of one per lane group (the schedule splits the parallel group loop into tasks of serial groups)."""

    def on_for(loop):
        if loop.kind != tirx.ForKind.SERIAL or not isinstance(loop.body, tirx.SeqStmt):
            return loop
        allocations = [stmt for stmt in loop.body.seq if isinstance(stmt, tirx.AllocBuffer)]
        if not allocations:
            return loop
        rest = [stmt for stmt in loop.body.seq if not isinstance(stmt, tirx.AllocBuffer)]
        body = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
        return tirx.SeqStmt([*allocations, with_loop(loop, body=body)])

    def on_seq(seq):
        # flatten the sequences that hoisting nested into a sequence
        if not any(isinstance(stmt, tirx.SeqStmt) for stmt in seq.seq):
            return seq
        flat = []
        for stmt in seq.seq:
            flat.extend(stmt.seq if isinstance(stmt, tirx.SeqStmt) else [stmt])
        return tirx.SeqStmt(flat)

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)], order="post")
    return func.with_body(tvm_ffi.structural_map(body, [(tirx.SeqStmt, on_seq)], order="post"))


# where `hoist_scratch_allocation` goes in TVM's default pipeline: right after this pass (by its PassInfo name)
INSERT_AFTER = "tirx.VectorizeLoop"


def _pipeline_factory(pair_buffers: frozenset[str]):
    """TVM's default pipeline (read at run time, `ir_utils.default_passes_with`) with `hoist_scratch_allocation`
    right after `INSERT_AFTER` and `contiguous_complex_access` after the last pass; its finalization passes
    unchanged."""

    def factory():
        _, finalize_host, finalize_device = tirx.get_tir_pipeline("default")

        @tvm.transform.module_pass(opt_level=0, name=PIPELINE_PASS)
        def pipeline(mod, _ctx):
            passes = default_passes_with([hoist_scratch_allocation], after=INSERT_AFTER)
            return tvm.ir.transform.Sequential([*passes, contiguous_complex_access(pair_buffers),
                                                tirx.transform.StmtSimplify()])(mod)

        return pipeline, finalize_host, finalize_device

    return factory


_REGISTERED: dict[frozenset[str], str] = {}
# plans are compiled from several threads (numpy_api and dask callers): the name of a new set and its registration are
# one step, else two sets named alike at once shared one pipeline, TVM's registry keeping the last factory
_REGISTER_LOCK = threading.Lock()


def register_pipeline(pair_buffers: frozenset[str]) -> str:
    """The name of the registered pipeline that rewrites loads in `pair_buffers` (registered once per set; safe to
    call from several threads)."""
    with _REGISTER_LOCK:
        if pair_buffers not in _REGISTERED:
            name = f"{PIPELINE}_{len(_REGISTERED)}"
            tirx.register_tir_pipeline(name, _pipeline_factory(pair_buffers))
            logger.debug("registered TIR pipeline %s (pair buffers %s)", name, sorted(pair_buffers))
            _REGISTERED[pair_buffers] = name
        return _REGISTERED[pair_buffers]
