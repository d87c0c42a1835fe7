"""A stack's KCL source as the batch compiler (:mod:`konfig.build.batch`) reads it.

The static part of batching: each file's declarations, imports and the names it uses
(:func:`analyze`, from kcl-lib's AST), whether same-named top-level declarations can be
merged by evaluating their entries in order (:func:`merged_source`), and how the last
entry file's ``X.instances()`` calls are rewritten (:func:`plan_last`). Whatever a batch
cannot express raises :class:`Unbatchable` with the reason; the stack then compiles
alone. The rules are in :mod:`konfig.build.batch`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.build import kcl
from konfig.detect.importgraph import SYSTEM_MODULES

# system modules a batched stack may import (``file`` only for ``file.read``); the
# others (runtime, manifests) can observe the package or change the program's output
ALLOWED_SYSTEM = frozenset(
    {
        "base64",
        "collection",
        "crypto",
        "datetime",
        "file",
        "json",
        "math",
        "net",
        "regex",
        "template",
        "units",
        "yaml",
    }
)
PREFIX = "_konfig_"  # names the generated code adds to a stack's package
FACTS_KEPT = 512  # analysed files a worker remembers (a project's base serves its stacks)
STACK_FILE = "stack.k"
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IMPORT_LINE = re.compile(
    r"^[ \t]*import[ \t]+([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?:[ \t]+as[ \t]+([A-Za-z_]\w*))?",
    re.M,
)
PACKAGE_DEPENDENT = ("workdir", "modpath")  # file.workdir()/file.modpath() differ in a batch


class Unbatchable(Exception):
    """The stack uses something its own KCL run and a batch would do differently."""


# ------------------------------------------------------------------- AST helpers


def walk(obj: Any) -> Iterator[dict[str, Any]]:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def ident_names(ident: Mapping[str, Any]) -> list[str]:
    return [str(n["node"]) for n in ident.get("names", [])]


def is_identifier(node: Mapping[str, Any]) -> bool:
    names = node.get("names")
    return isinstance(names, list) and bool(names) and isinstance(names[0], dict)


def lines_of(node: Mapping[str, Any]) -> tuple[int, int]:
    """The 0-based [start, stop) line range of a top-level statement."""
    start = int(node["line"]) - 1
    end = int(node["end_line"])
    stop = end if int(node["end_column"]) > 0 else end - 1
    return start, max(stop, start + 1)


def _slice(lines: Sequence[str], l0: int, c0: int, l1: int, c1: int) -> str:
    """Source text from (line, column) to (line, column); lines 1-based, columns 0-based."""
    if l0 == l1:
        return lines[l0 - 1][c0:c1]
    return "\n".join([lines[l0 - 1][c0:], *lines[l0 : l1 - 1], lines[l1 - 1][:c1]])


# ------------------------------------------------------------------- one file


@dataclass(frozen=True)
class Decl:
    """A top-level ``name: Schema {..}`` or ``name = Schema {..}`` statement."""

    name: str
    stmt: dict[str, Any]
    schema: dict[str, Any]  # the schema expression's node wrapper (with positions)


@dataclass(frozen=True)
class FileFacts:
    """What the batch needs to know about one KCL source file."""

    text: str
    lines: tuple[str, ...]
    imports: tuple[tuple[str, str], ...]  # (module path, name it is bound to)
    import_lines: tuple[tuple[int, int], ...]
    doc_lines: tuple[int, int] | None
    decls: tuple[Decl, ...]
    targets: tuple[str, ...]  # every top-level name any statement assigns
    nested_targets: frozenset[str]  # names assigned inside top-level if blocks
    reads_files: bool
    # the first two names of dotted names used as values (`x = frontend.Server`)
    value_refs: frozenset[tuple[str, str]]


def analyze(text: str, *, last: bool = False) -> FileFacts:
    """Facts about one file; raises :class:`Unbatchable` for what a batch cannot keep."""
    try:
        module = kcl.parse_source(text)
    except kcl.KclError as exc:
        raise Unbatchable(f"does not parse: {exc.summary()}") from None
    lines = tuple(text.split("\n"))
    imports: list[tuple[str, str]] = []
    import_lines: list[tuple[int, int]] = []
    decls: list[Decl] = []
    targets: list[str] = []
    nested: set[str] = set()
    taken: set[int] = set()
    for wrapper in module.get("body", []):
        node = wrapper["node"]
        kind = node["type"]
        start, stop = lines_of(wrapper)
        if wrapper["column"] != 0 or taken.intersection(range(start, stop)):
            raise Unbatchable("two statements share a line")
        taken.update(range(start, stop))
        if kind == "Import":
            path = str(node["path"]["node"])
            if path.startswith("."):
                raise Unbatchable(f"relative import `{path}`")
            if path.startswith("kcl_plugin"):
                raise Unbatchable(f"imports the plugin `{path}`")
            if "." not in path and path in SYSTEM_MODULES and path not in ALLOWED_SYSTEM:
                raise Unbatchable(f"imports the `{path}` module")
            imports.append((path, str(node["name"])))
            import_lines.append((start, stop))
        elif kind == "Unification":
            names = ident_names(node["target"]["node"])
            targets.append(names[0])
            if len(names) == 1:
                decls.append(Decl(names[0], wrapper, node["value"]))
        elif kind == "Assign":
            assigned = node["targets"]
            targets.extend(str(t["node"]["name"]["node"]) for t in assigned)
            if node["value"]["node"]["type"] == "Schema":
                if len(assigned) != 1 or assigned[0]["node"]["paths"] or node.get("ty"):
                    raise Unbatchable("a schema assignment with several targets, a path or a type")
                decls.append(Decl(str(assigned[0]["node"]["name"]["node"]), wrapper, node["value"]))
        elif kind == "AugAssign":
            targets.append(str(node["target"]["node"]["name"]["node"]))
        elif kind == "If":
            for sub in walk(node):
                sub_kind = sub.get("type")
                if sub_kind == "Assign":
                    nested.update(str(t["node"]["name"]["node"]) for t in sub["targets"])
                elif sub_kind == "AugAssign":
                    nested.add(str(sub["target"]["node"]["name"]["node"]))
                elif sub_kind == "Unification":
                    nested.add(ident_names(sub["target"]["node"])[0])
        elif kind not in ("Assert", "Expr", "Schema", "Rule", "TypeAlias"):
            raise Unbatchable(f"a top-level {kind} statement")
    bound_to_file = {name for path, name in imports if path == "file"}
    reads_files = False
    value_refs: set[tuple[str, str]] = set()
    for node in walk(module):
        if not is_identifier(node):
            continue
        parts = ident_names(node)
        if node.get("type") == "Identifier" and len(parts) >= 2:
            value_refs.add((parts[0], parts[1]))
        if parts[0] == "typeof":
            raise Unbatchable("calls typeof()")
        if not last and "instances" in parts[1:]:
            raise Unbatchable("calls instances()")
        if any(p.startswith(PREFIX) for p in parts):
            raise Unbatchable(f"uses a name starting with {PREFIX}")
        if parts[0] in bound_to_file:
            if parts[1:] != ["read"]:
                raise Unbatchable(f"uses {'.'.join(parts)} (a batch keeps only file.read)")
            reads_files = True
    doc = module.get("doc")
    return FileFacts(
        text=text,
        lines=lines,
        imports=tuple(imports),
        import_lines=tuple(import_lines),
        doc_lines=lines_of(doc) if isinstance(doc, dict) else None,
        decls=tuple(decls),
        targets=tuple(targets),
        nested_targets=frozenset(nested),
        reads_files=reads_files,
        value_refs=frozenset(value_refs),
    )


# ------------------------------------------------------------------- merging


def _check_unify(items: Sequence[Mapping[str, Any]], where: str) -> None:
    """Refuse configs where KCL's unification of entries differs from evaluating them
    in order: keyless entries (``**x``, ``if``) or a key set twice with a schema value."""
    buckets: dict[str, list[str]] = {}
    for item in items:
        entry = item["node"]
        key = entry["key"]
        if key is None:
            raise Unbatchable(f"an unpacked (**) or if entry in the merged `{where}`")
        key_node = key["node"]
        if key_node["type"] == "Identifier":
            parts = ident_names(key_node)
            name, nested = parts[0], len(parts) > 1
        elif key_node["type"] == "StringLit":
            name, nested = str(key_node["value"]), False
        else:
            raise Unbatchable(f"a {key_node['type']} key in the merged `{where}`")
        value = entry["value"]["node"]
        # KCL turns `a.b = v` into `a: {b = v}` before merging
        kind = "Config" if nested else str(value["type"])
        bucket = buckets.setdefault(name, [])
        if entry["operation"] == "Override" and not nested:
            bucket.clear()
        bucket.append(kind)
        if value["type"] == "Config":
            _check_unify(value["items"], where)
        elif value["type"] == "Schema" and value["config"]["node"]["type"] == "Config":
            _check_unify(value["config"]["node"]["items"], where)
    for name, kinds in buckets.items():
        if len(kinds) > 1 and "Schema" in kinds:
            raise Unbatchable(f"`{name}` is set twice with a schema value in the merged `{where}`")


def merged_source(decls: Sequence[tuple[Decl, FileFacts]]) -> str:
    """One declaration holding the entries of all ``decls`` in order, where the last is."""
    items: list[Mapping[str, Any]] = []
    for decl, _ in decls:
        schema = decl.schema["node"]
        config = schema["config"]["node"]
        if schema.get("args") or schema.get("kwargs") or config["type"] != "Config":
            raise Unbatchable(f"a merged declaration of `{decl.name}` with arguments")
        items.extend(config["items"])
    _check_unify(items, decls[-1][0].name)
    bodies: list[str] = []
    for decl, facts in decls:
        cfg = decl.schema["node"]["config"]
        l0, c0, l1, c1 = cfg["line"], cfg["column"], cfg["end_line"], cfg["end_column"]
        if (
            _slice(facts.lines, l0, c0, l0, c0 + 1) != "{"
            or _slice(facts.lines, l1, c1 - 1, l1, c1) != "}"
        ):
            raise Unbatchable(f"the declaration of `{decl.name}` is laid out unexpectedly")
        bodies.append(_slice(facts.lines, l0, c0 + 1, l1, c1 - 1))
    last, facts = decls[-1]
    stmt, cfg = last.stmt, last.schema["node"]["config"]
    head = _slice(facts.lines, stmt["line"], 0, cfg["line"], cfg["column"] + 1)
    rest = str(facts.lines[cfg["end_line"] - 1][cfg["end_column"] :])
    return head + "\n" + "\n".join(bodies) + "\n}" + rest


# ------------------------------------------------------------------- the last entry file


@dataclass(frozen=True)
class LastFile:
    """The last entry file (the render entry) and the ``instances()`` calls it makes."""

    facts: FileFacts
    calls: tuple[tuple[dict[str, Any], str, str], ...]  # (call node, bound name, schema)
    rendered: frozenset[tuple[str, str]]  # (module path, schema name)

    @property
    def counted(self) -> list[tuple[str, str]]:
        return sorted({(alias, schema) for _, alias, schema in self.calls})


def plan_last(text: str) -> LastFile:
    facts = analyze(text, last=True)
    module = kcl.parse_source(text)
    bound = {name: path for path, name in facts.imports}
    calls: list[tuple[dict[str, Any], str, str]] = []
    for node in walk(module):
        inner = node.get("node")
        if not isinstance(inner, dict) or inner.get("type") != "Call":
            continue
        func = inner["func"]["node"]
        if not is_identifier(func) or ident_names(func)[-1:] != ["instances"]:
            continue
        parts = ident_names(func)
        if len(parts) != 3 or inner["args"] or inner["keywords"] or parts[0] not in bound:
            raise Unbatchable("the render entry calls instances() in a way a batch cannot count")
        if node["line"] != node["end_line"]:
            raise Unbatchable("the render entry spreads an instances() call over lines")
        calls.append((node, parts[0], parts[1]))
    for node in walk(module):
        if is_identifier(node) and "instances" in ident_names(node)[:-1]:
            raise Unbatchable("the render entry uses instances without calling it")
    if facts.decls:
        raise Unbatchable("the render entry declares schema instances at top level")
    rendered = frozenset((bound[alias], schema) for _, alias, schema in calls)
    for node in walk(module):
        if node.get("type") == "Schema":
            parts = ident_names(node["name"]["node"])
            if len(parts) == 2 and (bound.get(parts[0]), parts[1]) in rendered:
                raise Unbatchable("the render entry itself makes an instance it renders")
    return LastFile(facts, tuple(calls), rendered)
