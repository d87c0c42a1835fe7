"""Words in output: counts with the right plural, a message named after its stack."""

from __future__ import annotations


def plural(n: int, singular: str, plural_form: str | None = None) -> str:
    """``1 object``, ``2 objects``, ``0 objects``; irregular plurals given explicitly
    (``plural(n, "inventory", "inventories")``)."""
    word = singular if n == 1 else (plural_form or _regular(singular))
    return f"{n} {word}"


def _regular(word: str) -> str:
    head, _, last = word.rpartition(" ")
    if last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u"):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def about(stack: str, message: str) -> str:
    """``<stack>: <message>``, the stack named once: the OpenTofu runtime's messages
    already start with the stack they are about."""
    return message if message.startswith(f"{stack}: ") else f"{stack}: {message}"
