"""Every tutorial notebook runs from top to bottom with the project's kernel, without a cell error, and shows
what it is about (each notebook's key output is asserted)."""

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("*.ipynb"))

EXPECTED_OUTPUT = {
    "01_tailsplit": ["tensorize refused", "4608 -> 9 issued instructions", "tensorized main tiles + scalar tail"],
    "02_tensorize_tails": [
        "guards under marks after TailSplit: 0",
        "instantiated with tailsplit_llvm_fp32_matmul_8x16xk",
        "variable_length with tailsplit_llvm_fp32_matmul_8x16xk",
        "symbolic M: one function, equal to numpy",
        "instantiated with tailsplit_avx512_vnni_dense_8x16xk",
        "variable_length with tailsplit_avx512_vnni_dense_8x16xk",
        "speedup of tailsplit over guarded",
        "one function, kernels per interval of M: main_kernel (64 threads), main_kernel_1 (128 threads), "
        "main_kernel_2 (128 threads), main_kernel_3 (128 threads)",
        "plotted time per M for M in [1, 16, 33, 127, 1000] (NVIDIA H100",
    ],
    "03_fft_generator": ["max |formula - DFT_96|", "relative L2 error"],
    "05_fft_plans_and_surface": [
        "chosen variant: Variant(",
        "imported: 1",
        "a new process's measure plan came from: wisdom",
        "pruned: {'stale': 0, 'orphaned': 0, 'temporary': 0, 'bytes': 0}",
        "workspace bytes (planned before running)",
        "rfftn matches numpy: True",
        "float16 in, complex64 out: complex64",
        "scipy.fft.fft2 through the backend matches: True",
        "dask fft2 matches numpy: True",
        "te_fft graph matches numpy: True",
        "stage fft_c2c1000: block power (pair consumer) fused into the stores of the last pass, writing power",
        "fused power spectrum matches numpy: True",
        "Relax model with emit_fft matches numpy: True",
    ],
    "04_warp_specialization": [
        "redundant, removed (4): c2->p4, c1->p7, c4->p7, c5->p7",
        "protocol is safe",
        "race",
        "TMA load load_B: 256x64 B -> B_ring, 32768 bytes",
        "expect_tx 49152 bytes from load_A, load_B",
        "expect_tx -32768 bytes: ['race', 'transaction bytes']",
        "release without lag: ['race', 'release in flight']",
        "persistent nest tt x ko: one pipeline over the running step",
        "cp_async_bulk_tensor",
        "one function for every M, kernels: gemm_kernel, gemm_kernel_1, gemm_kernel_2, gemm_kernel_3",
    ],
}


def cell_text(notebook) -> str:
    return "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(path, monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", os.environ.get("TVM_NUM_THREADS", "2"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = cell_text(notebook)
    for expected in EXPECTED_OUTPUT.get(path.stem, []):
        assert expected in text, f"{path.name} does not show {expected!r}"


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_uses_the_installed_package(path):
    """A notebook imports tvm_tailsplit before it touches sys.path: with the repository root first on the path, a
    notebook run from tutorials/ would import the checkout's sources instead of the installed package."""
    notebook = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    first_import = min(code.find(s) for s in ("import tvm_tailsplit", "from tvm_tailsplit") if s in code)
    assert "sys.path" not in code[:first_import], f"{path.name} changes sys.path before importing tvm_tailsplit"
