"""The reference folder and its fetch: one folder, named in one place; a missing file skips
a test, or fails it under ``CI=true``; and the fetch writes exactly the reference pack's
files, refusing a download that is not the pinned release's."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from tests import fetch_reference, reference
from tests.fetch_reference import METACONTROLLER_CRDS_SHA256, FetchError, fetch, metacontroller_crds, ome_crds
from tests.unavailable import unavailable

RELEASE_ORDER = (
    "metacontroller.k8s.io_compositecontrollers.yaml",
    "metacontroller.k8s.io_controllerrevisions.yaml",
    "metacontroller.k8s.io_decoratorcontrollers.yaml",
)
"""The order of the documents in Metacontroller's metacontroller-crds-v1.yaml."""


def release_manifest(tmp_path: Path, tampered: bool = False) -> str:
    """Metacontroller's release manifest put back together from the reference folder's three
    files, as a ``file://`` URL the fetch can download."""
    data = b"".join(reference.crd(name).read_bytes() for name in RELEASE_ORDER)
    path = tmp_path / "metacontroller-crds-v1.yaml"
    path.write_bytes(data.replace(b"CompositeController", b"CompositeKontroller", 1) if tampered else data)
    return path.as_uri()


def test_the_folder_is_named_in_one_place_only() -> None:
    repo = reference.REPO
    naming = [path.relative_to(repo).as_posix() for folder in ("tests", "hooks", "bench") for path in (repo / folder).rglob("*.py")
              if re.search(rf"{reference.VARIABLE}|/ *[\"']shared[\"']|[\"']shared[\"'] */|\.\./shared", path.read_text(encoding="utf-8"))]
    assert naming == ["tests/reference.py"]


def test_the_folder_is_the_variables_else_the_pack_beside_the_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(reference.VARIABLE, raising=False)
    assert Path(os.path.normpath(reference.folder())) == reference.REPO.parent.joinpath("shared", "reference")
    monkeypatch.setenv(reference.VARIABLE, str(tmp_path))
    assert reference.crds() == tmp_path / "crds"


@pytest.mark.parametrize("ci", ["", "true"], ids=["a clone", "CI=true"])
def test_a_missing_reference_skips_saying_how_to_fetch_it_and_fails_in_ci(ci: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(reference.VARIABLE, str(tmp_path))
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match=rf"needs upstream's ome\.io_basemodels\.yaml in {tmp_path}/crds .*`{re.escape(reference.FETCH)}` fetches it"):
        reference.crd("ome.io_basemodels.yaml")


def test_unavailable_is_the_one_policy_for_tools_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="kubectl is not installed"):
        unavailable("kubectl is not installed")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        unavailable("kubectl is not installed")


def test_the_pinned_checksum_is_that_of_the_release_manifest_the_pack_was_cut_from(tmp_path: Path) -> None:
    """The reference pack split metacontroller-crds-v1.yaml at v4.17.2 into three files; put
    back together they are the release's manifest, byte for byte."""
    data = Path(release_manifest(tmp_path).removeprefix("file://")).read_bytes()
    assert hashlib.sha256(data).hexdigest() == METACONTROLLER_CRDS_SHA256


def test_the_release_manifest_is_split_into_the_packs_files_byte_for_byte(tmp_path: Path) -> None:
    fetched = metacontroller_crds(release_manifest(tmp_path))
    assert fetched == {name: reference.crd(name).read_bytes() for name in reference.METACONTROLLER_CRDS}


def test_a_download_that_is_not_the_pinned_release_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=f"has SHA-256 [0-9a-f]{{64}}, not the pinned {METACONTROLLER_CRDS_SHA256}: refusing it"):
        metacontroller_crds(release_manifest(tmp_path, tampered=True))


def test_omes_crds_in_the_module_the_cluster_tier_builds_are_the_packs() -> None:
    if shutil.which("go") is None:
        unavailable("needs the Go toolchain, which downloads OME's module")
    assert {name: path.read_bytes() for name, path in ome_crds().items()} == {
        name: reference.crd(name).read_bytes() for name in reference.OME_CRDS
    }


def test_the_fetch_fills_what_is_missing_and_keeps_what_is_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    into = tmp_path / "reference" / "crds"
    into.mkdir(parents=True)
    kept = into / reference.METACONTROLLER_CRDS[0]
    kept.write_bytes(b"a file of the pack's own\n")
    monkeypatch.setattr(fetch_reference, "ome_crds", lambda: {name: reference.crd(name) for name in reference.OME_CRDS})
    done = fetch(into, release_manifest(tmp_path))
    assert done[0] == f"kept {kept}" and len(done) == 5 and all(line.startswith("wrote ") for line in done[1:])
    assert kept.read_bytes() == b"a file of the pack's own\n"
    for name in (*reference.METACONTROLLER_CRDS[1:], *reference.OME_CRDS):
        assert (into / name).read_bytes() == reference.crd(name).read_bytes()
    assert sorted(path.name for path in into.iterdir()) == sorted((*reference.METACONTROLLER_CRDS, *reference.OME_CRDS))
    assert fetch(into, "file:///nowhere") == [f"kept {into / name}" for name in (*reference.METACONTROLLER_CRDS, *reference.OME_CRDS)]


def test_the_command_says_in_one_line_what_it_could_not_fetch_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("go") is None:
        unavailable("needs the Go toolchain, which the command asks for first")
    monkeypatch.setenv(reference.VARIABLE, str(tmp_path / "reference"))
    missing = (tmp_path / "nowhere.yaml").as_uri()
    assert fetch_reference.main(["--metacontroller-crds-url", missing]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"tests.fetch_reference: cannot download {missing}: ")
    assert len(captured.err.splitlines()) == 1 and not (tmp_path / "reference").exists()


def test_the_command_fetches_from_a_mirror_of_the_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("go") is None:
        unavailable("needs the Go toolchain, which the command asks for first")
    mirror = release_manifest(tmp_path)
    packs = {name: reference.crd(name) for name in reference.OME_CRDS}
    monkeypatch.setattr(fetch_reference, "ome_crds", lambda: packs)
    monkeypatch.setenv(reference.VARIABLE, str(tmp_path / "reference"))
    assert fetch_reference.main(["--metacontroller-crds-url", mirror]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote {tmp_path}/reference/crds/{reference.METACONTROLLER_CRDS[0]} from {mirror}"
    )
