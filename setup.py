"""The one build step pyproject.toml cannot say: put templates/, static/ and migrations/ into the
wheel, inside the package (webapp/templates, webapp/static, webapp/migrations).

They stay at the top of the repo, where the checkout (`make run`, an editable install) reads
them; webapp/__init__.py looks inside the package first, then beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA_DIRS = ("templates", "static", "migrations")
# Bytecode a checkout run left behind (migrations/ holds Python files) has no place in a wheel:
# pip compiles what it installs for the interpreter that installs it.
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")


class BuildWithData(build_py):
    """build_py, then a fresh copy of each data directory into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads them from the checkout
            return
        package = Path(self.build_lib) / "webapp"
        for name in DATA_DIRS:
            target = package / name
            # build/ outlives a build: a file deleted from the repo must not stay in the next wheel.
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / name, target, ignore=LEFT_OUT)


setup(cmdclass={"build_py": BuildWithData})
