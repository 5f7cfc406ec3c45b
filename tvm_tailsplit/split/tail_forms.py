"""The tail-form registry: what ``tensorize_marked`` may use for a tail tile of a mark (a leaf module).

A mark names a registered ``TensorIntrin`` whose description is the pattern of the main tiles. Its *tail forms*
are registered here by mark value: fixed-size intrinsics by the marked loop's extent (``by_extent``), and a
*variable-length* emitter that receives the matched tail (``TailMatch``: buffers with start indices, extents,
bound free extents) and returns the statement replacing the marked loop, or raises ``TailMismatch`` to refuse.
The intrinsic catalog (``intrinsics``) and ``tensorize`` both import this module; it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import tvm
from tvm import s_tir, tirx

__all__ = ["TailForms", "TailMatch", "TailMismatch", "register_tail_intrinsics", "tail_intrinsics"]


class TailMismatch(ValueError):
    """Raised by a variable-length emitter (or the matcher) when a tail does not fit; the message is the reason."""


@dataclass(frozen=True)
class TailMatch:
    """A tail region matched against an intrinsic's description.

    ``buffers`` maps each description buffer name (e.g. ``"A"``) to the region's buffer and the start indices of
    the access (one per dimension of the region's buffer); ``extents`` are the region's loop extents, outermost
    first, paired with the description's loops; ``thread_bound`` says that a loop around or in the region is bound
    to a GPU thread (an emitter of CPU code must refuse it); ``free_extents`` maps the name of each free extent
    variable of the description (a loop of any extent) to the region's extent of that loop."""

    intrinsic: str
    block_name: str
    loops: tuple[tirx.For, ...]
    extents: tuple[tvm.ir.PrimExpr, ...]
    buffers: dict[str, tuple[tirx.Buffer, tuple[tvm.ir.PrimExpr, ...]]]
    thread_bound: bool = False
    free_extents: dict[str, tvm.ir.PrimExpr] = field(default_factory=dict)


@dataclass(frozen=True)
class TailForms:
    """The tail forms of one mark value: fixed-size intrinsics by the marked loop's extent, and an emitter."""

    by_extent: dict[int, str] = field(default_factory=dict)
    variable_length: Callable[[TailMatch], tirx.Stmt] | None = None


_TAIL_FORMS: dict[str, TailForms] = {}


def register_tail_intrinsics(
    mark_value: str,
    by_extent: dict[int, str] | None = None,
    variable_length: Callable[[TailMatch], tirx.Stmt] | None = None,
) -> None:
    """Register the tail forms of the intrinsic a mark names (replaces an earlier registration); ``mark_value``
    must also be a registered ``TensorIntrin`` when ``tensorize_marked`` meets the mark.

    ``by_extent`` maps an extent of the marked loop to a registered ``TensorIntrin`` covering tails of that size;
    ``variable_length(match: TailMatch) -> tirx.Stmt`` builds the replacement of a tail of any extent up to the
    description's (raise ``TailMismatch`` to refuse one)."""
    if not isinstance(mark_value, str) or not mark_value:
        raise TypeError(f"register_tail_intrinsics: mark_value must be the name of a TensorIntrin (a non-empty str), "
                        f"got {mark_value!r}")
    if by_extent is not None and not isinstance(by_extent, dict):
        raise TypeError(f"register_tail_intrinsics({mark_value!r}): by_extent must be a dict of loop extent -> "
                        f"TensorIntrin name, got {type(by_extent).__name__}")
    by_extent = dict(by_extent or {})
    for extent, name in by_extent.items():
        if isinstance(extent, bool) or not isinstance(extent, int) or extent <= 0:
            raise ValueError(f"by_extent keys are positive loop extents, got {extent!r} for {mark_value!r}")
        if not isinstance(name, str):
            raise ValueError(f"by_extent[{extent}] must name a TensorIntrin, got {name!r}")
        if s_tir.TensorIntrin.get(name, allow_missing=True) is None:
            raise ValueError(f"register_tail_intrinsics({mark_value!r}): by_extent[{extent}] names {name!r}, which is "
                             f"not a registered TensorIntrin (register it with tvm.s_tir.TensorIntrin.register first)")
    if variable_length is not None and not callable(variable_length):
        raise ValueError(f"variable_length must be callable, got {variable_length!r}")
    if not by_extent and variable_length is None:
        raise ValueError(f"register_tail_intrinsics({mark_value!r}): give by_extent, variable_length or both")
    _TAIL_FORMS[mark_value] = TailForms(by_extent, variable_length)


def tail_intrinsics(mark_value: str) -> TailForms | None:
    """The tail forms registered for ``mark_value`` (``None`` when there are none)."""
    return _TAIL_FORMS.get(mark_value)
