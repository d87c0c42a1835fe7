"""`konfig test`'s result cache (konfig.build.results, golden.check_compiled): a stack's
golden result is reused while its Spec and golden are the same, never once they changed.

As in tools/tests/check/test_stackcache.py: stored results are forged into "passed";
read back while nothing changed, never after a change to one of their inputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fixtures.rawstacks import app_resources, raw_stack
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.resultcache import forge_results, result_entries

from konfig.build import cache as compile_cache

PROD = "appops/shop/prod"
GOLDEN = f"{PROD}/ci-test/stdout.golden.yaml"


def _repo(builder: RepoBuilder, konfig: KonfigRunner) -> Path:
    """Two stacks with goldens; prod's golden then says 3 replicas, it compiles to 2."""
    raw_stack(builder, "shop", "dev", app_resources("web", "shop-dev"))
    raw_stack(builder, "shop", "prod", app_resources("web", "shop-prod", replicas=2))
    root = builder.root
    assert konfig("test", "--update", "--no-unit", "--no-cache", cwd=root).code == 0
    golden = root / GOLDEN
    golden.write_text(golden.read_text().replace("replicas: 2", "replicas: 3"))
    return root


def _forge(root: Path) -> int:
    """Every stored golden result says "passed"; returns how many there were."""

    def passed(was: Any) -> Any:
        assert isinstance(was, dict)
        return {**was, "status": "passed", "diffs": [], "message": "", "line": None}

    return forge_results(root, "test", passed)


def _test(konfig: KonfigRunner, root: Path, *args: str) -> tuple[int, str]:
    result = konfig("test", "--json", "--no-unit", *args, cwd=root)
    assert result.code in (0, 1), result.out + result.err
    return result.code, result.out


def test_a_failing_golden_fails_again_from_the_cache_with_the_same_report(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = _repo(repo_builder, konfig)
    fresh = _test(konfig, root, "--no-cache")
    assert fresh[0] == 1 and "+    replicas: 2" in fresh[1]
    first = _test(konfig, root)
    stored = {d["stack"]: d["result"] for d in result_entries(root, "test").values()}
    assert stored[PROD]["status"] == "mismatch"  # type: ignore[index]
    assert stored["appops/shop/dev"]["status"] == "passed"  # type: ignore[index]
    again = _test(konfig, root)
    assert fresh == first == again
    texts = {konfig("test", "--no-unit", *x, cwd=root).out for x in ((), ("--no-cache",))}
    assert len(texts) == 1, texts

    # JUnit: the same cases and failures (the times are the run's)
    def junit(*extra: str) -> str:
        out = tmp_path / f"junit{len(extra)}.xml"
        konfig("test", "--no-unit", "--junit", str(out), *extra, cwd=root)
        text = out.read_text(encoding="utf-8")
        return re.sub(r'time="[^"]*"', 'time=""', text)

    assert junit() == junit("--no-cache")

    assert _forge(root) == 2
    assert _test(konfig, root)[0] == 0  # the entries are read back


def _edit_golden(root: Path) -> None:
    golden = root / GOLDEN
    golden.write_text(golden.read_text().replace("replicas: 3", "replicas: 4"))


def _edit_settings(root: Path) -> None:
    settings = root / PROD / "ci-test/settings.yaml"
    settings.write_text(settings.read_text() + "  - key: extra\n    value: x\n")


CHANGES = {"golden": _edit_golden, "ci-test/settings.yaml": _edit_settings}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_input_is_never_served_from_the_cache(
    repo_builder: RepoBuilder, konfig: KonfigRunner, change: str
) -> None:
    root = _repo(repo_builder, konfig)
    assert _test(konfig, root)[0] == 1
    assert _forge(root) == 2
    assert _test(konfig, root)[0] == 0  # read back while nothing changed
    assert _forge(root) == 2
    CHANGES[change](root)
    cached = _test(konfig, root)
    assert cached[0] == 1, f"after a change to the {change}, a forged entry was read"
    assert cached == _test(konfig, root, "--no-cache")


def test_a_removed_golden_is_never_served_from_the_cache(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    root = _repo(repo_builder, konfig)
    assert _test(konfig, root)[0] == 1
    assert _forge(root) == 2
    (root / GOLDEN).unlink()
    cached = _test(konfig, root)
    assert cached[0] == 1 and '"status": "missing"' in cached[1]
    assert cached == _test(konfig, root, "--no-cache")


def test_another_konfig_is_never_served_from_the_cache(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(repo_builder, konfig)
    assert _test(konfig, root)[0] == 1
    assert _forge(root) == 2
    assert _test(konfig, root)[0] == 0
    monkeypatch.setattr(compile_cache, "tool_fingerprint", lambda state=None: "another konfig")
    cached = _test(konfig, root)
    assert cached[0] == 1
    assert cached == _test(konfig, root, "--no-cache")
