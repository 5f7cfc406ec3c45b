"""Producer/consumer warp specialization (seed 003): from sequential TIR with `warp_role` blocks to per-warp
programs synchronized by channels derived from the data and resource dependences over buffer ranges.

Stages, in the order data flows: `tree` (schedule tree) → `graphs` (CDFG, CDRFG, redundancy elimination over
explicit instances, for small trip counts) or `symbolic` (the same dependences as rules per producer task,
consumer task and iteration distance, derived from bounded windows and proved with `tvm.sym`, for long or
symbolic trip counts; a persistent nest of tiles and K steps as one pipeline over the running step) → `channels`
(channel ids, stages, phases) → `protocol` (per-warp programs with acquire/commit/wait/release) → `codegen`
(llvm threads + atomics, CUDA mbarriers) and `check` (interleaving checker); `analysis` and `pass_` wire them.
Hopper (`hopper=True`): `tiles` (TMA loads, wgmma tiles, register fragments) → `transactions` (TMA batches commit
through one `expect_tx` transaction channel) → `retirement` (wgmma groups kept in flight, releases deferred) →
`hopper` (sm_90a code: TMA, wgmma, setmaxnreg); `ablation` builds the same tiles and stages without warp
specialization.
"""

from . import examples, tiling
from .ablation import unspecialized_hopper_kernel
from .analysis import Analysis, analyze
from .channels import ChannelGroup, ChannelPlan
from .check import CheckReport, Issue, check
from .codegen import load_libatomic, require_concurrent_threads
from .cuda_pipeline import WARP_SPECIALIZED_PIPELINE
from .graphs import FlowGraph
from .pass_ import WarpSpecialize, WarpSpecializeCheckError
from .protocol import Protocol, SyncOp
from .retirement import in_flight_protocol
from .symbolic import SymbolicAnalysisError, SymbolicPlan
from .tiles import TilePlan, tile_plan
from .transactions import transaction_protocol
from .tree import WARP_ROLE, ScheduleTree, WarpSpecializeInputError

__all__ = [
    "WARP_ROLE",
    "WARP_SPECIALIZED_PIPELINE",
    "Analysis",
    "ChannelGroup",
    "ChannelPlan",
    "CheckReport",
    "FlowGraph",
    "Issue",
    "Protocol",
    "ScheduleTree",
    "SymbolicAnalysisError",
    "SymbolicPlan",
    "SyncOp",
    "TilePlan",
    "WarpSpecialize",
    "WarpSpecializeCheckError",
    "WarpSpecializeInputError",
    "analyze",
    "in_flight_protocol",
    "tile_plan",
    "transaction_protocol",
    "unspecialized_hopper_kernel",
    "check",
    "examples",
    "load_libatomic",
    "require_concurrent_threads",
    "tiling",
]
