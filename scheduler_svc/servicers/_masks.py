"""Update masks as AIP-134 reads them: which fields of a resource an Update call writes.

- A mask with paths writes exactly those paths; a path names a writable field
  (``enabled``) or a writable field of a writable message field
  (``retry_policy.max_attempts``). A path naming an output-only or unknown field is
  INVALID_ARGUMENT (``update_mask``, UPDATE_MASK_INVALID).
- The mask ``*`` (alone) writes every writable field: a full replacement, unset fields
  taking their defaults.
- No mask (or an empty one) writes the fields the request populates: a message field that
  is set (expanded into its own populated fields when it is one of ``nested``), an
  ``optional`` field that is present, a repeated field that is not empty, and a plain proto3
  scalar whose value is not the default (0, "", false): a plain scalar cannot be reset to
  its default without a mask. Output-only fields the request carries (as a read-modify-write
  client sends them back) are ignored.

Which fields are writable is read from the resource's proto (:func:`writable_fields`): a
field annotated ``google.api.field_behavior`` OUTPUT_ONLY, IDENTIFIER (the id, which names
the resource) or IMMUTABLE (AIP-203) is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.api import field_behavior_pb2
from google.protobuf import field_mask_pb2, message

from scheduler_svc.errors import InvalidArgument, Reason

#: The mask that replaces every writable field.
WILDCARD = "*"

#: Field behaviours (AIP-203) of the fields an update never writes.
NOT_WRITABLE = frozenset(
    {field_behavior_pb2.OUTPUT_ONLY, field_behavior_pb2.IDENTIFIER, field_behavior_pb2.IMMUTABLE}
)


def writable_fields(resource: Any) -> tuple[str, ...]:
    """The top-level fields of ``resource`` (a message's ``DESCRIPTOR``) that an update may
    write, in field-number order: those without a ``google.api.field_behavior`` in
    :data:`NOT_WRITABLE`."""
    out: list[str] = []
    for field in sorted(resource.fields, key=lambda f: f.number):
        behaviours = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        if not NOT_WRITABLE.intersection(behaviours):
            out.append(field.name)
    return tuple(out)


def update_paths(
    resource: message.Message,
    mask: field_mask_pb2.FieldMask,
    writable: tuple[str, ...],
    nested: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[str, ...]:
    """The paths an update of ``resource`` under ``mask`` writes, in a stable order.

    Args:
        resource (message.Message): the request's resource (Task, Schedule).
        mask (field_mask_pb2.FieldMask): the request's update_mask.
        writable (tuple[str, ...]): the resource's writable top-level fields.
        nested (Mapping[str, tuple[str, ...]] | None): for writable message fields whose
            own fields may be written one by one, those fields' names
            (``{"retry_policy": ("max_attempts", ...)}``).

    Returns:
        tuple[str, ...]: top-level names and ``parent.child`` paths, no duplicates.

    Raises:
        InvalidArgument: (field ``update_mask``) a path that is unknown or output only, or
            ``*`` together with other paths.
    """
    nested = nested or {}
    paths = list(mask.paths)
    if not paths:
        return _populated(resource, writable, nested)
    if WILDCARD in paths:
        if paths != [WILDCARD]:
            raise _bad_mask("'*' replaces every field; give it alone")
        return writable
    allowed = set(writable) | {
        f"{parent}.{child}" for parent, kids in nested.items() for child in kids
    }
    for path in paths:
        if path not in allowed:
            raise _bad_mask(
                f"unknown or read-only field {path!r}; writable: {', '.join(sorted(allowed))}"
            )
    return tuple(dict.fromkeys(paths))


def _populated(
    resource: message.Message, writable: tuple[str, ...], nested: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    present = {field.name: value for field, value in resource.ListFields()}
    out: list[str] = []
    for name in writable:
        if name not in present:
            continue
        if name in nested:
            inner = {field.name for field, _ in present[name].ListFields()}
            out.extend(f"{name}.{child}" for child in nested[name] if child in inner)
        else:
            out.append(name)
    return tuple(out)


def _bad_mask(text: str) -> InvalidArgument:
    return InvalidArgument(text, field="update_mask", reason=Reason.UPDATE_MASK_INVALID)
