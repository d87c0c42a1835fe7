"""Markdown as GitHub reads it, for the tests of the repository's documents.

Parsed with markdown-it-py (CommonMark plus tables, as GitHub's renderer): headings and
their anchors (GitHub's slugs), links with their line, sections, and fenced code blocks
with the paragraph just before each (the tutorial names a file's path there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

# What GitHub keeps of a heading's text in its anchor: letters, digits, marks, "_", "-"
# and spaces (github-slugger removes every other character, then turns each space into
# "-"); Python's \w is letters, digits, marks and "_".
_DROPPED = re.compile(r"[^\w\- ]")


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def parse(text: str) -> list[Token]:
    return _parser().parse(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's rendered text, before de-duplication."""
    return _DROPPED.sub("", heading.lower()).replace(" ", "-")


def _inline_text(token: Token) -> str:
    """The rendered text of an inline token: text and code spans, without markup."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int  # 1-based


def headings(text: str) -> list[Heading]:
    tokens = parse(text)
    found: list[Heading] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[i + 1]
            line = (token.map or [0])[0] + 1
            found.append(Heading(int(token.tag[1:]), _inline_text(inline), line))
    return found


def anchors(text: str) -> set[str]:
    """Every heading anchor GitHub gives the document (repeats get -1, -2, ...)."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in headings(text):
        base = slug(heading.text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


@dataclass(frozen=True)
class Link:
    target: str
    line: int  # 1-based: the first line of the block that holds it


def links(text: str) -> list[Link]:
    """Every link and image target (inline, reference and autolinks), in order."""
    found: list[Link] = []

    def walk(tokens: list[Token], line: int) -> None:
        for token in tokens:
            here = token.map[0] + 1 if token.map else line
            if token.type == "link_open":
                found.append(Link(str(token.attrs.get("href", "")), here))
            elif token.type == "image":
                found.append(Link(str(token.attrs.get("src", "")), here))
            if token.children:
                walk(token.children, here)

    walk(parse(text), 1)
    return found


@dataclass(frozen=True)
class Section:
    line: int  # 1-based line of the first line after the heading
    text: str


def section(text: str, title: str) -> Section:
    """The lines under the heading ``title`` up to the next heading of its level or
    higher; raises LookupError when there is no such heading."""
    lines = text.splitlines(keepends=True)
    all_headings = headings(text)
    for i, heading in enumerate(all_headings):
        if heading.text == title:
            end = len(lines)
            for later in all_headings[i + 1 :]:
                if later.level <= heading.level:
                    end = later.line - 1
                    break
            return Section(heading.line + 1, "".join(lines[heading.line : end]))
    raise LookupError(f"no heading {title!r}")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string (language), content and 1-based first line,
    and the text of the paragraph right before it (empty when there is none)."""

    info: str
    content: str
    line: int
    before: str


def fenced_blocks(text: str) -> list[Block]:
    tokens = parse(text)
    blocks: list[Block] = []
    for i, token in enumerate(tokens):
        if token.type != "fence":
            continue
        before = ""
        # ... paragraph_open, inline, paragraph_close, fence
        if i >= 3 and tokens[i - 1].type == "paragraph_close" and tokens[i - 2].type == "inline":
            before = tokens[i - 2].content
        blocks.append(Block(token.info.strip(), token.content, (token.map or [0])[0] + 1, before))
    return blocks
