"""Worker processes that run KCL under limits, and are replaced when they die.

KCL runs user code: a lambda that calls itself without end overflows the stack and
kills the process with a segmentation fault, a comprehension over ``range(10**9)``
takes gigabytes, a loop may never end. So stacks compile in worker processes, each with

* a memory limit (``RLIMIT_DATA``: kcl-lib aborts when an allocation fails),
* a CPU-time limit per task (``RLIMIT_CPU``, raised before each task),
* a wall-clock limit per task, enforced here (the worker is killed),
* no core files, SIGINT ignored (the parent stops them), SIGTERM's default action (the
  parent's handler is not inherited), and SIGKILL when the parent dies,
* temporary files in a folder of the pool's own, removed when the pool closes (a worker
  killed in the middle of a batch leaves its files there),
* an empty environment: the caller's may hold the age key, provider credentials, a
  kubeconfig or a token, and KCL's ``file.read_env`` hands a model any variable it
  names; KCL needs none (:func:`isolate_environment`),
* given a repository, a file system restricted by the kernel to reading the repository
  (not ``.git``) and the Python installation, and writing the pool's temporary folder
  (:mod:`konfig.build.sandbox`); a worker that cannot restrict itself where the kernel
  offers Landlock runs no task.

:class:`Pool` runs tasks and reports each as finished (:class:`Done`), failed with an
exception the task raised (:class:`Failed`, a plain message) or lost with its worker
(:class:`Died`, saying which limit it hit). A dead worker is replaced; the pool never
raises for a task's sake. What KCL wrote to stderr is captured per task (a file per
worker) so that it never reaches the user's terminal and tells an allocation failure
from other aborts.

Workers are forked from the calling process (kcl-lib starts no threads, and the
parent needs not load it: each worker imports it on first use). Being children of
the caller, their CPU time shows in its ``RUSAGE_CHILDREN`` and in ``/usr/bin/time``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import faulthandler
import multiprocessing
import os
import resource
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Generic, TypeVar

from konfig.build.limits import Limits
from konfig.build.sandbox import Sandbox, for_repository, restrict

_STDERR_TAIL = 8192  # bytes of a dead worker's stderr to read

T = TypeVar("T")


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


@dataclass(frozen=True)
class Failed:
    """The task raised; ``message`` is ``Type: text`` (never a traceback)."""

    message: str


@dataclass(frozen=True)
class Died:
    """The worker died or was killed while running the task."""

    reason: str  # e.g. "needed more than 2048 MiB of memory"
    limit: str | None  # "memory", "cpu", "time", "stack" or None (another crash)


Outcome = Done[Any] | Failed | Died


def _trim() -> None:
    """Give freed heap back to the system: a batch frees a lot at once, and a worker lives
    for many batches (its peak memory should not grow with the number of stacks)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _load_libc() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_LIBC = _load_libc() if hasattr(os, "fork") else None


_PR_SET_PDEATHSIG = 1


def isolate_environment() -> None:
    """Empty this process's environment (``os.environ`` and the C library's, which is
    what KCL's ``file.read_env`` reads): every KCL run happens in a worker after this.

    The strings the process started with stay in its memory and in
    ``/proc/<pid>/environ``; KCL cannot read them: kcl-lib refuses every path outside
    the folder of the file that reads (docs/security.md), which the tests hold it to."""
    os.environ.clear()


_SANDBOX_FAILED = 70  # a worker's exit code when it could not restrict itself


def _worker_main(
    conn: Connection,
    stderr_path: str,
    memory_bytes: int,
    tmp: str,
    parent: int,
    sandbox: Sandbox | None = None,
) -> None:
    """The loop of one worker: receive (function, argument, CPU budget), send the outcome."""
    # a crash is reported by the parent; a traceback dump from the caller's faulthandler
    # (inherited through fork, writing to the caller's stderr) would only add noise
    faulthandler.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _LIBC is not None:
        # a parent killed with SIGKILL cannot stop its workers: the kernel does
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the line above: nobody will send us work
    tempfile.tempdir = tmp
    isolate_environment()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    if sandbox is not None:
        try:
            restrict(sandbox)
        except OSError as exc:
            os.write(2, f"cannot restrict itself (Landlock): {exc}\n".encode())
            os._exit(_SANDBOX_FAILED)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, arg, cpu_budget = message
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + cpu_budget) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        outcome: Outcome
        try:
            outcome = Done(fn(arg))
        except Exception as exc:  # the task's own failure is data, never a traceback
            outcome = Failed(f"{type(exc).__name__}: {exc}")
        resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        try:
            conn.send(outcome)
        except (OSError, ValueError):
            return
        del outcome
        _trim()


class _Worker:
    def __init__(self, ctx: Any, limits: Limits, tmp: str, sandbox: Sandbox | None) -> None:
        fd, self.stderr_path = tempfile.mkstemp(prefix="worker-", suffix=".stderr", dir=tmp)
        os.close(fd)
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.process = ctx.Process(
            target=_worker_main,
            args=(child, self.stderr_path, limits.memory_mib << 20, tmp, os.getpid(), sandbox),
            daemon=True,
        )
        self.process.start()
        child.close()
        self.task: Any = None
        self.cpu_budget = 0.0
        self.wall_budget = 0.0
        self.deadline = 0.0

    def stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - _STDERR_TAIL))
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, *, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                kill = True
        if not kill:
            self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()
        Path(self.stderr_path).unlink(missing_ok=True)


def _died(worker: _Worker, limits: Limits, *, timed_out: bool) -> Died:
    if timed_out:
        return Died(f"did not finish within {worker.wall_budget:.0f} s", "time")
    code = worker.process.exitcode
    tail = worker.stderr_tail()
    if code == _SANDBOX_FAILED:
        return Died(f"worker {tail.strip() or 'could not restrict itself'}", "sandbox")
    if code is not None and code < 0:
        sig = -code
        if sig == signal.SIGXCPU:
            return Died(f"used more than {worker.cpu_budget:.0f} s of CPU time", "cpu")
        if "memory allocation of" in tail or "out of memory" in tail.lower():
            return Died(f"needed more than {limits.memory_mib} MiB of memory", "memory")
        if sig == signal.SIGSEGV or "overflowed its stack" in tail:
            return Died(
                "crashed with a stack overflow (most likely a function that calls itself "
                "without end)",
                "stack",
            )
        if sig == signal.SIGKILL:
            return Died("was killed (by the system, out of memory?)", "memory")
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return Died(f"crashed ({name})", None)
    return Died(f"stopped unexpectedly (exit code {code})", None)


class Pool(Generic[T]):
    """Up to ``jobs`` workers; submit tasks, iterate :meth:`outcomes` as they finish.

    Tasks may be submitted while iterating (a crashed batch re-run stack by stack).
    Use as a context manager: leaving it stops every worker.
    """

    def __init__(
        self,
        jobs: int,
        limits: Limits,
        *,
        root: Path | None = None,
        writable: Sequence[str] = (),
    ) -> None:
        """``root``: the repository the workers compile, whose sandbox they run in
        (:func:`konfig.build.sandbox.for_repository`, ``writable`` added); None: none."""
        self.jobs = max(1, jobs)
        self.limits = limits
        self.root = root
        self.writable = tuple(writable)
        self._ctx = multiprocessing.get_context("fork")
        self._queue: deque[tuple[Callable[[Any], Any], T, float]] = deque()
        self._workers: list[_Worker] = []
        self._tmp: str | None = None  # the workers' temporary folder, made with the first

    def __enter__(self) -> Pool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, fn: Callable[[T], Any], task: T, *, cpu_budget: float | None = None) -> None:
        budget = self.limits.cpu_seconds if cpu_budget is None else cpu_budget
        self._queue.append((fn, task, budget))

    def close(self) -> None:
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop(kill=worker.task is not None)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _dispatch(self) -> None:
        while self._queue:
            idle = next((w for w in self._workers if w.task is None), None)
            if idle is None:
                if len(self._workers) >= self.jobs:
                    return
                if self._tmp is None:
                    self._tmp = tempfile.mkdtemp(prefix="konfig-workers-")
                sandbox = (
                    None
                    if self.root is None
                    else for_repository(self.root, self._tmp, writable=self.writable)
                )
                idle = _Worker(self._ctx, self.limits, self._tmp, sandbox)
                self._workers.append(idle)
            fn, task, budget = self._queue.popleft()
            idle.task = task
            idle.cpu_budget = budget
            idle.wall_budget = self.limits.wall_seconds(budget)
            idle.deadline = time.monotonic() + idle.wall_budget
            try:
                idle.conn.send((fn, task, budget))
            except (OSError, ValueError):
                pass  # a worker that died idle: seen by its sentinel below

    def outcomes(self) -> Iterator[tuple[T, Outcome]]:
        """Yield ``(task, outcome)`` until no task is queued or running."""
        while True:
            self._dispatch()
            busy = [w for w in self._workers if w.task is not None]
            if not busy:
                return
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
            now = time.monotonic()
            for worker in busy:
                outcome: Outcome | None = None
                if worker.conn in ready:
                    try:
                        outcome = worker.conn.recv()
                    except (EOFError, OSError):
                        worker.process.join(5)
                        outcome = _died(worker, self.limits, timed_out=False)
                elif worker.process.sentinel in ready:
                    worker.process.join(5)
                    outcome = _died(worker, self.limits, timed_out=False)
                elif now >= worker.deadline:
                    worker.process.kill()
                    worker.process.join()
                    outcome = _died(worker, self.limits, timed_out=True)
                if outcome is None:
                    continue
                task, worker.task = worker.task, None
                if isinstance(outcome, Died):
                    self._workers.remove(worker)
                    worker.stop(kill=True)
                yield task, outcome
