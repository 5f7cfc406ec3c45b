"""TailSplit: condition-driven loop splitting below instruction-mapping marks, before tensorize.

Stages, in the order data flows: ``conditions`` (marks and guards) → ``intervals`` (always-true / fuzzy /
always-false intervals per loop variable) → ``plan`` (the split plan of a nest) → ``cost`` (mapping cost, the
full / partial decision) → ``rewrite`` (IR surgery) → ``privatize`` (a buffer per copy of a split loop) →
``apply`` (one PrimFunc) → ``pass_`` (the Pass) → ``tensorize`` (main and tail tiles, with the tail forms of
``tail_forms`` and the catalog ``intrinsics``) → ``pipeline`` (the ``"tailsplit"`` TIR pipeline). Around them:
``analysis`` (metrics and explanations), ``examples``, ``workloads`` and ``demo``; the mma.sync tensor-core matmul
``mma_schedule`` with its tail forms ``mma_tails`` (cp.async zero fill, predicated accumulator stores) and its
``"tailsplit_mma"`` pipeline (``mma_pipeline``: TailSplit, ``merge_cases``, tensorize).
"""

from . import analysis, examples, intrinsics, mma_pipeline, workloads
from .apply import NestReport, SplitReport, split_function
from .conditions import MARK_KEY, find_marks
from .pass_ import TailSplit
from .pipeline import TAILSPLIT_PIPELINE, tailsplit_pipeline
from .tail_forms import TailMatch, TailMismatch, register_tail_intrinsics
from .tensorize import TensorizeMarked, TensorizeRecord, tensorize_marked

__all__ = [
    "MARK_KEY",
    "NestReport",
    "SplitReport",
    "TAILSPLIT_PIPELINE",
    "TailMatch",
    "TailMismatch",
    "TailSplit",
    "TensorizeMarked",
    "TensorizeRecord",
    "analysis",
    "examples",
    "find_marks",
    "intrinsics",
    "mma_pipeline",
    "register_tail_intrinsics",
    "split_function",
    "tailsplit_pipeline",
    "tensorize_marked",
    "workloads",
]
