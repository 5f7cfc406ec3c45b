"""Hopper code generation (sm_90a): the transaction protocol's per-warp-role programs with TMA and wgmma.

Rewriting only: the tiles (`warpspec.tiles`), the transaction protocol (`warpspec.transactions`) and the wgmma
groups kept in flight (`warpspec.retirement`; `hopper_protocol` composes the two) decided everything. Every warp
role is one warpgroup (128 threads; `threadIdx.x` spans the roles in order).

* **Channels** are mbarriers in shared memory. A transaction channel expects one arrival (the producer's
  `mbarrier.arrive.expect_tx` with the batch's bytes) plus the bytes its TMA copies complete; any other channel
  expects one arrival per thread that runs its arriving role's program (`PRODUCER_THREADS` for the producer role,
  a warpgroup for a consumer role). Waits are `mbarrier.try_wait.parity` loops.
* **Producer role** (its tasks are TMA loads): only its first warp (`PRODUCER_THREADS`) runs the program; the
  *acquire* waits and a generic task's commits are executed by that warp and the `expect_tx` arrive and each copy
  (`cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes`) by its first thread. A release
  orders only its own thread's writes (and those it has observed), and the `expect_tx` arrive may commit what the
  role's generic tasks wrote before (the redundancy elimination lets a later commit cover an earlier edge): where
  the role has generic tasks, `__syncwarp()` precedes it. The TMA descriptors are encoded on the host
  (`runtime.cuTensorMapEncodeTiled`, 128-byte swizzle, one per source buffer and box; the buffer's shape as given at
  the call, so symbolic dimensions such as a symbolic M are run-time values there; rows of a multiple of
  `TMA_PITCH_BYTES`, checked when the kernel is generated or, for a symbolic length, by the host) and passed to the
  kernel as `__grid_constant__` parameters; `cuTensorMapEncodeTiled` rejects an empty dimension, so a symbolic one
  at 0 of which every load of the buffer lies in a loop of no step (K = 0: the K loop) is tested first, and the map
  left unencoded (and unread) there; an empty grid (a symbolic M at 0) encodes no map and launches nothing
  (`codegen._launched_when_nonempty`). The rings live in dynamic shared memory aligned to 1024 bytes (the swizzle atom
  repeats every 8 rows of 128 bytes); TVM declares that buffer 64-byte aligned, so thread 0 checks each ring's
  shared address and traps if it is not on an atom (TMA's swizzle and the descriptors' would disagree: wrong results
  otherwise).
* **Consumer roles** (wgmma tiles): the accumulator band of the role is a register fragment of `m * n / 128`
  floats per thread in wgmma's layout (for each 64-row block, thread `t` holds rows `16 (t / 32) + (t % 32) / 4
  (+ 8)` and columns `8 i + 2 (t % 4) (+ 1)`). A wgmma tile issues, per 16-wide step of K and per 64-row block,
  one `wgmma.mma_async.m64n{n}k16.f32.f16.f16` on K-major 128-byte-swizzled shared-memory descriptors (leading
  byte offset unused, stride byte offset 1024 bytes = 8 rows; the K step advances the start address by 32 bytes),
  then `wgmma.commit_group` and `wgmma.wait_group D`, `D` the task's in-flight depth (`Protocol.in_flight`: 1
  inside a pipeline loop whose ring has more stages, CUTLASS's `K_PIPE_MMAS`; else 0). The *release* after it is
  then that of the tile `D` earlier (`SyncOp.lag`), whose group has retired, so the tensor cores work on one tile
  while the warpgroup waits for the next stage; after the loop `wgmma.wait_group 0` drains the groups (before the
  stores read the fragment) and the last `D` releases follow where a producer still acquires them (for a ring,
  none). Fills zero the fragment; stores write it through the store task's own index expressions: each leaf of the
  store tree (`warpspec.tiles`) once per register of the thread, its band loops' variables replaced by the
  register's row and column, under the loops' ranges where they are not the whole band (a tail tile's store that
  TailSplit cut to the rows and columns inside the output); the guards and `Bind`s above the band loops (TailSplit's
  guard chain deciding the tile) stay as they are, so a main tile stores without a condition. The two columns of a
  register pair (`j` even, `j + 1`: consecutive registers) go out in one 2-element vector store where
  `tiles.pairs_columns` allows it (an aligned pair of addresses, a plain store).
  Every register of the fragment is fenced as CUTLASS's `warpgroup_fence_operand` does, before the tile's
  `wgmma.fence` and after each `wgmma.wait_group`: an empty volatile asm `"+f"(reg)` with a memory clobber on the
  register by reference (`T.cuda.func_call` of our own helper: TVM 0.27's `T.cuda.wgmma.noop_barrier` dispatcher
  reads `reg.dtype`, which no 0.27 expression has, and its helper takes the register by value, which fences a
  copy). So nvcc moves no access of the accumulator (a store task's conversion to fp16, say) across the
  asynchronous wgmma instructions that update it.
* **Generic tasks** (no tile form, touching neither a ring nor a fragment) run as on older GPUs: their independent
  loops strided over the role's threads (the producer's one warp, or a consumer's warpgroup), followed by a named
  barrier of the role when another task of the role reads what they write. A generic task writing the global
  source of a TMA load is followed by `fence.proxy.async.global` on each of its threads (its generic-proxy writes
  must be ordered before the copies' async-proxy reads that its arrives, directly or through others, let run).
* **Registers**: `setmaxnreg` lowers each producer warpgroup to `PRODUCER_REGISTERS` and raises the consumers to
  what the register file leaves after all of them (see `consumer_registers`; more would never be granted: the
  warpgroup would wait forever), where a consumer's fragment holds at least `REBALANCE_FRAGMENT_REGISTERS` floats
  per thread (`rebalances_registers`); a smaller one (64 x 64 and 64 x 32 bands) fits the even split, and the
  kernel keeps it. A role whose fragments leave fewer than `FRAGMENT_HEADROOM_REGISTERS` of its threads' registers
  (a 128-row band over 208 or more columns) is rejected: ptxas would spill the accumulators.
* **Shared memory**: the barriers, then the rings from 1024-byte boundaries; a kernel needing more than
  `SHARED_MEMORY_BYTES` (with its other shared buffers) is rejected, since it would compile and fail at launch.
* **Persistent kernels** (a persistent nest, `warpspec.symbolic`; `examples.hopper_gemm_kernel(..., ctas=...)`):
  the grid is the kernel's grid loops (a fixed number of CTAs) and every role runs the loop over its CTA's tiles
  around its part of the tile: the producer its K steps' acquires, `expect_tx` and copies, a consumer its fill
  (zeroing the fragment), its K steps (one group in flight, each release lagging one step within the tile) and,
  after each tile's K loop, the drain (`wgmma.wait_group 0` and the release of the tile's last stage) and the
  stores. Channel, phase and guards follow the running step `tt * N_k + ko`, so the producer is not held at a
  tile's end: it acquires the next tile's stages as the consumers release them, while they store.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.script import tirx as T

from ..cuda import shared_memory_per_block
from ..ir_utils import buffer_bytes, conjunction, runtime_assert, substitute, uses_var, with_loop
from .codegen import (
    _distribute,
    _launched_when_nonempty,
    _require_thread_private_in_one_role,
    _RoleProgram,
    _seq,
    _shares_buffers_with_role,
    _shares_with_role,
    _TargetLowering,
)
from .protocol import Protocol, SyncOp
from .retirement import in_flight_protocol
from .tiles import WGMMA_K, WGMMA_M, FragmentTask, TilePlan, TmaLoad, WgmmaTile, band_offsets, pairs_columns
from .transactions import transaction_protocol
from .tree import TaskNode, WarpSpecializeInputError

__all__ = ["FRAGMENT_HEADROOM_REGISTERS", "PRODUCER_REGISTERS", "PRODUCER_THREADS", "REBALANCE_FRAGMENT_REGISTERS",
           "WARPGROUP", "consumer_registers", "fragment_registers", "generate_hopper", "hopper_protocol",
           "rebalances_registers"]

WARPGROUP = 128
"""Rule: every warp role is one warpgroup (`setmaxnreg` and wgmma work on whole warpgroups)."""
PRODUCER_THREADS = 32
"""Rule: only the producer warpgroup's first warp runs its program (one thread issues the TMA copies; a generic
task of the role is strided over the warp), so a channel the producer role arrives on expects 32 arrivals."""
PRODUCER_REGISTERS = 40
"""Rule: a TMA producer warpgroup needs few registers; 40 is `setmaxnreg`'s useful minimum (CUTLASS's choice)."""
REGISTER_FILE = 65536
"""Rule: registers per SM (sm_90), shared by the CTA's warpgroups (one CTA per SM)."""
MAX_REGISTERS = 240
"""Rule: `setmaxnreg` accepts 24..256 in steps of 8; ptxas needs some headroom, 240 is CUTLASS's ceiling."""
REBALANCE_FRAGMENT_REGISTERS = 64
"""Rule: the warpgroups rebalance registers with `setmaxnreg` only where a consumer's fragment holds at least 64
floats per thread (a 64-row band of 128 columns or more): below that the consumers fit the even split of the
register file with room to spare, ptxas's own allocation then fixes no count at entry, and it ignores `setmaxnreg`
(note C7508)."""
FRAGMENT_HEADROOM_REGISTERS = 32
"""Rule: a consumer thread needs about 32 registers besides its fragments (descriptors, addresses, the loop's and
the stores' indices): measured with ptxas 13 (sm_90a) on `examples.hopper_gemm_kernel(block_m=256)`, whose 128-row
bands hold `block_n` floats per thread, a 200-float fragment fits the 232 registers `setmaxnreg` grants, a 208-float
one spills 5 KiB, a 256-float one spills 9 KiB and serializes the wgmma (note C7511)."""
SWIZZLE_128B = 3
"""CUtensorMapSwizzle value of the 128-byte swizzle, and the descriptor encoder's code for it."""
L2_PROMOTION_256B = 3
"""Rule: TMA loads promote their L2 fetches to 256-byte granules (CUtensorMapL2promotion L2_256B, what CUTLASS's
TMA copies use): a box row is 128 bytes, and the neighbouring CTAs read the neighbouring rows."""
TMA_PITCH_BYTES = 16
"""Rule: a TMA tensor map's row pitch (the source's row length in bytes) is a multiple of 16 bytes
(`cuTensorMapEncodeTiled`'s `globalStrides`): K a multiple of 8 fp16 elements."""
SWIZZLE_ATOM_BYTES = 1024
"""8 rows of 128 bytes: the descriptor's stride byte offset and the rings' alignment."""
SHARED_MEMORY_BYTES = shared_memory_per_block("sm_90a")
"""Rule: a kernel's shared memory (the barriers, each ring from a swizzle atom on, the other shared buffers) is at
most what one sm_90 block may use, 227 KiB; nvcc does not see the dynamic part, so a kernel over it compiles and
fails only at its launch."""
K_STEP_BYTES = 32
"""One wgmma K step of 16 fp16 elements advances a K-major descriptor's start address by 32 bytes."""
_FENCE_OPERAND = "tvm_tailsplit_fence_operand"
_FENCE_OPERAND_SOURCE = f"""
__forceinline__ __device__ void {_FENCE_OPERAND}(float& reg) {{
  asm volatile("" : "+f"(reg) :: "memory");
}}
"""


def consumer_registers(consumers: int, producers: int = 1) -> int:
    """Registers per consumer thread: the register file less the `producers` producer warpgroups', split evenly
    among the `consumers`, rounded down to a multiple of 8, at most `MAX_REGISTERS`."""
    per_thread = (REGISTER_FILE // WARPGROUP - producers * PRODUCER_REGISTERS) // consumers
    return min(MAX_REGISTERS, per_thread - per_thread % 8)


def rebalances_registers(tiles: TilePlan) -> bool:
    """Whether the kernel of `tiles` moves registers from the producer to the consumers (`setmaxnreg`): a fragment
    of at least `REBALANCE_FRAGMENT_REGISTERS` floats per thread."""
    return max(tile.m * tile.n // WARPGROUP for tile in tiles.mmas.values()) >= REBALANCE_FRAGMENT_REGISTERS


def fragment_registers(protocol: Protocol, tiles: TilePlan) -> dict[int, int]:
    """The floats per thread of each consumer role's fragments (one per accumulator the role's wgmma tiles update,
    `m * n / WARPGROUP` each)."""
    per_role: dict[int, dict[str, int]] = {}
    for task in protocol.tree.tasks():
        if (tile := tiles.mmas.get(task.name)) is not None:
            per_role.setdefault(task.role, {})[tile.accumulator.name] = tile.m * tile.n // WARPGROUP
    return {role: sum(fragments.values()) for role, fragments in per_role.items()}


def _require_fragments_fit(protocol: Protocol, tiles: TilePlan, consumers: int, producers: int) -> None:
    """A `WarpSpecializeInputError` where a consumer role's fragments and `FRAGMENT_HEADROOM_REGISTERS` exceed the
    registers of its threads (`consumer_registers`): ptxas would spill the accumulators."""
    available = consumer_registers(consumers, producers)
    for role, floats in fragment_registers(protocol, tiles).items():
        if floats + FRAGMENT_HEADROOM_REGISTERS > available:
            tasks = sorted(task.name for task in protocol.tree.tasks() if task.role == role
                           and task.name in tiles.mmas)
            raise WarpSpecializeInputError(
                f"the wgmma tiles {tasks} of warp role {role} accumulate into fragments of {floats} floats per thread; "
                f"with the {FRAGMENT_HEADROOM_REGISTERS} other registers a consumer thread needs that is more than the "
                f"{available} each of its threads gets (one of {consumers} consumer warpgroups beside {producers} "
                "producer): ptxas would spill the accumulators and serialize the wgmma; use narrower tiles or fewer "
                "rows per role")


def _shared_address(buffer: tirx.Buffer, indices: list) -> tirx.PrimExpr:
    """The address of `buffer[indices]` in dynamic shared memory, as an access pointer (which TVM's shared-memory
    merging relocates; it cannot relocate `address_of` a load)."""
    offset = 0
    for index, extent in zip(indices, buffer.shape, strict=True):
        offset = offset * extent + index
    return buffer.access_ptr("rw", offset=offset)


class _Hopper:
    """The lowering state of one kernel: rings, fragments, tensor maps and the channel barriers."""

    def __init__(self, protocol: Protocol, tiles: TilePlan, roles: list[int] | None = None,
                 barriers: int | None = None, shared_registers: bool = False):
        """`roles`: the warp roles that get a warpgroup each, in order (default: all); `barriers`: the number of
        mbarriers (default: the protocol's channels); `shared_registers`: one fragment and one pair of descriptors
        for all roles (when one program holds every role's tiles under thread guards, so that per-role buffers would
        all be live at once)."""
        self.shared_registers = shared_registers
        self.protocol = protocol
        self.tiles = tiles
        self.roles = list(protocol.tree.roles if roles is None else roles)
        barriers = protocol.plan.channel_count if barriers is None else barriers
        self.thread = tirx.Var("tx", "int32")
        self.bars = tirx.decl_buffer((max(1, barriers),), "uint64", "channels",
                                     scope="shared.dyn")  # at byte 0 of the dynamic buffer, the rings from 1024
        self.rings: dict[str, tirx.Buffer] = {}
        for load in tiles.loads.values():
            if load.ring.name not in self.rings:
                ring = load.ring
                self.rings[ring.name] = tirx.decl_buffer(ring.shape, ring.dtype, ring.name, scope="shared.dyn",
                                                         data_alignment=SWIZZLE_ATOM_BYTES)
        self.maps: dict[tuple[str, int, int], tirx.Var] = {}
        self.map_sources: dict[tuple[str, int, int], TmaLoad] = {}
        for load in tiles.loads.values():
            key = (load.source.name, load.rows, load.cols)
            if key not in self.maps:
                self.maps[key] = tirx.Var(f"{load.source.name}_tensor_map", T.handle("tensormap").ty)
                self.map_sources[key] = load
        self.fragments: dict[tuple[str, int], tirx.Buffer] = {}
        self.descriptors: dict[int, tuple[tirx.Buffer, tirx.Buffer]] = {}
        self.transactions = {name: op for ops in protocol.ops.values() for op in ops
                             for name, _ in op.tx_copies}
        self.tx_channels = {c for op in self.transactions.values() for c in op.group.channels}
        tasks = protocol.tree.tasks()
        load_roles = {task.role for task in tasks if task.name in tiles.loads}
        self.generic_load_roles = {task.role for task in tasks if task.role in load_roles
                                   and task.name not in tiles.loads}

    def offset(self, role: int) -> int:
        return self.roles.index(role) * WARPGROUP

    def fragment(self, accumulator: tirx.Buffer, role: int, m: int, n: int) -> tirx.Buffer:
        key = (accumulator.name, 0 if self.shared_registers else role)
        if key not in self.fragments:
            self.fragments[key] = tirx.decl_buffer((m * n // WARPGROUP,), "float32", f"{accumulator.name}_r{key[1]}",
                                                   scope="local")
        return self.fragments[key]

    def descriptor_buffers(self, role: int) -> tuple[tirx.Buffer, tirx.Buffer]:
        role = 0 if self.shared_registers else role
        if role not in self.descriptors:
            self.descriptors[role] = tuple(tirx.decl_buffer((1,), "uint64", f"{name}_desc_r{role}", scope="local")
                                           for name in ("a", "b"))
        return self.descriptors[role]

    def kernel(self, arrivals: list[int], program: tirx.Stmt, threads: int, asserts: list) -> tirx.PrimFunc:
        """The PrimFunc: host-side tensor maps, then the grid loops around `threads` threads that initialise the
        barriers (barrier `c` expecting `arrivals[c]` arrivals) and run `program`."""
        tree = self.protocol.tree
        thread = self.thread
        replaced = set(self.rings) | set(self.tiles.fragments)
        kept = [buf for buf in tree.root_block.alloc_buffers if buf.name not in replaced]
        self.check_shared_memory([buf for buf in kept if buf.scope().startswith("shared")])
        inits = [tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(_shared_address(self.bars, [c]),
                                                              tirx.IntImm("uint32", count)))
                 for c, count in enumerate(arrivals)]
        # the swizzle of TMA and of the wgmma descriptors (base offset 0) agree only on 1024-byte aligned stages:
        # TVM declares the dynamic buffer 64-byte aligned, so a kernel whose window is not traps instead of computing
        # garbage
        aligned = [tirx.Evaluate(T.cuda.trap_when_assert_failed(tirx.EQ(tirx.bitwise_and(
                       T.cuda.cvta_generic_to_shared(_shared_address(ring, [0, 0, 0])),
                       tirx.const(SWIZZLE_ATOM_BYTES - 1, "uint32")), tirx.const(0, "uint32"))))
                   for ring in self.rings.values()]
        setup = [tirx.IfThenElse(thread == 0, _seq([*aligned, *inits, tirx.Evaluate(
                     T.ptx.fence.mbarrier_init.release.cluster())]), None),
                 tirx.Evaluate(T.ptx.fence.proxy.async_.shared__cta()), tirx.Evaluate(T.cuda.cta_sync())]
        local = [*self.fragments.values(), *(d for pair in self.descriptors.values() for d in pair)]
        # The dynamic shared memory is allocated inside the kernel (TVM merges such allocations per kernel).
        kernel = SBlockRealize([], True, SBlock([], [], [], "kernel", _seq([*setup, program]),
                                                alloc_buffers=[*self.rings.values(), self.bars, *local]))
        binding = tirx.IterVar(tvm.ir.Range(0, threads), thread, tirx.IterVar.ThreadIndex, "threadIdx.x")
        body = tirx.For(thread, 0, threads, tirx.ForKind.THREAD_BINDING, kernel, thread_binding=binding)
        for loop in reversed(tree.grid_loops):
            body = with_loop(loop, body=body)
        checks, encodes = [], []
        for key, tensor_map in self.maps.items():
            load = self.map_sources[key]
            source = load.source
            element_bytes = tvm.DataType(source.dtype).bits // 8
            rows, cols = source.shape
            checks += self.pitch_check(source, cols * element_bytes)
            encode = tirx.Evaluate(tirx.call_packed(
                "runtime.cuTensorMapEncodeTiled", tensor_map, str(source.dtype), 2, source.data, cols, rows,
                cols * element_bytes, load.cols, load.rows, 1, 1, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0))
            nonempty = [dim > 0 for dim in self.skipped_when_empty(source)]
            encodes += [tirx.Bind(tensor_map, T.tvm_stack_alloca("tensormap", 1)),
                        tirx.IfThenElse(conjunction(nonempty), encode, None) if nonempty else encode]
        launch = _launched_when_nonempty(tree.grid_loops, [*encodes, body])
        root = SBlock([], [], [], "root", _seq([*tree.asserts, *asserts, *checks, launch]), alloc_buffers=kept)
        return tree.func.with_body(SBlockRealize([], True, root))

    @staticmethod
    def pitch_check(source: tirx.Buffer, pitch: tirx.PrimExpr) -> list[tirx.Stmt]:
        """The host's check that `source`'s rows (`pitch` bytes) suit a tensor map (`TMA_PITCH_BYTES`): nothing where
        it holds for every size, a `WarpSpecializeInputError` where it never does, else a run-time assert."""
        analyzer = tvm.sym.Analyzer()
        aligned = tirx.floormod(pitch, TMA_PITCH_BYTES) == 0
        message = (f"the rows of '{source.name}' ({pitch} bytes) must be a multiple of {TMA_PITCH_BYTES} bytes for "
                   "its TMA tensor map")
        if analyzer.can_prove(aligned):
            return []
        if isinstance(analyzer.simplify(pitch), tirx.IntImm):
            raise WarpSpecializeInputError(f"WarpSpecialize(hopper=True): {message}")
        return [runtime_assert(aligned, f"WarpSpecialize: {message}")]

    def skipped_when_empty(self, source: tirx.Buffer) -> list[tirx.Var]:
        """The symbolic dimensions of `source` at 0 of which no TMA load of it runs: each load lies in a pipeline
        loop of no step then (the K loop over `ceildiv(K, 64)` steps at K = 0)."""
        tree = self.protocol.tree
        analyzer = tvm.sym.Analyzer()
        for loop in tree.grid_loops:
            analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        enclosing: dict[str, list] = {}

        def visit(nodes, extents: list) -> None:
            for node in nodes:
                if isinstance(node, TaskNode):
                    enclosing[node.name] = extents
                else:
                    visit(node.children, [*extents, node.extent])

        visit(tree.children, [])

        def runs_no_step_at_zero(extent: int | tirx.PrimExpr, dim: tirx.Var) -> bool:
            return not isinstance(extent, int) and analyzer.can_prove(
                substitute(extent, {dim: tirx.IntImm(dim.ty.dtype, 0)}) <= 0)

        loads = [name for name, load in self.tiles.loads.items() if load.source.same_as(source)]
        return [dim for dim in source.shape if isinstance(dim, tirx.Var) and all(
            any(runs_no_step_at_zero(extent, dim) for extent in enclosing[name]) for name in loads)]

    def check_shared_memory(self, others: list[tirx.Buffer]) -> None:
        """Raise `WarpSpecializeInputError` unless the barriers, the rings (each from a swizzle atom on) and the
        `others` shared buffers fit in `SHARED_MEMORY_BYTES`."""
        def atoms(size: int) -> int:
            return -(-size // SWIZZLE_ATOM_BYTES) * SWIZZLE_ATOM_BYTES

        rings = sum(atoms(buffer_bytes(ring)) for ring in self.rings.values())
        total = atoms(buffer_bytes(self.bars)) + rings + sum(buffer_bytes(buffer) for buffer in others)
        if total > SHARED_MEMORY_BYTES:
            raise WarpSpecializeInputError(
                f"the Hopper kernel needs {total} bytes of shared memory ({rings} of rings "
                f"{sorted(self.rings)}), more than the {SHARED_MEMORY_BYTES} a block may use: fewer stages or "
                "smaller tiles")

    # -- synchronization ---------------------------------------------------------------------------------------
    def wait(self, op: SyncOp, channel: tirx.PrimExpr, parity: tirx.PrimExpr) -> tirx.Stmt:
        return tirx.Evaluate(T.cuda.mbarrier_wait(_shared_address(self.bars, [channel]), parity))

    def arrive(self, op: SyncOp, channel: tirx.PrimExpr) -> tirx.Stmt:
        address = _shared_address(self.bars, [channel])
        if op.tx_copies:
            expect = tirx.IfThenElse(self.thread == self.offset(op.group.src_role), tirx.Evaluate(
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(address, tirx.IntImm("uint32", op.tx_bytes))), None)
            if op.group.src_role not in self.generic_load_roles:
                return expect
            # the arrive may commit what the warp's generic tasks wrote: their lanes' writes reach its thread first
            return _seq([tirx.Evaluate(T.cuda.warp_sync()), expect])
        return tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(address))

    # -- tiles ---------------------------------------------------------------------------------------------------
    def tile_body(self, task: TaskNode, rename, index: tirx.PrimExpr) -> list | None:
        if task.name in self.tiles.loads:
            return [self.tma_load(task, self.tiles.loads[task.name], rename, index)]
        if task.name in self.tiles.mmas:
            return self.wgmma(task, self.tiles.mmas[task.name], rename, self.protocol.in_flight.get(task.name, 0))
        if task.name in self.tiles.fragment_tasks:
            op = self.tiles.fragment_tasks[task.name]
            stmts = [self.fragment_task(task, op, rename)]
            if op.store is not None and _shares_buffers_with_role(self.protocol, task, self.tiles.fragments):
                # each thread stores its fragment's elements (the same threads in every instance): another task of
                # the role, strided over the threads otherwise, touches them only after every thread has stored
                stmts.append(self.role_barrier(task.role, WARPGROUP))
            return stmts
        return None

    def role_barrier(self, role: int, threads: int) -> tirx.Stmt:
        """The named barrier of warp role `role` (id 1 + its position), for its `threads` threads."""
        return tirx.Evaluate(T.ptx.bar.sync(1 + self.roles.index(role), threads))

    def tma_load(self, task: TaskNode, load: TmaLoad, rename, index: tirx.PrimExpr) -> tirx.Stmt:
        op = self.transactions.get(task.name)
        if op is None:
            why = self.protocol.unmerged.get(task.name, "its batch's commits could not be merged")
            raise WarpSpecializeInputError(
                f"TMA load task '{task.name}' signals no transaction channel ({why}): a TMA copy completes on "
                "exactly one mbarrier")
        channel = op.group.channel(op.edge_number(index))
        return self.tma_copy(load, rename, channel, self.offset(task.role))

    def tma_copy(self, load: TmaLoad, rename, channel: tirx.PrimExpr, issuer: int) -> tirx.Stmt:
        """Thread `issuer` copies the box of `load` (its expressions renamed) into its stage, completing the bytes on
        barrier `channel`."""
        ring = self.rings[load.ring.name]
        tensor_map = self.maps[(load.source.name, load.rows, load.cols)]
        row, col = (rename(e) for e in load.origin)
        copy = T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"](
            _shared_address(ring, [rename(load.stage), 0, 0]), tirx.address_of(tensor_map), col, row,
            _shared_address(self.bars, [channel]))
        return tirx.IfThenElse(self.thread == issuer, tirx.Evaluate(copy), None)

    def wgmma(self, task: TaskNode, tile: WgmmaTile, rename, in_flight: int = 0) -> list:
        """The tile's wgmma instructions, committed as one group, then `wgmma.wait_group in_flight`."""
        fragment = self.fragment(tile.accumulator, task.role, tile.m, tile.n)
        desc_a, desc_b = self.descriptor_buffers(task.role)
        a, b = self.rings[tile.a.name], self.rings[tile.b.name]
        stage_a, stage_b = rename(tile.stage_a), rename(tile.stage_b)
        instruction = T.ptx[f"wgmma.mma_async.sync.aligned.m{WGMMA_M}n{tile.n}k{WGMMA_K}.f32.f16.f16"]
        per_block = tile.n * WGMMA_M // WARPGROUP
        stmts = [self.fence_fragment(fragment), tirx.Evaluate(T.ptx.wgmma.fence.sync.aligned())]
        for step in range(tile.k // WGMMA_K):
            for block in range(tile.m // WGMMA_M):
                encode_a = T.cuda.wgmma.encode_matrix_descriptor(
                    tirx.address_of(tirx.BufferLoad(desc_a, [0])),
                    _shared_address(a, [stage_a, tile.row0 + block * WGMMA_M, step * WGMMA_K]),
                    1, SWIZZLE_ATOM_BYTES >> 4, SWIZZLE_128B)
                encode_b = T.cuda.wgmma.encode_matrix_descriptor(
                    tirx.address_of(tirx.BufferLoad(desc_b, [0])), _shared_address(b, [stage_b, 0, step * WGMMA_K]),
                    1, SWIZZLE_ATOM_BYTES >> 4, SWIZZLE_128B)
                registers = [tirx.BufferLoad(fragment, [block * per_block + r]) for r in range(per_block)]
                mma = instruction(*registers, tirx.BufferLoad(desc_a, [0]), tirx.BufferLoad(desc_b, [0]),
                                  tirx.const(True, "bool"), 1, 1, 0, 0)
                stmts += [tirx.Evaluate(encode_a), tirx.Evaluate(encode_b), tirx.Evaluate(mma)]
        stmts += [tirx.Evaluate(T.ptx.wgmma.commit_group.sync.aligned()), *self.retire(fragment, in_flight)]
        return stmts

    def retire(self, fragment: tirx.Buffer, in_flight: int) -> list:
        """`wgmma.wait_group in_flight` (all but the warpgroup's `in_flight` latest groups retired), then the
        fragment's register fences."""
        return [tirx.Evaluate(T.ptx.wgmma.wait_group.sync.aligned(in_flight)), self.fence_fragment(fragment)]

    def drain(self, task: TaskNode) -> list:
        """After the loop of an in-flight wgmma task: every group of its warpgroup retired (`wait_group 0`)."""
        tile = self.tiles.mmas[task.name]
        return self.retire(self.fragment(tile.accumulator, task.role, tile.m, tile.n), 0)

    @staticmethod
    def fence_fragment(fragment: tirx.Buffer) -> tirx.Stmt:
        """CUTLASS's `warpgroup_fence_operand` on every register of `fragment`: an empty volatile asm that reads and
        writes the register (`"+f"`, by reference) with a memory clobber, so that nvcc neither moves an access of the
        accumulator across the wgmma instructions that update it asynchronously nor keeps a copy of it."""
        r = tirx.Var("r", "int32")
        fence = T.cuda.func_call(_FENCE_OPERAND, tirx.BufferLoad(fragment, [r]), source_code=_FENCE_OPERAND_SOURCE)
        return tirx.For(r, 0, int(fragment.shape[0]), tirx.ForKind.UNROLLED, tirx.Evaluate(fence))

    def fragment_task(self, task: TaskNode, op: FragmentTask, rename) -> tirx.Stmt:
        fragment = self.fragment(op.accumulator, task.role, op.m, op.width)
        count = int(fragment.shape[0])
        r = tirx.Var("r", "int32")
        if op.store is None:
            return tirx.For(r, 0, count, tirx.ForKind.UNROLLED,
                            tirx.BufferStore(fragment, tirx.FloatImm("float32", 0.0), [r]))
        lane = self.thread - self.offset(task.role)
        warp, quad = tirx.floordiv(lane, 32), tirx.floormod(lane, 32)
        per_block = op.width * WGMMA_M // WARPGROUP
        row_loops, col_loops = op.band_loops

        def registers(leaf: tirx.Stmt, row_loop: tirx.For, col_loop: tirx.For) -> tirx.Stmt:
            """The leaf for each register of the thread: the band loops' variables replaced by the fragment
            element's row and column (less the leaf's offsets, `tiles.band_offsets`), under the loops' ranges where
            they are not the whole band; the two columns of a register pair in one vector store where the leaf
            allows it (`tiles.pairs_columns`)."""
            column_block = tirx.Var("column_block", "int32")
            row_offset, col_offset = band_offsets(leaf, op.accumulator, op.row0, row_loop, col_loop)
            paired = pairs_columns(leaf, col_loop, col_offset)

            def element(row: tirx.PrimExpr, col: tirx.PrimExpr, register: tirx.PrimExpr) -> tirx.Stmt:
                store = substitute(leaf, {row_loop.loop_var: row - row_offset, col_loop.loop_var: col - col_offset})
                return _replace_loads(store, op.accumulator, fragment, register)

            def inside(store: tirx.Stmt, row: tirx.PrimExpr, col: tirx.PrimExpr) -> tirx.Stmt:
                bounds = (_within(row, row_loop, row_offset, op.m)
                          + _within(col, col_loop, col_offset, op.width))
                return tirx.IfThenElse(conjunction(bounds), store, None) if bounds else store

            stores = []
            for block in range(op.m // WGMMA_M):
                for half in range(2):  # the thread's two rows of the block: registers 4 c + 2 half, + 1
                    row = block * WGMMA_M + 16 * warp + tirx.floordiv(quad, 4) + 8 * half
                    col = 8 * column_block + 2 * tirx.floormod(quad, 4)
                    register = block * per_block + 4 * column_block + 2 * half
                    first, second = element(row, col, register), element(row, col + 1, register + 1)
                    if paired:
                        *outer, last = first.indices
                        pair = tirx.BufferStore(first.buffer, tirx.Shuffle([first.value, second.value], [0, 1]),
                                                [*outer, tirx.Ramp(last, 1, 2)])
                        stores.append(inside(pair, row, col))
                    else:
                        stores += [inside(first, row, col), inside(second, row, col + 1)]
            return tirx.For(column_block, 0, op.width // 8, tirx.ForKind.UNROLLED, _seq(stores))

        def lower(stmt: tirx.Stmt, loops: tuple[tirx.For, ...], guards: tuple[tirx.PrimExpr, ...]) -> tirx.Stmt:
            """`stmt` of the store tree under the band loops `loops` and the element guards `guards` (the ifs
            between the row and the column loop, which mention the row: they go into each leaf)."""
            if isinstance(stmt, tirx.SeqStmt):
                return _seq([lower(s, loops, guards) for s in stmt.seq])
            band = row_loops if not loops else col_loops
            if isinstance(stmt, tirx.For) and any(stmt.loop_var.same_as(var) for var in band):
                return lower(stmt.body, (*loops, stmt), guards)
            if len(loops) == 2:
                return registers(tirx.IfThenElse(conjunction(list(guards)), stmt, None) if guards else stmt, *loops)
            if isinstance(stmt, tirx.IfThenElse) and loops:
                return _seq([lower(stmt.then_case, loops, (*guards, stmt.condition)),
                             None if stmt.else_case is None
                             else lower(stmt.else_case, loops, (*guards, tirx.Not(stmt.condition)))])
            if isinstance(stmt, tirx.IfThenElse):
                return tirx.IfThenElse(stmt.condition, lower(stmt.then_case, loops, guards),
                                       None if stmt.else_case is None else lower(stmt.else_case, loops, guards))
            return stmt  # a Bind above the band loops

        return lower(rename(op.store), (), ())


def _within(index: tirx.PrimExpr, loop: tirx.For, offset: tirx.PrimExpr, extent: int) -> list[tirx.PrimExpr]:
    """The bounds of `loop`'s range, moved by `offset` into the band, on the band index `index`; but those of the
    whole band `[0, extent)`, which every index of the fragment layout meets."""
    analyzer = tvm.sym.Analyzer()
    lo, hi = offset + loop.min, offset + loop.min + loop.extent
    bounds = []
    if not analyzer.can_prove(lo <= 0):
        bounds.append(lo <= index)
    if not analyzer.can_prove(hi >= extent):
        bounds.append(index < hi)
    return bounds


def _replace_loads(stmt: tirx.Stmt, accumulator: tirx.Buffer, fragment: tirx.Buffer,
                   register: tirx.PrimExpr) -> tirx.Stmt:
    def on_load(load):
        return tirx.BufferLoad(fragment, [register]) if load.source.same_as(accumulator) else load

    return tvm_ffi.structural_map(stmt, (tvm.ir.TensorLoad, on_load), order="post")


def hopper_protocol(protocol: Protocol, tiles: TilePlan) -> Protocol:
    """The protocol the Hopper kernel implements: TMA batches as transactions (`warpspec.transactions`), then
    wgmma groups kept in flight (`warpspec.retirement`)."""
    return in_flight_protocol(transaction_protocol(protocol, tiles), tiles)


def _trip_count_asserts(protocol: Protocol) -> list[tirx.Stmt]:
    """Run-time checks, before the grid loops, of the minimum symbolic trip counts the channel plan holds for (the
    generic generators test them inside the grid loops instead, `codegen._or_sequential`); a trip count per CTA
    (using a grid loop variable) cannot be checked there and is refused."""
    tree = protocol.tree
    extents = {loop.var.name: loop.extent for loop in tree.loops()}
    asserts = []
    for name, minimum in protocol.plan.min_trip_counts:
        grid = [g.loop_var.name for g in tree.grid_loops if uses_var(extents[name], g.loop_var)]
        if grid:
            raise WarpSpecializeInputError(
                f"loop '{name}': the rules hold only from {minimum} iterations on, but its trip count {extents[name]} "
                f"uses the grid loop variables {grid}, so the Hopper kernel cannot assert it before the grid loops")
        asserts.append(runtime_assert(extents[name] >= minimum, f"WarpSpecialize: loop '{name}' must run at least "
                                                         f"{minimum} iterations (its synchronization was derived "
                                                         "for those)"))
    return asserts


def generate_hopper(protocol: Protocol, tiles: TilePlan) -> tirx.PrimFunc:
    """The sm_90a kernel implementing `protocol` (the Hopper protocol, see `hopper_protocol`) with the `tiles` (see
    the module doc)."""
    if not tiles.loads or not tiles.mmas:
        raise WarpSpecializeInputError(
            "WarpSpecialize(hopper=True) found no TMA load or no wgmma tile task; the accepted forms are in "
            "tvm_tailsplit.warpspec.tiles (e.g. examples.hopper_gemm_kernel)"
            + "".join(f"; {reason}" for reason in tiles.refused.values()))
    _require_thread_private_in_one_role(protocol)
    state = _Hopper(protocol, tiles)
    tree, plan = protocol.tree, protocol.plan
    roles = state.roles
    producers = {task.role for task in tree.tasks() if task.name in tiles.loads}
    consumers = [role for role in roles if role not in producers]
    _require_fragments_fit(protocol, tiles, len(consumers), len(producers))
    thread = state.thread

    def generic_body(role: int, task: TaskNode, body: tirx.Stmt) -> list:
        threads = PRODUCER_THREADS if role in producers else WARPGROUP
        stmts = [_distribute(body, thread - state.offset(role), threads)]
        if _shares_with_role(protocol, task):
            stmts.append(state.role_barrier(role, threads))
        if tiles.feeds_tma(task):  # its generic-proxy writes, then TMA's async-proxy reads: a proxy fence between
            stmts.append(tirx.Evaluate(T.ptx.fence.proxy.async_.global_()))
        return stmts

    lowering = _TargetLowering(generic_body, state.wait, state.arrive, state.tile_body,
                               drain=state.drain)
    dispatch = None
    rebalance = rebalances_registers(tiles)
    for role in reversed(roles):
        program = _RoleProgram(protocol, role, lowering).build()
        if role in producers:
            program = tirx.IfThenElse(thread < state.offset(role) + PRODUCER_THREADS, program, None)
            registers = T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGISTERS)
        else:
            registers = T.ptx["setmaxnreg.inc.sync.aligned.u32"](consumer_registers(len(consumers), len(producers)))
        if rebalance:
            program = _seq([tirx.Evaluate(registers), program])
        dispatch = program if dispatch is None else tirx.IfThenElse(
            thread < state.offset(role) + WARPGROUP, program, dispatch)
    counts = [1 if c in state.tx_channels else PRODUCER_THREADS if plan.arriving_role(c) in producers else WARPGROUP
              for c in range(plan.channel_count)]
    return state.kernel(counts, dispatch, WARPGROUP * len(roles), _trip_count_asserts(protocol))
