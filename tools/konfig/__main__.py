"""The ``konfig`` command (and ``python -m konfig``).

``konfig --version`` is answered here, before the CLI and click are loaded: CI logs
ask for it on every run, and it should cost no more than starting Python.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from konfig import __version__

        # the same line click's version option prints
        sys.stdout.write(f"konfig, version {__version__}\n")
        sys.exit(0)
    from konfig.cli import main as run_cli

    run_cli()


if __name__ == "__main__":
    main()
