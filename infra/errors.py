"""Errors raised by the ``scheduler_dedup.infra`` package.

Every error the user can catch is named for what happened; messages name the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class DedupConfigError(ValueError):
    """A component input (or a stack config key) is invalid.

    Raised by :func:`scheduler_dedup.infra.job.settings.resolve_settings` and therefore by the
    :class:`~scheduler_dedup.infra.job.component.DedupScheduledJob` constructor *before* any child
    resource is created, so ``pulumi preview`` fails with the message.

    Attributes:
        field: the input name in snake_case (for example ``attempt_deadline_seconds``).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class DedupConfigErrors(DedupConfigError):
    """Several inputs are invalid: every problem of one config at once, so one round of fixes suffices.

    Attributes:
        errors: each problem, in input order (each a :class:`DedupConfigError` naming its field).
        field: the first problem's field.
    """

    def __init__(self, errors: "Sequence[DedupConfigError]") -> None:
        self.errors = tuple(errors)
        self.field = self.errors[0].field
        ValueError.__init__(self, f"{len(self.errors)} problems:\n" + "\n".join(f"- {e}" for e in self.errors))


class DeployArchiveError(DedupConfigError):
    """The deploy archive cannot be built (missing handler files, a clash with the job source)."""


def bool_input(args: Mapping[str, Any], key: str, default: bool) -> bool:
    """The true-or-false input ``args[key]`` (``default`` when absent).

    Raises:
        DedupConfigError: field ``key``: not a bool.
    """
    value = args.get(key, default)
    if not isinstance(value, bool):
        raise DedupConfigError(key, f"must be true or false, got {value!r}")
    return value


def read_str(args: Mapping[str, Any], key: str) -> str | None:
    """The non-empty string input ``args[key]``, stripped (None when absent).

    Raises:
        DedupConfigError: field ``key``: not a non-empty string.
    """
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DedupConfigError(key, f"must be a non-empty string, got {value!r}")
    return value.strip()
