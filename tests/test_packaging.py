"""What a wheel built from this tree holds and needs: every directory of the package is a package that
setuptools' `find` includes, the package has no data files that would need `package-data`, and the declared
numpy minimum has what the code relies on."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parent.parent
PACKAGE = ROOT / "tvm_tailsplit"


def test_every_package_directory_is_shipped():
    from setuptools import find_packages

    shipped = set(find_packages(str(ROOT), include=["tvm_tailsplit*"]))
    directories = {".".join(d.relative_to(ROOT).parts) for d in [PACKAGE, *PACKAGE.rglob("*")]
                   if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))}
    assert directories <= shipped


def test_the_package_holds_only_python_sources():
    """The wheel ships `*.py` only (no `package-data`): the code opens no data file of its own."""
    others = [p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert others == []


def test_declared_numpy_minimum():
    """`ndarray.reshape(..., copy=False)` is numpy 2.1's (numpy 1.24-2.0 raised "'copy' is an invalid keyword" in
    `fft.rfft`); the suite's FFT tests were run with numpy 2.2.6 and 2.4. With `numpy>=1.24` declared, a user's
    numpy 1.26 stayed installed and the numpy surface failed."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (numpy,) = [d for d in project["dependencies"] if re.match(r"numpy\b", d)]
    minimum = tuple(int(x) for x in re.search(r">=\s*([\d.]+)", numpy).group(1).split(".")[:2])
    assert minimum >= (2, 2)


def test_one_transform_declares_the_compact_distance():
    """numpy before 2.4 exports a dimension of one with the compact stride through DLPack, whatever the array's:
    a plan of one transform with a distance (`fft.irfft(x[:, :33], n=64)` in parts, whose last part is one row)
    failed there with TVM's "Invalid input.strides[0]". One transform has no distance: the plan declares the
    compact one, and a strided row is run through it."""
    import numpy as np

    from tvm_tailsplit import fft

    p = fft.plan(64, batch=1, kind="c2r", idist=50, dtype="complex128")
    assert p.input_layout.distance == 33
    rows = np.random.default_rng(0).standard_normal((50, 33)) + 1j * np.random.default_rng(1).standard_normal((50, 33))
    row = rows[49:50]
    np.testing.assert_allclose(p(row), np.fft.irfft(row, n=64), rtol=1e-9, atol=1e-9)


def test_license_is_an_spdx_expression():
    """`license = { text = ... }` is deprecated by setuptools (every build printed a BuildBackendWarning, and
    builds stop being supported in 2027): the license is an SPDX string, which needs setuptools >= 77."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
