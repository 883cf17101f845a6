"""Where the simulator lets a test perturb what the controllers see and when they stop.

Sieve (OSDI 2022, "Automatic Reliability Testing for Cluster Management Controllers")
found its bugs by perturbing a controller's view of the cluster in three ways: an
update it never observes, a stale read, a crash between two writes. A ``Perturbation``
is asked at the three places where those happen in the simulator, and the default one
changes nothing:

- ``before_write``: a write arrives at the API server (``Cluster.before_write``), after
  its writer read what it writes from. Running another writer's update here makes it land
  in between (and the writer's own write may meet a Conflict); raising ``Stopped`` here
  is the writer's process stopping before this write.
- ``view``: a controller reads one informer while it syncs a parent. Answering a change
  number makes that informer's view lag to just after that change for this sync; the
  changes it missed reach the controller's handlers after the sync
  (``Controller.catch_up``).
- ``before_call``: a controller is about to call its hook. Raising ``HookDown`` is the
  hook's process gone for that call. ``answered`` then sees what the hook asked for.

The exploration that uses them is ``tests/exploration.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.metacontroller.selection import Obj

if TYPE_CHECKING:
    from tests.metacontroller.controller import Controller, TypeKey
    from tests.metacontroller.simulator import Simulator


class Stopped(Exception):
    """The writer's process stopped before its write (Metacontroller: it starts again with
    empty caches and queues)."""


class Perturbation:
    """Nothing perturbed."""

    def attach(self, sim: Simulator) -> None:
        """The simulator is built: nothing exists yet."""

    def before_write(self, user: str, verb: str, obj: Obj) -> None:
        """A write by ``user`` arrives at the API server."""

    def view(self, controller: Controller, parent: Obj, type_key: TypeKey) -> int | None:
        """The change up to which ``controller``'s informer of ``type_key`` has caught up as
        it syncs ``parent``; None for the present."""
        return None

    def before_call(self, controller: Controller, parent: Obj, hook: str) -> None:
        """``controller`` is about to call its ``hook`` (sync, finalize) for ``parent``."""

    def answered(self, controller: Controller, parent: Obj, answer: dict[str, Any]) -> None:
        """``controller``'s hook answered this for ``parent``."""

    def story_begins(self) -> None:
        """A test's setup is done; what follows is the story it tells."""
