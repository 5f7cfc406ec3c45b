"""Event-level simulation of the generated Hopper GEMM kernels: a CPU-side check of TVM's sm_90a CUDA text.

`transpile` turns the body of the `extern "C" __global__` kernel that `cuda.cuda_source` returns for a
`WarpSpecialize("cuda", hopper=True)` GEMM (or `ablation.unspecialized_hopper_kernel`) into a Python generator
function of `(tx, bx, by)`: its `for`/`if`/`else` blocks and `int v = ...;` bindings become Python, and every
statement with an effect becomes one yielded event. The statements it understands, by the helper names TVM 0.27
emits:

* `tvm_builtin_ptx_mbarrier_init_init_shared_b64(..[c], (uint)n)` (barrier `c` expects `n` arrivals),
  `tvm_builtin_cuda_mbarrier_wait((&..[c]), parity)` (the `try_wait.parity` loop),
  `tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(..[c])`,
  `tvm_builtin_ptx_mbarrier_arrive_expect_tx_arrive_expect_tx_shared_b64(..[c], (uint)bytes)`;
* `tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_2d_shared__cluster_global_mbarrier__
  complete_tx__bytes` (a TMA box copy: destination in the dynamic buffer, tensor map, column and row coordinates,
  barrier);
* `ptx_wgmma_encode_matrix_descriptor(&x_desc, &..[offset], lbo, sbo, swizzle)`,
  `tvm_builtin_ptx_wgmma_f16_ss_mma_async_sync_aligned_m64n{N}k16_f32_f16_f16_1_1_0_0(registers.., scale_d)`,
  `tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned()`,
  `tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_{D}()`;
* `tvm_builtin_ptx_setmaxnreg_{dec,inc}_sync_aligned_u32_{R}()`, `tvm_builtin_cuda_cta_sync()`;
* `tvm_builtin_cuda_trap_when_assert_failed(((cvta(&..[offset]) & (uint)mask) == (uint)0))` (the kernel traps
  unless a ring starts on a swizzle atom; the window is taken to start at shared address 0);
* the fragment's zero fill `acc_rX_ptr[r] = 0x0p+0f`, the stores `C_ptr[index] = acc_rX_ptr[r];` and
  `*(float2*)(C_ptr + index) = make_float2(acc_rX_ptr[r], acc_rX_ptr[s]);` (elements `index` and `index + 1`);
* no-ops: the fences (`tvm_builtin_ptx_fence_proxy..`, `..fence_mbarrier_init..`, `..wgmma_fence..`,
  `tvm_tailsplit_fence_operand`) and the declarations of the shared buffer, fragments and descriptors.

Any other line (a named barrier, a ternary, a renamed helper) raises `ValueError` naming the line: a codegen
change in TVM breaks this check loudly, never makes it pass silently. C integer expressions become Python ones
(`/` as `//`, `%` as `%`: their operands are non-negative in the CTAs simulated, where C and Python agree; a stage
count or CTA count other than a power of two makes TVM emit `%`; TVM parenthesizes every binary operation, so C's
precedence and Python's agree).

`simulate_gemm` runs each CTA's threads in a random interleaving (seeded): each round steps up to
`THREADS_PER_ROUND` random runnable threads by one event, and completes a pending TMA copy instead with the odds
`COPY_COMPLETION_ODDS[seed % 3]` (copies landing early, very late, or at once). It models mbarrier phases
(arrival count, `expect_tx` bytes less the bytes completed, `try_wait.parity` of the current phase), TMA copies
landing in a ring stage (its content: the box's tensor map and coordinates), wgmma groups that read their stages
until a `wait_group` retires them, per-thread fragment registers holding the list of products accumulated into
them (reset by the zero fill), `__syncthreads`, and the rings laid out as TVM places them (`gemm_rings`).

It reports a `KernelFault` of one kind (the constants below) at the first of: every live thread waiting on a barrier
phase that no pending copy or thread can complete (`DEADLOCK`); a TMA copy issued into, or landing in, a stage that
an unretired wgmma group reads, two copies in flight into one stage, or a copy not at the start of a stage of its
operand's ring (`STAGE_RACE`); a wgmma reading a stage before its copy landed (`EARLY_READ`); more bytes completed
than expected or an arrival past a barrier's count (`TRANSACTION`); a descriptor other than CUTLASS's K-major
128-byte-swizzle one (`make_gmma_desc<Major::K>` of `Layout_K_SW128_Atom`: leading byte offset 1, stride byte offset
1024 B, B128; the emitted encoder is checked by `check_descriptor_encoder`), or not at a 16-element K step of a
64-row block of a stage of its operand's ring, or A and B at different K (`DESCRIPTOR`); a fragment stored while
groups are in flight (`UNRETIRED_STORE`); a `float2` store at an odd element (`MISALIGNED`, C taken to start
8-byte aligned); a C element stored other than exactly once (`COVERAGE`); a stored register
other than the one the PTX m64nNk16 D-fragment layout assigns to that element, or not holding exactly the products
of the element's A row and B row at every 16-wide K step of the K tiles (`FRAGMENT`); a warpgroup not executing one
`setmaxnreg` value on all its threads, or the values exceeding the register file (`REGISTERS`); a trap whose
condition fails (`TRAP`).
A stored register that no fill or wgmma wrote is a `FRAGMENT` fault too.

Limits: random interleavings (a few seeds), not all of them: a pass is evidence, a fault a counterexample; one CTA
at a time (no cluster, no inter-CTA effects); values are not computed, only which products reach which register
(numerics are the `gpu` tests' job); TMA zero fill past K is not modelled (a box is the same content whether or not
it crosses K); memory ordering is sequentially consistent apart from the TMA copies' delay; the fragment layout and
ring placement are those of `examples.hopper_gemm_kernel`'s tiles (fp16, 64-wide K tiles).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator

from tvm_tailsplit.warpspec.hopper import REGISTER_FILE, SWIZZLE_128B, SWIZZLE_ATOM_BYTES, WARPGROUP
from tvm_tailsplit.warpspec.tiles import WGMMA_K, WGMMA_M

DEADLOCK = "deadlock"
STAGE_RACE = "stage race"
EARLY_READ = "early read"
TRANSACTION = "transaction"
DESCRIPTOR = "descriptor"
UNRETIRED_STORE = "unretired store"
MISALIGNED = "misaligned vector store"
COVERAGE = "coverage"
FRAGMENT = "fragment"
REGISTERS = "registers"
TRAP = "trap"

THREADS_PER_ROUND = 8
"""Rule: a scheduling round steps at most 8 random runnable threads (fine interleavings, few rounds)."""
COPY_COMPLETION_ODDS = (0.3, 0.02, 0.9)
"""Rule: seed `s` lands a pending TMA copy, instead of stepping threads, with probability `ODDS[s % 3]` a round."""
BLOCK_K = 64
"""The K tile of the rings (fp16: one 128-byte swizzle row)."""
HALF_BYTES = 2

Event = tuple
"""`(kind, *operands)`, the kinds and operands as `_EVENTS` lists them (and `('start',)`, every thread's first)."""


class KernelFault(AssertionError):
    """A property of the simulated kernel failed; `kind` is one of the module's kinds."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclasses.dataclass(frozen=True)
class Ring:
    """A ring in the dynamic shared buffer, in fp16 elements: `stages` stages of `rows` x `BLOCK_K`."""

    name: str
    base: int
    rows: int
    stages: int

    @property
    def stage_size(self) -> int:
        return self.rows * BLOCK_K


def gemm_rings(block_m: int = 128, block_n: int = 256, stages: int = 4) -> tuple[Ring, Ring]:
    """The A and B rings as TVM places them: the barriers at byte 0, from byte `SWIZZLE_ATOM_BYTES` the smaller ring
    (A on a tie), the other right after it (TVM's shared-memory merge places the larger allocation last; each
    operand's ring named after its tensor map's buffer). Returned as (A, B)."""
    first = SWIZZLE_ATOM_BYTES // HALF_BYTES
    if block_n < block_m:
        b = Ring("B", first, block_n, stages)
        return Ring("A", b.base + stages * b.stage_size, block_m, stages), b
    a = Ring("A", first, block_m, stages)
    return a, Ring("B", a.base + stages * a.stage_size, block_n, stages)


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A transpiled kernel: `thread(tx, bx, by)` yields the events of thread `tx` of CTA `(bx, by)`."""

    thread: Callable[[int, int, int], Iterator[Event]]
    threads: int


# -- transpilation -------------------------------------------------------------------------------------------------

_BAR = r"\(\(\(uint64_t\*\)buf_dyn_shmem_ptr\)\[(.+?)\]\)"
_HALF = r"\(\(\(half\*\)buf_dyn_shmem_ptr\)\[(.+?)\]\)"
_SHARED_BAR = rf"tvm_builtin_cuda_cvta_generic_to_shared\(\(&{_BAR}\)\)"
_CASTS = re.compile(r"\((?:int|uint|unsigned int|int64_t|long long|unsigned long long)\)")

_EVENTS: list[tuple[str, re.Pattern, str]] = [(kind, re.compile(pattern), groups) for kind, pattern, groups in [
    # (event kind, statement, the captured groups: e a C expression, i an int, s a name, r a register list)
    ("init", rf"tvm_builtin_ptx_mbarrier_init_init_shared_b64\({_SHARED_BAR}, \(uint\)(\d+)\);", "ei"),
    ("wait", rf"tvm_builtin_cuda_mbarrier_wait\(\(&{_BAR}\), (.+)\);", "ee"),
    ("arrive", rf"tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64\({_SHARED_BAR}\);", "e"),
    ("expect", rf"tvm_builtin_ptx_mbarrier_arrive_expect_tx_arrive_expect_tx_shared_b64\({_SHARED_BAR}, "
               r"\(uint\)(\d+)\);", "ei"),
    ("tma", r"tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_2d_shared__cluster_global_mbarrier__"
            rf"complete_tx__bytes\(tvm_builtin_cuda_cvta_generic_to_shared\(\(&{_HALF}\)\), "
            rf"\(\(void\*\)\(\(unsigned long long\)\(&\((\w+)_tensor_map\)\)\)\), (.+), (.+), {_SHARED_BAR}\);",
     "eseee"),
    ("desc", rf"ptx_wgmma_encode_matrix_descriptor\(\(&\(([ab])_desc_r\d+_ptr\[0\]\)\), \(&{_HALF}\), (\d+), (\d+), "
             r"(\d+)\);", "seiii"),
    ("mma", r"tvm_builtin_ptx_wgmma_f16_ss_mma_async_sync_aligned_m64n(\d+)k16_f32_f16_f16_1_1_0_0\("
            r"((acc_r\d+)_ptr\[\d+\](?:, \3_ptr\[\d+\])*), a_desc_r\d+_ptr\[0\], b_desc_r\d+_ptr\[0\], "
            r"\(bool\)([01])\);", "irsi"),
    ("commit", r"tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned\(\);", ""),
    ("wait_group", r"tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_(\d+)\(\);", "i"),
    ("setmaxnreg", r"tvm_builtin_ptx_setmaxnreg_(dec|inc)_sync_aligned_u32_(\d+)\(\);", "si"),
    ("sync", r"tvm_builtin_cuda_cta_sync\(\);", ""),
    ("aligned", r"tvm_builtin_cuda_trap_when_assert_failed\(\(\("
                rf"tvm_builtin_cuda_cvta_generic_to_shared\(\(&{_HALF}\)\) & \(uint\)(\d+)\) == \(uint\)0\)\);", "ei"),
    ("zero", r"(acc_r\d+)_ptr\[(\d+)\] = 0x0p\+0f/\*0\.000000e\+00\*/;", "si"),
    ("store", r"C_ptr\[(.+)\] = (acc_r\d+)_ptr\[(\d+)\];", "esi"),
    ("store_pair", r"\*\(float2\*\)\(C_ptr \+ (.+)\) = make_float2\((acc_r\d+)_ptr\[(\d+)\], \2_ptr\[(\d+)\]\);",
     "esii"),
]]
_NO_OPS = re.compile(r"tvm_builtin_ptx_fence_proxy_proxy_async_shared__cta\(\);|"
                     r"tvm_builtin_ptx_fence_mbarrier_init_mbarrier_init_release_cluster\(\);|"
                     r"tvm_builtin_ptx_wgmma_fence_fence_sync_aligned\(\);|"
                     r"tvm_tailsplit_fence_operand\(acc_r\d+_ptr\[\d+\]\);|"
                     r"extern __shared__ __align__\(\d+\) uchar buf_dyn_shmem_ptr\[\];|"
                     r"alignas\(\d+\) (?:float|uint64_t) \w+\[\d+\];")


def python_expression(expression: str) -> str:
    """A C integer expression of the kernel as Python (`threadIdx.x` as `tx`, `blockIdx.x/y` as `bx`/`by`)."""
    if "?" in expression:
        raise ValueError(f"cuda_events: unsupported C expression {expression!r}")
    expression = (expression.replace("((int)threadIdx.x)", "tx").replace("((int)blockIdx.x)", "bx")
                  .replace("((int)blockIdx.y)", "by"))
    expression = _CASTS.sub("", expression).replace("&&", " and ").replace("||", " or ")
    return expression.replace("/", "//")


def _python_value(text: str, kind: str) -> str:
    if kind == "e":
        return python_expression(text)
    if kind == "r":
        return repr(tuple(int(r) for r in re.findall(r"_ptr\[(\d+)\]", text)))
    return repr(text) if kind == "s" else str(int(text))


def _event_line(line: str) -> str | None:
    """The Python `yield` of one effect statement, or None if `line` is no such statement."""
    for kind, pattern, groups in _EVENTS:
        if match := pattern.fullmatch(line):
            values = [_python_value(match[i + 1], g) for i, g in enumerate(groups)]
            return f"yield ({kind!r}, {', '.join(values)})"
    return None


def kernel_lines(source: str) -> list[str]:
    """The statements of the `__global__` kernel's body in `source` (stripped, non-empty)."""
    start = source.index("{", source.index(") {", source.index('extern "C" __global__'))) + 1
    lines, depth = [], 1
    for raw in source[start:].splitlines():
        line = raw.strip()
        depth += line.count("{") - line.count("}")
        if depth == 0:
            return lines
        if line:
            lines.append(line)
    raise ValueError("cuda_events: the kernel body does not close")


def transpile(source: str) -> Kernel:
    """The kernel of `source` (see the module doc) as a generator function of `(tx, bx, by)`; the symbolic `K` and
    `M` are globals of the function (`simulate_gemm` sets them)."""
    out = ["def thread(tx, bx, by):", "    yield ('start',)"]  # a generator even if the thread does nothing
    depth = 1
    for line in kernel_lines(source):
        indent = "    " * depth
        if loop := re.fullmatch(r"for \(int (\w+) = 0; \1 < (.+); \+\+\1\) \{", line):
            out.append(f"{indent}for {loop[1]} in range({python_expression(loop[2])}):")
            depth += 1
        elif condition := re.fullmatch(r"if \((.+)\) \{", line):
            out += [f"{indent}if {python_expression(condition[1])}:", f"{indent}    pass"]
            depth += 1
        elif line == "} else {":
            out += ["    " * (depth - 1) + "else:", f"{indent}pass"]
        elif line == "}":
            depth -= 1
        elif binding := re.fullmatch(r"int (\w+) = (.+);", line):  # CSE values, Binds (a tail's `min` extent)
            out.append(f"{indent}{binding[1]} = {python_expression(binding[2])}")
        elif (event := _event_line(line)) is not None:
            out.append(indent + event)
        elif not _NO_OPS.fullmatch(line):
            raise ValueError(f"cuda_events: cannot parse the kernel line {line[:240]!r}")
    namespace: dict = {}
    exec(compile("\n".join(out), "<transpiled kernel>", "exec"), namespace)
    return Kernel(namespace["thread"], int(re.search(r"__launch_bounds__\((\d+)\)", source)[1]))


# -- simulation ----------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Barrier:
    count: int
    pending: int
    tx: int = 0
    phase: int = 0

    def complete_if_done(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count


@dataclasses.dataclass
class _Copy:
    stage: tuple[str, int]
    content: tuple[str, int, int]  # tensor map, column (K), row
    barrier: int
    bytes: int


@dataclasses.dataclass(frozen=True)
class Store:
    """One `C[index] = fragment[register]`: the storing thread and the products the register holds, one per wgmma
    that accumulated into it, `(a_row0, b_row0, k, position)`: the first A row of the wgmma's 64-row block, the first
    B row of its tile, its K step, and the register's position in its D fragment (whose layout gives the element's
    offsets from those rows)."""

    thread: int
    register: int
    products: tuple[tuple[int, int, int, int], ...]


class _Cta:
    """The state of one simulated CTA."""

    def __init__(self, kernel: Kernel, rings: tuple[Ring, ...], bx: int, by: int, rng: random.Random):
        self.rings = rings
        self.rng = rng
        self.threads = {t: kernel.thread(t, bx, by) for t in range(kernel.threads)}
        self.barriers: dict[int, _Barrier] = {}
        self.content: dict[tuple[str, int], tuple[str, int, int]] = {}
        self.copies: dict[tuple[str, int], _Copy] = {}  # in flight, by stage
        self.groups: dict[int, list[set]] = defaultdict(list)  # committed, unretired groups' stages, per thread
        self.open_group: dict[int, set] = defaultdict(set)
        self.descriptors: dict[tuple[int, str], int] = {}
        self.registers: dict[tuple[int, str], dict[int, list]] = defaultdict(dict)  # (thread, fragment) -> products
        self.register_requests: dict[int, dict[int, int]] = defaultdict(dict)  # warpgroup -> thread -> setmaxnreg
        self.stores: dict[int, list[Store]] = defaultdict(list)

    def stage_of(self, offset: int) -> tuple[Ring, int, int]:
        for ring in self.rings:
            if ring.base <= offset < ring.base + ring.stages * ring.stage_size:
                stage, within = divmod(offset - ring.base, ring.stage_size)
                return ring, stage, within
        raise KernelFault(DESCRIPTOR, f"shared offset {offset} lies in no ring")

    def readers(self, stage: tuple[str, int]) -> list[int]:
        return [t for t in set(self.groups) | set(self.open_group)
                if any(stage in g for g in [*self.groups[t], self.open_group[t]])]

    def land(self, copy: _Copy) -> None:
        if readers := self.readers(copy.stage):
            raise KernelFault(STAGE_RACE, f"TMA copy lands in {copy.stage} while threads {readers[:3]} have "
                                          "unretired wgmma groups reading it")
        self.content[copy.stage] = copy.content
        del self.copies[copy.stage]
        barrier = self.barriers[copy.barrier]
        barrier.tx -= copy.bytes
        if barrier.tx < 0:
            raise KernelFault(TRANSACTION, f"barrier {copy.barrier} completes more bytes than expected")
        barrier.complete_if_done()

    def arrive(self, channel: int, tx_bytes: int = 0) -> None:
        barrier = self.barriers[channel]
        barrier.tx += tx_bytes
        barrier.pending -= 1
        if barrier.pending < 0:
            raise KernelFault(TRANSACTION, f"barrier {channel} gets more arrivals than its count {barrier.count}")
        barrier.complete_if_done()

    def copy(self, t: int, offset: int, tensor_map: str, column: int, row: int, channel: int) -> None:
        ring, stage, within = self.stage_of(offset)
        key = (ring.name, stage)
        if ring.name != tensor_map or within:
            raise KernelFault(STAGE_RACE, f"TMA copy of {tensor_map} into ring {ring.name} at offset {within} of a "
                                          "stage")
        if readers := self.readers(key):
            raise KernelFault(STAGE_RACE, f"thread {t} issues a TMA copy into {key} while threads {readers[:3]} "
                                          "have unretired wgmma groups reading it")
        if key in self.copies:
            raise KernelFault(STAGE_RACE, f"two TMA copies in flight into {key}")
        self.copies[key] = _Copy(key, (tensor_map, column, row), channel, ring.rows * BLOCK_K * HALF_BYTES)

    def encode(self, t: int, which: str, offset: int, lbo: int, sbo: int, swizzle: int) -> None:
        if (lbo, sbo, swizzle) != (1, SWIZZLE_ATOM_BYTES >> 4, SWIZZLE_128B):
            raise KernelFault(DESCRIPTOR, f"descriptor fields (lbo, sbo, swizzle) {lbo, sbo, swizzle}, not the "
                                          "K-major 128-byte-swizzle ones (1, 64, 3)")
        self.descriptors[(t, which)] = offset

    def operand(self, t: int, which: str) -> tuple[tuple[str, int, int], int, int]:
        """The content of the stage wgmma operand `which` reads, and the descriptor's row and column in it."""
        ring, stage, within = self.stage_of(self.descriptors[(t, which)])
        if ring is not self.rings["ab".index(which)]:
            raise KernelFault(DESCRIPTOR, f"thread {t}: wgmma operand {which} points into ring {ring.name}")
        key = (ring.name, stage)
        if key in self.copies or key not in self.content:
            raise KernelFault(EARLY_READ, f"thread {t} issues a wgmma reading {key} before its TMA copy landed")
        self.open_group[t].add(key)
        row, column = divmod(within, BLOCK_K)
        return self.content[key], row, column

    def mma(self, t: int, n: int, registers: tuple[int, ...], fragment: str, scale_d: int) -> None:
        (_, a_k, a_row0), a_row, a_col = self.operand(t, "a")
        (_, b_k, b_row0), b_row, b_col = self.operand(t, "b")
        if a_col != b_col or a_col % WGMMA_K or a_row % WGMMA_M or b_row or a_k != b_k:
            raise KernelFault(DESCRIPTOR, f"thread {t}: A at row {a_row} column {a_col} of its K tile {a_k}, B at row "
                                          f"{b_row} column {b_col} of its K tile {b_k}")
        if len(registers) != n * WGMMA_M // WARPGROUP:
            raise KernelFault(FRAGMENT, f"m64n{n}k16 with {len(registers)} registers")
        product = (a_row0 + a_row, b_row0, a_k + a_col)
        held = self.registers[(t, fragment)]
        for position, register in enumerate(registers):
            if held.get(register) is None:
                if scale_d:
                    raise KernelFault(FRAGMENT, f"thread {t} accumulates into {fragment}[{register}] before a fill")
                held[register] = []
            held[register].append((*product, position))

    def store(self, t: int, index: int, fragment: str, register: int) -> None:
        if self.groups[t] or self.open_group[t]:
            raise KernelFault(UNRETIRED_STORE, f"thread {t} stores {fragment}[{register}] with wgmma groups in flight")
        products = self.registers[(t, fragment)].get(register)
        if products is None:
            raise KernelFault(FRAGMENT, f"thread {t} stores {fragment}[{register}], which no fill or wgmma wrote")
        self.stores[index].append(Store(t, register, tuple(products)))

    def step(self, t: int, event: Event) -> bool:
        """Execute `event` of thread `t`; False if it blocks (a wait on an unfinished phase, a barrier)."""
        kind = event[0]
        if kind == "wait":  # try_wait.parity(p) passes once the phase of parity p completed
            return (self.barriers[event[1]].phase & 1) != event[2]
        if kind == "init":
            self.barriers[event[1]] = _Barrier(event[2], event[2])
        elif kind == "arrive":
            self.arrive(event[1])
        elif kind == "expect":
            self.arrive(event[1], event[2])
        elif kind == "tma":
            self.copy(t, *event[1:])
        elif kind == "desc":
            self.encode(t, *event[1:])
        elif kind == "mma":
            self.mma(t, *event[1:])
        elif kind == "commit":
            self.groups[t].append(self.open_group.pop(t, set()))
        elif kind == "wait_group":
            self.groups[t] = self.groups[t][-event[1]:] if event[1] else []
        elif kind == "zero":
            self.registers[(t, event[1])][event[2]] = []
        elif kind == "store":
            self.store(t, *event[1:])
        elif kind == "store_pair":  # two adjacent elements from two registers, one vector store
            index, fragment, first, second = event[1:]
            if index % 2:
                raise KernelFault(MISALIGNED, f"thread {t} stores a float2 at the odd element {index} of C")
            self.store(t, index, fragment, first)
            self.store(t, index + 1, fragment, second)
        elif kind == "aligned":
            if (event[1] * 2) & event[2]:  # fp16 elements of the dynamic buffer, from shared address 0
                raise KernelFault(TRAP, f"thread {t} traps: shared byte {event[1] * 2} is not on a multiple of "
                                        f"{event[2] + 1}")
        elif kind == "setmaxnreg":
            self.register_requests[t // WARPGROUP][t] = event[2]
        elif kind != "start":
            raise ValueError(f"cuda_events: no model of the event {event}")
        return True

    def run(self, completion_odds: float) -> None:
        pending: dict[int, Event] = {}
        everyone = set(self.threads)
        runnable, at_barrier, finished = set(everyone), set(), set()
        while runnable or self.copies:
            if self.copies and (not runnable or self.rng.random() < completion_odds):
                self.land(self.copies[self.rng.choice(sorted(self.copies))])
                continue
            progressed = False
            ready = sorted(runnable - at_barrier)
            for t in self.rng.sample(ready, min(len(ready), THREADS_PER_ROUND)):
                if t not in pending:
                    try:
                        pending[t] = next(self.threads[t])
                    except StopIteration:
                        runnable.discard(t)
                        finished.add(t)
                        progressed = True
                        continue
                if pending[t][0] == "sync":
                    at_barrier.add(t)
                    del pending[t]
                    progressed = True
                elif self.step(t, pending[t]):
                    del pending[t]
                    progressed = True
            if at_barrier and at_barrier | finished == everyone:
                if finished:
                    raise KernelFault(DEADLOCK, "__syncthreads after some threads exited")
                at_barrier.clear()
                progressed = True
            if not progressed and not self.copies and self.blocked(runnable - at_barrier, pending):
                raise KernelFault(DEADLOCK, self.deadlock_report(runnable, pending))
        self.check_registers()

    def blocked(self, threads: set[int], pending: dict[int, Event]) -> bool:
        return all(t in pending and pending[t][0] == "wait" and not self.step(t, pending[t]) for t in threads)

    def deadlock_report(self, runnable: set[int], pending: dict[int, Event]) -> str:
        waits = sorted({pending[t][1:] for t in runnable if t in pending})
        states = {c: (b.phase, b.pending, b.tx) for c, b in self.barriers.items()}
        return (f"{len(runnable)} threads blocked; their waits (barrier, parity) {waits}; barriers (phase, arrivals "
                f"pending, bytes pending) {states}")

    def check_registers(self) -> None:
        total = 0
        for warpgroup, values in self.register_requests.items():
            if len(values) != WARPGROUP or len(set(values.values())) != 1:
                raise KernelFault(REGISTERS, f"warpgroup {warpgroup}: setmaxnreg on {len(values)} threads, values "
                                             f"{sorted(set(values.values()))}")
            total += WARPGROUP * next(iter(values.values()))
        if total > REGISTER_FILE:
            raise KernelFault(REGISTERS, f"setmaxnreg asks for {total} registers of {REGISTER_FILE}")


_ENCODER_LINES = (
    "case 3: _desc.bitfield.layout_type_ = uint8_t(1); break; // 128B swizzle",
    "_desc.bitfield.start_address_ = static_cast<uint16_t>(start_address >> 4);",
    "constexpr uint8_t base_offset = 0;",
    "_desc.bitfield.stride_byte_offset_  = static_cast<uint32_t>(sdo);",
    "_desc.bitfield.leading_byte_offset_ = static_cast<uint32_t>(ldo);",
)
"""What TVM's `ptx_wgmma_encode_matrix_descriptor` must do for the fields `(1, 64, 3)` to be CUTLASS's
`make_gmma_desc<Major::K>` descriptor of `Layout_K_SW128_Atom`: swizzle code 3 is layout type 1 (`B128`), the start
address in 16-byte units, base offset 0 (the stages start on 1024-byte atoms), the byte offsets as given."""


def check_descriptor_encoder(source: str) -> None:
    """The descriptor helper emitted in `source` encodes as `_ENCODER_LINES` state (raises a `DESCRIPTOR` fault)."""
    start = source.index("void ptx_wgmma_encode_matrix_descriptor(")
    body = {line.strip() for line in source[start:source.index("\n}", start)].splitlines()}
    if missing := [line for line in _ENCODER_LINES if line not in body]:
        raise KernelFault(DESCRIPTOR, f"the emitted descriptor encoder lacks {missing}")


def fragment_position(lane: int, register: int) -> tuple[int, int]:
    """(row, column) of `register` of thread `lane` of a warpgroup in one 64-row block of an m64nNk16 D fragment
    (the PTX ISA's wgmma D layout), `register` counted within the block."""
    row = 16 * (lane // 32) + (lane % 32) // 4 + 8 * ((register % 4) // 2)
    return row, 8 * (register // 4) + 2 * (lane % 4) + register % 2


def check_stores(stores: dict[int, list[Store]], n: int, k_tiles: int) -> None:
    """Every stored C element (row-major, `n` columns): stored once, from its fragment register, holding the
    products of its A row and B row at every K step of `k_tiles` tiles (see the module doc)."""
    steps = list(range(0, k_tiles * BLOCK_K, WGMMA_K))
    for index, writers in stores.items():
        i, j = divmod(index, n)
        if len(writers) != 1:
            raise KernelFault(COVERAGE, f"C[{i}, {j}] stored {len(writers)} times")
        (store,) = writers
        if (held := sorted(k for *_, k, _ in store.products)) != steps:
            raise KernelFault(FRAGMENT, f"C[{i}, {j}] (thread {store.thread} register {store.register}) holds the K "
                                        f"steps {held}, not {steps}")
        for a_row0, b_row0, _, position in store.products:
            row, column = fragment_position(store.thread % WARPGROUP, position)
            if (i, j) != (a_row0 + row, b_row0 + column):
                raise KernelFault(FRAGMENT, f"C[{i}, {j}] (thread {store.thread} register {store.register}) holds "
                                            f"A row {a_row0 + row} x B row {b_row0 + column}")


def simulate_gemm(kernel: Kernel, m: int, n: int, k: int, grid: tuple[int, int], seed: int,
                  rings: tuple[Ring, ...] = gemm_rings(),
                  stored: Callable[[int, int], bool] = lambda i, j: True) -> int:
    """Simulate every CTA of `grid` (x, y) of the GEMM kernel (C: `m` x `n`, reduction length `k`) with `seed`;
    check that every C element `(i, j)` with `stored(i, j)` (all of them by default), and no other, is stored once,
    from the right register with the right products (module doc). Returns the number of C elements stored; raises
    `KernelFault`."""
    kernel.thread.__globals__.update(K=k, M=m)
    stores: dict[int, list[Store]] = defaultdict(list)
    for bx in range(grid[0]):
        for by in range(grid[1]):
            cta = _Cta(kernel, rings, bx, by, random.Random(f"{seed}/{bx}/{by}"))
            cta.run(COPY_COMPLETION_ODDS[seed % len(COPY_COMPLETION_ODDS)])
            for index, writers in cta.stores.items():
                stores[index] += writers
    check_stores(stores, n, -(-k // BLOCK_K))
    expected = {i * n + j for i in range(m) for j in range(n) if stored(i, j)}
    if set(stores) != expected:
        wrong = sorted(set(stores) ^ expected)[:4]
        raise KernelFault(COVERAGE, f"{len(stores)} of the {len(expected)} C elements stored (of {m * n}); "
                                    f"first elements stored but not expected or the reverse: "
                                    f"{[divmod(index, n) for index in wrong]}")
    return len(stores)
