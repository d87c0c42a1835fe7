"""konfig's build: one step added to pyproject.toml's, so a built package carries the
repository template ``konfig init`` copies.

``build_py`` copies the template's files (the files git tracks here, minus what
``tools/konfig/repo/template.py`` leaves out) into ``konfig/data/template/`` of the
build, so ``pip install konfig`` (a wheel) can make a repository without a clone of the
template. An editable install (``make venv``) copies nothing: konfig reads the checkout
it runs from. Built outside a git checkout (from an sdist), the package has no template
and ``konfig init`` says so.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _template() -> ModuleType:
    """konfig.repo.template, loaded by path: konfig's dependencies are not installed yet."""
    path = ROOT / "tools" / "konfig" / "repo" / "template.py"
    spec = importlib.util.spec_from_file_location("_konfig_template", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class BuildPyWithTemplate(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not (ROOT / ".git").exists():
            return
        template = _template()
        dest = Path(self.build_lib) / "konfig" / "data" / "template"
        shutil.rmtree(dest, ignore_errors=True)
        for rel in template.template_paths(template.tracked_files(ROOT)):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, target)


setup(cmdclass={"build_py": BuildPyWithTemplate})
