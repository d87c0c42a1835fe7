"""The template's controller-side manifests for pull delivery (pull/): the Flux ones are
accepted by the API server with the CRDs of the Flux release hack/flux pins, and the
Argo CD ApplicationSet's directories are exactly the stack folders publish writes."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
PULL = ROOT / "pull"
GOLDEN_TREE = Path(__file__).parent / "pipeline" / "golden" / "rendered" / "tree"


def test_the_applicationset_generates_one_application_per_stack_folder() -> None:
    (doc,) = yaml.safe_load_all((PULL / "argocd/applicationset.yaml").read_text())
    (generator,) = doc["spec"]["generators"]
    assert generator["git"]["revision"] == "rendered"
    (pattern,) = [d["path"] for d in generator["git"]["directories"]]
    folders = {p.relative_to(GOLDEN_TREE).as_posix() for p in GOLDEN_TREE.rglob("*") if p.is_dir()}
    stack_folders = {p.parent.relative_to(GOLDEN_TREE).as_posix()
                     for p in GOLDEN_TREE.glob("*/*/*/kustomization.yaml")}  # fmt: skip
    assert stack_folders and {f for f in folders if fnmatch.fnmatch(f, pattern)} == stack_folders
    assert "index .path.segments 0" in doc["spec"]["template"]["spec"]["destination"]["name"]


def test_one_flux_file_per_cluster_folder() -> None:
    clusters = {p.name for p in GOLDEN_TREE.iterdir() if p.is_dir()}
    assert {p.stem for p in (PULL / "flux").glob("*.yaml")} == clusters
    for cluster in clusters:
        docs = list(yaml.safe_load_all((PULL / f"flux/{cluster}.yaml").read_text()))
        source, kustomization = docs
        assert source["spec"]["ref"] == {"branch": "rendered"}
        assert kustomization["spec"]["path"] == f"./{cluster}"
        assert kustomization["spec"]["sourceRef"]["name"] == source["metadata"]["name"]


@pytest.mark.cluster
def test_the_flux_manifests_pass_the_api_servers_validation(cluster: Cluster) -> None:
    crds = subprocess.run(
        [str(ROOT / "hack/flux"), "crds"], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split()
    assert any("kustomizations" in c for c in crds) and any("gitrepositories" in c for c in crds)
    for crd in crds:
        cluster.kubectl("apply", "--server-side", "-f", crd)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("create", "namespace", "flux-system", check=False)
    for path in sorted((PULL / "flux").glob("*.yaml")):
        cluster.kubectl("apply", "--dry-run=server", "--server-side", "-f", str(path))
    # and a wrong one is refused: the check can fail
    bad = (PULL / "flux/admin.yaml").read_text().replace("prune: true", "prune: maybe")
    res = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=bad, check=False)
    assert res.returncode != 0 and "prune" in res.stderr


@pytest.mark.parametrize("cluster_folder", ["admin", "edge"])
def test_kustomize_builds_each_cluster_folder_into_exactly_its_objects(
    cluster_folder: str,
) -> None:
    """What kustomize-controller runs on the folder (kustomize, here kubectl's) gives back
    every published object unchanged, and nothing else."""
    from konfig.build.rendered import dump

    folder = GOLDEN_TREE / cluster_folder
    built = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    got = sorted(dump(d).decode() for d in yaml.safe_load_all(built.stdout) if d)
    want = sorted(p.read_text() for p in folder.rglob("*.yaml") if p.name != "kustomization.yaml")
    assert got == want and len(want) >= 3
