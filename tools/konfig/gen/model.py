"""The records the generator works with: KCL types, fields and schemas, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Package = tuple[str, ...]
GeneratedFiles = dict[str, str]  # posix path relative to the output directory -> text


@dataclass(frozen=True)
class Prim:
    """A built-in KCL type: ``str``, ``int``, ``float``, ``bool``, ``any`` or ``{str:}``."""

    kcl: str


@dataclass(frozen=True)
class Ref:
    """Another generated schema, by package and name."""

    package: Package
    name: str


@dataclass(frozen=True)
class ListOf:
    item: KType


@dataclass(frozen=True)
class DictOf:
    value: KType


@dataclass(frozen=True)
class Union:
    options: tuple[KType, ...]


@dataclass(frozen=True)
class Literals:
    """An enum: a union of literal values."""

    values: tuple[str | int | float | bool, ...]


KType = Prim | Ref | ListOf | DictOf | Union | Literals

ANY = Prim("any")
OBJECT = Prim("{str:}")


@dataclass(frozen=True)
class Field:
    name: str
    type: KType
    required: bool
    doc: str = ""
    default: Any = None  # a JSON value; None when the API declares no default


@dataclass(frozen=True)
class SchemaDef:
    """One KCL schema to generate: ``name`` in package ``package``, written to ``file``."""

    package: Package
    name: str
    doc: str
    fields: tuple[Field, ...]
    source: str  # where it came from, for the file header
    file: str  # file name inside the package directory, e.g. "deployment.k"
