"""A store's configuration error (:class:`~scheduler_dedup.handler.core.errors.StoreConfigError`) logged as ERROR once
per process, not once per delivery.

A misconfigured store answers every delivery, run check and start-up probe the same way until someone changes the
setting its ``fix`` names: one ERROR line with the fix is what a person needs (and what an error-reporting alert should
count), and every later meeting is a WARNING. A different fix gets its own ERROR line, and so does the same one again
after the store answered normally in between (:func:`store_answered`): a role removed again a month later is news.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.core.errors import StoreConfigError

_lock = threading.Lock()
_reported: set[str] = set()


def log_store_config_error(logger: logging.Logger, error: StoreConfigError, what: str,
                           extra: Mapping[str, Any] | None = None) -> bool:
    """Log ``what`` with the store, its answer and the fix: ERROR the first time this process meets this fix (since
    the store last answered normally), WARNING after.

    Args:
        logger: the handler's logger.
        error: the store's configuration error.
        what: what could not be done, e.g. ``delivery misconfigured-job``.
        extra: structured fields of the line (``LogField`` names).

    Returns:
        True if this was the ERROR line.
    """
    with _lock:
        first = error.fix not in _reported
        _reported.add(error.fix)
    cause = error.__cause__ if error.__cause__ is not None else error
    severity = logging.ERROR if first else logging.WARNING
    logger.log(severity, "%s: %s is misconfigured (%s: %s); fix: %s%s", what, error.store, type(cause).__name__,
               cause, error.fix, "" if first else " (logged as ERROR once; every call fails until fixed)",
               extra=dict(extra or {}))
    return first


def store_answered() -> None:
    """The store answered a call normally: a configuration error met after this is logged as ERROR again."""
    if _reported:
        with _lock:
            _reported.clear()
