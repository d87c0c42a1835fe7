"""Which project and stack names are safe, and how to show untrusted text in a terminal.

A stack address is a path, taken literally everywhere; still, a name that a shell, a
glob, a terminal or a reviewer's eye reads differently from what it is makes trouble
the moment someone copies it into a command, a workflow or a pull request. Unsafe:

- glob and shell metacharacters and whitespace (``* ? [ ] { } $ ` ' " \\ ; & | < > ( ) !
  ~ #``, spaces, tabs) and a leading ``-`` (read as an option);
- control characters (C0 and C1, DEL: newlines, ANSI escapes) and invisible or
  direction-changing format characters (bidirectional overrides and isolates, zero-width
  joiners and marks: a name that displays as another name);
- two sibling names that are equal after Unicode normalisation (NFKC): ``café`` written
  with a precomposed ``é`` and with ``e`` plus a combining accent look the same but are
  two directories.

:func:`display` escapes control and format characters so that no text konfig prints can
move the cursor, recolour the terminal or reorder what follows it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

GLOB_AND_SHELL = frozenset("*?[]{}$`'\"\\;&|<>()!~#")


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc"


def _is_invisible(ch: str) -> bool:
    # Cf: format characters (bidi embeddings, overrides and isolates, zero-width
    # joiners, soft hyphen, BOM); Zl/Zp: line and paragraph separators
    return unicodedata.category(ch) in ("Cf", "Zl", "Zp")


def display(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with control and invisible format characters shown as escapes
    (``keep_newlines``: line breaks and tabs stay as they are)."""
    if text.isprintable() and text.isascii():
        return text
    out: list[str] = []
    for ch in text:
        if ch in "\n\t" and keep_newlines:
            out.append(ch)
        elif _is_control(ch) or _is_invisible(ch):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def name_problems(name: str) -> list[str]:
    """Why ``name`` is not a safe project or stack name (empty when it is safe)."""
    problems: list[str] = []
    controls = sorted({ch for ch in name if _is_control(ch)})
    if controls:
        problems.append("control characters " + ", ".join(display(c) for c in controls))
    invisible = sorted({ch for ch in name if _is_invisible(ch)})
    if invisible:
        problems.append(
            "invisible or direction-changing characters "
            + ", ".join(f"{display(c)} ({unicodedata.name(c, 'unnamed')})" for c in invisible)
        )
    meta = sorted({ch for ch in name if ch in GLOB_AND_SHELL})
    if meta:
        problems.append("glob or shell metacharacters " + " ".join(meta))
    if any(ch.isspace() and not _is_control(ch) for ch in name):
        problems.append("whitespace")
    if name.startswith("-"):
        problems.append("a leading '-' (read as a command-line option)")
    return problems


def normalised(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


def normalisation_clashes(names: Iterable[str]) -> dict[str, list[str]]:
    """Sibling names equal after NFKC normalisation: each such name -> the others."""
    by_form: dict[str, list[str]] = {}
    for name in names:
        by_form.setdefault(normalised(name), []).append(name)
    clashes: dict[str, list[str]] = {}
    for group in by_form.values():
        unique = sorted(set(group))
        if len(unique) > 1:
            for name in unique:
                clashes[name] = [n for n in unique if n != name]
    return clashes
