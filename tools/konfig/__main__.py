"""The ``konfig`` command (and ``python -m konfig``).

``konfig --version`` is answered here, before the CLI and click are loaded: CI logs
ask for it on every run, and it should cost no more than starting Python.
"""

from __future__ import annotations

import sys

_PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    """Keep other processes of the same user (a KCL or OpenTofu program a pull request
    wrote, a provider) from reading this one's memory and ``/proc/<pid>/environ``, which
    hold the keys and credentials konfig was given. Linux only; root is not stopped."""
    if sys.platform != "linux":
        return
    import ctypes

    try:
        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from konfig import __version__

        # the same line click's version option prints
        sys.stdout.write(f"konfig, version {__version__}\n")
        sys.exit(0)
    _not_dumpable()
    from konfig import cli

    cli.main()


if __name__ == "__main__":
    main()
