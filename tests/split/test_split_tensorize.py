"""After TailSplit, ``sch.tensorize`` succeeds on the marked loops of the condition-free copies (before the
pass it is refused because of the tail guard), and the tensorized program is numerically right on llvm."""

import numpy as np
import pytest
import tvm
from tvm import s_tir

from tvm_tailsplit import MARK_KEY, TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.examples import register_vector_scale_intrinsic, vector_scale_1d
from tvm_tailsplit.testing import guarded_array, to_tvm


def marked_loops_of_block(sch, block_name):
    return [loop for loop in sch.get_loops(sch.get_sblock(block_name)) if MARK_KEY in sch.get(loop).annotations]


def test_tensorize_is_refused_before_the_pass():
    intrinsic = register_vector_scale_intrinsic(16)
    sch = s_tir.Schedule(vector_scale_1d(100, 16))
    (mark,) = marked_loops_of_block(sch, "B")
    sch.unannotate(mark, MARK_KEY)
    with pytest.raises(s_tir.ScheduleError, match="can not be blockized"):
        sch.tensorize(mark, intrinsic)


@pytest.mark.parametrize("n", [16, 100, 129, 255])
def test_tensorize_main_tiles_after_the_pass(n):
    intrinsic = register_vector_scale_intrinsic(16)
    after = TailSplit(strategy="full")(vector_scale_1d(n, 16))
    sch = s_tir.Schedule(after)
    main_block = "B_0" if n % 16 else "B"
    (mark,) = marked_loops_of_block(sch, main_block)
    assert sch.get(mark).extent.value == 16
    sch.unannotate(mark, MARK_KEY)
    sch.tensorize(mark, intrinsic)
    assert "T.ramp(0, 1, 16)" in sch.mod.script() or "T.Ramp" in sch.mod.script()
    executable = tvm.compile(sch.mod, target="llvm")
    a = guarded_array((n,), "float32")
    b = guarded_array((n,), "float32")
    a.array[:] = np.random.default_rng(n).uniform(-1, 1, n).astype("float32")
    executable["main"](to_tvm(a.array), to_tvm(b.array))
    b.check_canaries("B")
    np.testing.assert_allclose(b.array, a.array * 2, rtol=0, atol=0)
    assert analysis.instruction_count(after).issued == -(-n // 16)
