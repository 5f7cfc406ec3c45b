"""The public surface: every name in the `__all__` of the facade and of each wing exists, and every public
function, class, method and property reachable from them has a docstring (what `help()` shows a user)."""

import importlib
import importlib.util
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

PUBLIC_MODULES = ["tvm_tailsplit", "tvm_tailsplit.split", "tvm_tailsplit.fft", "tvm_tailsplit.warpspec"]


def undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj)) and not obj.__doc__:
            missing.append(name)
        if inspect.isclass(obj):
            for attribute, value in vars(obj).items():
                member = getattr(value, "__func__", value)
                if not attribute.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    if not member.__doc__:
                        missing.append(f"{name}.{attribute}")
    return missing


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_names_exist_and_have_docstrings(module_name):
    module = importlib.import_module(module_name)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
    assert undocumented(module_name) == []


def parameters_not_in_docstring(module_name: str) -> list[str]:
    """Each public function's and public method's parameters that `help()` of it does not name (``self``, ``cls``
    aside; dataclasses, whose fields are their parameters, aside)."""
    module = importlib.import_module(module_name)
    functions = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            functions.append((name, obj))
        elif inspect.isclass(obj):
            functions += [(f"{name}.{attribute}", getattr(value, "__func__", value))
                          for attribute, value in vars(obj).items()
                          if (not attribute.startswith("_") or attribute == "__call__")
                          and inspect.isfunction(getattr(value, "__func__", value))]
    missing = []
    for name, function in functions:
        doc = inspect.getdoc(function) or ""
        for parameter in inspect.signature(function).parameters:
            if parameter not in ("self", "cls") and not re.search(rf"\b{re.escape(parameter)}\b", doc):
                missing.append(f"{name}({parameter})")
    return missing


@pytest.mark.parametrize("module_name", [*PUBLIC_MODULES, "tvm_tailsplit.testing", "tvm_tailsplit.split.workloads",
                                         "tvm_tailsplit.split.analysis", "tvm_tailsplit.warpspec.examples",
                                         "tvm_tailsplit.cuda", "tvm_tailsplit.ir_utils"])
def test_public_functions_name_every_parameter_in_their_docstring(module_name):
    assert parameters_not_in_docstring(module_name) == []


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # (a parent that is a module, not a package)
        return False


def test_dotted_names_in_the_readme_and_the_docstrings_exist():
    """Every ``tvm_tailsplit.a.b`` the README or the package's sources name (a pass's own name aside) resolves, so
    that a user who types what help() or the README says gets the object."""
    root = pathlib.Path(__file__).parent.parent
    unresolved = set()
    for path in [root / "README.md", *sorted((root / "tvm_tailsplit").rglob("*.py"))]:
        for match in re.finditer(r"(?<!name=\")tvm_tailsplit(?:\.\w+)+", path.read_text()):
            obj, module = importlib.import_module("tvm_tailsplit"), "tvm_tailsplit"
            for part in match.group(0).split(".")[1:]:
                module = f"{module}.{part}"
                if hasattr(obj, part):
                    obj = getattr(obj, part)
                elif _is_module(module):
                    obj = importlib.import_module(module)
                else:
                    unresolved.add(f"{path.name}: {match.group(0)}")
                    break
    assert sorted(unresolved) == []


def test_the_readmes_dotted_names_are_attributes_after_importing_the_package():
    """``import tvm_tailsplit`` is enough to reach what the README names ``tvm_tailsplit.split.workloads.*`` and
    the like (the facade's docstring: ``split`` holds ``split.workloads`` and ``split.examples``); a submodule that
    the wing does not import is an AttributeError there. In a fresh process: this one has imported everything."""
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    names = sorted(set(re.findall(r"tvm_tailsplit(?:\.\w+)+", readme)) | {"tvm_tailsplit.fft.dask_array.fft2"})
    script = ("import functools, tvm_tailsplit\n"
              f"for name in {names!r}:\n"
              "    try:\n"
              "        functools.reduce(getattr, name.split('.')[1:], tvm_tailsplit)\n"
              "    except AttributeError:\n"
              "        print(name)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert result.stdout.split() == []
