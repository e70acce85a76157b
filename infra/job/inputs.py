"""Readers of component inputs: whole numbers, required strings (:func:`~scheduler_dedup.infra.errors.read_str`
reads the optional ones), service account emails and the resource prefix, each raising
:class:`~scheduler_dedup.infra.errors.DedupConfigError` naming the field; :class:`Problems` collects every error of
one resolution so a config with four mistakes shows four at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pulumi

from scheduler_dedup.infra.errors import DedupConfigError, DedupConfigErrors, read_str

T = TypeVar("T")


def read_int(args: Mapping[str, Any], key: str, default: int, *, field: str | None = None) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise DedupConfigError(field or key, f"must be a whole number of seconds/count, got {value!r}")
    return int(value)


def required_str(args: Mapping[str, Any], key: str, what: str) -> str:
    value = read_str(args, key)
    if value is None:
        raise DedupConfigError(key, f"is required: {what}")
    return value


_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


def resource_prefix(name: str, field: str = "name") -> str:
    """The prefix of GCP resource ids (``resource_prefix``, else the component name), checked to be usable in them
    (service, bucket, account ids).

    Raises:
        DedupConfigError: not 1-40 lowercase letters, digits or hyphens starting with a letter.
    """
    if not _NAME_RE.match(name) or name.endswith("-"):
        raise DedupConfigError(
            field, f"{name!r} must be 1-40 lowercase letters, digits or hyphens, starting with a letter "
            "(GCP resource ids are derived from it), e.g. 'nightly-report'"
        )
    return name


class Problems:
    """Every :class:`DedupConfigError` of one resolution, so a config with four mistakes shows four at once."""

    def __init__(self) -> None:
        self.errors: list[DedupConfigError] = []

    def run(self, check: Callable[[], T], fallback: T) -> T:
        """``check()``, or ``fallback`` after recording the error it raised."""
        try:
            return check()
        except DedupConfigError as error:
            self.add(error)
            return fallback

    def add(self, error: DedupConfigError) -> None:
        self.errors.extend(error.errors if isinstance(error, DedupConfigErrors) else [error])

    def raise_any(self) -> None:
        """Raises: DedupConfigError (one problem) or :class:`DedupConfigErrors` (several)."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise DedupConfigErrors(self.errors)


_SA_EMAIL_RE = re.compile(r"^[a-z0-9][a-z0-9-]*@[a-z0-9.-]+\.gserviceaccount\.com$")


def service_account_email(args: Mapping[str, Any], key: str, *, field: str | None = None) -> pulumi.Input[str] | None:
    """A service account's email (plain values checked), or None when not given.

    Raises:
        DedupConfigError: not an ``...@....gserviceaccount.com`` email; names ``field`` (default ``key``).
    """
    value = args.get(key)
    if value is None or isinstance(value, pulumi.Output):
        return value
    if not isinstance(value, str) or not _SA_EMAIL_RE.match(value):
        raise DedupConfigError(field or key, f"{value!r} is not a service account email: use "
                                             "NAME@PROJECT.iam.gserviceaccount.com, or leave it out")
    return value
