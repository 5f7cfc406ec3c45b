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
    """numpy 2.4 exports a dimension of one with its own stride through DLPack (2.3 and older write the compact
    one, and TVM checks the stride the plan declares: `fft.irfft(x[:, :33], n=64)` in parts, whose last part is
    one row, failed with "Invalid input.strides[0]"); `ndarray.reshape(..., copy=False)` is numpy 2.1's. With
    `numpy>=1.24` declared, a user's numpy 1.26 or 2.3 stayed installed and the numpy surface failed."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (numpy,) = [d for d in project["dependencies"] if re.match(r"numpy\b", d)]
    minimum = tuple(int(x) for x in re.search(r">=\s*([\d.]+)", numpy).group(1).split(".")[:2])
    assert minimum >= (2, 4)
    python = tuple(int(x) for x in re.fullmatch(r">=\s*3\.(\d+)", project["requires-python"]).groups())
    assert python >= (11,)  # numpy 2.4's own minimum


def test_dlpack_keeps_the_stride_of_a_dimension_of_one():
    """What the plans rely on from numpy: a one-transform part of a strided batch reaches TVM with its stride."""
    import numpy as np
    import tvm_ffi

    part = np.zeros((50, 64, 2))[49:50, :33]
    assert tvm_ffi.from_dlpack(part, require_alignment=0, require_contiguous=False).strides == (128, 2, 1)


def test_license_is_an_spdx_expression():
    """`license = { text = ... }` is deprecated by setuptools (every build printed a BuildBackendWarning, and
    builds stop being supported in 2027): the license is an SPDX string, which needs setuptools >= 77."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
