"""The package's version has one source, ``delta_connect_py.__version__``.

pyproject.toml declares the version dynamic and reads it from that attribute; the command line
prints it. (The wheel's installed metadata is compared with it by ``server/wheel-smoke.sh``.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tomllib

import delta_connect_py

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def test_pyproject_reads_the_version_from_the_package() -> None:
    pyproject = _pyproject()
    project = pyproject["project"]
    assert isinstance(project, dict)
    assert "version" not in project, "a second version in pyproject.toml"
    assert "version" in project["dynamic"]
    tool = pyproject["tool"]
    assert isinstance(tool, dict)
    assert tool["setuptools"]["dynamic"]["version"] == {"attr": "delta_connect_py.__version__"}


def test_the_version_is_a_literal_setuptools_reads_without_importing() -> None:
    """setuptools reads ``attr:`` statically only from a plain assignment of a string; anything
    else would make it import the package (and pyspark) at build time."""
    tree = ast.parse((ROOT / "delta_connect_py" / "__init__.py").read_text(encoding="utf-8"))
    values = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    ]
    assert values == [delta_connect_py.__version__]


def test_the_command_line_prints_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "delta_connect_py.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert result.stdout.strip() == f"delta-connect {delta_connect_py.__version__}"
