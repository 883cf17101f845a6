"""The hook beside OME's own PVC backend, story by story, measured alike; writes docs/comparison.md.

    python -m bench.upstream [--story SLUG]... [--kind KIND] [--output PATH]

It builds what it needs once per machine (the cluster tier's binaries and OME v1.2.2, into
``~/.cache/ome-basemodel-hook/``), then tells every story of ``tests/cluster/comparison.py``
for both kinds of model, first on the hook's side (the hook installed beside OME v0.1.5,
Metacontroller simulated in real time, or the binary ``METACONTROLLER_BIN`` names), then on
OME v1.2.2's (its manager alone, with the ``omeAgent`` block its chart sets), each in a world
of its own on 127.0.0.1, and writes the tables. A benchmark, not a test: it asserts nothing,
and a side that never reaches a state is a result. About an hour on two cores.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

from hooks import __version__
from tests.cluster import builds, comparison
from tests.cluster.comparison import HOOK, KINDS, SIDES, STORIES, UPSTREAM, Outcome
from tests.cluster.metacontroller_binary import binary
from tests.helm import built as helm_built
from tests.metacontroller.simulator import V4_16

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "comparison.md"
INTRODUCTION = """\
What each side leaves a user with, story by story, measured on one machine with the
cluster tier's parts: a real etcd, kube-apiserver and kube-controller-manager, the played
scheduler and kubelet (`tests/cluster/kubelet.py`), and each side's real `ome-agent`.
`python -m bench.upstream` told the stories and wrote this page; run it again to check it.

- **{hook}**: the hook {version} installed as docs/install.md says, beside OME's manager
  {ome} (whose writes to a `pvc://` model's status the fence refuses), {metacontroller}.
- **{upstream}**: OME's manager {upstream_version} alone, with the `omeAgent` block and
  the metadata Job's ServiceAccount and RBAC its `ome-resources` chart renders, and its
  CRDs. Its admission webhooks do not run here (no certificates): with them, a BaseModel
  URI that names a namespace is refused at the API server instead of failing in the status.

Kubernetes {kubernetes}, etcd {etcd}; {date}, {cores} cores shared with other work, so the
seconds are this machine's, not a promise. Each story runs in a namespace of its own; the
writes are every write the API server's audit log shows about the model and the objects made
for it (its namespace, and for OME's backend its result ConfigMap and RoleBinding in OME's
namespace), by actor, refusals (403) in brackets. "Left" is what remains besides the model
and its claim when the story ends. docs/upstream-v1.2.2-notes.md explains what OME's backend
does and why.
"""

WHERE_OME_DOES_BETTER = """\
## Where OME does better

Where each side stands, story by story, and why, is in
[the notes](upstream-v1.2.2-notes.md#where-each-side-stands-story-by-story): the hook ends
better on a Lost, terminating or `volumeMode: Block` claim, a failed extraction fixed, metadata
already in the spec, the Job's TTL and deletion. Where OME does better, the hook does not
match it, for these reasons:

- **A BaseModel URI that names another namespace** is refused when it is applied, by OME's
  validating webhook, before any status: the hook is no webhook (it answers Metacontroller
  after the write), so it can only fail the model with `CrossNamespacePVC`, which says the
  same in the status. Adding an admission webhook would be a second thing to install and
  certify for one message.
- **No refused writes**: the fence's refusals of OME v0.1.5's writes are the price of two
  writers for one status with an OME that cannot be told to stop; they end with the
  upgrade, when the hook stands aside ([moving to it](install.md#moving-to-omes-own-pvc-backend)).
- **Seconds to Ready** differ from run to run by more than between the sides (from under
  10 s to about 55 s for either) on two cores shared with other work: no side is faster there. The hook creates a
  Job's ServiceAccount and grant one sync before the Job, which OME does in the same
  reconcile; the gap is one Metacontroller round, well under a second when idle.
"""


def cell(text: str) -> str:
    """A table cell: pipes escaped, lines kept apart."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def writes(outcome: Outcome) -> str:
    return ", ".join(f"{actor} {counts['writes']}" + (f" ({counts['refused']} refused)" if counts["refused"] else "")
                     for actor, counts in sorted(outcome.writes.items(), key=lambda item: (-item[1]["writes"], item[0])))


def verdict(outcome: Outcome) -> str:
    """One line: where the model ended, how fast it was Ready, how many Jobs it took."""
    final = f"{outcome.state or 'no status'}" + (f" `{outcome.reason}`" if outcome.reason else "")
    ready = f", Ready after {outcome.seconds_to_ready:.0f} s" if outcome.seconds_to_ready is not None else ""
    return f"{final}{ready}, {len(outcome.jobs)} Job{'s' * (len(outcome.jobs) != 1)}"


def summary(outcomes: list[Outcome]) -> list[str]:
    by = {(outcome.story, outcome.kind, outcome.side): outcome for outcome in outcomes}
    lines = [f"| story | kind | {HOOK.title} | {UPSTREAM.title} |", "|---|---|---|---|"]
    for _, title, _ in STORIES:
        for kind in KINDS:
            cells = [by.get((title, kind, side.title)) for side in SIDES]
            if any(cells):
                lines.append(f"| {title} | {kind} | " + " | ".join(cell(verdict(found)) if found else "not told" for found in cells) + " |")
    return lines


def story_table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| side | kind | final state and reason | `kubectl get` | `kubectl describe`: Ready's message; events | Jobs created | "
             "API writes per actor | s to Ready | left | steps |", "|---|---|---|---|---|---|---|---:|---|---|"]
    for outcome in outcomes:
        get = " ".join(f"{name}={value}" for name, value in outcome.columns.items())
        describe = outcome.message + ("\n" + "\n".join(outcome.events) if outcome.events else "")
        ready = f"{outcome.seconds_to_ready:.0f}" if outcome.seconds_to_ready is not None else "never"
        row = [outcome.side, outcome.kind, f"{outcome.state} {outcome.reason}".strip() or "no status", get, describe,
               f"{len(outcome.jobs)}: " + ", ".join(outcome.jobs) if outcome.jobs else "0", writes(outcome), ready,
               "\n".join(outcome.left) or "nothing", "\n".join(outcome.steps)]
        lines.append("| " + " | ".join(cell(text) for text in row) + " |")
    return lines


def untold(outcomes: list[Outcome]) -> list[str]:
    """A line naming each story and kind this run did not tell on both sides (none when
    every one was): a page written by ``--story`` or ``--kind`` says what it lacks."""
    told = {(outcome.story, outcome.kind, outcome.side) for outcome in outcomes}
    missing = [f"{title} ({kind})" for _, title, _ in STORIES for kind in KINDS
               if any((title, kind, side.title) not in told for side in SIDES)]
    return [f"**Not told in this run**, so not on this page: {', '.join(missing)}.", ""] if missing else []


def render(outcomes: list[Outcome], when: datetime, cores: int) -> str:
    """docs/comparison.md: what was run, where each side stands, then each story's table."""
    metacontroller = binary()
    introduction = INTRODUCTION.format(
        hook=HOOK.title, version=__version__, ome=builds.OME.version, upstream=UPSTREAM.title,
        upstream_version=builds.OME_PVC_BACKEND.version, kubernetes=builds.KUBERNETES.version, etcd=builds.ETCD.version,
        metacontroller=f"the Metacontroller binary {metacontroller.name}" if metacontroller
        else f"Metacontroller played by the project's simulator ({V4_16.name}'s behaviour) in real time",
        date=when.strftime("%Y-%m-%d"), cores=cores)
    lines = ["# The hook beside OME's own PVC backend", "", introduction, *untold(outcomes), "## Where each side stands", "",
             *summary(outcomes), "", WHERE_OME_DOES_BETTER]
    for _, title, _ in STORIES:
        told = [outcome for outcome in outcomes if outcome.story == title]
        if told:
            lines += [f"## {title}", "", *story_table(told), ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    # Stopped with SIGTERM, the worlds stop their processes as on Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(prog="python -m bench.upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--story", action="append", choices=[slug for slug, _, _ in STORIES], default=[],
                        help="tell only these stories (repeatable); all by default")
    parser.add_argument("--kind", choices=KINDS, help="only this kind of model; both by default")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write the page (default {OUTPUT.relative_to(REPO)})")
    options = parser.parse_args(argv)
    for target, seconds in builds.build_all(targets=builds.COMPARISON_BUILDS).items():
        if seconds:
            sys.stdout.write(f"built {target} in {seconds:.0f} s\n")
    if helm_built() is None:
        sys.stderr.write("needs the Go toolchain to build helm, which renders OME's chart\n")
        return 1
    kinds = (options.kind,) if options.kind else KINDS
    outcomes: list[Outcome] = []
    for side in SIDES:
        for outcome in comparison.tell_all(side, kinds, tuple(options.story)):
            print(f"{outcome.side} | {outcome.story} | {outcome.kind}: {verdict(outcome)}", flush=True)
            outcomes.append(outcome)
            # Written after every story, so a run stopped part-way keeps what it measured
            # (the page names what it did not tell).
            options.output.write_text(render(outcomes, datetime.now(timezone.utc), os.cpu_count() or 1) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {options.output}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
