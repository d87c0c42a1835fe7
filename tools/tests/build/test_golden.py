from __future__ import annotations

from pathlib import Path

from konfig.build import golden
from konfig.repo.yamlio import dump_yaml
from konfig.spec import Spec, spec_from_items


def _deployment(replicas: int = 1, args: list[str] | None = None) -> dict[str, object]:
    container: dict[str, object] = {"name": "web", "image": "nginx:1.27.3"}
    if args is not None:
        container["args"] = args
    return {
        "id": "apps/v1:Deployment:ns:web",
        "type": "Kubernetes",
        "attributes": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}},
        },
        "dependsOn": ["v1:Namespace:ns"],
        "extensions": {},
    }


NAMESPACE = {
    "id": "v1:Namespace:ns",
    "attributes": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
}


def _spec(*items: dict[str, object]) -> Spec:
    return spec_from_items(list(items))


def _golden(*items: dict[str, object]) -> str:
    return dump_yaml({"resources": list(items)})


def test_resource_order_and_key_order_do_not_matter() -> None:
    compiled = _spec(NAMESPACE, _deployment())
    # resources reversed, keys in a different order than canonical
    reordered = {k: _deployment()[k] for k in reversed(list(_deployment()))}
    text = _golden(reordered, compiled.to_dict()["resources"][1])
    result = golden.compare("appops/p/s", compiled, text)
    assert result.status is golden.Status.PASSED, result


def test_list_order_does_not_matter_but_contents_do() -> None:
    compiled = _spec(NAMESPACE, _deployment(args=["a", "b", "b"]))
    ns = compiled.to_dict()["resources"][1]
    same = golden.compare("s", compiled, _golden(ns, _deployment(args=["b", "a", "b"])))
    assert same.passed
    # a multiset: one "b" fewer is a difference, though membership is the same
    fewer = golden.compare("s", compiled, _golden(ns, _deployment(args=["a", "b"])))
    assert fewer.status is golden.Status.MISMATCH
    assert [d.id for d in fewer.diffs] == ["apps/v1:Deployment:ns:web"]
    diff = fewer.diffs[0].diff.splitlines()
    added = [line[1:].strip() for line in diff if line.startswith("+ ")]
    assert added == ["- b"]


def test_mismatch_gives_a_unified_diff_per_resource() -> None:
    compiled = _spec(NAMESPACE, _deployment(replicas=3))
    result = golden.compare("appops/p/s", compiled, _golden(_deployment(replicas=1)))
    assert result.status is golden.Status.MISMATCH
    by_id = {d.id: d for d in result.diffs}
    assert by_id["v1:Namespace:ns"].change == "added"
    changed = by_id["apps/v1:Deployment:ns:web"]
    assert changed.change == "changed"
    lines = changed.diff.splitlines()
    assert lines[0] == "--- golden: apps/v1:Deployment:ns:web"
    assert lines[1] == "+++ compiled: apps/v1:Deployment:ns:web"
    assert "-    replicas: 1" in lines
    assert "+    replicas: 3" in lines
    assert "1 changed, 1 added" in result.summary()


def test_removed_resource_is_reported() -> None:
    compiled = _spec(NAMESPACE)
    result = golden.compare(
        "s", compiled, _golden(compiled.to_dict()["resources"][0], _deployment())
    )
    assert [(d.id, d.change) for d in result.diffs] == [("apps/v1:Deployment:ns:web", "removed")]


def test_missing_golden_hints_at_update() -> None:
    result = golden.compare("appops/p/s", _spec(NAMESPACE), None)
    assert result.status is golden.Status.MISSING
    assert "konfig test --update appops/p/s" in result.message


def test_broken_golden_yaml_has_a_line() -> None:
    result = golden.compare("appops/p/s", _spec(NAMESPACE), "resources:\n  - id: [\n")
    assert result.status is golden.Status.INVALID
    assert result.file == "appops/p/s/ci-test/stdout.golden.yaml"
    assert result.line == 3
    assert "invalid YAML" in result.message


def test_update_writes_only_when_bytes_differ(tmp_path: Path) -> None:
    compiled = _spec(NAMESPACE, _deployment())
    first = golden.update(tmp_path, "appops/p/s", compiled)
    assert first.changed and first.created
    path = tmp_path / "appops/p/s/ci-test/stdout.golden.yaml"
    assert path.read_text() == compiled.to_yaml()
    mtime = path.stat().st_mtime_ns
    again = golden.update(tmp_path, "appops/p/s", compiled)
    assert not again.changed
    assert path.stat().st_mtime_ns == mtime
    changed = golden.update(tmp_path, "appops/p/s", _spec(NAMESPACE, _deployment(replicas=2)))
    assert changed.changed and not changed.created
    assert changed.ids == ("apps/v1:Deployment:ns:web",)
    assert golden.check(tmp_path, "appops/p/s", _spec(NAMESPACE, _deployment(replicas=2))).passed
    # no temporary files left behind
    assert sorted(p.name for p in path.parent.iterdir()) == ["stdout.golden.yaml"]
