"""The public surface: every name in the `__all__` of the facade and of each wing exists, and every public
function, class, method and property reachable from them has a docstring (what `help()` shows a user)."""

import importlib
import inspect

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
