"""Output a person can follow: whole per-stack blocks when not a terminal, live regions
on one, a heartbeat in CI, and NO_COLOR honoured (checked in a real pseudo-terminal)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fixtures.repos import copy_template
from rich.console import Console

from konfig.commands._console import use_color
from konfig.commands._progress import StackProgress
from konfig.engine.stackrun import Event, ObjectResult, StackResult


class Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_use_color_follows_terminal_no_color_and_dumb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(Stream(True)) and not use_color(Stream(False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Stream(True))
    monkeypatch.setenv("NO_COLOR", "")  # empty: not set (no-color.org)
    assert use_color(Stream(True))
    monkeypatch.setenv("TERM", "dumb")
    assert not use_color(Stream(True))


def _run_stack(progress: StackProgress, path: str, n: int, pause: float) -> StackResult:
    progress.start(path)
    results = []
    progress(Event(path, "level", f"level 1/1: {n} objects"))
    for i in range(n):
        ns = path.split("/")[1]
        rid = f"v1:ConfigMap:{ns}:cm{i}"
        # the engine's words: the outcome and the object (the line shows its id instead)
        result = ObjectResult(rid, "created", f"created ConfigMap cm{i} in namespace {ns} (v1)")
        results.append(result)
        progress(Event(path, "object", result.message, result))
        time.sleep(pause)
    done = StackResult(path, True, tuple(results), seconds=n * pause)
    progress.finish(done)
    return done


def test_parallel_stacks_print_whole_blocks_never_interleaved() -> None:
    printed: list[str] = []
    contexts = {f"appops/s{i}/dev": "admin" for i in range(4)}
    with StackProgress(
        "apply", live=False, contexts=contexts, echo=printed.append, heartbeat=0
    ) as p:
        threads = [
            threading.Thread(target=_run_stack, args=(p, f"appops/s{i}/dev", 5, 0.01))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(printed) == 4  # one write per stack: its complete block
    for text in printed:
        lines = text.splitlines()
        stack = lines[0].split(" ")[0]
        assert lines[0] == f"{stack} (context admin): applied in 0.1 s: 5 created"
        name = stack.split("/")[1]
        assert lines[2:] == [f"  created   v1:ConfigMap:{name}:cm{i}" for i in range(5)]


def test_heartbeat_says_which_stacks_are_at_what(capsys: pytest.CaptureFixture[str]) -> None:
    with StackProgress("apply", live=False, echo=lambda _t: None, heartbeat=0.05) as p:
        p.start("appops/slow/dev")
        p(
            Event(
                "appops/slow/dev", "wait", "waiting until apps/v1:Deployment:s:web becomes healthy"
            )
        )
        time.sleep(0.2)
        p.finish(StackResult("appops/slow/dev", True))
    err = capsys.readouterr().err
    assert "still applying 1 stack: appops/slow/dev (waiting until apps/v1:Deployment:s:web" in err


def test_live_regions_on_a_terminal_then_the_block() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    with StackProgress("apply", live=True, console=console, heartbeat=0) as p:
        p.start("appops/a/dev")
        p(Event("appops/a/dev", "level", "level 1/2: 3 objects"))
        time.sleep(0.4)  # a few refreshes of the live region
        shown = buffer.getvalue()
        p.finish(StackResult("appops/a/dev", True, (ObjectResult("v1:Namespace:a", "created"),)))
    out = buffer.getvalue()
    assert "appops/a/dev: level 1/2: 3 objects" in shown  # the stack's live region
    assert "appops/a/dev: applied in 0.0 s: 1 created" in out  # its block, printed above


@pytest.mark.parametrize("no_color", ["", "1"])
@pytest.mark.parametrize("command", ["status", "pending"])
def test_no_color_in_a_real_terminal(tmp_path: Path, no_color: str, command: str) -> None:
    """konfig in a pseudo-terminal: coloured (rich tables, click errors) unless NO_COLOR."""
    repo = copy_template(tmp_path / "repo")
    repo.stack("p", "dev", stack_yaml="name: dev\nkubernetes:\n  context: admin\n")
    env = dict(os.environ, TERM="xterm-256color", NO_COLOR=no_color)
    env.pop("CI", None)
    konfig = str(Path(sys.executable).parent / "konfig")
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [konfig, "--root", str(repo.root), command, "--kubeconfig", str(tmp_path / "nope")],
        stdin=child, stdout=child, stderr=child, env=env,
    )  # fmt: skip
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    out = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 1 and "kubeconfig not found" in out, out
    assert ("\x1b[" in out) == (no_color == ""), out
