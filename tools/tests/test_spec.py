import pytest
import yaml

from konfig.spec import SpecError, spec_from_output


def _deploy(name: str, ns: str = "apps") -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name},
    }


def test_spec_sorted_and_canonical() -> None:
    out = {
        "resources": [
            {"attributes": _deploy("b"), "dependsOn": ["v1:Namespace:apps", "v1:Namespace:apps"]},
            {"attributes": {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "apps"}}},
        ]
    }
    spec = spec_from_output(out)
    assert [r.id for r in spec.resources] == ["apps/v1:Deployment:apps:b", "v1:Namespace:apps"]
    assert spec.resources[0].depends_on == ("v1:Namespace:apps",)
    text = spec.to_yaml()
    assert text.index("apiVersion") < text.index("kind") < text.index("metadata")
    assert yaml.safe_load(text) == spec.to_dict()
    shuffled = {"resources": list(reversed(out["resources"]))}
    assert spec_from_output(shuffled).to_yaml() == text
    assert spec_from_output(shuffled).digest() == spec.digest()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({}, "no `resources` list"),
        ({"resources": {}}, "must be a list"),
        ({"resources": [1]}, "must be a mapping"),
        ({"resources": [{"id": "x"}]}, "no `attributes`"),
        ({"resources": [{"attributes": _deploy("a"), "dependsOn": "x"}]}, "`dependsOn` must be"),
    ],
)
def test_invalid_output(output: object, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spec_from_output(output)
