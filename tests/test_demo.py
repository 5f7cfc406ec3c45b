"""``make demo`` runs: the headline (4608 -> 9 issued instructions) and the symbolic-length flow (TailSplit +
tensorize_marked, one instruction per tile, checked on llvm)."""

from tvm_tailsplit.split import demo


def test_demo_shows_the_headline_and_the_symbolic_flow(capsys):
    demo.main()
    out = capsys.readouterr().out
    assert "4608 -> 9 issued instructions" in out
    assert "issued instructions for n = 15, 16, 17, 1000: [1, 1, 2, 63]" in out
    assert "variable_length with tailsplit_avx512_fp32_mul_16" in out
    assert "checked on llvm for n = 0..49, 1000, 1023" in out
