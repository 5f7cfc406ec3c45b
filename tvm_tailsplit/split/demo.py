"""``make demo``: TailSplit on the seed's headline example, with what the pass did.

An element-wise multiply over an NC1HWC0 tensor (c1=3, h=20, w=4, c0=16) is tiled with loops
``c1, h_o, w, h_i, c0``: the ``h`` axis is cut into two full tiles of 8 and a tail of 4, and the mark
(``pragma_emit_insn = "vmuls"``) sits below ``h_o``. The tail guard forces the instruction down to single
points (4608 issued); after TailSplit the main and tail tiles are condition-free (9 issued).

Then the same flow with a symbolic length: ``C = A * B`` over ``n`` elements (known only at run time), the
mark naming the 16-lane AVX-512 multiply; TailSplit cuts the main tiles at ``n // 16`` and binds the tail's
extent ``T.min(16, n - i_0 * 16)`` above the mark, and ``tensorize_marked`` maps the main tiles to the
intrinsic and the tail to its masked variable-length form; checked on llvm for many ``n``.
"""

from __future__ import annotations

import tvm

from ..testing import assert_same_results
from . import analysis, intrinsics
from .examples import elementwise_multiply_nc1hwc0, symbolic_vector_multiply
from .pass_ import TailSplit
from .rewrite import remove_marks
from .tensorize import tensorize_marked


def main() -> None:
    mod = elementwise_multiply_nc1hwc0()
    before = analysis.instruction_count(mod)
    print("Before TailSplit:")
    print(f"  instruction sites {before.sites}, issued instructions {before.issued}, "
          f"guards under marks {analysis.conditions_under_marks(mod)}")
    reports: list = []
    after = tvm.transform.Sequential([TailSplit(strategy="auto", reports=reports)])(mod)
    print()
    print(reports[0])
    print()
    print(after.script())
    counts = analysis.instruction_count(after)
    print("After TailSplit:")
    print(f"  instruction sites {counts.sites}, issued instructions {counts.issued}, "
          f"guards under marks {analysis.conditions_under_marks(after)}")
    per_site = " + ".join(str(n) for n in counts.issued_per_site)
    print(f"  {before.issued} -> {counts.issued} issued instructions ({per_site}; "
          f"{before.issued // counts.issued}x fewer)")
    assert_same_results(mod, after)
    print("  checked on llvm: the split program computes the same C as the original (random data, canaries)")
    symbolic_demo()


def symbolic_demo() -> None:
    print()
    print("Symbolic length: C = A * B over n elements, 16-lane AVX-512 multiply")
    mod = symbolic_vector_multiply()
    reports: list = []
    split = TailSplit(reports=reports)(mod)
    print(reports[0])
    records: list = []
    tensorized = tensorize_marked(split, report=records)
    print(*records, sep="\n")
    print(tensorized.script())
    executables = (
        tvm.compile(remove_marks(mod), target="llvm"),
        tvm.compile(tensorized, target=intrinsics.llvm_target()),
    )
    for n in list(range(0, 50)) + [1000, 1023]:
        assert_same_results(mod, tensorized, trials=1, scalar_args={"n": n}, executables=executables)
    counts = [analysis.instruction_count(split, symbolic_values={"n": n}).issued for n in (15, 16, 17, 1000)]
    print(f"  issued instructions for n = 15, 16, 17, 1000: {counts} (one per tile of 16)")
    print("  checked on llvm for n = 0..49, 1000, 1023: the tensorized program computes the same C (canaries)")


if __name__ == "__main__":
    main()
