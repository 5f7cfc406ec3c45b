"""Every tutorial notebook runs from top to bottom without an error (executed with the project's kernel)."""

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(path):
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
