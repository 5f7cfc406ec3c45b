"""The ``"tailsplit"`` TIR pipeline: TailSplit, then ``tensorize_marked``, then TVM's default pipeline.

Composed, not copied: the third stage is whatever ``tvm.tirx.get_tir_pipeline("default")`` returns when the
pipeline is built (its pass list, its ``PassContext`` config handling and its host/device finalization), so the
pipeline follows TVM's default as it changes. Registered under ``TAILSPLIT_PIPELINE`` when ``tvm_tailsplit`` is
imported: ``tvm.compile(mod, target, tir_pipeline="tailsplit")``. ``tailsplit_pipeline(**options)`` gives the same
triple with TailSplit's options (register it under a name of your own with ``tvm.tirx.register_tir_pipeline``).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .pass_ import TailSplit
from .tensorize import TensorizeMarked

__all__ = ["TAILSPLIT_PIPELINE", "tailsplit_pipeline"]

TAILSPLIT_PIPELINE = "tailsplit"


def tailsplit_pipeline(**tailsplit_options) -> tuple[tvm.transform.Pass, object, object]:
    """``(pass, finalize_host_passes, finalize_device_passes)``, the triple a TIR pipeline factory returns:
    ``TailSplit(**tailsplit_options)``, ``TensorizeMarked()`` and TVM's default pipeline in one ``Sequential``, with
    the default pipeline's finalization passes. This function is the factory registered as ``"tailsplit"``; for
    other options register a factory, not its triple: ``tvm.tirx.register_tir_pipeline(name,
    functools.partial(tailsplit_pipeline, strategy="partial"))``."""
    default, finalize_host, finalize_device = tirx.get_tir_pipeline("default")
    passes = [TailSplit(**tailsplit_options), TensorizeMarked(), default]
    return tvm.transform.Sequential(passes, name="TailSplitPipeline"), finalize_host, finalize_device


tirx.register_tir_pipeline(TAILSPLIT_PIPELINE, tailsplit_pipeline)
