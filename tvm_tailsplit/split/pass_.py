"""The ``TailSplit`` pass: a thin module pass around ``apply.split_function``, one call per PrimFunc (named by its
GlobalVar); reports go to the caller's list and, with ``verbose``, to the ``tvm_tailsplit`` logger."""

from __future__ import annotations

import logging

import tvm
from tvm import tirx

from ..ir_utils import checked_module_pass, require_bools, require_list
from .apply import SplitReport, split_function, validate_options

__all__ = ["TailSplit"]

logger = logging.getLogger("tvm_tailsplit")


def TailSplit(  # noqa: N802 - pass constructors are CamelCase in TVM
    strategy: str = "auto",
    max_mapping_cost: int = 256,
    max_fuzzy_expansion: int = 64,
    verbose: bool = False,
    reports: list[SplitReport] | None = None,
) -> tvm.transform.Pass:
    """Split loop ranges by the guards below instruction-mapping marks, before tensorize.

    Parameters
    ----------
    strategy:
        ``"full"`` (split every loop variable in a guard, above and below the mark: fewest conditions),
        ``"partial"`` (split only the mark and the loops below it; decide outer variables with a guard chain
        above the mark: less code) or ``"auto"`` (full split when its mapping cost is within
        ``max_mapping_cost``, else partial).
    max_mapping_cost:
        The largest code length (see ``tvm_tailsplit.split.analysis.estimate_mapping_cost``) accepted for a full
        split under ``"auto"``.
    max_fuzzy_expansion:
        The most copies element-by-element expansion makes of one statement: a fuzzy interval is expanded only
        while its size times the sizes of the expanded intervals around it is at most this (expansions nest);
        an interval not expanded keeps its condition.
    verbose:
        Log (logger ``tvm_tailsplit``, level INFO; shown by ``logging.basicConfig(level=logging.INFO)``), per
        function and mark, what was split, what was kept and why; without it the reports go to DEBUG.
    reports:
        When a list is given, the ``SplitReport`` of every function is appended to it (anything but a list or
        ``None`` is a ``TypeError`` naming ``reports``).

    Returns
    -------
    A ``tvm.transform.Pass`` (a module pass) named ``TailSplit`` working on every PrimFunc of a module, with
    blocks (s_tir) or without (one report per PrimFunc, marks or not, named by its GlobalVar; after TVM's
    ``LowerOpaqueBlock`` a mark is ``T.attr(loop_var, "pragma_emit_insn", value)`` above its loop, and stays so);
    functions without marks, and functions that are not PrimFuncs (Relax), pass through unchanged. Called
    directly on anything but an ``IRModule`` it raises ``TypeError``.
    """
    validate_options(strategy, max_mapping_cost, max_fuzzy_expansion)
    require_list(reports, "TailSplit", "reports")
    require_bools("TailSplit", verbose=verbose)

    def transform(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        functions = {}
        for global_var, func in mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                func, report = split_function(func, global_var.name_hint, strategy, max_mapping_cost,
                                              max_fuzzy_expansion)
                logger.log(logging.INFO if verbose else logging.DEBUG, "%s", report)
                if reports is not None:
                    reports.append(report)
            functions[global_var] = func
        return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)

    return checked_module_pass(transform, "TailSplit")
