"""The values of ``status.state`` this hook writes: the ones OME's own controllers use.

OME's CRD also allows Creating, Importing and In_Training, but nothing upstream sets
them for base models, so neither does this hook.
"""

from enum import StrEnum


class State(StrEnum):
    READY = "Ready"
    FAILED = "Failed"
    IN_TRANSIT = "In_Transit"
