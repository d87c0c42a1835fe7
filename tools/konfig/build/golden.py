"""Golden tests: a stack's compiled Spec against ``ci-test/stdout.golden.yaml``.

Both sides are brought into a canonical form before comparing: resources keyed by
id (their order does not matter), mapping keys sorted, and every list's items sorted
by their canonical JSON, so lists compare as multisets (order does not matter,
duplicates and missing items do). On a mismatch each differing resource gets a
unified diff of its canonical YAML.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig.errors import ConfigError
from konfig.ids import resource_id
from konfig.repo.files import WriteScope, atomic_write_text
from konfig.repo.yamlio import dump_yaml, load_yaml_text
from konfig.spec import Spec

if TYPE_CHECKING:
    from konfig.build.compiler import CompileResult

GOLDEN = "ci-test/stdout.golden.yaml"
UPDATE_HINT = "run `konfig test --update {stack}` and review the change"


class Status(StrEnum):
    PASSED = "passed"
    MISMATCH = "mismatch"
    MISSING = "missing"
    INVALID = "invalid"


@dataclass(frozen=True)
class ResourceDiff:
    id: str
    change: str  # "added" (compiled, not in golden), "removed" or "changed"
    diff: str  # unified diff, golden -> compiled


@dataclass(frozen=True)
class GoldenResult:
    stack_path: str
    status: Status
    file: str  # the golden file, relative to the repository root
    diffs: tuple[ResourceDiff, ...] = ()
    message: str = ""
    line: int | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def summary(self) -> str:
        if self.status is Status.PASSED:
            return "golden matches"
        if self.status is Status.MISSING:
            return f"no golden file {self.file}"
        if self.status is Status.INVALID:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
            return f"{where}: {self.message}"
        counts = Counter(d.change for d in self.diffs)
        parts = [f"{counts[c]} {c}" for c in ("changed", "added", "removed") if counts[c]]
        return f"{self.file}: compiled output differs from the golden ({', '.join(parts)})"


@dataclass(frozen=True)
class UpdateResult:
    stack_path: str
    file: str
    changed: bool
    created: bool = False
    ids: tuple[str, ...] = field(default=())  # resource ids whose content changed


def golden_path(stack_path: str) -> str:
    return f"{stack_path}/{GOLDEN}"


def normalize(data: Any) -> Any:
    """Canonical form for comparing: keys sorted, list items sorted (multiset semantics)."""
    if isinstance(data, Mapping):
        return {str(k): normalize(data[k]) for k in sorted(data, key=str)}
    if isinstance(data, list):
        items = [normalize(v) for v in data]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return data


def _keyed(resources: list[Any]) -> dict[str, Any]:
    """Resources keyed by id; a repeated id keeps every copy (compared as a multiset)."""
    keyed: dict[str, list[Any]] = {}
    for item in resources:
        if isinstance(item, Mapping):
            rid = item.get("id")
            if not rid and isinstance(item.get("attributes"), Mapping):
                rid = resource_id(item["attributes"])
            rid = str(rid or "<no id>")
        else:
            rid = "<not a mapping>"
        keyed.setdefault(rid, []).append(normalize(item))
    return {k: v[0] if len(v) == 1 else normalize(v) for k, v in keyed.items()}


def _yaml(value: Any) -> list[str]:
    return dump_yaml(value).splitlines(keepends=True) if value is not None else []


def compare(stack_path: str, compiled: Spec, golden_text: str | None) -> GoldenResult:
    """Compare a compiled Spec with the golden file's text (None: there is no golden)."""
    file = golden_path(stack_path)
    if golden_text is None:
        return GoldenResult(
            stack_path,
            Status.MISSING,
            file,
            message=f"no golden file; {UPDATE_HINT.format(stack=stack_path)}",
        )
    try:
        data = load_yaml_text(golden_text, file=file)
    except ConfigError as exc:
        return GoldenResult(
            stack_path, Status.INVALID, file, message=exc.message.split(": ", 1)[-1], line=exc.line
        )
    if data is None:
        data = {"resources": []}
    if not isinstance(data, Mapping) or not isinstance(data.get("resources", []), list):
        return GoldenResult(
            stack_path,
            Status.INVALID,
            file,
            message="expected a mapping with a `resources` list (a compiled Spec); "
            + UPDATE_HINT.format(stack=stack_path),
            line=1,
        )
    expected = _keyed(list(data.get("resources") or []))
    actual = _keyed(list(compiled.to_dict()["resources"]))
    diffs: list[ResourceDiff] = []
    for rid in sorted(set(expected) | set(actual)):
        want, got = expected.get(rid), actual.get(rid)
        if want == got:
            continue
        change = "added" if want is None else "removed" if got is None else "changed"
        text = "".join(
            difflib.unified_diff(
                _yaml(want),
                _yaml(got),
                fromfile=f"golden: {rid}",
                tofile=f"compiled: {rid}",
            )
        )
        diffs.append(ResourceDiff(rid, change, text))
    if diffs:
        line = _line_of_id(golden_text, diffs[0].id)
        return GoldenResult(stack_path, Status.MISMATCH, file, tuple(diffs), line=line)
    return GoldenResult(stack_path, Status.PASSED, file)


def _line_of_id(text: str, rid: str) -> int | None:
    """The golden's line that holds a resource's ``id`` (None when it is not there)."""
    for number, line in enumerate(text.splitlines(), 1):
        key, _, value = line.strip().removeprefix("- ").partition(":")
        if key == "id" and value.strip().strip("'\"") == rid:
            return number
    return None


_ID_LINE = "  - id: "  # how `konfig test --update` writes each resource's first line


def golden_ids(root: Path, stack_path: str) -> dict[str, int] | None:
    """The resource ids a stack's golden records, each with its line; None without one.

    Only the ids (what `konfig check`'s ownership rule needs of the stacks it did not
    compile): a line scan of the canonical file, a YAML parse only for a hand-written one.
    """
    try:
        text = read_golden(root, stack_path)
    except (OSError, UnicodeDecodeError):
        return None
    if text is None:
        return None
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(_ID_LINE):
            value = line[len(_ID_LINE) :].strip()
            if value[:1] in ("'", '"'):
                try:
                    value = str(load_yaml_text(value, file=golden_path(stack_path)))
                except ConfigError:
                    continue
            found.setdefault(value, number)
    if found or "id:" not in text:
        return found
    try:
        data = load_yaml_text(text, file=golden_path(stack_path))
    except ConfigError:
        return None
    items = data.get("resources") if isinstance(data, Mapping) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            found.setdefault(item["id"], _line_of_id(text, item["id"]) or 1)
    return found


def read_golden(root: Path, stack_path: str) -> str | None:
    path = root / golden_path(stack_path)
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8")


def check(root: Path, stack_path: str, compiled: Spec) -> GoldenResult:
    return compare(stack_path, compiled, read_golden(root, stack_path))


def check_compiled(
    root: Path, compiled: Sequence[CompileResult], state: Path | None
) -> list[GoldenResult]:
    """:func:`check` for every stack that compiled, each result from the result cache
    under ``state`` while its Spec (by its compile key and digest) and its golden's
    bytes are those it was worked out from (None: no cache)."""
    from konfig.build import results as rc

    store = rc.ResultCache(state, "test") if state is not None else None
    found: list[GoldenResult] = []
    for result in compiled:
        if result.spec is None:
            continue
        if store is None or result.cache_key is None:
            found.append(check(root, result.stack_path, result.spec))
            continue
        key = rc.result_key(
            "test",
            {
                "stack": result.stack_path,
                "compile": result.cache_key,
                "spec": rc.text_digest(result.yaml()),
                "golden": rc.file_digest(root / golden_path(result.stack_path)),
                "libraries": rc.library_versions(),
            },
        )
        cached = _from_json(result.stack_path, store.get(key, result.stack_path))
        if cached is None:
            cached = check(root, result.stack_path, result.spec)
            store.put(key, result.stack_path, _to_json(cached))
        found.append(cached)
    return found


def _to_json(result: GoldenResult) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "file": result.file,
        "diffs": [[d.id, d.change, d.diff] for d in result.diffs],
        "message": result.message,
        "line": result.line,
    }


def _from_json(stack_path: str, data: Any) -> GoldenResult | None:
    """A stored result; None for anything but what :func:`_to_json` writes."""
    try:
        line, stored = data["line"], data["diffs"]
        if not (line is None or type(line) is int) or not all(
            isinstance(d, list) and len(d) == 3 and all(isinstance(x, str) for x in d)
            for d in stored
        ):
            return None
        diffs = tuple(ResourceDiff(*d) for d in stored)
        file, message = data["file"], data["message"]
        if not isinstance(file, str) or not isinstance(message, str):
            return None
        return GoldenResult(stack_path, Status(data["status"]), file, diffs, message, line)
    except (TypeError, KeyError, ValueError):
        return None


def render(compiled: Spec) -> str:
    """The golden file's text for a Spec: its canonical YAML, as `konfig compile` prints it."""
    return compiled.to_yaml()


def update(root: Path, stack_path: str, compiled: Spec) -> UpdateResult:
    """Rewrite the golden (atomically) when its bytes differ; report what changed."""
    file = golden_path(stack_path)
    old = read_golden(root, stack_path)
    new = render(compiled)
    if old == new:
        return UpdateResult(stack_path, file, changed=False)
    ids: tuple[str, ...] = ()
    if old is not None:
        result = compare(stack_path, compiled, old)
        ids = tuple(d.id for d in result.diffs)
    atomic_write_text(root / file, new, scope=WriteScope.repository(root))
    return UpdateResult(stack_path, file, changed=True, created=old is None, ids=ids)
