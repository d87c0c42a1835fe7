"""YAML reading is bounded: an alias bomb, a self-referring alias, deep nesting or a huge
file is a ConfigError with the file (and line), in milliseconds and a few megabytes."""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.repos import RepoBuilder

from konfig.errors import ConfigError
from konfig.repo import yamlio


def laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level an alias list of the level below."""
    lines = ["name: dev", "a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_quickly_with_file_and_line() -> None:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as raised:
        yamlio.load_yaml_text(laughs(), file="appops/shop/dev/stack.yaml")
    assert time.perf_counter() - started < 1.0
    assert raised.value.file == "appops/shop/dev/stack.yaml"
    assert raised.value.line == 3  # the first alias
    assert "aliases expand this document to 4,412,961,507 values" in str(raised.value)


def test_alias_that_contains_itself_is_refused() -> None:
    with pytest.raises(ConfigError, match="refers to a value that contains it"):
        yamlio.load_yaml_text("name: dev\nloop: &l [1, *l]\n", file="s.yaml")


def test_ordinary_aliases_still_load() -> None:
    text = "defaults: &d {replicas: 2, tier: web}\nprod: *d\nlist: &l [1, 2]\nagain: *l\n"
    data = yamlio.load_yaml_text(text, file="s.yaml")
    assert data["prod"] == {"replicas": 2, "tier": "web"} and data["again"] == [1, 2]
    # a few levels of reuse stay well under the bound
    assert (
        yamlio.load_yaml_text(laughs(levels=3, width=9), file="s.yaml")["a3"][0][0][0][0] == "lol"
    )


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(ConfigError, match="nests deeper than 100 levels"):
        yamlio.load_yaml_text("x: " + "[" * 150 + "]" * 150 + "\n", file="deep.yaml")


def test_huge_or_binary_config_files_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "stack.yaml"
    big.write_bytes(b"name: dev\n" + b"# padding\n" * (yamlio.MAX_FILE_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="larger than 8 MiB"):
        yamlio.load_yaml_file(big, root=tmp_path)
    binary = tmp_path / "project.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        yamlio.load_yaml_file(binary, root=tmp_path)


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize(
    ("command", "code"),
    [(["check"], 1), (["list"], 1), (["compile", "--all", "--no-cache"], 1)],
)
def test_commands_stay_small_on_an_alias_bomb(
    repo_builder: RepoBuilder, command: list[str], code: int
) -> None:
    """Before the bound, `konfig check` passed 3 GiB on this stack.yaml: here the command
    runs with 1 GiB of address space and must answer with the file, never a traceback
    (compile reports the broken stack as an error and compiles the other one)."""
    repo_builder.stack("shop", "dev", stack_yaml=laughs())
    repo_builder.stack("shop", "prod")
    proc = subprocess.run(
        [sys.executable, "-m", "konfig", *command],
        cwd=repo_builder.root,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: _limited(1 << 30),
        check=False,
    )
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "appops/shop/dev/stack.yaml:3" in proc.stdout + proc.stderr


def test_a_key_set_twice_is_an_error_at_the_second(tmp_path: Path) -> None:
    """PyYAML keeps the last value silently; a config that means two things is refused."""
    path = tmp_path / "stack.yaml"
    path.write_text(
        "name: dev\nkubernetes:\n  context: staging\nkubernetes:\n  context: production\n"
    )
    with pytest.raises(ConfigError) as info:
        yamlio.load_yaml_file(path, root=tmp_path)
    assert info.value.file == "stack.yaml" and info.value.line == 4
    assert "duplicate key `kubernetes` (first at line 2)" in info.value.message
    with pytest.raises(ConfigError, match=r"duplicate key `a` \(first at line 2\)"):
        yamlio.load_yaml_text("top:\n  a: 1\n  b: 2\n  a: 3\n", file="x.yaml")


def test_merge_keys_may_be_overridden() -> None:
    data = yamlio.load_yaml_text("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n", file="x.yaml")
    assert data["use"] == {"x": 1, "y": 3}


# --- writing: the block emitter gives PyYAML's bytes ---------------------------------

NASTY = [
    "",
    " ",
    "a",
    "yes",
    "No",
    "ON",
    "off",
    "null",
    "Null",
    "~",
    "y",
    "n",
    "true",
    "False",
    "1",
    "-1",
    "0x1F",
    "0o17",
    "1_000",
    "1.5",
    "1e3",
    "-.inf",
    ".NaN",
    "1:20",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "<<",
    "=",
    "-",
    "- a",
    "-a",
    "?",
    "? a",
    ":",
    "a:",
    "a: b",
    "a:b",
    "#",
    "a #b",
    "a#b",
    "'",
    '"',
    "'a'",
    "\\",
    "\t",
    "a\tb",
    " a",
    "a ",
    "a  b",
    "@a",
    "`a",
    "!a",
    "&a",
    "*a",
    "%a",
    "|",
    ">",
    "{a}",
    "[a]",
    "a,b",
    "a]",
    "é",
    "日本語",
    "\x00",
    "\x07",
    "\ufeff",
    "\x85",
    "\u2028",
    "\ud800",
    "😀",
    "512Mi",
    "100m",
    "0.5",
    "nginx:1.25",
    "http://x.example/a?b=c#d",
    "a" * 130,
    "b" * 200 + " c",
    "k" * 127,
    "x\ny",
    "x\n",
    "x\n\n",
    "\nx",
    " x\ny",
    "x \ny",
    "x\ty\nz",
    "x\r\ny",
    "x\n\ny",
    "x\n\x85y",
    "line one\nline two\n",
    "- a\n- b\n",
    "a: b\nc: d\n",
    "é\nü",
    "\n",
    "w " * 2100,
    "a::b",
    "a:1",
    "a:/b",
    "b:-",
    "x:80:",
    "apps/v1:Deployment:ns:web",
    "Yes:",
    "v" * 5000,
    "p0123-dev",
    "apps/v1",
    "app.kubernetes.io/name",
]


def _random_data(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 5 and roll < 0.3:
        return {_random_string(rng): _random_data(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    if depth < 5 and roll < 0.5:
        return [_random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return rng.choice(
        [
            _random_string(rng),
            _random_string(rng),
            None,
            True,
            False,
            rng.randint(-(10**20), 10**20),
            rng.randint(-5, 5),
            rng.uniform(-1e6, 1e6),
            rng.choice([0.0, -0.0, 1e17, 1e-7, float("inf"), float("-inf"), float("nan")]),
        ]
    )


def _random_string(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(NASTY)
    alphabet = "aZ09_-./: #'\"\n\t é,[]{}!&*?|>%@`~"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def test_dump_yaml_writes_what_pyyaml_writes() -> None:
    """Every form the block emitter writes itself (or leaves to PyYAML) is PyYAML's byte
    for byte: nasty strings as keys and values, at several depths, in sequences."""
    rng = random.Random(33)
    docs: list[Any] = [{s: s} for s in NASTY] + [[s] for s in NASTY]
    docs += [{"a": {"b": [{"c": s, "d": [s, [s, {"e": s}]]}]}} for s in NASTY]
    docs += [_random_data(rng) for _ in range(3000)]
    fast = 0
    for doc in docs:
        expected = yamlio._dump_slowly(doc)
        assert yamlio.dump_yaml(doc) == expected, doc
        try:
            yamlio._Block().document(doc) if type(doc) in (dict, list) else None
            fast += 1
        except yamlio._Slow:
            pass
    assert fast > len(docs) * 0.6  # most of them never reach PyYAML's emitter


def test_dump_yaml_of_a_compiled_spec_is_pyyaml_s(tmp_path: Path) -> None:
    """A Spec of the examples (Deployment, Service, a ConfigMap with a file's text)."""
    spec = {
        "resources": [
            {
                "id": "apps/v1:Deployment:shop:web",
                "type": "Kubernetes",
                "attributes": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"labels": {"app.kubernetes.io/name": "web"}, "name": "web"},
                    "spec": {
                        "replicas": 2,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "args": ["--port", "8080", "-v"],
                                        "image": "nginx:1.25",
                                        "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}},
                                    }
                                ]
                            }
                        },
                    },
                },
                "dependsOn": [],
                "extensions": {},
            },
            {
                "id": "v1:ConfigMap:shop:conf",
                "type": "Kubernetes",
                "attributes": {"data": {"app.conf": "listen 80;\nroot /srv;\n", "x": "1.0"}},
                "dependsOn": ["apps/v1:Deployment:shop:web"],
                "extensions": {"kusion.io/a": True, "b": None, "c": 0.25},
            },
        ]
    }
    text = yamlio.dump_yaml(spec)
    assert text == yamlio._dump_slowly(spec)
    assert yamlio._Block().document(spec) == text  # no fallback for an ordinary Spec
