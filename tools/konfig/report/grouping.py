"""Grouping identical changes across stacks: one entry per distinct change.

When a base model changes, the same field change lands in hundreds of stacks. This
module turns the per-stack changes of a preview into *groups*: each distinct change
once, with the stacks (and objects) it occurs in, and marks what does not fit.

Normalisation (:mod:`konfig.report.placeholders`): the object's namespace, the project
and the stack name become placeholders, so the same change in two stacks reads the same.

What a distinct change is, per object class (action, apiVersion, kind, normalised
name):

* ``update`` / ``replace``: each changed field (path, before → after) is a line; the
  lines that occur in exactly the same objects form one group (two fields changed
  together in 300 Deployments are one group of two lines);
* ``create``: the created objects whose normalised content is equal form one group;
* ``delete``: all deletes of the class form one group (what is deleted needs no
  field-by-field comparison).

Roles, per object class, from the biggest group down:

* ``variant``: a group that changes a field a bigger shared group changes too, but to
  or from another value (an override in some stacks): it *differs* from that group;
* ``few``: any other change in only a few stacks (one, or at most :data:`FEW` and at
  most a tenth of the changed stacks): an object created, deleted or changed only there;
* ``shared``: every other group;
* ``varied``: groups that change the same fields, more than ``max_variants`` of them
  and none in half of their stacks (the values are genuinely per stack), become one
  group whose fields tell how many different values there are.

A ``few`` group, and a variant in only a few stacks, is *exceptional*: the
*exceptions* are the stacks that need a look of their own, the failed stacks and the
stacks of every exceptional group. Shared, varied and bigger variant groups are the
*changes across stacks*.

Pure functions on plain data: no printing, no environment, no I/O. Inputs must be
masked already (the report's masking module does that when it reads the preview).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from konfig.report.placeholders import (
    MARKER,
    PLACEHOLDERS,
    Literals,
    Normaliser,
    display,
    display_value,
    freeze,
    thaw,
    usable,
)

CHANGING = ("create", "update", "replace", "delete")
# Review order of actions: what removes things first, additions last.
ACTION_RANK = {"delete": 0, "replace": 1, "update": 2, "create": 3}
MAX_VARIANTS = 5
Role = Literal["shared", "variant", "few", "varied"]
FEW = 3  # at most this many stacks (and a tenth of the changed ones): an exception

# -- inputs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One changed leaf field: ``before``/``after`` are ``None`` when absent."""

    path: str
    before: Any
    after: Any
    # the live value is someone else's change since Konfig's last apply: "the cluster
    # already differs", kept apart from "this PR changes" (a group of its own)
    drift: bool = False


@dataclass(frozen=True)
class ObjectChange:
    """One object's change in one stack (masked), as the preview reports it."""

    api_version: str
    kind: str
    namespace: str | None
    name: str
    action: str
    fields: tuple[Field, ...] = ()
    diff: str = ""

    @property
    def id(self) -> str:
        ns = f"{self.namespace}:" if self.namespace else ""
        return f"{self.api_version}:{self.kind}:{ns}{self.name}"


@dataclass(frozen=True)
class FailureNote:
    """Why a stack failed (compile error, failed test or check, preview error)."""

    stage: str
    message: str
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class StackChanges:
    """What one stack changes; ``failed`` when a stage failed for it (``failures``: why)."""

    path: str
    changes: tuple[ObjectChange, ...] = ()
    production: bool = False
    failed: bool = False
    failures: tuple[FailureNote, ...] = ()

    @property
    def project(self) -> str:
        parts = self.path.split("/", 2)
        return parts[1] if len(parts) > 1 else ""

    @property
    def stack(self) -> str:
        parts = self.path.split("/", 2)
        return parts[2] if len(parts) > 2 else ""


# -- outputs --------------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    """One object of one stack that a group covers."""

    stack: str
    id: str
    tokens: tuple[tuple[str, str], ...]  # placeholder -> this object's value
    diff: str = ""


@dataclass(frozen=True)
class VariedField:
    """A field whose values differ from stack to stack (a ``varied`` group)."""

    path: str
    befores: tuple[Any, ...]  # the distinct values, at most a few (see ``before_count``)
    before_count: int
    afters: tuple[Any, ...]
    after_count: int


@dataclass(frozen=True)
class Group:
    """One distinct change and where it occurs.

    ``name``, ``fields[].path`` and string values are templates: a placeholder that
    has the same value in every occurrence is written out, the others stay as
    ``{namespace}``, ``{project}`` or ``{stack}`` (listed in ``placeholders``).
    """

    id: str
    role: Role
    action: str
    api_version: str
    kind: str
    name: str
    fields: tuple[Field, ...]
    occurrences: tuple[Occurrence, ...]
    stacks: tuple[str, ...]  # sorted by path
    production: tuple[str, ...]  # the production-like ones among ``stacks``
    placeholders: tuple[str, ...] = ()
    varies: tuple[VariedField, ...] = ()
    variant_of: str | None = None
    field_objects: tuple[int, ...] = ()  # per field, when the fields' object counts differ
    reference: tuple[Field | None, ...] = ()  # variants: per field, the same field's change
    exceptional: bool = False  # shown as an exception of its stacks, not as a change
    # in the group this one is a variant of (None: that group does not change it)

    @property
    def objects(self) -> int:
        return len(self.occurrences)

    @property
    def sample(self) -> Occurrence:
        """The occurrence to show a diff of: a production one first."""
        prod = set(self.production)
        return min(self.occurrences, key=lambda o: (o.stack not in prod, o.stack, o.id))


@dataclass(frozen=True)
class StackException:
    """A stack that needs a look of its own: it failed, or its change differs."""

    stack: str
    production: bool
    failed: bool
    groups: tuple[str, ...]  # ids of its exceptional groups


@dataclass(frozen=True)
class FailureGroup:
    """Stacks that fail the same way (the same stage, file, line and first line of the
    message, once their project and stack names are placeholders): one base-model
    error breaks every stack that uses it."""

    id: str
    failures: tuple[FailureNote, ...]  # templates, as Group's; the first stack's wording
    stacks: tuple[str, ...]
    production: tuple[str, ...]
    placeholders: tuple[str, ...]

    @property
    def sample(self) -> str:
        """The stack whose full messages to show: a production one first."""
        return (self.production or self.stacks)[0]


@dataclass(frozen=True)
class Grouping:
    groups: tuple[Group, ...]  # in review order (see :func:`review_key`)
    exceptions: tuple[StackException, ...]  # in review order, without failure_groups' stacks
    changed: tuple[str, ...]  # stacks with at least one change, sorted
    failed: tuple[str, ...]
    unchanged: tuple[str, ...]  # planned, nothing to change
    production: frozenset[str] = field(default_factory=frozenset)
    failure_groups: tuple[FailureGroup, ...] = ()  # biggest first

    def group(self, group_id: str) -> Group:
        for g in self.groups:
            if g.id == group_id:
                return g
        raise KeyError(group_id)

    @property
    def shared(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if not g.exceptional)


# -- normalisation --------------------------------------------------------------


def tokens_of(stack: StackChanges, change: ObjectChange) -> dict[str, str]:
    """The stack-specific values of one object change, by placeholder name."""
    values = {"namespace": change.namespace or "", "project": stack.project, "stack": stack.stack}
    return {k: v for k, v in values.items() if usable(v)}


_DIFF_HEADER = re.compile(r"^(---|\+\+\+|@@)")


# -- grouping -------------------------------------------------------------------

_ClassKey = tuple[str, str, str, str]  # action, apiVersion, kind, normalised name


@dataclass
class _Item:
    """One object change, normalised."""

    occurrence: Occurrence
    lines: tuple[Field, ...]  # normalised, values frozen
    originals: dict[tuple[str, int], Any]  # (path, 0 before / 1 after) -> unfrozen value
    body: str  # normalised diff body, for changes that carry no field list


@dataclass
class _Entry:
    cls: _ClassKey
    lines: tuple[Field, ...]
    items: list[_Item]
    key: tuple[Any, ...]
    role: Role = "few"
    exceptional: bool = False
    head: _Entry | None = None  # the entry this one is a variant of
    objects: tuple[int, ...] = ()  # per line, how many objects have it (merged entries)

    @property
    def stacks(self) -> set[str]:
        return {i.occurrence.stack for i in self.items}

    @property
    def paths(self) -> dict[str, Field]:
        return {line.path: line for line in self.lines}


def _normalise(stacks: Sequence[StackChanges]) -> dict[_ClassKey, list[_Item]]:
    work = []
    literals = Literals()
    for s in stacks:
        for c in s.changes:
            if c.action not in CHANGING:
                continue
            tokens = tokens_of(s, c)
            kind = (c.action, c.api_version, c.kind)
            literals.add(("name", *kind, c.name), tokens)
            fields = c.fields if c.action != "delete" else ()
            for f in fields:
                literals.add(("path", *kind, f.path), tokens)
                for side, v in ((0, f.before), (1, f.after)):
                    if isinstance(v, str):
                        literals.add(("value", *kind, f.path, side, v), tokens)
            work.append((s, c, tokens, kind, fields))

    classes: dict[_ClassKey, list[_Item]] = {}
    for s, c, tokens, kind, fields in work:
        norm = Normaliser(tokens)
        cls = (*kind, norm.text(c.name, literals.skip(("name", *kind, c.name))))
        originals: dict[tuple[str, int], Any] = {}
        lines = []
        for f in fields:
            path = norm.text(f.path, literals.skip(("path", *kind, f.path)))
            sides = []
            for side, v in ((0, f.before), (1, f.after)):
                if isinstance(v, str):
                    v = norm.text(v, literals.skip(("value", *kind, f.path, side, v)))
                sides.append(freeze(v))
            lines.append(Field(path, sides[0], sides[1], f.drift))
            originals[(path, 0)] = f.before
            originals[(path, 1)] = f.after
        occurrence = Occurrence(s.path, c.id, tuple(sorted(tokens.items())), c.diff)
        body = ""
        if not lines and c.action != "delete":
            body = "".join(
                norm.text(line)
                for line in c.diff.splitlines(keepends=True)
                if not _DIFF_HEADER.match(line)
            )
        classes.setdefault(cls, []).append(_Item(occurrence, tuple(lines), originals, body))
    return classes


def group_changes(stacks: Iterable[StackChanges], *, max_variants: int = MAX_VARIANTS) -> Grouping:
    """Group the changes of ``stacks`` (see the module docstring)."""
    stacks = list(stacks)
    production = frozenset(s.path for s in stacks if s.production)
    failed = sorted(s.path for s in stacks if s.failed)

    entries: list[_Entry] = []
    for cls, items in _normalise(stacks).items():
        found = _entries(cls, items)
        families: dict[tuple[Any, ...], list[_Entry]] = {}
        for entry in found:
            families.setdefault(_family(entry), []).append(entry)
        for family in families.values():
            entries.extend(_collapse(family, max_variants))
    changed_count = len({s.path for s in stacks if any(c.action in CHANGING for c in s.changes)})
    _assign_roles(entries, changed_count)
    exceptional = {s for e in entries if e.exceptional for s in e.stacks}
    entries = _merge(entries, exceptional | set(failed))

    groups = [_group(e, production) for e in entries]
    ordered = sorted(groups, key=review_key)

    changed = sorted({s.path for s in stacks if any(c.action in CHANGING for c in s.changes)})
    changed_set, failed_set = set(changed), set(failed)
    unchanged = sorted(
        s.path for s in stacks if s.path not in failed_set and s.path not in changed_set
    )
    per_stack: dict[str, list[str]] = {}
    for g in ordered:
        if g.exceptional:
            for path in g.stacks:
                per_stack.setdefault(path, []).append(g.id)
    only_failed = [s for s in stacks if s.failed and s.path not in per_stack]
    failure_groups = _failure_groups(only_failed, production)
    grouped_failures = {p for fg in failure_groups for p in fg.stacks}
    for path in failed:
        if path not in grouped_failures:
            per_stack.setdefault(path, [])
    by_id = {g.id: g for g in ordered}
    exceptions = [
        StackException(path, path in production, path in failed_set, tuple(ids))
        for path, ids in per_stack.items()
    ]
    exceptions.sort(key=lambda e: _exception_key(e, by_id))
    return Grouping(
        groups=tuple(ordered),
        exceptions=tuple(exceptions),
        changed=tuple(changed),
        failed=tuple(failed),
        unchanged=tuple(unchanged),
        production=production,
        failure_groups=failure_groups,
    )


def _failure_groups(
    stacks: Sequence[StackChanges], production: frozenset[str]
) -> tuple[FailureGroup, ...]:
    """Failed stacks (with no other exception) that fail the same way, two or more."""
    by_key: dict[tuple[Any, ...], list[tuple[StackChanges, dict[str, str]]]] = {}
    for s in stacks:
        if not s.failures:
            continue
        tokens = {k: v for k, v in (("project", s.project), ("stack", s.stack)) if usable(v)}
        norm = Normaliser(tokens)
        key = tuple(
            (
                f.stage,
                norm.text(f.file) if f.file else None,
                f.line,
                norm.text(f.message.splitlines()[0] if f.message else ""),
            )
            for f in s.failures
        )
        by_key.setdefault(key, []).append((s, tokens))
    out = []
    for key, members in by_key.items():
        if len(members) < 2:
            continue
        paths = tuple(sorted(s.path for s, _ in members))
        seen: dict[str, set[str]] = {}
        for _, tokens in members:
            for name, value in tokens.items():
                seen.setdefault(name, set()).add(value)
        uniform = {n: next(iter(v)) for n, v in seen.items() if len(v) == 1}
        texts = [t for item in key for t in (item[1] or "", item[3])]
        left = {m for t in texts for m in MARKER.findall(t)} - set(uniform)
        out.append(
            FailureGroup(
                id=_digest(("failure", key)),
                failures=tuple(
                    FailureNote(
                        stage,
                        display(msg, uniform),
                        display(file, uniform) if file else None,
                        line,
                    )
                    for stage, file, line, msg in key
                ),
                stacks=paths,
                production=tuple(p for p in paths if p in production),
                placeholders=tuple(p for p in PLACEHOLDERS if p in left),
            )
        )
    out.sort(key=lambda g: (0 if g.production else 1, -len(g.stacks), g.id))
    return tuple(out)


def _entries(cls: _ClassKey, items: list[_Item]) -> list[_Entry]:
    action = cls[0]
    if action == "delete":
        return [_Entry(cls, (), items, (cls,))]
    if action == "create":
        by_content: dict[tuple[Any, ...], list[_Item]] = {}
        for item in items:
            by_content.setdefault((item.lines, item.body), []).append(item)
        return [_Entry(cls, k[0], v, (cls, *k)) for k, v in by_content.items()]
    # update / replace: the lines that occur in exactly the same objects go together.
    where: dict[Field, list[_Item]] = {}
    bodies: dict[str, list[_Item]] = {}
    for item in items:
        if not item.lines:  # no field list (an older producer): compare the diffs
            bodies.setdefault(item.body, []).append(item)
        for line in item.lines:
            where.setdefault(line, []).append(item)
    together: dict[tuple[int, ...], tuple[list[Field], list[_Item]]] = {}
    for line, holders in where.items():
        key = tuple(sorted(id(h) for h in holders))
        together.setdefault(key, ([], holders))[0].append(line)
    out = [
        _Entry(cls, tuple(lines), holders, (cls, *lines)) for lines, holders in together.values()
    ]
    out.extend(_Entry(cls, (), v, (cls, "diff", b)) for b, v in bodies.items())
    return out


def _family(entry: _Entry) -> tuple[Any, ...]:
    """Entries that are alternatives of one another: the same fields changed."""
    if entry.cls[0] in ("update", "replace"):
        return (tuple(line.path for line in entry.lines), bool(entry.lines))
    return ()


def _digest(key: Any) -> str:
    return hashlib.sha1(repr(key).encode()).hexdigest()[:10]


def _size(entry: _Entry) -> tuple[int, int, str]:
    return (-len(entry.stacks), -len(entry.items), _digest(entry.key))


def _collapse(family: list[_Entry], max_variants: int) -> list[_Entry]:
    """A family of many alternatives none of which dominates: one ``varied`` entry."""
    family.sort(key=_size)
    total = set().union(*(e.stacks for e in family))
    if len(family) <= max_variants or 2 * len(family[0].stacks) >= len(total):
        return family
    cls = family[0].cls
    items = [i for e in family for i in e.items]
    lines = tuple(line for e in family for line in e.lines)
    return [
        _Entry(cls, lines, items, (cls, "varied", *(ln.path for ln in family[0].lines)), "varied")
    ]


def _assign_roles(entries: list[_Entry], changed: int) -> None:
    """Variant, few or shared (see the module docstring); ``varied`` entries stay."""
    by_class: dict[_ClassKey, list[_Entry]] = {}
    for e in entries:
        by_class.setdefault(e.cls, []).append(e)
    for same in by_class.values():
        same.sort(key=_size)
        for i, e in enumerate(same):
            n = len(e.stacks)
            few = n == 1 or (n <= FEW and n * 10 <= changed)
            if e.role == "varied":
                continue
            mine = e.paths
            head = next(
                (
                    bigger
                    for bigger in same[:i]
                    if bigger.role == "shared"
                    and len(bigger.stacks) > n
                    and _conflicts(e, mine, bigger)
                ),
                None,
            )
            if head is not None:
                e.role, e.head, e.exceptional = "variant", head, few
            else:
                e.role, e.exceptional = ("few", True) if few else ("shared", False)


def _conflicts(entry: _Entry, mine: Mapping[str, Field], bigger: _Entry) -> bool:
    """The same field, another value (two changes without a field list: their diffs)."""
    if not entry.lines and not bigger.lines:
        return entry.cls[0] in ("update", "replace")
    theirs = bigger.paths
    common = mine.keys() & theirs.keys()
    return any(mine[p] != theirs[p] for p in common)


def _merge(entries: list[_Entry], exceptional: set[str]) -> list[_Entry]:
    """Shared entries of one class that occur in the same stacks, but for the
    exceptions, are one change (fields changed together, one of them also elsewhere)."""
    out: list[_Entry] = []
    merged: dict[tuple[Any, ...], _Entry] = {}
    renamed: dict[int, _Entry] = {}
    for e in entries:
        if e.role != "shared" or e.cls[0] not in ("update", "replace") or not e.lines:
            out.append(e)
            continue
        core = frozenset(e.stacks - exceptional)
        key = (e.cls, core) if core else (e.cls, "alone", id(e))
        into = merged.get(key)
        counts = tuple(len(e.items) for _ in e.lines)
        if into is None:
            into = _Entry(e.cls, e.lines, list(e.items), e.key, role="shared", objects=counts)
            merged[key] = into
            out.append(into)
        else:
            seen = {id(i) for i in into.items}
            into.items.extend(i for i in e.items if id(i) not in seen)
            into.lines += e.lines
            into.objects += counts
            into.key = (*into.key, *e.lines)
        renamed[id(e)] = into
    for e in out:
        if e.head is not None:
            e.head = renamed.get(id(e.head), e.head)
    return out


def _group(entry: _Entry, production: frozenset[str]) -> Group:
    occurrences = tuple(sorted((i.occurrence for i in entry.items), key=lambda o: (o.stack, o.id)))
    uniform = _uniform(occurrences)
    action, api_version, kind, name = entry.cls
    stacks = tuple(sorted({o.stack for o in occurrences}))
    shown = [name]
    varies: tuple[VariedField, ...] = ()
    fields: tuple[Field, ...] = ()
    if entry.role == "varied":
        varies = _varies(entry, uniform)
        shown += [v.path for v in varies]
    else:
        fields = tuple(_display_field(line, entry, uniform) for line in entry.lines)
        shown += [line.path for line in entry.lines]
        shown += [v for ln in entry.lines for v in (ln.before, ln.after) if isinstance(v, str)]
    left = {m for text in shown for m in MARKER.findall(text)} - set(uniform)
    objects = entry.objects if entry.objects and len(set(entry.objects)) > 1 else ()
    reference: tuple[Field | None, ...] = ()
    if entry.head is not None:
        head = entry.head
        theirs = head.paths
        head_uniform = _uniform([i.occurrence for i in head.items])
        reference = tuple(
            _display_field(theirs[line.path], head, head_uniform) if line.path in theirs else None
            for line in entry.lines
        )
    return Group(
        id=_digest(entry.key),
        role=entry.role,
        action=action,
        api_version=api_version,
        kind=kind,
        name=display(name, uniform),
        fields=fields,
        occurrences=occurrences,
        stacks=stacks,
        production=tuple(s for s in stacks if s in production),
        placeholders=tuple(p for p in PLACEHOLDERS if p in left),
        varies=varies,
        variant_of=_digest(entry.head.key) if entry.head is not None else None,
        field_objects=objects,
        reference=reference,
        exceptional=entry.exceptional,
    )


def _display_field(line: Field, entry: _Entry, uniform: Mapping[str, str]) -> Field:
    originals: dict[tuple[str, int], Any] = {}
    for item in entry.items:
        if (line.path, 0) in item.originals:
            originals = item.originals
            break
    return Field(
        display(line.path, uniform),
        display_value(thaw(line.before, originals.get((line.path, 0))), uniform),
        display_value(thaw(line.after, originals.get((line.path, 1))), uniform),
        line.drift,
    )


def _varies(entry: _Entry, uniform: Mapping[str, str]) -> tuple[VariedField, ...]:
    values: dict[str, tuple[dict[Any, Any], dict[Any, Any]]] = {}
    for item in entry.items:
        for line in item.lines:
            before, after = values.setdefault(line.path, ({}, {}))
            before.setdefault(line.before, item.originals.get((line.path, 0)))
            after.setdefault(line.after, item.originals.get((line.path, 1)))
    return tuple(
        VariedField(
            display(path, uniform),
            tuple(display_value(thaw(k, v), uniform) for k, v in list(before.items())[:3]),
            len(before),
            tuple(display_value(thaw(k, v), uniform) for k, v in list(after.items())[:3]),
            len(after),
        )
        for path, (before, after) in values.items()
    )


def _uniform(occurrences: Sequence[Occurrence]) -> dict[str, str]:
    """Placeholders with the same value in every occurrence: those are written out."""
    seen: dict[str, set[str]] = {}
    for o in occurrences:
        for name, value in o.tokens:
            seen.setdefault(name, set()).add(value)
    everywhere = set(PLACEHOLDERS)
    for o in occurrences:
        everywhere &= {name for name, _ in o.tokens}
    return {n: next(iter(v)) for n, v in seen.items() if len(v) == 1 and n in everywhere}


# -- review order ---------------------------------------------------------------


def review_key(group: Group) -> tuple[Any, ...]:
    """Deletes and replaces before updates before creates; production first;
    exceptions before shared changes; bigger before smaller."""
    return (
        ACTION_RANK.get(group.action, 9),
        0 if group.production else 1,
        0 if group.exceptional else 1,
        -len(group.stacks),
        group.kind,
        group.name,
        group.id,
    )


def _exception_key(e: StackException, groups: Mapping[str, Group]) -> tuple[Any, ...]:
    rank = min((ACTION_RANK.get(groups[g].action, 9) for g in e.groups), default=9)
    return (0 if e.failed else 1, rank, 0 if e.production else 1, e.stack)
