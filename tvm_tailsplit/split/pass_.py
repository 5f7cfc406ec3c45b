"""The ``TailSplit`` pass: a thin ``prim_func_pass`` around ``apply.split_function``."""

from __future__ import annotations

import tvm
from tvm import tirx

from .apply import SplitReport, split_function, validate_options

__all__ = ["TailSplit"]


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
        The largest code length (see ``tvm_tailsplit.analysis.estimate_mapping_cost``) accepted for a full
        split under ``"auto"``.
    max_fuzzy_expansion:
        The longest fuzzy interval expanded element by element; a longer one keeps its condition.
    verbose:
        Print, per function and mark, what was split, what was kept and why.
    reports:
        When a list is given, the ``SplitReport`` of every function is appended to it.

    Returns
    -------
    A ``tvm.transform.Pass`` named ``TailSplit`` working on s_tir PrimFuncs; functions without marks pass
    through unchanged.
    """
    validate_options(strategy, max_mapping_cost, max_fuzzy_expansion)

    def transform(func: tirx.PrimFunc, mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
        name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "main"
        new_func, report = split_function(func, name, strategy, max_mapping_cost, max_fuzzy_expansion)
        if verbose:
            print(report)
        if reports is not None:
            reports.append(report)
        return new_func

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="TailSplit")
