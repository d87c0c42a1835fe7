"""The bad-input corpus: each case under ``corpus/<case>/`` is a repository overlay
(``repo/``) on the template's real base/, and ``case.yaml`` says what to run and what it
must answer. ``corpus/README.md`` lists every case and what it answers now.

Every case runs konfig as its own process, and every case must:

* end within its bound (``bound``, seconds; 120 unless told) with the exit code it
  expects (1 unless told), print no Python traceback, and leave no process running;
* leave the repository exactly as it was (but for konfig's cache in ``.cache/``,
  and unless ``changes: true``), leave a folder
  outside it (``outside/``) untouched, and leave no temporary file behind (konfig's
  ``TMPDIR`` is a folder of the case's own, empty at the end).

``case.yaml`` keys:

* ``command``: konfig's arguments; ``check`` and ``test`` cases that expect a finding
  (``expect: {rule, file, line}``) run with JSON output and must report it;
* ``expect``: ``exit``, ``output`` (texts stdout + stderr must contain), ``absent``
  (texts they must not), ``rule``/``file``/``line``;
* ``base: shop``: ``corpus/_shop/`` (one valid stack ``shop/dev`` with its golden) is
  laid down before ``repo/`` (which is then optional); ``move`` renames folders,
  ``files`` writes files (text, or ``{text, encoding, bom, crlf}``) and ``symlinks``
  makes links (``{outside}``: a file in the folder outside the repository);
* ``git``: ``commit`` (a git repository with one commit of everything), ``empty``
  (``git init``, no commit) or ``shallow`` (a depth-1 clone of ``main`` and a branch
  ``other`` whose merge base it lacks); after the commit, ``dirty`` (files changed and
  not committed) and ``remove`` (folders deleted and not committed);
* ``move_out``: repository folders moved to ``outside/`` and replaced by a symlink to
  where they went (a folder that leads out of the repository);
* ``kubeconfig``: ``cluster`` (the test session's control plane: the case is a
  ``cluster`` test), ``cluster-bad-token`` (that control plane, with a token it does
  not know), ``silent`` (a server that accepts connections and never answers),
  ``status-500``/``status-429`` (a server answering every request with that status:
  the real API server cannot be made to) or ``refused``; ``exec`` adds an ``exec``
  credential plugin running that shell command; the kubeconfig is passed as
  ``--kubeconfig``;
* ``env``: environment variables for konfig (e.g. a lower compile bound);
* ``readonly``: the repository is mounted read-only for the command;
* ``before``: commands run first, each ``[konfig, ...]`` or ``[kubectl, ...]`` (on
  the ``cluster``), and each must succeed;
* ``signal``: ``{name: SIGTERM, after: "text"}`` sends that signal once konfig has
  printed the text (or, ``after_temp: pattern``, once a file matching the glob pattern
  exists in its ``TMPDIR``): an event, never a delay, which a slow start at a high load
  could outlast (konfig handles signals from about 1 s after it starts at a load of 12).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.faults import (
    Running,
    SilentServer,
    closed_port_url,
    exec_user,
    plugin_script,
    processes_in_group,
    readonly_prefix,
    wait_until_gone,
    write_kubeconfig,
)
from fixtures.repos import AUTHOR, copy_template

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").is_file())


def _spec(case: str) -> dict[str, Any]:
    data = yaml.safe_load((CORPUS / case / "case.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict), case
    return data


SHARED = {"shop": CORPUS / "_shop"}
CLUSTER_KUBECONFIGS = ("cluster", "cluster-bad-token")


def _params() -> Iterator[Any]:
    for case in CASES:
        needs_cluster = _spec(case).get("kubeconfig") in CLUSTER_KUBECONFIGS
        yield pytest.param(case, id=case, marks=[pytest.mark.cluster] if needs_cluster else [])


def _snapshot(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel.split("/")[0] in (".git", ".cache"):
            continue  # git's own files, konfig's cache
        if p.is_symlink():
            out[rel] = "-> " + str(p.readlink())
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "<dir>"
    return out


def _check_findings(out: str) -> list[tuple[str, str | None, int | None]]:
    return [(f["rule"], f["file"], f["line"]) for f in json.loads(out)]


def _test_findings(out: str) -> list[tuple[str, str | None, int | None]]:
    data = json.loads(out)
    found: list[tuple[str, str | None, int | None]] = []
    for stack in data["stacks"]:
        if stack["status"] == "compile-error":
            e = stack["error"]
            found.append(("compile/error", e["file"], e["line"]))
        elif stack["status"] not in ("passed", "unchanged"):
            found.append((f"golden/{stack['status']}", stack["golden"], stack.get("line")))
    for unit in data["unitTests"]:
        if not unit["passed"]:
            found.append(("kcl-test/failed", unit["file"], unit["line"]))
    return found


def _git(root: Path, *args: str) -> None:
    env = {**AUTHOR, "PATH": "/usr/bin:/bin", "HOME": str(root.parent)}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def _write(root: Path, rel: str, spec: Any) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(spec, str):
        path.write_bytes(spec.encode())
        return
    text = str(spec["text"])
    if spec.get("crlf"):
        text = text.replace("\n", "\r\n")
    data = text.encode(spec.get("encoding", "utf-8"))
    path.write_bytes((b"\xef\xbb\xbf" if spec.get("bom") else b"") + data)


def _shallow(root: Path, tmp: Path) -> None:
    """``root`` becomes a depth-1 clone of ``main`` and ``other``, which forked from
    ``main``'s first commit: the clone lacks their merge base."""
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    _git(root, "branch", "other")
    (root / "README.md").write_text("second\n", encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "second")
    _git(root, "checkout", "-q", "other")
    (root / "OTHER.md").write_text("other\n", encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "other")
    _git(root, "checkout", "-q", "main")
    upstream = tmp / "upstream"
    shutil.move(str(root), upstream)
    _git(tmp, "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{upstream}", str(root))


class StatusServer:
    """An API server that answers every request with one HTTP status (500, 429): the
    real kube-apiserver cannot be made to fail on demand, so this is the one fake."""

    def __init__(self, status: int) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                body = json.dumps(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status}
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 50


def test_every_case_is_in_the_readme() -> None:
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    missing = [case for case in CASES if f"`{case}`" not in readme]
    assert missing == [], f"corpus/README.md does not list {missing}"


@pytest.mark.parametrize("case", list(_params()))
def test_corpus_case(case: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    spec = _spec(case)
    expect: dict[str, Any] = spec.get("expect") or {}
    builder = copy_template(tmp_path / "repo")
    root = builder.root
    if spec.get("base"):
        shutil.copytree(SHARED[spec["base"]], root, dirs_exist_ok=True)
    if (CORPUS / case / "repo").is_dir():
        shutil.copytree(CORPUS / case / "repo", root, dirs_exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not konfig's\n", encoding="utf-8")
    for src, dst in (spec.get("move") or {}).items():
        shutil.move(str(root / src), root / dst)
    for rel, content in (spec.get("files") or {}).items():
        _write(root, rel, content)
    for rel, target in (spec.get("symlinks") or {}).items():
        (root / rel).symlink_to(str(target).format(outside=outside / "keep.txt"))
    for rel in spec.get("move_out") or []:
        target = outside / Path(rel).name
        shutil.move(str(root / rel), target)
        (root / rel).symlink_to(target, target_is_directory=True)
    if spec.get("git") in ("commit", "empty"):
        _git(root, "init", "-q", "-b", "main")
        if spec["git"] == "commit":
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "-m", "corpus")
    elif spec.get("git") == "shallow":
        _shallow(root, tmp_path)
    for rel, content in (spec.get("dirty") or {}).items():  # after the commit
        _write(root, rel, content)
    for rel in spec.get("remove") or []:
        shutil.rmtree(root / rel)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp), "NO_COLOR": "1"}
    env.update({name: str(value) for name, value in (spec.get("env") or {}).items()})

    command = [str(a) for a in spec["command"]]
    server: SilentServer | None = None
    kubeconfig = spec.get("kubeconfig")
    cluster = request.getfixturevalue("cluster") if kubeconfig in CLUSTER_KUBECONFIGS else None
    if kubeconfig is not None:
        if kubeconfig == "cluster-bad-token":
            config = yaml.safe_load(Path(cluster.kubeconfig).read_text(encoding="utf-8"))
            for entry in config["users"]:
                entry["user"] = {"token": "not-a-token-it-knows"}
            path = tmp_path / "kubeconfig"
            path.write_text(yaml.safe_dump(config), encoding="utf-8")
        elif cluster is not None:
            path = cluster.kubeconfig
        elif str(kubeconfig).startswith("status-"):
            status = StatusServer(int(str(kubeconfig).removeprefix("status-")))
            request.addfinalizer(status.close)
            path = write_kubeconfig(tmp_path / "kubeconfig", status.url, {"token": "corpus"})
        else:
            if kubeconfig == "silent":
                server = SilentServer()
                request.addfinalizer(server.close)
                url = server.url
            else:
                url = closed_port_url()
            user: dict[str, object] = {"token": "corpus"}
            if spec.get("exec"):
                user = exec_user(plugin_script(tmp_path / "plugin.sh", f"{spec['exec']}\n"))
            path = write_kubeconfig(tmp_path / "kubeconfig", url, user)
        command += ["--kubeconfig", str(path)]
    for step in spec.get("before") or []:
        step = [str(a) for a in step]
        if step[0] == "kubectl":
            assert cluster is not None, f"{case}: kubectl needs kubeconfig: cluster"
            cluster.kubectl(*step[1:])
        else:
            assert step[0] == "konfig", step
            extra = ["--kubeconfig", str(cluster.kubeconfig)] if cluster is not None else []
            run = Running(root, [*step[1:], *extra], env=env)
            code, out, err, _ = run.finish(120)
            assert code == 0, f"{step}: {out}{err}"

    if "rule" in expect:
        command += ["--format", "json"] if command[0] == "check" else ["--json"]
    before = _snapshot(root)
    outside_before = _snapshot(outside)
    bound = float(spec.get("bound", 120))
    prefix = readonly_prefix(root) if spec.get("readonly") else None
    run = Running(root, command, env=env, prefix=prefix)
    group = [run.proc.pid]
    sig = spec.get("signal")
    if sig is not None:
        if "after" in sig:
            run.wait_for(
                lambda: any(sig["after"] in line for line in run.out + run.err),
                repr(sig["after"]),
                bound,
            )
        else:
            pattern = str(sig["after_temp"])
            run.wait_for(lambda: any(tmp.glob(pattern)), f"{pattern} in TMPDIR", bound)
        group = processes_in_group(run.proc.pid)
        run.proc.send_signal(getattr(signal, sig["name"]))
    code, out, err, _ = run.finish(bound)
    text = out + err

    assert code == expect.get("exit", 1), text
    assert "Traceback" not in text, text
    assert wait_until_gone(group) == [], "processes left running"
    for wanted in expect.get("output") or []:
        assert wanted in text, f"{wanted!r} not in:\n{text}"
    for unwanted in expect.get("absent") or []:
        assert unwanted not in text, f"{unwanted!r} in:\n{text}"
    if "rule" in expect:
        findings = _check_findings(out) if command[0] == "check" else _test_findings(out)
        wanted_finding = (expect["rule"], expect["file"], expect["line"])
        assert wanted_finding in findings, f"{wanted_finding} not in {findings}"
    if not spec.get("changes"):
        assert _snapshot(root) == before, "the command changed the repository"
    assert _snapshot(outside) == outside_before, "the command wrote outside the repository"
    assert list(tmp.iterdir()) == [], "temporary files left behind"
