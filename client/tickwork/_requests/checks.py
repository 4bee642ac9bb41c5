"""Checks of SDK arguments, before anything is sent: references, ids, Python types,
enum names, and protobuf's own range checks, each failure an
:class:`~tickwork.errors.InvalidArgument` naming the argument."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from google.protobuf.descriptor import FieldDescriptor

from tickwork.errors import InvalidArgument
from tickwork.v1.job_pb2 import JobStatus
from tickwork.v1.schedule_pb2 import CatchUpPolicy, JitterMode, OverlapPolicy

Ref = int | str
"""A task or schedule reference: an id (int) or a name (str)."""

MAX_ID = 2**63 - 1
"""The largest id (ids are int64)."""


def signed_range(bits: int) -> tuple[int, int]:
    """The lowest and highest value of a signed ``bits``-bit integer (protobuf's int32 and
    int64 fields)."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def check_ref(ref: object, what: str = "task") -> Ref:
    """Validate a task or schedule reference.

    Args:
        ref (object): an id (positive int) or a name (non-empty str).
        what (str): ``"task"`` or ``"schedule"``, for the message.

    Returns:
        int | str: ``ref`` unchanged.

    Raises:
        InvalidArgument: ``ref`` is a bool, a non-positive int, an empty string, a string that
            is not valid UTF-8, or another type.
    """
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        raise InvalidArgument(f"{what}: expected an id (int) or a name (str), got {ref!r}")
    if isinstance(ref, int) and not 0 < ref <= MAX_ID:
        raise InvalidArgument(f"{what}: id must be from 1 to {MAX_ID}, got {ref}")
    if isinstance(ref, str) and not ref:
        raise InvalidArgument(f"{what}: name must not be empty")
    if isinstance(ref, str) and not _is_utf8(ref):
        raise InvalidArgument(f"{what}: name is not valid UTF-8 text: {ref!r}")
    return ref


def _is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (a lone surrogate, as undecodable command-line
    bytes become under Python's ``surrogateescape``, does not; protobuf strings must)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_job_id(job_id: object) -> int:
    """Validate a job id: an int from 1 to :data:`MAX_ID`.

    Raises:
        InvalidArgument: naming ``job_id``.
    """
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidArgument(f"job_id: expected an integer, got {job_id!r:.80}")
    if not 0 < job_id <= MAX_ID:
        raise InvalidArgument(f"job_id: must be from 1 to {MAX_ID}, got {job_id}")
    return job_id


def task_refs(tasks: Sequence[int | str], field: str = "tasks") -> Sequence[int | str]:
    """A sequence of task ids or names; a bare string is refused rather than split into
    characters. Raises InvalidArgument naming ``field``."""
    if isinstance(tasks, str | bytes):
        raise InvalidArgument(f"{field}: expected a list of task ids or names, got a string")
    if isinstance(tasks, Mapping) or not isinstance(tasks, Sequence):
        raise InvalidArgument(
            f"{field}: expected a list of task ids or names, got {type(tasks).__name__}"
        )
    return tasks


def check_type(value: object, kind: Any, field: str) -> None:
    """Refuse a value of the wrong Python type (bool is not an int here) with
    InvalidArgument naming ``field``, rather than protobuf's TypeError or a coercion."""
    wrong_bool = isinstance(value, bool) and kind is not bool
    if wrong_bool or not isinstance(value, kind):
        raise InvalidArgument(f"{field}: expected {_type_name(kind)}, got {value!r:.80}")


def _type_name(kind: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "True or False"}
    parts = [names.get(k, "None") for k in getattr(kind, "__args__", (kind,))]
    return " or ".join(parts)


def assign_field(message: Any, field: str, value: object, name: str | None = None) -> None:
    """``setattr(message, field, value)``, with protobuf's refusals (a number out of the
    field's range, a string that is not valid Unicode, a wrong type) raised as
    InvalidArgument naming ``name`` (default ``field``)."""
    try:
        setattr(message, field, value)
    except UnicodeError:
        raise InvalidArgument(f"{name or field}: not valid Unicode text") from None
    except ValueError as err:  # "Value out of range: N"
        raise InvalidArgument(f"{name or field}: {err} for a {_kind(message, field)}") from None
    except TypeError:
        raise InvalidArgument(f"{name or field}: wrong type, got {value!r:.80}") from None


def assign_labels(message: Any, labels: Mapping[str, str] | None, field: str = "labels") -> None:
    """Put ``labels`` into the map field ``field`` of ``message`` (the service checks the
    label rules).

    Raises:
        InvalidArgument: ``labels`` is not a mapping of str to str (named ``field``).
    """
    if labels is None:
        return
    if not isinstance(labels, Mapping):
        raise InvalidArgument(f"{field}: give a mapping of str to str, got {labels!r:.80}")
    target = getattr(message, field)
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"{field}: keys and values must be str, got {key!r}: {value!r}")
        target[key] = value


def _kind(message: Any, field: str) -> str:
    """The protobuf type of ``field`` in words, e.g. ``"32-bit integer"``."""
    kind = message.DESCRIPTOR.fields_by_name[field].type
    words = {
        FieldDescriptor.TYPE_INT32: "32-bit integer",
        FieldDescriptor.TYPE_INT64: "64-bit integer",
    }
    return words.get(kind, "field")


def parse_job_status(value: JobStatus | str | int) -> JobStatus:
    """Turn ``"failed"``, ``"FAILED"``, ``"JOB_STATUS_FAILED"`` or the enum into a JobStatus.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    return cast("JobStatus", _parse_enum(JobStatus, "JOB_STATUS_", value, "status"))


def parse_catch_up_policy(value: CatchUpPolicy | str | int) -> CatchUpPolicy:
    """Turn ``"SKIP"``, ``"run_once"``, ``"CATCH_UP_POLICY_RUN_ONCE"`` or the enum into a
    CatchUpPolicy.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    policy = _parse_enum(CatchUpPolicy, "CATCH_UP_POLICY_", value, "catch_up_policy")
    return cast("CatchUpPolicy", policy)


def parse_jitter_mode(value: JitterMode | str | int) -> JitterMode:
    """Turn ``"STABLE"``, ``"random"``, ``"JITTER_MODE_STABLE"`` or the enum into a
    JitterMode.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    return cast("JitterMode", _parse_enum(JitterMode, "JITTER_MODE_", value, "jitter_mode"))


def parse_overlap_policy(value: OverlapPolicy | str | int) -> OverlapPolicy:
    """Turn ``"BUFFER_ALL"``, ``"buffer-all"``, ``"OVERLAP_POLICY_BUFFER_ALL"`` or the enum
    into an OverlapPolicy.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    policy = _parse_enum(OverlapPolicy, "OVERLAP_POLICY_", value, "overlap_policy")
    return cast("OverlapPolicy", policy)


def _parse_enum(enum: Any, prefix: str, value: object, field: str) -> int:
    """Look ``value`` (a name with or without ``prefix``, or a number) up in ``enum``."""
    known: dict[str, int] = {
        str(name): int(number)
        for name, number in enum.items()
        if not str(name).endswith("_UNSPECIFIED")
    }
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        key = key if key.startswith(prefix) else prefix + key
        if key in known:
            return known[key]
    elif isinstance(value, int) and not isinstance(value, bool) and value in known.values():
        return value
    short = ", ".join(name.removeprefix(prefix) for name in known)
    raise InvalidArgument(f"{field}: expected one of {short}, got {value!r}")


def enum_label(enum: Any, value: int) -> str:
    """Short name of an enum value: ``JOB_STATUS_FAILED`` -> ``"FAILED"``.

    Args:
        enum: a generated protobuf enum (``JobStatus``, ``Trigger``, ...).
        value (int): its number; unknown numbers come back as the number.
    """
    try:
        name = str(enum.Name(value))
    except ValueError:
        return str(value)
    prefix = str(enum.keys()[0]).removesuffix("UNSPECIFIED")
    return name.removeprefix(prefix)
