"""Labels on the children that take them (``labels``; an alert policy's ``user_labels``): Google's label rules
(https://cloud.google.com/resource-manager/docs/labels-overview#requirements): at most 64, keys 1-63 lower-case
letters, digits, ``_`` or ``-`` starting with a lower-case letter, values 0-63 of the same characters. Cloud
Monitoring's rules for an alert policy's ``userLabels`` (AlertPolicy, Monitoring API v3) and Spanner's for an
instance's ``labels`` are the same, so one check serves every labelled child."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import Problems

#: Added to every labelled child, so the resources of the component can be found by label.
MANAGED_BY = {"managed-by": "scheduler-dedup"}
MAX_LABELS = 64
_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")


def resolve_labels(value: Any) -> dict[str, str]:
    """``labels`` checked, with :data:`MANAGED_BY` added.

    Raises:
        DedupConfigErrors: every bad key or value at once, or more than :data:`MAX_LABELS`.
    """
    if value is None:
        return dict(MANAGED_BY)
    if not isinstance(value, Mapping):
        raise DedupConfigError("labels", f"must be a mapping key: value, got {value!r}")
    problems = Problems()
    for key, item in value.items():
        if not isinstance(key, str) or not _KEY_RE.match(key):
            problems.add(DedupConfigError(f"labels.{key}", "is not a label key: 1-63 lower-case letters, digits, '_' "
                                                           "or '-', starting with a letter, e.g. team"))
        elif not isinstance(item, str) or not _VALUE_RE.match(item):
            problems.add(DedupConfigError(f"labels.{key}", f"{item!r} is not a label value: 0-63 lower-case letters, "
                                                           "digits, '_' or '-', e.g. data-platform"))
    labels = {**MANAGED_BY, **value}
    if len(labels) > MAX_LABELS:
        problems.add(DedupConfigError("labels", f"{len(labels)} labels with managed-by; Google takes at most "
                                                f"{MAX_LABELS}: remove {len(labels) - MAX_LABELS}"))
    problems.raise_any()
    return labels
