"""The README and docs/ agree with the code they describe, and a reader can follow them.

Tables are held to their one source (the settings, the CLI's exit statuses, the catalogue
of reasons, the modules, the kustomization; the lifecycle costs in tests/simulation/test_lifecycle.py); every link and anchor resolves; every command
block is either run by a test or plainly a command for a cluster or a repository.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import yaml

from hooks.cli import EXIT_STATUSES
from hooks.reasons import ConditionType, Reason
from tests import docs
from tests.configuration_doc import tables
from tests.status_doc import table as status_table

REPO = docs.REPO
README = docs.README.read_text(encoding="utf-8")
# Commands for a cluster, an image registry or a repository: no test runs them.
CLUSTER_COMMANDS = ("kubectl ", "helm ", "docker ", "git ")
LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")
# The reasons OME's own PVC backend gives (OME v1.2.2, pkg/apis/ome/v1beta1/model.go), which the
# pages that compare the two sides quote as OME's: names of another product, not stale ones of ours.
OME_PVC_BACKEND_REASONS = {
    "PVCInvalid",
    "PVCNotFound",
    "PVCNotBound",
    "PVCValidated",
    "PVCMetadataPending",
    "PVCMetadataExtracting",
    "PVCMetadataExtractionFailed",
    "PVCMetadataReady",
    "PVCConfigMissing",
}


def test_readme_is_read_in_five_minutes() -> None:
    assert len(README.splitlines()) <= 200


def test_readme_opens_with_a_title_one_sentence_of_what_this_is_then_the_two_commands() -> None:
    title, what, *_ = README.split("\n\n")
    assert title == "# ome-basemodel-hook"
    assert what.endswith(".") and not re.search(r"[.!?]\s", what), f"one sentence: {what!r}"
    opening = README.split("\n---\n")[0]
    assert "\n## " not in opening
    assert re.findall(r"```sh\n(.*?)\n```", opening, re.S) == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/basemodel-hook serve",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest",
    ]


def test_readme_answers_need_try_and_install_in_its_first_screen() -> None:
    first_screen = "\n".join(README.splitlines()[:50])
    assert "basemodel-hook serve" in first_screen and "pytest" in first_screen
    assert "(#try-it-in-five-minutes)" in first_screen and "(#install)" in first_screen
    assert "## Do you need it?" in first_screen
    assert re.findall(r"^## (.+)$", README, re.M)[:4] == [
        "Do you need it?",
        "What it changes in your cluster, and what it leaves alone",
        "Try it in five minutes",
        "Install",
    ]


def test_module_table_names_every_module_under_hooks() -> None:
    listed = {name for cell in docs.table_after("| module (under `hooks/`) | owns |") for name in re.findall(r"`([^`]+\.py)`", cell)}
    modules = {path.relative_to(REPO / "hooks").as_posix() for path in (REPO / "hooks").rglob("*.py") if path.name != "__init__.py"}
    assert listed == modules


def test_install_table_names_every_file_the_kustomization_applies() -> None:
    listed = {name for cell in docs.table_after("| File | What it installs |") for name in re.findall(r"`([^`]+\.yaml)`", cell)}
    kustomization = yaml.safe_load((REPO / "metacontroller" / "kustomization.yaml").read_text(encoding="utf-8"))
    assert listed == set(kustomization["resources"])


def test_configuration_tables_are_the_ones_printed_from_the_settings() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for group, table in tables().items():
        assert table in page, f"docs/configuration.md: {group}'s table differs from `python -m tests.configuration_doc`"
    documented = set(re.findall(r"^\| `([A-Z_]+)`", page, re.M))
    assert documented == {re.search(r"`([A-Z_]+)`", row).group(1) for table in tables().values() for row in table.splitlines()[2:]}


def test_status_table_is_the_one_printed_from_the_catalogue_of_reasons() -> None:
    page = (REPO / "docs" / "status.md").read_text(encoding="utf-8")
    assert status_table() in page, "docs/status.md: the table of reasons differs from `python -m tests.status_doc`"


def test_every_reason_the_docs_and_the_monitoring_name_is_in_the_catalogue() -> None:
    """A reason renamed or split in the code leaves no stale name in a page, a runbook or a panel."""
    monitoring = "\n".join(path.read_text(encoding="utf-8") for path in sorted((REPO / "metacontroller" / "monitoring").iterdir()))
    text = "\n".join([docs.text(), monitoring, (REPO / "CHANGELOG.md").read_text(encoding="utf-8")])
    named = set(re.findall(r"\b(?:PVC|Job|Metadata|Storage)[A-Z][A-Za-z]+\b|\bInvalidStorageURI\b|\bCrossNamespacePVC\b|\bHandedBack\b", text))
    classes = {node.name for path in (REPO / "hooks").rglob("*.py") for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)}
    assert named - set(Reason) - set(ConditionType) - classes - OME_PVC_BACKEND_REASONS == set()


def test_exit_statuses_are_documented_as_the_cli_gives_them() -> None:
    rows = set(re.findall(r"^\| (\d) \| [^|]+ \| (.+) \|$", (REPO / "docs" / "configuration.md").read_text(encoding="utf-8"), re.M))
    expected = {(str(status), re.sub(r"\b(serve|replay)\b", r"`\1`", meaning)) for status, _, meaning in EXIT_STATUSES}
    assert rows == expected


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(heading) for heading in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_slug_follows_githubs_rules() -> None:
    assert slug("The CRDs and OME's charts") == "the-crds-and-omes-charts"
    assert slug("What it changes in your cluster, and what it leaves alone") == "what-it-changes-in-your-cluster-and-what-it-leaves-alone"


def test_every_link_and_anchor_resolves() -> None:
    broken = []
    for page in docs.PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken


def test_every_docs_section_the_manifests_and_the_code_point_at_exists() -> None:
    sources = [*(REPO / "metacontroller").rglob("*.yaml"), *(REPO / "hooks").rglob("*.py")]
    pointers = {(page, anchor) for source in sources for page, anchor in re.findall(r"(docs/\w+\.md)#([\w-]+)", source.read_text(encoding="utf-8"))}
    assert ("docs/install.md", "the-status-fence") in pointers
    assert not {(page, anchor) for page, anchor in pointers if anchor not in anchors(REPO / page)}


def shell_commands(block: str) -> list[str]:
    """The commands of a shell block, continuation lines joined."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def ci_commands() -> list[str]:
    """What `.ci/run` runs on a clean clone: its commands, out of their timing `step`, comments and
    shell settings left out."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    return [re.sub(r"^step [\w-]+ ", "", line) for line in shell_commands(script) if not line.startswith(("#", "set ", "cd "))]


def test_every_command_block_runs_in_a_test_or_ci_or_is_a_cluster_command() -> None:
    first_two = re.findall(r"```sh\n(.*?)\n```", README.split("---")[0], re.S)
    examples = {match.group(0).split("\n")[1] for pattern in (docs.CURL_EXAMPLE, docs.REPLAY_EXAMPLE) for match in pattern.finditer(docs.text())}
    unaccounted = [
        command
        for block in docs.blocks("sh")
        for command in shell_commands(block)
        if not command.startswith(CLUSTER_COMMANDS) and command not in first_two and command not in examples
        and command not in ci_commands()
    ]
    assert not unaccounted


def test_ci_runs_the_readmes_test_command_and_every_tier_the_readme_names() -> None:
    """Each step of the test command in its order, and every command of the tiers' section."""
    tiers = [command for block in re.findall(r"```sh\n(.*?)\n```", README.split("## Slower tiers")[1].split("\n## ")[0], re.S)
             for command in shell_commands(block)]
    test_command = re.findall(r"```sh\n(.*?)\n```", README.split("---")[0], re.S)[1]
    steps = [step for line in ci_commands() for step in line.split(" && ")]
    wanted = test_command.split(" && ")
    assert [step for step in steps if step in wanted] == wanted
    assert ".venv/bin/python -m tests.years_ahead" in tiers and all(command in steps for command in tiers)
    assert all(steps.index(command) > steps.index(wanted[-1]) for command in tiers if command.endswith("pytest -m exploration")
               or command.endswith("tests.years_ahead"))


def test_nothing_tells_a_user_to_stop_or_scale_down_omes_manager() -> None:
    text = docs.text()
    assert not re.search(r"scale\b[^\n]*ome-controller-manager|ome-controller-manager[^\n]*replicas[= ]0", text)
    assert not re.search(r"\b(stop|disable|scale down) OME'?s? (BaseModel|controller)", text, re.I)


def test_no_switch_is_written_with_a_value() -> None:
    """``--create-namespace ome-basemodel-hook`` reads as a broken Helm command: the flag is
    a switch, and the word after it would be taken for Helm's chart argument."""
    switches = ("--create-namespace", "--force-conflicts", "--server-side", "--untar")
    assert [match.group(0) for match in re.finditer(rf"(?:{'|'.join(switches)}) +\w[\w.-]*", docs.text())] == []
