"""The change digest on plain plans: what counts, what does not, and that it is stable."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from konfig.engine.diff import FieldChange
from konfig.engine.digest import (
    ChangeDigest,
    DigestError,
    change_digest,
    differences,
    secret_digest,
)
from konfig.engine.drift import DriftedField, ObjectDrift
from konfig.engine.plan import Change, StackPlan
from konfig.masking import MASK_AFTER, MASK_BEFORE
from konfig.secrets.refs import KeyStatus

DEPLOY = "apps/v1:Deployment:shop:web"
SECRET = "v1:Secret:shop:db"


def deployment(image: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }


def change(rid: str, action: str, fields: tuple[FieldChange, ...], **kw: Any) -> Change:
    api, kind, ns, name = rid.split(":")
    values: dict[str, Any] = {
        "id": rid, "api_version": api, "kind": kind, "namespace": ns, "name": name,
        "action": action, "reason": "", "validated": True, "desired": None, "live": None,
        "fields": fields, "diff": "",
    }  # fmt: skip
    values.update(kw)
    return Change(**values)


IMAGE = "spec.template.spec.containers[name=web].image"


def image_update(new: str = "nginx:2", *extra: FieldChange, **kw: Any) -> Change:
    live = deployment("nginx:1") | {
        "metadata": {"name": "web", "uid": "u-1", "resourceVersion": "7"}
    }
    return change(
        DEPLOY,
        "update",
        (FieldChange(IMAGE, "nginx:1", new), *extra),
        desired=deployment(new),
        live=live,
        **kw,
    )


def plan(*changes: Change, path: str = "appops/shop/prod") -> StackPlan:
    return StackPlan(path, "admin", False, "a" * 64, None, None, tuple(changes))


def test_the_same_change_has_the_same_digest_in_another_process() -> None:
    here = change_digest(plan(image_update()))
    code = (
        "import sys; sys.path[:0] = " + json.dumps([str(Path(__file__).parent), *sys.path]) + "\n"
        "from test_digest import plan, image_update\n"
        "from konfig.engine.digest import change_digest\n"
        "print(change_digest(plan(image_update())).digest)\n"
    )
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    ).stdout.strip()  # fmt: skip
    assert there == here.digest
    assert len(here.digest) == 64
    # the order of the server's answers does not matter
    other = change(SECRET, "delete", ())
    assert (
        change_digest(plan(image_update(), other)).digest
        == change_digest(plan(other, image_update())).digest
    )


def test_every_field_path_and_value_counts() -> None:
    base = change_digest(plan(image_update()))
    assert change_digest(plan(image_update("nginx:3"))).digest != base.digest
    more = image_update("nginx:2", FieldChange("spec.replicas", 1, 3))
    assert change_digest(plan(more)).digest != base.digest
    moved = change(DEPLOY, "update", (FieldChange(IMAGE.replace("web]", "api]"), "a", "nginx:2"),))
    assert change_digest(plan(moved)).digest != base.digest
    assert change_digest(plan(replace(image_update(), action="replace"))).digest != base.digest
    assert change_digest(plan(image_update(), path="appops/shop/dev")).digest != base.digest
    (entry,) = base.objects
    assert dict(entry.fields).keys() == {IMAGE}


def test_a_secret_counts_by_digest_and_never_by_value() -> None:
    def secret(value: str) -> Change:
        desired = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                   "data": {"password": value}}  # fmt: skip
        return change(
            SECRET, "update", (FieldChange("data.password", MASK_BEFORE, MASK_AFTER),),
            desired=desired,
        )  # fmt: skip

    one, two = change_digest(plan(secret("aHVudGVyMg=="))), change_digest(plan(secret("c2VjcmV0")))
    assert one.digest != two.digest
    text = json.dumps(one.to_dict())
    assert "aHVudGVyMg==" not in text and "hunter2" not in text
    (field,) = one.objects[0].fields
    assert field[1].startswith("s") and field[1] == secret_digest(
        "aHVudGVyMg==", salt=f"appops/shop/prod\0{SECRET}\0data.password"
    )
    # salted by where it lives: the same value elsewhere has another digest
    assert secret_digest("x", salt="a") != secret_digest("x", salt="b")


def test_a_value_from_an_encrypted_file_counts_by_its_file_not_by_what_a_key_shows() -> None:
    def sealed(status: str, value: str) -> Change:
        desired = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                   "data": {"password": value}}  # fmt: skip
        return change(
            SECRET, "update", (FieldChange("data.password", MASK_BEFORE, MASK_AFTER),),
            desired=desired, secrets=(KeyStatus("password", status),),
        )  # fmt: skip

    files = (("appops/shop/prod/secrets.enc.yaml", "c" * 64),)
    # the pull request's preview had no production key; the apply has it
    previewed = change_digest(plan(sealed("not compared", "")), files)
    applied = change_digest(plan(sealed("changed", "c2VjcmV0")), files)
    assert previewed.digest == applied.digest
    assert "c2VjcmV0" not in json.dumps(applied.to_dict())
    # another encrypted file (a value changed, re-encrypted): another change
    edited = change_digest(
        plan(sealed("changed", "c2VjcmV0")), (("appops/shop/prod/secrets.enc.yaml", "d" * 64),)
    )
    assert edited.digest != previewed.digest
    assert [str(d) for d in differences(previewed, edited)] == [
        "encrypted file changed: appops/shop/prod/secrets.enc.yaml"
    ]
    assert ChangeDigest.from_dict("appops/shop/prod", edited.to_dict()).digest == edited.digest


def test_drift_in_a_field_the_change_does_not_touch_leaves_the_digest() -> None:
    reviewed = change_digest(plan(image_update()))
    drift = ObjectDrift(DEPLOY, "drifted", (DriftedField("spec.replicas", 4, False),))
    scaled = image_update("nginx:2", FieldChange("spec.replicas", 4, 1, drift=True), drift=drift)
    now = change_digest(plan(scaled))
    assert now.digest == reviewed.digest
    assert now.cluster_differs == ((DEPLOY, "spec.replicas"),)
    assert differences(reviewed, now) == []
    # only drift, nothing of the repository's: not in the change set at all
    only = change(DEPLOY, "update", (FieldChange("spec.replicas", 4, 1, drift=True),), drift=drift)
    assert change_digest(plan(only)).objects == ()
    assert change_digest(plan(only)).digest == change_digest(plan()).digest


def test_drift_in_a_field_the_change_sets_counts() -> None:
    reviewed = change_digest(plan(image_update()))
    drift = ObjectDrift(DEPLOY, "drifted", (DriftedField(IMAGE, "nginx:9", False),))
    edited = change(
        DEPLOY, "update", (FieldChange(IMAGE, "nginx:9", "nginx:2", drift=True),), drift=drift
    )
    now = change_digest(plan(edited))
    assert now.digest != reviewed.digest
    assert [str(d) for d in differences(reviewed, now)] == [f"no longer update: {DEPLOY}"]


def test_differences_name_the_paths() -> None:
    reviewed = change_digest(plan(image_update()))
    now = change_digest(
        plan(
            image_update("nginx:3", FieldChange("spec.replicas", 3, 1)),
            change(SECRET, "delete", ()),
        )
    )
    assert [str(d) for d in differences(reviewed, now)] == [
        f"now also: {DEPLOY} spec.replicas",
        f"changed: {DEPLOY} {IMAGE}",
        f"now also delete: {SECRET}",
    ]


def test_the_live_fingerprint_is_recorded_not_counted() -> None:
    one = change_digest(plan(image_update()))
    assert [v.to_dict() for v in one.live] == [{"id": DEPLOY, "uid": "u-1", "resourceVersion": "7"}]
    live = deployment("nginx:1") | {
        "metadata": {"name": "web", "uid": "u-1", "resourceVersion": "9"}
    }
    assert change_digest(plan(replace(image_update(), live=live))).digest == one.digest
    tofu = replace(plan(image_update()), tofu_state=("lin-1", 4))
    assert change_digest(tofu).to_dict()["tofuState"] == {"lineage": "lin-1", "serial": 4}
    assert change_digest(tofu).digest == one.digest


def test_a_record_read_back_must_hold_together() -> None:
    one = change_digest(plan(image_update()))
    again = ChangeDigest.from_dict("appops/shop/prod", one.to_dict())
    assert again.digest == one.digest and differences(one, again) == []
    forged = one.to_dict()
    forged["objects"][0]["fields"] = {}
    with pytest.raises(DigestError, match="the record was altered"):
        ChangeDigest.from_dict("appops/shop/prod", forged)
    with pytest.raises(DigestError):
        ChangeDigest.from_dict("appops/shop/dev", one.to_dict())


def test_fields_an_ignore_rule_keeps_out_do_not_count() -> None:
    from konfig.engine.ignore import IgnoredField

    def noisy(live_replicas: int) -> Change:
        kept_out = IgnoredField(
            "/spec/replicas", live_replicas, 1, "stack.yaml ignore[0]", "the HPA web", "left out"
        )
        return image_update(ignored=(kept_out,))

    base = change_digest(plan(image_update()))
    # the same change with a field an ignore rule kept out, whatever its live value: same digest
    assert change_digest(plan(noisy(5))).digest == base.digest
    assert change_digest(plan(noisy(9))).digest == base.digest
    # an ignored field alone is no change to review
    only_noise = change(DEPLOY, "update", (), ignored=noisy(5).ignored)
    assert change_digest(plan(only_noise)).digest == change_digest(plan()).digest
