from pathlib import Path

import pytest

from konfig.build import kcl

PRETTY_EVAL = (
    "EvaluationError\n \x1b[1;38;5;12m-->\x1b[0m /r/appops/a/dev/main.k:2:6\n"
    "\x1b[1;38;5;12m  |\x1b[0m\n\x1b[1;38;5;12m2 |\x1b[0m _b = frontend.Server {\n"
    "\x1b[1;38;5;12m  |\x1b[0m\x1b[1;38;5;9m      ^\x1b[0m "
    "\x1b[1;38;5;9mInstance check failed\x1b[0m\n"
    "\n --> /r/base/pkg/models/frontend/server.k:6:1\n  |\n"
    '6 |         replicas >= 0, "replicas must be >= 0"\n'
    "  |  Check failed on the condition: replicas must be >= 0, got -1\n"
)


def test_parse_diagnostics_strips_colour_and_relativises() -> None:
    diags = kcl.parse_diagnostics(PRETTY_EVAL, root=Path("/r"))
    assert diags[0] == kcl.Diagnostic(
        "Instance check failed", "appops/a/dev/main.k", 2, 6, "EvaluationError"
    )
    assert diags[1].file == "base/pkg/models/frontend/server.k"
    assert diags[1].line == 6


def test_parse_diagnostics_without_location() -> None:
    text = "error[E3M38]: EvaluationError - Cannot find the kcl file, please check /x.k\n"
    (diag,) = kcl.parse_diagnostics(text)
    assert diag.file is None
    assert diag.kind == "EvaluationError"
    assert "Cannot find the kcl file" in diag.message


def test_run_returns_data_and_options(tmp_path: Path) -> None:
    main = tmp_path / "main.k"
    main.write_text('env = option("env")\nn = option("n")\ns = option("s")\n')
    out = kcl.run([str(main)], work_dir=tmp_path, options=[("env", "prod"), ("n", 3), ("s", "3")])
    assert out == {"env": "prod", "n": 3, "s": "3"}


def test_run_reports_syntax_error_with_location(tmp_path: Path) -> None:
    main = tmp_path / "main.k"
    main.write_text("a = {\n  b = \n")
    with pytest.raises(kcl.KclError) as info:
        kcl.run([str(main)], work_dir=tmp_path, root=tmp_path)
    first = info.value.diagnostics[0]
    assert (first.file, first.line, first.kind) == ("main.k", 2, "InvalidSyntax")
    # KCL repeats the same syntax error; we report each location and message once
    assert len(set(info.value.diagnostics)) == len(info.value.diagnostics)


def test_version_is_pinned_kcl() -> None:
    assert kcl.version().startswith("0.13.")


def test_stale_kcl_test_files_are_removed(tmp_path: Path) -> None:
    import os
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    stale = tmp_path / f"_kcl_test_{proc.pid}.k"
    stale.write_text("x = 1\n")
    live = tmp_path / f"_kcl_test_{os.getpid()}.k"
    live.write_text("x = 1\n")
    other = tmp_path / "main_test.k"
    other.write_text("x = 1\n")
    assert kcl.remove_stale_test_files(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_library_version_without_loading_kcl_lib() -> None:
    from importlib import metadata

    assert kcl.library_version() == metadata.version("kcl-lib") == kcl.version()
