"""The README's TailSplit example runs as written and its operator computes ``A * B`` for every length; its
WarpSpecialize examples run (llvm result against numpy, the CUDA and Hopper forms compiled); its FFT examples
(the first plan, the te_fft graph, the Relax model of emit_fft, the convolution) compute what their comments say; its
recipe for scipy.fft's global backend leaves to scipy what the backend declines."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tvm

README = pathlib.Path(__file__).parent.parent / "README.md"


def tailsplit_example() -> str:
    section = README.read_text().split("## Using TailSplit", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_tailsplit_example_runs_and_computes_the_product():
    namespace: dict = {}
    exec(compile(tailsplit_example(), str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    script = namespace["mod"].script()
    assert "T.Ramp(0, 1, 16)" in script and "llvm.masked.store" in script
    executable = namespace["executable"]
    rng = np.random.default_rng(0)
    for n in [0, 1, 15, 16, 17, 100, 1000]:
        x, y = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
        z = tvm.runtime.tensor(np.zeros(n, "float32"))
        executable["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y), z)
        np.testing.assert_array_equal(z.numpy(), x * y)


@pytest.mark.nvcc
def test_readme_warpspecialize_examples_run():
    """Both code blocks of "Using WarpSpecialize" (llvm, CUDA, and the Hopper form), run in one namespace."""
    section = README.read_text().split("## Using WarpSpecialize", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    a, b, c = (namespace[name] for name in ("a", "b", "c"))
    np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)
    assert "wgmma" in namespace["ex"].mod.imports[0].inspect_source()
    assert namespace["ablation"].attrs["global_symbol"] == "gemm"


def _section_blocks(heading: str) -> list[str]:
    section = README.read_text().split(heading, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_fft_examples_compute_what_their_comments_say():
    """"Using the FFT generator" (numpy.fft.fft to 2e-7 relative L2 error), the te_fft graph (== np.fft.fft), the
    Relax model (== np.fft.rfft) and "FFT convolution" (== scipy.signal.fftconvolve), run as written."""
    namespace: dict = {}
    (first,) = _section_blocks("## Using the FFT generator")
    exec(compile(first, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    x, y = namespace["x"], namespace["y"]
    reference = np.fft.fft(x.astype(np.complex128))
    assert np.linalg.norm(y - reference) / np.linalg.norm(reference) < 2e-7
    assert namespace["z"].shape == (8, 100)
    fft_part = README.read_text().split("## Using the FFT generator", 1)[1].split("\n## ", 1)[0]
    te_block = next(b for b in re.findall(r"```python\n(.*?)```", fft_part, re.S) if "fft.te_fft(" in b)
    exec(compile(te_block, str(README), "exec"), namespace)  # noqa: S102
    x, z = namespace["x"], namespace["z"].numpy()
    reference = np.fft.fft(x[..., 0] + 1j * x[..., 1])
    np.testing.assert_allclose(z[..., 0] + 1j * z[..., 1], reference, atol=1e-4 * np.abs(reference).max())
    fusion_block = next(b for b in re.findall(r"```python\n(.*?)```", fft_part, re.S) if "fuse_consumers(" in b)
    exec(compile(fusion_block, str(README), "exec"), namespace)  # noqa: S102
    assert namespace["report"] == [re.search(r"# report: \['(.*)'\]", fusion_block).group(1)]
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        fused = tvm.compile(tvm.IRModule({"main": namespace["func"].with_attr("global_symbol", "main")}), "llvm")
    power = tvm.runtime.empty((8, 1000), "float32")
    fused["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(v) for _, v in namespace["constants"]], power)
    expected = np.abs(reference / 2) ** 2  # Y is the transform of X * 0.5
    np.testing.assert_allclose(power.numpy(), expected, rtol=1e-3, atol=1e-6 * expected.max())
    relax_block = next(b for b in re.findall(r"```python\n(.*?)```", fft_part, re.S) if "fft.emit_fft(" in b)
    exec(compile(relax_block, str(README), "exec"), namespace)  # noqa: S102
    signal_in = np.random.default_rng(0).standard_normal((16, 4096)).astype(np.float32)
    spectrum = namespace["vm"]["main"](tvm.runtime.tensor(signal_in)).numpy()
    reference = np.fft.rfft(signal_in)
    np.testing.assert_allclose(spectrum[..., 0] + 1j * spectrum[..., 1], reference,
                               atol=1e-4 * np.abs(reference).max())
    signal = pytest.importorskip("scipy.signal")
    (convolution,) = _section_blocks("### FFT convolution")
    exec(compile(convolution, str(README), "exec"), namespace)  # noqa: S102
    x, h, y = namespace["x"], namespace["h"], namespace["y"]
    np.testing.assert_allclose(y, signal.fftconvolve(x, h[None], mode="same", axes=-1), rtol=1e-4, atol=1e-3)


GLOBAL_BACKEND_CHECK = """
import collections
import numpy as np
import scipy.fft
from tvm_tailsplit.fft import scipy_backend


class CountingBackend:
    __ua_domain__ = scipy_backend.__ua_domain__
    counts = collections.Counter()

    def __ua_function__(self, method, args, kwargs):
        result = scipy_backend.__ua_function__(method, args, kwargs)
        self.counts[result is NotImplemented] += 1
        return result


fft = CountingBackend()
{recipe}
x = np.random.default_rng(0).standard_normal(16)
np.testing.assert_allclose(scipy.fft.fft(x), np.fft.fft(x), atol=1e-12)
assert scipy.fft.dct(x).shape == (16,)  # declined: computed by scipy
assert scipy.fft.fft(x.astype(np.longdouble)).dtype == np.clongdouble  # declined: scipy, exactly
assert fft.counts == {{False: 1, True: 2}}, fft.counts
"""


def test_readme_global_scipy_backend_recipe_keeps_scipy_for_what_the_backend_declines():
    """The README's "For global use:" recipe (its code spans, run as written with `fft` the backend) computes the
    transforms on the backend and leaves DCT and long double to scipy (set_global_backend alone replaces scipy's
    own backend: scipy.fft.dct raised BackendNotImplementedError)."""
    sentence = README.read_text().split("For global use:", 1)[1].split(". ", 1)[0]
    recipe = "\n".join(re.findall(r"`(scipy\.fft\.\w+\(.*?\))`", sentence))
    assert "set_global_backend(fft)" in recipe
    done = subprocess.run([sys.executable, "-c", GLOBAL_BACKEND_CHECK.format(recipe=recipe)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
