"""TailSplit: condition-driven loop splitting below instruction-mapping marks, before tensorize."""

from .apply import NestReport, SplitReport, split_function
from .conditions import MARK_KEY, find_marks
from .pass_ import TailSplit

__all__ = ["MARK_KEY", "NestReport", "SplitReport", "TailSplit", "find_marks", "split_function"]
