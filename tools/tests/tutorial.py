"""The README's tutorial as a script: its shell blocks and files, in the README's order.

:func:`script` turns the section "Write your first stack" of README.md into one bash
script: each ```sh block as written, and each file the section shows (a fenced block
right after a paragraph that is only its path, "`appops/hello/dev/main.k`:") written to
that path with a quoted here-document, so ``export``s carry from one block to the next
as they do in the reader's shell. Any other fenced block in the section is an error: the
section must say what to do with every block it shows.

The one change to the README's text (:data:`CLUSTER_UP`): ``hack/cluster up`` starts a
cluster and prints its kubeconfig path; here the cluster is the test session's, so that
command becomes a ``printf`` of the session cluster's kubeconfig path. Everything else,
``hack/cluster down`` included (in a fresh clone it finds no cluster of its own and
removes nothing), runs as written.

:func:`run` runs the script with a terminal as its stdin on which the reader answers
"y" to each ``Do you want to ...?`` that konfig asks, and records the questions.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import mdparse

TITLE = "Write your first stack"
CLUSTER_UP = "hack/cluster up"
_FILE_CAPTION = re.compile(r"`([^`\s]+)`:")
_PROMPT = re.compile(rb"Do you want to ([^?\n]+)\? \[y/N\]: $")
_EOF = "KONFIG_README_FILE_END"
PREAMBLE = """\
set -euo pipefail
PS4='+ README: '
set -x
"""


class TutorialError(Exception):
    """The section cannot be run as written (a block with no instruction, a bad path)."""


def script(readme: str, kubeconfig: Path) -> str:
    """The bash script the section "Write your first stack" of ``readme`` amounts to."""
    section = mdparse.section(readme, TITLE)
    parts = [PREAMBLE]
    ups = 0
    for block in mdparse.fenced_blocks(section.text):
        line = section.line + block.line - 1
        caption = _FILE_CAPTION.fullmatch(block.before.strip())
        if block.info == "sh":
            ups += block.content.count(CLUSTER_UP)
            body = block.content.replace(
                CLUSTER_UP, "printf '%s\\n' " + shlex.quote(str(kubeconfig))
            )
            parts.append(f"# README.md:{line}\n{body}")
        elif caption:
            path = PurePosixPath(caption.group(1))
            if path.is_absolute() or ".." in path.parts:
                raise TutorialError(f"README.md:{line}: {path} is not a path in the repository")
            if _EOF in block.content:
                raise TutorialError(f"README.md:{line}: the file holds {_EOF}")
            parts.append(
                f"# README.md:{line}: the file {path}\n"
                f"cat > {shlex.quote(str(path))} <<'{_EOF}'\n{block.content}{_EOF}\n"
            )
        else:
            raise TutorialError(
                f"README.md:{line}: a ```{block.info} block that is neither a shell block "
                "(```sh) nor a file (a paragraph of only its path, `path`:, right before it)"
            )
    if ups == 0:
        raise TutorialError(f"the section never runs `{CLUSTER_UP}`: nothing to map")
    return "".join(parts)


@dataclass(frozen=True)
class Transcript:
    returncode: int
    output: str
    questions: list[str]


def run(text: str, cwd: Path, env: dict[str, str], timeout: float) -> Transcript:
    """Run a bash script with a terminal for stdin, answering "y" to each question."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-c", text],
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.close(slave)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    output = bytearray()
    answered = 0
    questions: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                output += f"\n[the tutorial did not finish within {timeout:.0f}s]\n".encode()
                break
            ready, _, _ = select.select([out], [], [], 1.0)
            if not ready:
                continue
            chunk = os.read(out, 65536)
            if not chunk:
                proc.wait()
                break
            output += chunk
            asked = _PROMPT.search(output, answered)
            if asked:
                questions.append(asked.group(1).decode())
                answered = len(output)
                os.write(master, b"y\n")
    finally:
        os.close(master)
        proc.stdout.close()
    return Transcript(proc.returncode, output.decode(errors="replace"), questions)
