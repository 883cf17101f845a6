"""The catalogue: every condition type the hook writes and every reason it gives, each with
the one model state it means, what it means and what to do about it.

One cause, one reason, one state: a model's ``status.state`` is the state of its ``Ready``
condition's reason, which is the reason of the first condition that is not True. The
reason of a True condition means that its part is ready. ``docs/status.md`` prints this
catalogue as its table, and a test holds the page to it.

The rule that gives a reason sits where its fact is judged (the URI, the PVC, the metadata
Job); search for the reason's member to find it.
"""

from __future__ import annotations

from enum import StrEnum

from hooks.states import State


class ConditionType(StrEnum):
    """The conditions of a ``pvc://`` model's status, in the order they are written."""

    STORAGE_READY = "StorageReady"
    METADATA_READY = "MetadataReady"
    READY = "Ready"


class Reason(StrEnum):
    """A reason, with the condition that gives it (None: no condition, only the hook's
    metrics and logs), the state it means, what it means and what to do (Markdown, as the
    docs show them)."""

    condition: ConditionType | None
    state: State
    meaning: str
    action: str

    def __new__(cls, value: str, condition: ConditionType | None, state: State, meaning: str, action: str) -> Reason:
        reason = str.__new__(cls, value)
        reason._value_ = value
        reason.condition, reason.state, reason.meaning, reason.action = condition, state, meaning, action
        return reason

    # --- StorageReady: the URI, then the PVC ------------------------------------------------
    INVALID_STORAGE_URI = (
        "InvalidStorageURI", ConditionType.STORAGE_READY, State.FAILED,
        "`spec.storage.storageUri` is not a `pvc://` URI the hook can mount: the message says which rule it breaks "
        "and the accepted form",
        "fix the URI: `pvc://{pvc}/{sub-path}` for a BaseModel, `pvc://{namespace}:{pvc}/{sub-path}` for a "
        "ClusterBaseModel",
    )
    CROSS_NAMESPACE_PVC = (
        "CrossNamespacePVC", ConditionType.STORAGE_READY, State.FAILED,
        "a BaseModel names a PVC in another namespace; a BaseModel may only read its own namespace's volumes",
        "move the model, or use a ClusterBaseModel to share a PVC across namespaces",
    )
    PVC_NOT_FOUND = (
        "PVCNotFound", ConditionType.STORAGE_READY, State.FAILED,
        "no PVC of that name in that namespace",
        "create the PVC, or point the URI at an existing one",
    )
    PVC_BLOCK_MODE = (
        "PVCBlockMode", ConditionType.STORAGE_READY, State.FAILED,
        "the PVC has `volumeMode: Block`: a raw device, which no pod can mount as a directory of files, so no Job "
        "is started",
        "copy the model onto a claim with `volumeMode: Filesystem` (the default) and point the URI at it",
    )
    PVC_PENDING = (
        "PVCPending", ConditionType.STORAGE_READY, State.IN_TRANSIT,
        "the PVC is `Pending` or has no phase yet",
        "wait, or `kubectl describe pvc`: no matching PersistentVolume, a provisioner error, or "
        "`volumeBindingMode: WaitForFirstConsumer` (a model PVC should be pre-populated and Bound)",
    )
    PVC_LOST = (
        "PVCLost", ConditionType.STORAGE_READY, State.FAILED,
        "the PVC is `Lost`: its volume is gone and the model's files cannot be read",
        "restore the volume, or point the URI at another PVC",
    )
    PVC_TERMINATING = (
        "PVCTerminating", ConditionType.STORAGE_READY, State.FAILED,
        "the PVC is being deleted; no new pod can mount it",
        "restore it, or point the URI at another PVC",
    )
    PVC_BOUND = (
        "PVCBound", ConditionType.STORAGE_READY, State.READY,
        "the PVC exists where the URI says, is Bound and is not being deleted; the message names its volume, size "
        "and access modes, and says when those keep pods on other nodes (`ReadWriteOnce`) or any second pod "
        "(`ReadWriteOncePod`) from mounting it",
        "nothing",
    )

    # --- MetadataReady: the metadata Job ----------------------------------------------------
    STORAGE_NOT_READY = (
        "StorageNotReady", ConditionType.METADATA_READY, State.IN_TRANSIT,
        "no Job until the storage is ready (`Ready` shows `StorageReady`'s reason instead)",
        "see `StorageReady`",
    )
    JOB_PENDING = (
        "JobPending", ConditionType.METADATA_READY, State.IN_TRANSIT,
        "the metadata Job is requested: first its ServiceAccount and RBAC, then the Job",
        "wait; if nothing appears, the model's events show why Metacontroller could not create them "
        "(`kubectl describe`, reason `SyncError`)",
    )
    JOB_RUNNING = (
        "JobRunning", ConditionType.METADATA_READY, State.IN_TRANSIT,
        "the Job runs, or its pod waits (with `READ_JOB_PODS=true` the message says what for: an image pull, "
        "scheduling)",
        "wait; a waiting reason in the message is what to fix",
    )
    JOB_SUSPENDED = (
        "JobSuspended", ConditionType.METADATA_READY, State.IN_TRANSIT,
        "someone suspended the Job",
        "`kubectl patch job <name> -p '{\"spec\":{\"suspend\":false}}'`",
    )
    JOB_FAILED = (
        "JobFailed", ConditionType.METADATA_READY, State.FAILED,
        "the Job failed: the message quotes its condition and the command that prints the agent's log (with "
        "`READ_JOB_PODS=true`, how its pod ended and the agent's last error), says which attempt failed and when "
        "the next one starts, or that none is left",
        "fix the model files or the PVC (a missing `config.json`, files the Job's user cannot read: "
        "`JOB_RUN_AS_USER`); see [Retries](#retries)",
    )
    JOB_DEADLINE_EXCEEDED = (
        "JobDeadlineExceeded", ConditionType.METADATA_READY, State.FAILED,
        "the Job ran past its deadline (`JOB_ACTIVE_DEADLINE_SECONDS`, 300 s)",
        "as `JobFailed`; a slow volume may need a longer deadline",
    )
    METADATA_EXTRACTED = (
        "MetadataExtracted", ConditionType.METADATA_READY, State.READY,
        "a Job wrote `modelType`, `modelArchitecture` and `modelParameterSize` into the spec",
        "nothing",
    )
    METADATA_PRESENT = (
        "MetadataPresent", ConditionType.METADATA_READY, State.READY,
        "the spec already held `modelType`, `modelArchitecture` and `modelParameterSize` (written by you): no Job "
        "runs",
        "nothing",
    )

    # --- Ready: both of the above; when not, the first one's reason -------------------------
    READY = (
        "Ready", ConditionType.READY, State.READY,
        "`StorageReady` and `MetadataReady` are True: the PVC is Bound and the spec holds the metadata",
        "nothing",
    )

    # --- no condition: the hook's metrics and logs ------------------------------------------
    HANDED_BACK = (
        "HandedBack", None, State.IN_TRANSIT,
        "the model is no longer the hook's (its URI left `pvc://`, it left the controllers' selector, or OME "
        "serves `pvc://` models itself): the answer has no children and the status OME computes for a model no "
        "node reports, `{state: In_Transit}` without conditions, until OME writes its own; a status OME's own PVC "
        "backend wrote is handed back as it stands",
        "nothing: the model is OME's ([a model that is not the hook's](#a-model-that-is-not-the-hooks))",
    )


# The state each reason means, by the reason as a condition carries it (a member or its
# value); a reason outside the catalogue is a bug, and fails the call with a 500.
STATE_OF: dict[str, State] = {reason.value: reason.state for reason in Reason}
