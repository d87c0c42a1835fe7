"""Where in a stack's sources a Spec resource comes from, as well as we can tell.

Findings on a compiled Spec have no YAML position; they point at the stack's
``main.k``, at the first line that mentions the resource's name as a string literal
(the project's shared ``base/*.k`` files are searched next), else at the file alone.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from konfig.repo.layout import MAIN, STACK_FILE, Stack
from konfig.spec import Resource


@cache
def _lines(path: Path) -> tuple[str, ...]:
    try:
        return tuple(path.read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):
        return ()


def stack_file(root: Path, stack: Stack) -> str:
    main = f"{stack.path}/{MAIN}"
    return main if (root / main).is_file() else f"{stack.path}/{STACK_FILE}"


def locate(root: Path, stack: Stack, resource: Resource | None) -> tuple[str, int | None]:
    default = stack_file(root, stack)
    if resource is None or not resource.name:
        return default, None
    needle = f'"{resource.name}"'
    candidates = [root / stack.path / MAIN]
    base = root / stack.project_path / "base"
    if base.is_dir():
        candidates.extend(sorted(p for p in base.glob("*.k") if not p.name.endswith("_test.k")))
    for path in candidates:
        for number, line in enumerate(_lines(path), 1):
            if needle in line:
                return path.relative_to(root).as_posix(), number
    return default, None


def clear_cache() -> None:
    _lines.cache_clear()
