"""``python -m tests.fetch_reference``: fill the reference folder (``tests/reference.py``) from
upstream's releases, for a clone without the reference pack beside it (a contributor's
laptop, GitHub's runners). The workflows run it before ``.ci/run``.

- OME's BaseModel and ClusterBaseModel CRDs come from the OME module the cluster tier
  builds (``tests/cluster/ome/go.mod`` pins the version, its ``go.sum`` checks what Go's
  module proxy serves): ``config/crd/full/``, which OME's ``ome-crd`` chart ships byte for
  byte. It needs the Go toolchain.
- Metacontroller's three CRDs come from its release ``METACONTROLLER_VERSION``: goreleaser
  attaches ``manifests/production/*`` to each release, ``metacontroller-crds-v1.yaml``
  among them. The download must have the SHA-256 pinned here, taken from that file at the
  release's tag (``76b818bd``); it is split into one file per CRD, named as the pack names
  them, each the bytes of its document.

A file already in the folder is kept, so the fetch never touches the reference pack itself.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import urllib.request
from pathlib import Path

import yaml

from tests import reference
from tests.cluster import builds

METACONTROLLER_VERSION = "v4.17.2"
METACONTROLLER_CRDS_URL = (
    f"https://github.com/metacontroller/metacontroller/releases/download/{METACONTROLLER_VERSION}/metacontroller-crds-v1.yaml"
)
METACONTROLLER_CRDS_SHA256 = "58146fd8ad334094786bf87eacc75d6b6c4274ef8111fe99f9de4c878007fab5"
OME_CRD_FOLDER = Path("config") / "crd" / "full"
DOWNLOAD_TIMEOUT_SECONDS = 120


class FetchError(Exception):
    """A reference could not be fetched, or what was fetched is not what is pinned."""


def metacontroller_crds(url: str = METACONTROLLER_CRDS_URL) -> dict[str, bytes]:
    """Metacontroller's CRDs by file name, from the release's manifest at ``url``, checked
    against the pinned SHA-256 before anything is read from it."""
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            data = response.read()
    except OSError as error:
        raise FetchError(f"cannot download {url}: {error}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != METACONTROLLER_CRDS_SHA256:
        raise FetchError(f"{url} has SHA-256 {digest}, not the pinned {METACONTROLLER_CRDS_SHA256}: refusing it")
    return {_crd_file_name(document): document for document in _documents(data)}


def _documents(data: bytes) -> list[bytes]:
    """Each YAML document of a stream whose documents all start with a ``---`` line, with that line."""
    return [match.group(0) for match in re.finditer(rb"^---\n.*?(?=^---\n|\Z)", data, re.M | re.S)]


def _crd_file_name(document: bytes) -> str:
    """``<group>_<plural>.yaml``, as controller-gen and the reference pack name a CRD's file."""
    spec = yaml.safe_load(document)["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


def ome_crds() -> dict[str, Path]:
    """OME's model CRDs by file name, in the OME module Go downloaded."""
    module = builds.module_directory(builds.OME)
    return {name: module / OME_CRD_FOLDER / name for name in reference.OME_CRDS}


def fetch(into: Path, url: str = METACONTROLLER_CRDS_URL) -> list[str]:
    """Write every reference CRD missing from ``into``; what was done with each, one line a file."""
    names = (*reference.METACONTROLLER_CRDS, *reference.OME_CRDS)
    missing = {name for name in names if not (into / name).is_file()}
    sources: dict[str, tuple[bytes, str]] = {}
    if missing & set(reference.METACONTROLLER_CRDS):
        fetched = metacontroller_crds(url)
        if sorted(fetched) != sorted(reference.METACONTROLLER_CRDS):
            raise FetchError(f"{url} holds {sorted(fetched)}, not {sorted(reference.METACONTROLLER_CRDS)}")
        sources.update({name: (data, url) for name, data in fetched.items()})
    if missing & set(reference.OME_CRDS):
        sources.update({name: (path.read_bytes(), str(path)) for name, path in ome_crds().items()})
    into.mkdir(parents=True, exist_ok=True)
    done = []
    for name in names:
        target = into / name
        if name not in missing:
            done.append(f"kept {target}")
            continue
        data, source = sources[name]
        partial = target.with_name(f".{name}.partial")
        partial.write_bytes(data)
        partial.replace(target)
        done.append(f"wrote {target} from {source}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fetch_reference",
                                     description="Fill the reference folder (tests/reference.py) with what it lacks, from upstream.")
    parser.add_argument("--metacontroller-crds-url", default=METACONTROLLER_CRDS_URL, metavar="URL",
                        help="where to download metacontroller-crds-v1.yaml, such as a mirror of the release "
                             "(file:// too); its SHA-256 must still be the pinned one (default: %(default)s)")
    url = parser.parse_args(argv).metacontroller_crds_url
    if shutil.which("go") is None:
        sys.stderr.write("tests.fetch_reference: OME's CRDs come from its Go module: install the Go toolchain first\n")
        return 1
    try:
        for line in fetch(reference.crds(), url):
            sys.stdout.write(line + "\n")
    except (FetchError, RuntimeError) as error:
        sys.stderr.write(f"tests.fetch_reference: {error}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
