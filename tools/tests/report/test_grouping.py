"""Unit tests of grouping identical changes across stacks (``konfig.grouping``)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from fleet import (
    Fleet,
    add_label,
    change,
    configmap,
    deployment,
    service,
    set_image,
)

from konfig.report import grouping
from konfig.report.grouping import CHANGING, Field, ObjectChange, StackChanges, group_changes

IMAGE = "spec.template.spec.containers[name=main].image"


def stacks_from_preview(
    doc: Mapping[str, Any], *, production: Iterable[str] = ()
) -> list[StackChanges]:
    """The stacks of one ``konfig preview --format json`` document (already masked)."""
    prod = set(production)
    out = []
    for s in doc.get("stacks") or []:
        changes = tuple(
            ObjectChange(
                api_version=str(c.get("apiVersion", "")),
                kind=str(c.get("kind", "")),
                namespace=c.get("namespace") or None,
                name=str(c.get("name", "")),
                action=str(c.get("action", "")),
                fields=tuple(
                    Field(str(f.get("path", "")), f.get("before"), f.get("after"))
                    for f in c.get("fields") or []
                    if isinstance(f, Mapping)
                ),
                diff=str(c.get("diff") or ""),
            )
            for c in s.get("changes") or []
            if isinstance(c, Mapping) and c.get("action") in CHANGING
        )
        path = str(s.get("path", ""))
        out.append(
            StackChanges(path, changes, production=path in prod, failed=s.get("status") == "error")
        )
    return out


def grouped(fleet: Fleet, production: tuple[str, ...] = ()) -> grouping.Grouping:
    return group_changes(stacks_from_preview(fleet.preview(), production=production))


def test_one_change_in_300_stacks_is_one_group() -> None:
    result = grouped(Fleet(100, edits=[set_image("nginx:1.27.4")]))
    assert len(result.groups) == 1
    (g,) = result.groups
    assert (g.role, g.action, g.kind, g.name) == ("shared", "update", "Deployment", "{project}")
    assert g.fields == (Field(IMAGE, "nginx:1.27.3", "nginx:1.27.4"),)
    assert g.objects == 300 and len(g.stacks) == 300
    assert g.placeholders == ("project",)
    assert result.exceptions == ()
    assert len(result.changed) == 300 and result.unchanged == ()


def test_stack_specific_values_become_placeholders() -> None:
    def team(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["labels"]["team"] = meta["name"]  # the project's name
        meta["labels"]["ns"] = meta["namespace"]
        meta["labels"]["url"] = f"https://{meta['name']}.example.com/{meta['namespace']}"

    result = grouped(Fleet(5, edits=[team]))
    (g,) = result.groups
    assert [(f.path, f.before, f.after) for f in g.fields] == [
        ("metadata.labels.ns", None, "{namespace}"),
        ("metadata.labels.team", None, "{project}"),
        ("metadata.labels.url", None, "https://{project}.example.com/{namespace}"),
    ]
    assert g.placeholders == ("namespace", "project")


def test_a_placeholder_with_one_value_is_written_out() -> None:
    # Every stack is a `dev` stack: {stack} would hide nothing, so it is shown as is.
    fleet = Fleet(4, envs=("dev",), edits=[add_label("env", "dev")])
    (g,) = grouped(fleet).groups
    assert {f.after for f in g.fields} == {"dev"}
    assert g.placeholders == ("project",)  # the Deployments' names differ: {project}
    # A single stack: every placeholder has one value, the group reads like the stack.
    one = Fleet(1, envs=("prod",), edits=[add_label("tier", "app000-prod")])
    (g1,) = grouped(one).groups
    assert g1.name == "app000" and {f.after for f in g1.fields} == {"app000-prod"}
    assert g1.role == "few" and g1.exceptional


def test_tokens_match_whole_words_only() -> None:
    fleet = Fleet(
        3,
        envs=("qa",),
        edits=[add_label("a", "quality"), add_label("b", "qa-east"), add_label("c", "app0001")],
        name=lambda i: f"app{i:03d}",
    )
    (g,) = grouped(fleet).groups
    values = {f.path: f.after for f in g.fields}
    assert values["metadata.labels.a"] == "quality"
    assert values["metadata.labels.b"] == "qa-east"  # uniform {stack}: written out
    assert values["metadata.labels.c"] == "app0001"  # app000 is no whole token of app0001


def test_exceptions_different_value_extra_delete_failure() -> None:
    def older(project: str, env: str) -> list[dict[str, Any]]:
        live = deployment(project, env, image="nginx:1.26.0")
        planned = copy.deepcopy(live)
        set_image("nginx:1.27.4")(planned)
        return [change(live, planned)]

    def drops(project: str, env: str) -> list[dict[str, Any]]:
        gone = configmap(project, env, "legacy", {"mode": "old"})
        return [
            *Fleet(0, edits=[set_image("nginx:1.27.4")]).standard(project, env),
            change(gone, None),
        ]

    error = {"message": "compile failed: boom", "file": "appops/app002/prod/main.k", "line": 3}
    fleet = Fleet(
        100,
        edits=[set_image("nginx:1.27.4")],
        special={
            "appops/app007/dev": older,
            "appops/app010/staging": drops,
            "appops/app002/prod": error,
        },
    )
    result = grouped(fleet, production=tuple(p for p in fleet.paths() if p.endswith("/prod")))
    shared = [g for g in result.groups if g.role == "shared"]
    assert len(shared) == 1 and len(shared[0].stacks) == 298
    assert shared[0].production and len(shared[0].production) == 99
    variant = next(g for g in result.groups if g.role == "variant")
    assert variant.variant_of == shared[0].id
    assert variant.stacks == ("appops/app007/dev",)
    assert variant.fields == (Field(IMAGE, "nginx:1.26.0", "nginx:1.27.4"),)
    delete = next(g for g in result.groups if g.action == "delete")
    assert (
        delete.role == "few" and delete.exceptional and delete.stacks == ("appops/app010/staging",)
    )
    assert (delete.kind, delete.name) == ("ConfigMap", "legacy")
    # Review order: failures first, then the delete, then the differing update.
    assert [e.stack for e in result.exceptions] == [
        "appops/app002/prod",
        "appops/app010/staging",
        "appops/app007/dev",
    ]
    assert result.exceptions[0].failed and result.exceptions[0].production
    assert result.exceptions[1].groups == (delete.id,)
    assert result.exceptions[2].groups == (variant.id,)
    # Groups: the delete before the updates.
    assert result.groups[0] is delete
    assert result.failed == ("appops/app002/prod",)


def test_two_unrelated_changes_are_two_groups() -> None:
    paths = Fleet(60).paths()
    image_stacks = set(paths[:120])
    label_stacks = set(paths[90:])  # overlap: 30 stacks have both

    def both(project: str, env: str) -> list[dict[str, Any]]:
        path = f"appops/{project}/{env}"
        live = deployment(project, env)
        planned = copy.deepcopy(live)
        if path in image_stacks:
            set_image("nginx:1.27.4")(planned)
        if path in label_stacks:
            add_label("cost-center", "cc-42")(planned)
        return [change(live, planned)]

    result = grouped(Fleet(60, special=dict.fromkeys(paths, both)))
    assert [g.role for g in result.groups] == ["shared", "shared"]
    by_path = {g.fields[0].path: g for g in result.groups}
    assert set(by_path[IMAGE].stacks) == image_stacks
    label = by_path["metadata.labels.cost-center"]
    assert set(label.stacks) == label_stacks
    assert [f.path for f in label.fields] == [
        "metadata.labels.cost-center",
        "spec.template.metadata.labels.cost-center",
    ]
    assert result.exceptions == ()


def test_values_that_differ_in_every_stack_are_one_varied_group() -> None:
    def scale(project: str, env: str) -> list[dict[str, Any]]:
        index = int(project[3:])
        live = deployment(project, env, replicas=1)
        return [change(live, deployment(project, env, replicas=2 + index))]

    paths = Fleet(20, envs=("dev",)).paths()
    result = grouped(Fleet(20, envs=("dev",), special=dict.fromkeys(paths, scale)))
    (g,) = result.groups
    assert g.role == "varied" and len(g.stacks) == 20
    (vf,) = g.varies
    assert (vf.path, vf.befores, vf.before_count, vf.after_count) == ("spec.replicas", (1,), 1, 20)
    assert len(vf.afters) == 3
    assert result.exceptions == ()


def test_a_few_variants_stay_exceptions_of_the_dominant_change() -> None:
    def pinned(project: str, env: str) -> list[dict[str, Any]]:
        live = deployment(project, env, image=f"nginx:1.2{int(project[3:]) % 10}.0")
        planned = copy.deepcopy(live)
        set_image("nginx:1.27.4")(planned)
        return [change(live, planned)]

    odd = {f"appops/app{i:03d}/dev": pinned for i in range(8)}
    result = grouped(Fleet(100, edits=[set_image("nginx:1.27.4")], special=odd))
    roles = sorted(g.role for g in result.groups)
    assert roles == ["shared", *["variant"] * 8]
    assert len(result.exceptions) == 8


def test_creates_group_by_content() -> None:
    def add_cm(project: str, env: str) -> list[dict[str, Any]]:
        data = {"LOG": "debug" if project == "app003" else "info", "NS": f"{project}-{env}"}
        return [change(None, configmap(project, env, f"{project}-settings", data))]

    paths = Fleet(10).paths()
    result = grouped(Fleet(10, special=dict.fromkeys(paths, add_cm)))
    shared = next(g for g in result.groups if g.role == "shared")
    assert (shared.action, shared.kind, shared.name) == (
        "create",
        "ConfigMap",
        "{project}-settings",
    )
    assert len(shared.stacks) == 27
    assert ("data.NS", None, "{namespace}") in [(f.path, f.before, f.after) for f in shared.fields]
    variant = next(g for g in result.groups if g.role == "variant")
    assert len(variant.stacks) == 3 and variant.variant_of == shared.id
    assert shared.sample.diff.startswith("--- live/v1:ConfigMap:")


def test_deletes_group_whatever_their_content() -> None:
    def drop(project: str, env: str) -> list[dict[str, Any]]:
        return [
            change(service(project, env), None),
            change(configmap(project, env, "c", {env: project}), None),
        ]

    paths = Fleet(4).paths()
    result = grouped(Fleet(4, special=dict.fromkeys(paths, drop)))
    assert sorted((g.kind, g.name, len(g.stacks)) for g in result.groups) == [
        ("ConfigMap", "c", 12),
        ("Service", "{project}", 12),
    ]


def test_changes_without_a_field_list_are_compared_by_diff() -> None:
    def legacy(path: str, ns: str, value: int) -> StackChanges:
        diff = (
            f"--- live/v1:ConfigMap:{ns}:c\n+++ planned/v1:ConfigMap:{ns}:c\n@@ -1 +1 @@\n"
            f"-  a: 1\n+  a: {value}\n"
        )
        c = ObjectChange("v1", "ConfigMap", ns, "c", "update", (), diff)
        return StackChanges(path, (c,))

    stacks = [legacy(f"appops/p{i}/dev", f"p{i}-dev", 2) for i in range(4)]
    stacks.append(legacy("appops/q/dev", "q-dev", 3))
    result = group_changes(stacks)
    assert sorted((g.role, len(g.stacks)) for g in result.groups) == [("shared", 4), ("variant", 1)]


def test_production_groups_first_within_an_action() -> None:
    def cm_update(project: str, env: str) -> list[dict[str, Any]]:
        live = configmap(project, env, "c", {"a": "1"})
        return [change(live, configmap(project, env, "c", {"a": "2" if env == "prod" else "3"}))]

    paths = Fleet(10).paths()
    fleet = Fleet(10, special=dict.fromkeys(paths, cm_update))
    prod = [p for p in paths if p.endswith("/prod")]
    result = grouped(fleet, production=tuple(prod))
    assert [len(g.stacks) for g in result.groups] == [10, 20]  # prod first, though smaller
    assert result.groups[0].production == tuple(sorted(prod))


def test_unchanged_and_failed_stacks_are_counted() -> None:
    stacks = [
        StackChanges("appops/a/dev"),
        StackChanges("appops/b/dev", failed=True, production=True),
        StackChanges(
            "appops/c/dev",
            (ObjectChange("v1", "ConfigMap", "c", "x", "create", (Field("data.a", None, "1"),)),),
        ),
    ]
    result = group_changes(stacks)
    assert result.unchanged == ("appops/a/dev",)
    assert result.failed == ("appops/b/dev",)
    assert result.changed == ("appops/c/dev",)
    assert [(e.stack, e.failed, e.production) for e in result.exceptions] == [
        ("appops/b/dev", True, True),
        ("appops/c/dev", False, False),
    ]


def test_group_ids_are_stable() -> None:
    fleet = Fleet(5, edits=[set_image("nginx:1.27.4")])
    assert grouped(fleet).groups[0].id == grouped(fleet).groups[0].id
    other = Fleet(5, edits=[set_image("nginx:1.27.5")])
    assert grouped(fleet).groups[0].id != grouped(other).groups[0].id
