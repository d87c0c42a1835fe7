"""`konfig check`'s result cache (konfig.check.stackcache): a stack's findings are
reused while every input of them is the same, and never once one of them changed.

How "reused" is seen: after a run, every stored result is forged into "no findings"
(what a hostile entry would say). With nothing changed the next run reads the forged
entries back (the failing stack passes: the cache is read); after a change to any one
input the forged entries are not read and the stack fails again, with exactly the
findings of a run without the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.rawstacks import app_resources, raw_stack
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.resultcache import ENTRIES, forge_results, result_entries

from konfig.build import cache as compile_cache

PROD = "appops/shop/prod"
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object}
"""


def _repo(builder: RepoBuilder) -> None:
    raw_stack(builder, "shop", "dev", app_resources("web", "shop-dev"))
    raw_stack(builder, "shop", "prod", app_resources("web", "shop-prod", image="nginx"))


def _forge(root: Path) -> int:
    """Every stored check result says "no findings"; returns how many there were."""
    return forge_results(root, "check", lambda _was: [])


def _check(konfig: KonfigRunner, root: Path, *args: str) -> tuple[int, str]:
    result = konfig("check", "--format", "json", *args, cwd=root)
    assert result.code in (0, 1), result.out + result.err
    return result.code, result.out


def test_a_failing_stack_fails_again_from_the_cache_with_the_same_findings(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    fresh = _check(konfig, root, "--no-cache")
    assert fresh[0] == 1 and f"{PROD}/main.k" in fresh[1]
    assert not (root / ENTRIES).exists()  # --no-cache writes nothing
    first = _check(konfig, root)
    stored = result_entries(root, "check")
    by_stack = {d["stack"]: d["result"] for d in stored.values()}
    assert set(by_stack) == {"appops/shop/dev", PROD}
    assert by_stack["appops/shop/dev"] == [] and by_stack[PROD]  # the failure is stored
    again = _check(konfig, root)
    assert fresh == first == again  # the same exit code and report, cache or not
    for fmt in ("text", "github"):
        outputs = {
            konfig("check", "--format", fmt, *extra, cwd=root).out
            for extra in ((), ("--no-cache",))
        }
        assert len(outputs) == 1, outputs

    # the entries are read back: forged, they are what the next run reports
    assert _forge(root) == 2
    assert _check(konfig, root)[0] == 0


def _stack_yaml_described(root: Path) -> None:
    path = root / PROD / "stack.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "description: prod\n", encoding="utf-8")


CHANGES = {
    # a policy's source (the policies' package the entry imports)
    "policy": lambda root: (root / "base/pkg/policies/image_tag.k").write_text(
        (root / "base/pkg/policies/image_tag.k").read_text(encoding="utf-8") + "# edited\n",
        encoding="utf-8",
    ),
    # the schemas validated against: another Kubernetes version's
    "kubernetes version": lambda root: (root / "konfig.yaml").write_text(
        (root / "konfig.yaml")
        .read_text(encoding="utf-8")
        .replace('kubernetesVersion: "1.32"', 'kubernetesVersion: "1.31"'),
        encoding="utf-8",
    ),
    # konfig.yaml's check configuration
    "allowSystemNamespaces": lambda root: (root / "konfig.yaml").write_text(
        (root / "konfig.yaml").read_text(encoding="utf-8")
        + "allowSystemNamespaces: [kube-public]\n",
        encoding="utf-8",
    ),
    # a kind defined in the repository (a CRD: schema/unknown-kind, scope)
    "CRD": lambda root: (
        (root / "base/crds/widget.yaml").parent.mkdir(parents=True)
        or (root / "base/crds/widget.yaml").write_text(CRD, encoding="utf-8")
    ),
    # the stack's own settings
    "stack.yaml": _stack_yaml_described,
    # its project's
    "project.yaml": lambda root: (root / "appops/shop/project.yaml").write_text(
        "name: shop\ndescription: the shop\n", encoding="utf-8"
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_input_is_never_served_from_the_cache(
    repo_builder: RepoBuilder, konfig: KonfigRunner, change: str
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    assert _check(konfig, root)[0] == 1
    assert _forge(root) == 2
    assert _check(konfig, root)[0] == 0  # read back while nothing changed
    assert _forge(root) == 2
    CHANGES[change](root)
    cached = _check(konfig, root)
    assert cached[0] == 1, f"after a change to the {change}, a forged entry was read"
    assert cached == _check(konfig, root, "--no-cache")


def test_another_konfig_is_never_served_from_the_cache(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    assert _check(konfig, root)[0] == 1
    assert _forge(root) == 2
    assert _check(konfig, root)[0] == 0
    # konfig's version and its own files are one fingerprint (every rule is in it)
    monkeypatch.setattr(compile_cache, "tool_fingerprint", lambda state=None: "another konfig")
    cached = _check(konfig, root)
    assert cached[0] == 1
    assert cached == _check(konfig, root, "--no-cache")


def test_policies_off_and_on_are_two_results(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    assert _check(konfig, root, "--no-policies")[0] == 0  # prod's findings are the policies'
    off = _check(konfig, root, "--no-policies")
    on = _check(konfig, root)
    assert off[0] == 0 and on[0] == 1 and "policy/" in on[1]
    assert on == _check(konfig, root, "--no-cache")
    assert off == _check(konfig, root, "--no-cache", "--no-policies")
