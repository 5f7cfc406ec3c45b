"""tvm-tailsplit: TVM 0.27 passes and generators for irregular tiles.

- ``TailSplit``: split loop ranges by the guards below ``pragma_emit_insn`` marks so that tensorize applies.
- ``analysis``: instruction counts, conditions under marks, mapping-cost estimates.
"""

from . import analysis
from .split import MARK_KEY, TailSplit

__all__ = ["MARK_KEY", "TailSplit", "analysis"]
__version__ = "0.1.0"
