"""The pull-request report built from the JSON of every stage.

Inputs are what the stages print: ``konfig changed --json``, ``konfig compile
--json``, ``konfig test --json``, ``konfig check --format json`` and ``konfig preview
--format json`` (``docs/preview-json.md``). Any of them may be missing (a fork PR has
no preview; a failed job leaves no artifact): the report says what it lacks.

:func:`build` turns the inputs into a :class:`~konfig.report.records.Report` (plain
data, defined in :mod:`konfig.report.records`), which :mod:`konfig.report.comment`
renders (the markdown comment, the job summary, the JSON).

Secret values: the preview masks them; this module masks again every value under a
Secret's ``data``/``stringData`` in diffs (:func:`konfig.masking.mask_secret_diff`), so
a report can never carry one even from a faulty input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from konfig.engine.plan import ACTIONS
from konfig.errors import UsageError
from konfig.masking import mask_field, mask_secret_diff
from konfig.pipeline.reviewed import reviewed_of_previews
from konfig.repo.settings import DEFAULT_PRODUCTION_STACKS, is_production
from konfig.report.grouping import Field
from konfig.report.inputs import Document, ReportInputError, validated
from konfig.report.modes import Origin
from konfig.report.previews import proposed_rule_text
from konfig.report.records import (
    ChangeItem,
    DangerItem,
    Failure,
    IgnoredItem,
    Mode,
    ProposedRuleItem,
    PullItem,
    Report,
    StackReport,
)


@dataclass(frozen=True)
class Inputs:
    """The JSON documents (parsed, or :class:`Document` with their file); every one
    optional, previews may come in parts. Each must match its command's contract."""

    previews: Sequence[Document | Mapping[str, Any]] = ()
    changed: Document | Mapping[str, Any] | None = None
    compile: Sequence[Document | Sequence[Any]] = ()  # each: konfig compile --json
    tests: Sequence[Document | Mapping[str, Any]] = ()
    checks: Sequence[Document | Sequence[Any]] = ()
    missing: Sequence[str] = ()


# -- building ---------------------------------------------------------------------


def build(
    inputs: Inputs,
    *,
    sha: str,
    run_url: str | None = None,
    production: tuple[str, ...] = DEFAULT_PRODUCTION_STACKS,
    pr: int | None = None,
    origin: Origin | None = None,
    live_follows: bool = False,
    run_id: str | None = None,
) -> Report:
    """Merge the stage outputs into one :class:`Report` (pure; raises ReportInputError
    when a document does not match its contract).

    A stack is production-like as ``konfig changed --json`` says; a stack it does not
    describe (or an older change set) by the ``production`` path patterns.
    """
    stacks: dict[str, dict[str, Any]] = {}

    def entry(path: str) -> dict[str, Any]:
        return stacks.setdefault(
            path,
            {"path": path, "reasons": [], "deleted": False, "failures": []},
        )

    others: list[Failure] = []
    if inputs.changed is not None:
        _read_changed(validated("changed", inputs.changed), entry)
    for listed in inputs.compile:
        _read_compile(validated("compile", listed), entry)
    for doc in inputs.tests:
        _read_test(validated("test", doc), entry, others)
    for findings in inputs.checks:
        _read_check(validated("check", findings), entry, others)
    previews = [validated("preview", preview) for preview in inputs.previews]
    modes: set[Mode] = set()
    for doc in previews:
        mode = _mode(doc)
        if mode is not None:
            modes.add(mode)
        _read_preview(doc, entry)
    if len(modes) > 1:
        shown = ", ".join(sorted(f"{m.name} {str(m.base or '')[:12]}".strip() for m in modes))
        raise ReportInputError(
            f"previews of different modes or commits ({shown}): one report shows one mode "
            "of one merge"
        )
    try:
        # what reviewers saw against the clusters: an offline render diff is no such record
        live = [doc for doc in previews if (_mode(doc) or Mode("live")).name == "live"]
        reviewed = reviewed_of_previews(live, pr=pr)
    except UsageError as exc:
        raise ReportInputError(str(exc)) from None
    proposed: dict[tuple[str, str, str], list[str]] = {}
    declared: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for doc in previews:
        for rule in doc.get("ignoreRulesProposed") or []:
            key = (str(rule["source"]), str(rule["change"]), proposed_rule_text(rule))
            declared.setdefault(key, rule)
            listed = proposed.setdefault(key, [])
            listed += [str(p) for p in rule["stacks"] if str(p) not in listed]
    reused: dict[str, int] = {}
    for doc in live:
        for item in doc["stacks"]:
            if item.get("reusedFrom"):
                reused[str(item["reusedFrom"])] = reused.get(str(item["reusedFrom"]), 0) + 1

    # A failure in a file inside a stack (e.g. a unit test there) belongs to its row.
    rest = []
    for failure in others:
        owner = _owner(failure.file, stacks)
        if owner is None:
            rest.append(failure)
        else:
            stacks[owner]["failures"].append(failure)

    reports = []
    for path in sorted(stacks):
        data = stacks[path]
        failures = _dedupe(data["failures"])
        if any(f.stage == "compile" for f in failures):
            # The preview of a stack that does not compile repeats the compile error.
            failures = tuple(
                f
                for f in failures
                if not (f.stage == "preview" and f.message.startswith("compile failed"))
            )
        reports.append(
            StackReport(
                path=path,
                reasons=tuple(data["reasons"]),
                deleted=bool(data["deleted"]),
                previewed="counts" in data,
                counts=data.get("counts", dict.fromkeys(ACTIONS, 0)),
                changes=tuple(data.get("changes", ())),
                failures=failures,
                production=is_production(path, data.get("production"), production),
                not_previewed=tuple(data.get("not_previewed", ())),
                ignored=tuple(data.get("ignored", ())),
                digest=reviewed.stacks[path].digest if path in reviewed.stacks else None,
                cluster_differs=(
                    reviewed.stacks[path].cluster_differs if path in reviewed.stacks else ()
                ),
                pull=data.get("pull"),
            )
        )
    return Report(
        sha=sha,
        run_url=run_url,
        stacks=tuple(reports),
        other_failures=_dedupe(rest),
        missing=tuple(inputs.missing),
        previewed=bool(inputs.previews),
        reviewed=reviewed,
        mode=next(iter(modes)) if modes else None,
        origin=origin,
        live_follows=live_follows,
        reused=tuple(sorted(reused.items())),
        run_id=run_id if live else None,
        proposed_rules=tuple(
            ProposedRuleItem(
                change,
                source,
                text,
                tuple(sorted(stacks)),
                reason=str(declared[source, change, text].get("reason") or ""),
                selector=dict(declared[source, change, text].get("selector") or {}),
                paths=tuple(map(str, declared[source, change, text].get("paths") or ())),
                managers=tuple(map(str, declared[source, change, text].get("managers") or ())),
            )
            for (source, change, text), stacks in sorted(proposed.items())
        ),
    )


def _mode(doc: Mapping[str, Any]) -> Mode | None:
    """A preview document's mode; None for one written before Konfig had modes (live,
    but the comment does not claim what the document does not say)."""
    raw = doc.get("mode")
    if raw is None:
        return None
    if raw["name"] == "offline":
        return Mode("offline", str(raw["base"]), str(raw["merge"]))
    return Mode("live")


def _owner(file: str | None, stacks: Mapping[str, Any]) -> str | None:
    if not file:
        return None
    candidates = [p for p in stacks if PurePosixPath(file).is_relative_to(p)]
    return max(candidates, key=len) if candidates else None


def _dedupe(failures: Iterable[Failure]) -> tuple[Failure, ...]:
    seen: dict[tuple[str, str, str | None, int | None], Failure] = {}
    for f in failures:
        seen.setdefault((f.stage, f.message, f.file, f.line), f)
    return tuple(seen.values())


def _read_changed(doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        if "production" in item:
            e["production"] = item["production"]
        for reason in item["reasons"]:
            if reason not in e["reasons"]:
                e["reasons"].append(reason)
    for path in doc["deleted_stacks"]:
        e = entry(path)
        e["deleted"] = True
        if "stack deleted" not in e["reasons"]:
            e["reasons"].append("stack deleted")


def _compile_failure(err: Mapping[str, Any]) -> Failure:
    """A compile error as ``konfig compile --json`` and ``konfig test --json`` write it."""
    return Failure("compile", err["message"] or "compile failed", err["file"] or None, err["line"])


def _read_compile(doc: Sequence[Mapping[str, Any]], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc:
        e = entry(item["path"])
        if item["error"] is not None:
            e["failures"].append(_compile_failure(item["error"]))


# `konfig test --json` statuses that are not failures
_TEST_OK = ("passed", "created", "updated", "unchanged")


def _read_test(
    doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]], others: list[Failure]
) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        status = item["status"]
        if status == "compile-error" and "error" in item:
            e["failures"].append(_compile_failure(item["error"]))
        elif status not in _TEST_OK:
            detail = "".join(d["diff"] for d in item.get("diffs", ()))
            e["failures"].append(
                Failure(
                    "test",
                    item.get("message") or f"golden test {status}",
                    item.get("golden") or None,
                    item.get("line"),
                    detail=detail,
                )
            )
    for unit in doc["unitTests"]:
        if unit["passed"]:
            continue
        message = f"{unit['package']}: {unit['name']}: {unit.get('message', '')}".strip(": ")
        others.append(Failure("test", message, unit.get("file") or None, unit.get("line")))


def _read_check(
    doc: Sequence[Mapping[str, Any]], entry: Callable[[str], dict[str, Any]], others: list[Failure]
) -> None:
    for item in doc:
        if item["severity"] != "error":
            continue
        failure = Failure(
            "check",
            item["message"] or "check failed",
            item["file"] or None,
            item["line"],
            rule=item["rule"] or None,
        )
        if item.get("stack"):
            entry(item["stack"])["failures"].append(failure)
        else:
            others.append(failure)


def _read_preview(doc: Mapping[str, Any], entry: Callable[[str], dict[str, Any]]) -> None:
    for item in doc["stacks"]:
        e = entry(item["path"])
        e["deleted"] = e["deleted"] or item["deleted"]
        if item["status"] == "error":  # a failed stack has no counts to show
            err = item["error"] or {}
            e["failures"].append(
                Failure(
                    "preview",
                    err.get("message") or "preview failed",
                    err.get("file") or None,
                    err.get("line"),
                )
            )
        else:
            # "conflict" is absent from a preview written before Konfig knew conflicts
            e["counts"] = {a: item["counts"].get(a, 0) for a in ACTIONS}
        changes = [
            ChangeItem(
                id=c["id"],
                kind=c["kind"],
                namespace=c["namespace"] or None,
                name=c["name"],
                action=c["action"],
                reason=c["reason"] + (f" ⛔ REFUSED: {c['refused']}" if c.get("refused") else ""),
                validated=c["validated"],
                diff=mask_secret_diff(c["diff"]) if c["kind"] == "Secret" else c["diff"],
                api_version=c.get("apiVersion", ""),
                fields=_fields(c.get("apiVersion", ""), c["kind"], c["fields"]),
                owner=c.get("owner") or None,
                dangers=tuple(DangerItem(d["class"], d["reason"]) for d in c.get("dangers") or []),
                rename=_rename_text(c.get("rename")),
            )
            for c in item["changes"]
            if c["action"] != "unchanged"
        ]
        e["changes"] = sorted(changes, key=lambda c: c.id)
        e["ignored"] = [
            IgnoredItem(
                f"{c['kind']} " + (f"{c['namespace']}/" if c["namespace"] else "") + c["name"],
                f["path"],
                *mask_field(
                    c.get("apiVersion", ""),
                    c["kind"],
                    f["path"].lstrip("/").replace("/", "."),
                    f.get("live"),
                    f.get("declared"),
                ),
                f["rule"],
                f["reason"],
                f["applied"],
            )
            for c in sorted(item["changes"], key=lambda c: c["id"])
            for f in c.get("ignored") or []
        ]
        e["not_previewed"] = [(n["id"], n["reason"]) for n in item.get("notPreviewed") or []]
        pull = item.get("pull")
        if pull:
            e["pull"] = PullItem(
                pull["branch"],
                pull["folder"],
                pull["digest"],
                pull["diff"],
                pull.get("controller"),
                tuple(f"{r['message']} [{r['rule']}]" for r in pull["refused"]),
            )


def _fields(api_version: str, kind: str, raw: Sequence[Mapping[str, Any]]) -> tuple[Field, ...]:
    out = []
    for f in raw:
        before, after = mask_field(api_version, kind, f["path"], f["before"], f["after"])
        out.append(Field(f["path"], before, after, bool(f.get("drift"))))
    return tuple(out)


def _rename_text(rename: Any) -> str:
    if not isinstance(rename, Mapping):
        return ""
    old = str(rename.get("from", "")).rsplit(":", 1)[-1]
    new = str(rename.get("to", "")).rsplit(":", 1)[-1]
    return f"rename {old} → {new}"
