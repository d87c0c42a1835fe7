"""The runtime seam (konfig.pipeline.runtime): which runtime runs a stack, the one
question whether OpenTofu takes part, the credentials each runtime checks before any
write, and the OpenTofu runtime imported only for a stack it takes. On plain data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.plan import Change, StackPlan
from konfig.errors import KonfigError
from konfig.pipeline import runtime
from konfig.pipeline.runtime import (
    KUBERNETES,
    NOTHING_SET_UP,
    RUNTIMES,
    Contexts,
    KubernetesRuntime,
    check_credentials,
    runtime_of,
    shown_entry,
    uses,
    uses_opentofu,
)
from konfig.repo.layout import Stack
from konfig.spec import Spec, spec_from_items
from konfig.tofu.context import TofuContext
from konfig.tofu.hybrid_runtime import HybridRuntime
from konfig.tofu.policy import policy_from_data
from konfig.tofu.runner import TofuSettings

PROVIDER = {"source": "registry.opentofu.org/cyrilgdn/postgresql", "version": "1.26.0"}
TERRAFORM = {
    "terraform": {
        "providers": {"postgresql": {"environment": {"host": "PGH", "password": "PGP"}}},
    }
}
PLAIN = Stack("web", "dev", "appops/web/dev", "appops/web", raw={})
# konfig.yaml's Terraform policy: the shop's variables granted (docs/terraform.md)
POLICY = policy_from_data(
    {
        "providers": {"postgresql": {}},
        "credentials": [
            {
                "stacks": ["appops/shop/prod"],
                "provider": "postgresql",
                "environment": {"host": "PGH", "password": "PGP"},
            }
        ],
    }
)
SECTION = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw=TERRAFORM)


def _terraform_spec() -> Spec:
    return spec_from_items(
        [
            {
                "id": "cyrilgdn/postgresql:postgresql_database:shop",
                "type": "Terraform",
                "attributes": {"name": "shop"},
                "extensions": {"provider": PROVIDER},
            }
        ]
    )


def _tofu(environment: dict[str, str], tmp_path: Path) -> Contexts:
    settings = TofuSettings(binary="tofu", cli_config=None, environ={})
    return Contexts(tofu=TofuContext(settings, tmp_path, environment, policy=POLICY))


def test_a_stack_without_terraform_runs_on_the_kubernetes_engine() -> None:
    assert runtime_of(PLAIN, Spec(()), NOTHING_SET_UP) is KUBERNETES
    assert runtime_of(PLAIN, None, NOTHING_SET_UP) is KUBERNETES
    assert not uses_opentofu(PLAIN) and not uses_opentofu(PLAIN, Spec(()))


def test_opentofu_takes_a_stack_with_a_terraform_section_or_terraform_resources() -> None:
    # the section alone (its state may still hold removed resources)
    assert isinstance(runtime_of(SECTION, None, NOTHING_SET_UP), HybridRuntime)
    assert uses_opentofu(SECTION)
    # Terraform resources in the Spec, no section
    assert isinstance(runtime_of(PLAIN, _terraform_spec(), NOTHING_SET_UP), HybridRuntime)
    assert uses_opentofu(PLAIN, _terraform_spec()) and uses("opentofu", PLAIN, _terraform_spec())
    assert not uses("no-such-runtime", SECTION)


def test_the_runtime_carries_the_context_the_command_set_up(tmp_path: Path) -> None:
    contexts = _tofu({}, tmp_path)
    chosen = runtime_of(SECTION, None, contexts)
    assert isinstance(chosen, HybridRuntime) and chosen.tofu is contexts.tofu


def test_a_stack_opentofu_takes_is_refused_when_opentofu_was_not_set_up() -> None:
    chosen = runtime_of(PLAIN, _terraform_spec(), NOTHING_SET_UP)
    unused = cast(Kube, None)  # refused before any request
    with pytest.raises(KonfigError) as caught:
        chosen.preview(
            unused,
            PLAIN,
            _terraform_spec(),
            None,
            KubeTarget(None, None),
            workers=1,
            secret_data=None,
        )
    assert caught.value.message == (
        "appops/web/dev: has Terraform resources and OpenTofu is not set up"
    )


def test_each_runtime_checks_the_credentials_of_its_own_stacks(tmp_path: Path) -> None:
    specs = {SECTION.path: _terraform_spec(), PLAIN.path: Spec(())}
    # a plain stack needs nothing set up and nothing from the environment
    check_credentials([PLAIN], specs, NOTHING_SET_UP)
    check_credentials([SECTION, PLAIN], specs, _tofu({"PGH": "h", "PGP": "p"}, tmp_path))
    with pytest.raises(KonfigError) as caught:
        check_credentials([SECTION, PLAIN], specs, _tofu({"PGH": "h"}, tmp_path))
    assert caught.value.message == (
        "the provider credentials come from the environment and these variables are not "
        "set: appops/shop/prod: PGP (provider postgresql, argument password); nothing was "
        "changed"
    )
    with pytest.raises(KonfigError) as caught:
        check_credentials([SECTION], specs, _tofu({"PGH": "h"}, tmp_path), verb="destroy")
    assert "appops/shop/prod: PGP" in caught.value.message


def test_a_third_runtime_is_one_more_line_at_the_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    """RUNTIMES is the one list: an entry claims stacks, the first claim wins, every
    other stack stays on the Kubernetes engine."""
    assert [name for name, _, _ in RUNTIMES] == ["opentofu"]
    third = KubernetesRuntime()  # a real runtime, under another name

    def claims(stack: Stack, spec: Spec | None) -> bool:
        return stack.project == "web"

    monkeypatch.setattr(runtime, "RUNTIMES", (*RUNTIMES, ("third", claims, lambda c: third)))
    assert runtime_of(PLAIN, None, NOTHING_SET_UP) is third
    assert uses("third", PLAIN) and not uses("third", SECTION)
    assert isinstance(runtime_of(SECTION, None, NOTHING_SET_UP), HybridRuntime)  # first wins


def test_the_plan_shown_is_compared_as_a_saved_preview_entry() -> None:
    change = Change(
        "v1:ConfigMap:web:c", "v1", "ConfigMap", "web", "c", "create", "", True, None, None, (), ""
    )
    plan = StackPlan("appops/web/dev", "ctx", False, "digest", None, None, (change,))
    assert shown_entry(plan) == {
        "status": "ok",
        "specDigest": "digest",
        "changes": [change.to_dict()],
    }


PROBE = """\
import json, sys
from konfig.repo.layout import Stack
from konfig.pipeline.runtime import NOTHING_SET_UP, runtime_of, uses_opentofu
plain = Stack("web", "dev", "appops/web/dev", "appops/web", raw={})
section = Stack("shop", "prod", "appops/shop/prod", "appops/shop", raw={"terraform": {}})
loaded = []
assert not uses_opentofu(plain)
runtime_of(plain, None, NOTHING_SET_UP)
loaded.append(sorted(m for m in sys.modules if m.startswith("konfig.")))
runtime_of(section, None, NOTHING_SET_UP)
loaded.append(sorted(m for m in sys.modules if m.startswith("konfig.")))
print(json.dumps(loaded))
"""


def test_the_opentofu_runtime_is_imported_only_for_a_stack_it_takes() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    before, after = (set(m) for m in json.loads(proc.stdout))
    opentofu = {"konfig.tofu.hybrid_runtime", "konfig.tofu.hybrid", "konfig.tofu.plan_apply"}
    assert not before & opentofu, sorted(before & opentofu)
    assert opentofu <= after
    # asking the seam loads none of the Kubernetes engine's heavier modules either
    assert not before & {"konfig.engine.applier", "konfig.engine.planner", "konfig.engine.kube"}
