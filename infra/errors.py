"""Errors raised by the ``scheduler_dedup.infra`` package.

Every error the user can catch is named for what happened; messages name the field and the fix.
"""

from __future__ import annotations


class DedupConfigError(ValueError):
    """A component input (or a stack config key) is invalid.

    Raised by :func:`scheduler_dedup.infra.settings.resolve_settings` and therefore by the
    :class:`~scheduler_dedup.infra.component.DedupScheduledJob` constructor *before* any child
    resource is created, so ``pulumi preview`` fails with the message.

    Attributes:
        field: the input name in snake_case (for example ``attempt_deadline_seconds``).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class DeployArchiveError(DedupConfigError):
    """The deploy archive cannot be built (missing handler files, a clash with the job source)."""
