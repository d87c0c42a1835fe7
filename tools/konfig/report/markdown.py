"""Markdown for people: the jinja2 templates and the filters that keep PR text inert.

Paths, messages and diffs come from pull requests: every filter escapes what could
break out of a table cell, an HTML element or a code span.
"""

from __future__ import annotations

import re

import jinja2

from konfig.engine.plan import CHANGING
from konfig.repo.names import display


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("konfig.report", "templates"),
        autoescape=False,  # markdown; HTML contexts use the `html` filter explicitly
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = cell
    env.filters["html"] = html
    env.filters["fence"] = fence
    env.filters["code"] = code
    env.globals["CHANGING"] = CHANGING
    return env


# an @mention or a team mention would notify whoever a pull request names
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")


def html(text: object) -> str:
    """Text for markdown and HTML: no element, no entity, no @mention survives."""
    escaped = (
        display(str(text), keep_newlines=True)  # terminal escapes shown, never sent
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )
    return _MENTION.sub("@&#8203;", escaped)  # a zero-width space: shown, never a mention


def cell(text: object, limit: int = 160) -> str:
    value = " ".join(str(text).split())
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return html(value).replace("|", "\\|")


def fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * max(3, longest + 1)


def code(text: object) -> str:
    """An inline code span that no content can close early (paths come from PRs)."""
    value = " ".join(display(str(text)).split()).replace("|", "\\|")
    if "`" not in value:
        return f"`{value}`"
    ticks = "`" * (max(len(m) for m in re.findall(r"`+", value)) + 1)
    return f"{ticks} {value} {ticks}"
