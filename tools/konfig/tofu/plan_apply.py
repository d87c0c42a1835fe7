"""Plan and apply the Terraform resources of one stack with OpenTofu.

:func:`tofu_plan` writes the stack's configuration into its working directory,
initialises it when its providers or backend changed, runs ``tofu plan -out`` and
translates the plan (:mod:`konfig.tofu.plans`). Values the environment or a secret gives
reach OpenTofu only as ephemeral variables. Objects in the stack's inventory that the
state does not record (an apply interrupted before OpenTofu wrote its state) are
imported, so a re-run adopts them instead of failing on "already exists"; an import of
an object that turns out not to exist is dropped and the plan made again.

Every plan also writes its machine-readable messages (``-json-into``), which say what it
does (:class:`PlannedActions`). A plan that changes nothing and saw no drift is not read
back (``tofu show -json`` starts the provider once more); one made with ``show=False``
neither: :func:`plan_from_actions` tells its changes from the messages when it only
creates and updates; :func:`show_plan` reads it back otherwise.

:func:`tofu_apply` applies exactly the saved plan and says, per resource, what
happened; after a failure the state (read again by the caller) tells what exists. The
plan file is named after the process (``konfig-<pid>.tfplan``): a plan kept between
``konfig apply``'s first plan and its apply under the lock is not replaced by another
konfig's preview of the same stack; one left by a process that is gone is removed.
Nothing here prints or reads the environment: the caller passes the variables' values.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from konfig.repo.files import WriteScope, remove
from konfig.spec import Spec
from konfig.tofu import plans
from konfig.tofu.config import CONFIG_FILE, Backend, Configuration, configuration, state_providers
from konfig.tofu.model import StackTerraform, TerraformResource, terraform_resources
from konfig.tofu.runner import Cluster, ImportMissing, Run, TofuError, TofuSettings, Workdir

PLAN_PREFIX = "konfig-"
PLAN_SUFFIX = ".tfplan"
_CREDENTIAL = re.compile(r"password|secret|token|key|cert", re.IGNORECASE)


@dataclass(frozen=True)
class WriteOnlyValue:
    """A write-only argument's value and its version (None: not known to this run)."""

    value: str | None
    version: str | None


@dataclass(frozen=True)
class StackTofu:
    """What the Terraform part of one stack needs; the pipeline builds it."""

    stack_path: str
    workdir: Path
    backend: Backend
    settings: TofuSettings
    cluster: Cluster
    terraform: StackTerraform
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)
    scope: WriteScope | None = None


# The planned actions (OpenTofu's machine-readable ``planned_change`` messages) that
# neither destroy nor replace anything: nothing apply could refuse.
ADDITIVE = frozenset({"create", "update", "noop", "read"})


@dataclass(frozen=True)
class PlannedActions:
    """What ``tofu plan -json-into`` said it plans: address -> action, and its summary."""

    actions: dict[str, str]
    summary: dict[str, int] | None  # add, change, remove, import, forget (None: not seen)
    drifted: tuple[str, ...] = ()  # ``resource_drift``: changed outside OpenTofu

    @property
    def additive(self) -> bool:
        """Nothing is destroyed, replaced, forgotten or moved (judged by the summary and
        each action; a message konfig does not know makes it False)."""
        if self.summary is None:
            return False
        if self.summary.get("remove", 1) or self.summary.get("forget", 1):
            return False
        return all(a in ADDITIVE for a in self.actions.values())

    def creating(self) -> list[str]:
        return [addr for addr, a in self.actions.items() if a == "create"]


@dataclass
class PlannedStack:
    """A saved plan and what applying it needs (kept in memory, never written)."""

    resources: list[TerraformResource]
    plan: plans.TerraformPlan  # empty until shown when planned with ``show=False``
    plan_file: str
    workdir: Workdir
    variables: dict[str, str] = field(repr=False)
    ids: dict[str, str]  # address -> resource id
    imports: dict[str, str]
    actions: PlannedActions | None = None  # with ``show=False``: what the plan does
    destroy: bool = False

    @property
    def addresses(self) -> dict[str, str]:
        """Resource id -> address, for every change of the plan."""
        return {rid: addr for addr, rid in self.ids.items()}


def _variables(
    ctx: StackTofu, config: Configuration, values: Mapping[tuple[str, str], WriteOnlyValue]
) -> dict[str, str]:
    out: dict[str, str] = {}
    missing: list[str] = []
    for var in config.variables:
        if var.env:
            value = ctx.environment.get(var.env)
            if value is None or value == "":
                missing.append(f"{var.env} ({var.resource}, argument {var.argument})")
            else:
                out[var.name] = value
        else:
            known = values.get((var.secret, var.key))
            if known is None or known.value is None:
                raise TofuError(
                    f"{ctx.stack_path}: {var.resource}: the value of {var.argument} "
                    f"({var.secret} key {var.key}) is not known to this run"
                )
            out[var.name] = known.value
    if missing:
        raise TofuError(
            f"{ctx.stack_path}: the provider credentials come from the environment and "
            f"these variables are not set: {', '.join(missing)}; nothing was changed",
            hint="set them in the apply environment (the workflow's secrets); stack.yaml "
            "`terraform.providers.<config>.environment` names them",
        )
    return out


def tofu_plan(
    ctx: StackTofu,
    spec: Spec | None,
    *,
    values: Mapping[tuple[str, str], WriteOnlyValue],
    state: Mapping[str, Any] | None,
    members: Sequence[str] = (),
    lock: bool,
    destroy: bool = False,
    secrets: set[str] | None = None,
    show: bool = True,
) -> PlannedStack:
    """Plan the stack's Terraform resources (``destroy``: all of them destroyed).

    Its machine-readable messages are kept (``actions``). ``show``: the plan is read back
    (``tofu show -json``, which starts the provider again) unless it changes nothing and
    OpenTofu saw nothing changed outside it (no ``resource_drift``): then every resource
    is unchanged and its values are the state's. ``show=False``: never read back
    (:func:`plan_from_actions`, :func:`show_plan`).

    ``values``: (Secret id, key) -> a write-only argument's value; ``state``: the
    current state (decoded from the backend's Secret; None: none yet); ``members``:
    the Terraform ids of the stack's inventory (to adopt what the state lacks).
    """
    resources = [] if spec is None else terraform_resources(spec)
    if destroy:
        resources_in_config: list[TerraformResource] = []
    else:
        resources_in_config = resources
    versions = {
        (r.id, w.attribute): values.get((w.secret, w.key), WriteOnlyValue(None, None)).version
        for r in resources_in_config
        for w in r.write_only
    }
    imports = adoptions(resources_in_config, state, members)
    workdir = Workdir(
        ctx.settings,
        ctx.workdir,
        what=ctx.stack_path,
        cluster=ctx.cluster,
        secrets=secrets,
        scope=ctx.scope,
    )
    providers = state_providers(state)
    plan_file = f"{PLAN_PREFIX}{os.getpid()}{PLAN_SUFFIX}"
    remove([ctx.workdir / plan_file, *_orphaned_plans(ctx.workdir)], scope=workdir.scope)
    for _attempt in range(2):
        config = configuration(
            resources_in_config,
            ctx.terraform,
            ctx.backend,
            versions=versions,
            imports=imports,
            state_providers=providers,
        )
        variables = _variables(ctx, config, values)
        # scrub credentials and write-only values from tofu's output (not a host, a
        # port or a user name: those are not secret, and "postgres" is in every address)
        workdir.secrets |= {
            variables[v.name]
            for v in config.variables
            if v.name in variables
            and len(variables[v.name]) >= 4
            and (v.secret or _CREDENTIAL.search(v.argument))
        }
        workdir.write_config(config.document, CONFIG_FILE)
        workdir.init(config.document["terraform"])
        stream = f"{plan_file}.jsonl"
        try:
            code = workdir.plan(plan_file, variables, lock=lock, destroy=destroy, json_into=stream)
        except ImportMissing as exc:
            gone = set(exc.addresses)
            dropped = {rid for rid in imports if _address(rid) in gone} or set(imports)
            imports = {rid: i for rid, i in imports.items() if rid not in dropped}
            continue
        except BaseException:
            remove([workdir.path / stream], scope=workdir.scope)
            raise
        break
    else:  # pragma: no cover - the second plan has no imports left to fail
        raise TofuError(f"{ctx.stack_path}: tofu plan failed twice on imports")
    ids = {r.address.address: r.id for r in resources}
    planned = PlannedStack(
        resources,
        plans.TerraformPlan((), {}, code == 2),
        plan_file,
        workdir,
        variables,
        ids,
        imports,
        destroy=destroy,
    )
    planned.actions = _read_actions(workdir, stream)
    if not show:
        return planned
    unchanged = None if code or planned.actions.drifted else plan_from_actions(planned)
    if unchanged is None:
        return show_plan(planned)
    # Nothing to change and nothing changed outside OpenTofu: the refreshed state is the
    # recorded one, so its values are the plan's (what references resolve to).
    by_address = plans.state_values(state or {})
    recorded_values = {rid: by_address[a] for a, rid in ids.items() if a in by_address}
    return replace(unchanged, plan=replace(unchanged.plan, values=recorded_values))


def adoptions(
    resources: Sequence[TerraformResource],
    state: Mapping[str, Any] | None,
    members: Sequence[str],
) -> dict[str, str]:
    """Resource id -> import id of the resources to adopt: those with an import id that
    the intent record ``members`` lists (an interrupted apply created them) and the
    ``state`` does not record."""
    from konfig.tofu.state import state_addresses

    recorded = state_addresses(state)
    return {
        r.id: r.import_id
        for r in resources
        if r.import_id and r.id in set(members) and r.address.address not in recorded
    }


def show_plan(planned: PlannedStack) -> PlannedStack:
    """The saved plan read back (``tofu show -json``) and translated into changes."""
    workdir = planned.workdir
    shown = workdir.show(planned.plan_file)
    in_config = [] if planned.destroy else planned.resources
    write_only = {r.id: tuple(w.attribute for w in r.write_only) for r in in_config}
    versioned = {r.id: tuple(w.version for w in r.write_only if w.version) for r in in_config}
    translated = plans.translate(
        shown,
        planned.ids,
        write_only=write_only,
        versions=versioned,
        secrets=workdir.secrets,
    )
    return replace(planned, plan=translated)


def plan_from_actions(planned: PlannedStack) -> PlannedStack | None:
    """A plan of ``tofu_plan(show=False)`` translated from its messages alone
    (:func:`konfig.tofu.plans.from_actions`: actions, no field changes) when it creates,
    updates or leaves alone and destroys, replaces, forgets, moves and adopts nothing;
    None otherwise: :func:`show_plan` reads it back."""
    actions = planned.actions
    if actions is None or planned.destroy or not actions.additive:
        return None
    if (actions.summary or {}).get("import", 1):
        return None
    try:
        translated = plans.from_actions(actions.actions, planned.ids)
    except ValueError:
        return None
    return replace(planned, plan=translated)


def _read_actions(workdir: Workdir, stream: str) -> PlannedActions:
    """The ``planned_change`` actions, the ``change_summary`` and the ``resource_drift``
    addresses of a plan's messages (the file is removed once read)."""
    path = workdir.path / stream
    actions: dict[str, str] = {}
    summary: dict[str, int] | None = None
    drifted: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    finally:
        remove([path], scope=workdir.scope)
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if message.get("type") == "planned_change":
            change = message.get("change") or {}
            address = str((change.get("resource") or {}).get("addr", ""))
            actions[address] = str(change.get("action", ""))
        elif message.get("type") == "change_summary":
            counts = message.get("changes") or {}
            summary = {str(k): int(v) for k, v in counts.items() if isinstance(v, int)}
        elif message.get("type") == "resource_drift":
            change = message.get("change") or {}
            drifted.append(str((change.get("resource") or {}).get("addr", "")))
    return PlannedActions(actions, summary, tuple(drifted))


def _orphaned_plans(path: Path) -> list[Path]:
    """Plan files, and their message files, of konfig processes that are gone (killed
    between plan and apply)."""
    out: list[Path] = []
    for found in path.glob(f"{PLAN_PREFIX}*{PLAN_SUFFIX}*") if path.is_dir() else ():
        pid, _, rest = found.name[len(PLAN_PREFIX) :].partition(PLAN_SUFFIX)
        if not pid.isdigit() or rest not in ("", ".jsonl"):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            out.append(found)
        except OSError:
            pass  # another user's process: alive
    return out


def _address(rid: str) -> str:
    _, type_, name = rid.split(":", 2)
    return f"{type_}.{name}"


@dataclass(frozen=True)
class TofuOutcome:
    """What applying one stack's Terraform plan did."""

    ok: bool
    output: str  # tofu's output, scrubbed
    errors: dict[str, str]  # address -> the error OpenTofu reported for it
    error: str = ""  # the whole run's error ("" when ok)


def tofu_apply(planned: PlannedStack, *, keep_plan: bool = False) -> TofuOutcome:
    """``tofu apply`` of the saved plan; the plan file is removed afterwards (unless
    ``keep_plan``: the caller still reads it and removes it)."""
    workdir = planned.workdir
    try:
        run = workdir.apply(planned.plan_file, planned.variables)
    finally:
        if not keep_plan:
            remove([workdir.path / planned.plan_file], scope=workdir.scope)
    if run.code == 0:
        return TofuOutcome(True, run.output, {})
    failure = workdir.failure(run, "apply")
    return TofuOutcome(False, run.output, _errors_by_address(run), str(failure))


def _errors_by_address(run: Run) -> dict[str, str]:
    """``Error: ...`` diagnostics attributed to the resource their ``with`` line names."""
    out: dict[str, str] = {}
    lines = run.output.splitlines()
    for index, line in enumerate(lines):
        body = line.strip().lstrip("│").strip()
        if not body.startswith("Error: "):
            continue
        for nxt in lines[index + 1 : index + 12]:
            match = re.match(r"^[│\s]*with ([A-Za-z0-9_]+\.[A-Za-z0-9_-]+),", nxt)
            if match:
                out.setdefault(match.group(1), body[len("Error: ") :])
                break
    return out
