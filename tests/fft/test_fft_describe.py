"""What a plan knows before its first call: description, shapes and workspace, read from the IR."""

import logging

import numpy as np

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft.template import physical_scratch_elements


def test_describe_lists_factorization_formula_passes_and_codelets():
    plan = tfft.plan(1024, 4, radix_limit=32)
    text = plan.describe()
    assert "complex transform size 1024 = 2 · 2" in text
    assert "formula: (DFT_32 ⊗ I_32) · T^1024_32 · (I_32 ⊗ DFT_32) · L^1024_32" in text
    assert "passes over memory (2)" in text
    assert "DFT_32 sign -1" in text
    assert "passes over memory (4)" in tfft.plan(1024, 4).describe()  # radices 8, 8, 4, 4
    rader = tfft.plan(1009).describe()
    assert "DFT_1009[rader]" in rader and "rader1009_gather" in rader
    assert "bluestein83_chirp" in tfft.plan(83).describe()


def test_shapes_and_workspace_known_before_the_first_call():
    plan = tfft.plan(1024, 40, dtype="complex128")
    assert plan.input_shape == (40, 1024, 2)
    assert plan.output_shape == (40, 1024, 2)
    # two ping-pong scratch buffers of 1024 complex128 per lane
    assert physical_scratch_elements(plan.passes) == 2 * 1024
    assert plan.workspace_bytes == 2 * 1024 * 16 * plan.lanes
    assert plan.table_bytes == (1024 + 128 + 32) * 16  # twiddle tables of the three Cooley-Tukey levels
    small = tfft.plan(16, 40)
    assert small.workspace_bytes == 0  # one codelet: input to output, no scratch
    x = np.zeros((40, 1024), np.complex128)
    assert plan(x).shape == (40, 1024)


def test_plans_are_cached():
    assert tfft.plan(48, 3) is tfft.plan(48, 3)
    assert tfft.plan(48, 3) is not tfft.plan(48, 3, norm="ortho")


def test_first_pass_nests_the_unit_stride_loop_of_the_input_inside():
    # 1024 = CT(8, CT(4, CT(4, 8))): the first pass reads input[i0 + 8·i1 + 32·i2 + 128·e]; i0 is vectorized
    first = tfft.plan(1024, 2).passes.passes[0]
    assert first.loops == (8, 4, 4) and first.loop_order == (1, 2, 0)
    # 65536: vectorized along i0, the lanes would write the scratch 8192 elements apart; i0 goes just outside,
    # the other loops outside it by decreasing input stride
    first = tfft.plan(65536, 1).passes.passes[0]
    assert first.loops == (8, 8, 8, 4, 4) and first.loop_order == (3, 2, 1, 0, 4)
    # passes whose last loop already has a unit stride keep their order
    assert all(p.loop_order is None for p in tfft.plan(1024, 2).passes.passes[1:])
    x = (np.random.default_rng(1).standard_normal((2, 1024)) + 1j).astype(np.complex64)
    np.testing.assert_allclose(tfft.plan(1024, 2)(x), np.fft.fft(x), rtol=1e-4, atol=1e-3)


def test_plan_construction_is_logged_on_the_fft_logger(caplog):
    with caplog.at_level(logging.DEBUG, logger="tvm_tailsplit.fft"):
        tfft.plan(21, 5, norm="forward", dtype="complex128", radix_limit=4)
    records = [r for r in caplog.records if r.name == "tvm_tailsplit.fft" and "Plan(n=21, batch=5" in r.getMessage()]
    assert len(records) == 1 and "lanes per group" in records[0].getMessage()
