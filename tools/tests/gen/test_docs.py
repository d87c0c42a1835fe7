"""`konfig gen docs`: the frontend models reference, generated from the KCL source."""

from __future__ import annotations

from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder

from konfig.gen.docs import parse_models, render_markdown, undocumented

SOURCE = '''
schema Base:
    """Shared fields.

    Attributes
    ----------
    name: str, required
        The name.
    """
    name: str

schema Thing(Base):
    """A thing | with a pipe.

    Attributes
    ----------
    size: int, default 1
        How big.
    ghost: str, optional
        Documented but not declared.
    """
    size: int = 1
    $type?: "a" | "b"
    _private = 3

    check:
        size > 0, "size must be > 0"
'''


def test_parse_and_render() -> None:
    models = parse_models({"thing.k": SOURCE})
    assert [m.name for m in models] == ["Base", "Thing"]
    thing = models[1]
    assert thing.base == "Base"
    assert [(a.name, a.type, a.required, a.default) for a in thing.attributes] == [
        ("size", "int", False, "1"),
        ("type", '"a" | "b"', False, None),
    ]
    assert thing.attributes[0].description == "How big."
    assert undocumented(models) == [
        "thing.k: Thing.type has no docstring entry",
        "thing.k: Thing documents unknown attribute ghost",
    ]
    text = render_markdown(models)
    assert "| [Thing](#thing) | A thing \\| with a pipe. |" in text
    assert "| `name` (required) | `str` |  | The name. |" in text
    assert '| `type` | `"a" \\| "b"` |  |  |' in text
    assert "Also has every attribute of [Base](#base)." in text


def test_committed_reference_is_up_to_date_and_complete(konfig: KonfigRunner) -> None:
    result = konfig("gen", "docs", "--check", cwd=TEMPLATE_ROOT)
    assert result.code == 0, result.err
    text = (TEMPLATE_ROOT / "docs/models/frontend.md").read_text()
    for name in ("## Server", "## Job", "## CronJob", "## Manifests", "`disruptionBudget`"):
        assert name in text


def test_check_fails_on_an_undocumented_attribute(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    assert konfig("gen", "docs", cwd=repo_builder.root).code == 0
    model = repo_builder.root / "base/pkg/models/frontend/server.k"
    declared = '    strategy: "RollingUpdate" | "Recreate" = "RollingUpdate"\n'
    text = model.read_text()
    assert declared in text
    model.write_text(text.replace(declared, declared + "    paused: bool = False\n"))
    result = konfig("gen", "docs", "--check", cwd=repo_builder.root)
    assert result.code == 1
    assert "Server.paused has no docstring entry" in result.err
    assert "docs/models/frontend.md: out of date" in result.err
