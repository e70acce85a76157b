"""Allowed callers: which ``DEDUP_ALLOWED_CALLERS`` entries the handler accepts, decided in one place.

Cloud Scheduler mints the OIDC token as the service account named in ``oidcToken.serviceAccountEmail``
(https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OidcToken), so the
token's ``email`` claim is always a service account's email. An entry may be written as that email or as
the IAM member people copy from bindings, ``serviceAccount:EMAIL``
(https://cloud.google.com/iam/docs/principal-identifiers); the member form is normalised to the email.
Emails are compared lower-cased: IAM member identifiers are case-insensitive for service accounts (their emails
are lower-case by construction: https://cloud.google.com/iam/docs/service-accounts-create, "account ID"). Where
the component created the account, ``DEDUP_ALLOWED_CALLER_IDS`` pins it by its unique id, the ID token's ``sub``
(https://cloud.google.com/docs/authentication/token-types#id-contents): a deleted and recreated account of the same
email gets a new unique id and is refused. Any other member type (``user:``, ``group:``, ``domain:``,
``principal:``, ``allUsers``...) and any email that is not a service account's (``*.gserviceaccount.com``) is
refused: no Scheduler token can carry it, so it would only hide a 403 on every delivery.
"""

from __future__ import annotations

from scheduler_dedup.handler.core.errors import ConfigError

VARIABLE = "DEDUP_ALLOWED_CALLERS"
IDS_VARIABLE = "DEDUP_ALLOWED_CALLER_IDS"
SERVICE_ACCOUNT_MEMBER = "serviceAccount:"
#: Every service account email ends with this: user-managed (``NAME@PROJECT.iam.gserviceaccount.com``),
#: default (``PROJECT_NUMBER-compute@developer.gserviceaccount.com``, ``PROJECT@appspot.gserviceaccount.com``)
#: and Google-managed (``service-N@gcp-sa-*.iam.gserviceaccount.com``) ones.
SERVICE_ACCOUNT_DOMAIN = ".gserviceaccount.com"


def account_email(value: str) -> str:
    """The service-account email that an IAM member ``serviceAccount:EMAIL``, an account's resource name
    (``projects/P/serviceAccounts/EMAIL``) or a bare email names, lower-cased as IAM compares it (see the module
    docstring); the handler, the component and the policy pack compare identities through it. Never raises."""
    email = value.strip().rsplit("/", 1)[-1]
    if email[: len(SERVICE_ACCOUNT_MEMBER)].lower() == SERVICE_ACCOUNT_MEMBER.lower():
        email = email[len(SERVICE_ACCOUNT_MEMBER):]
    return email.strip().lower()


def normalise_caller(entry: str) -> str:
    """The service-account email an allowed-caller entry stands for, lower-cased.

    Args:
        entry: an email (``sched@p.iam.gserviceaccount.com``) or an IAM member
            (``serviceAccount:sched@p.iam.gserviceaccount.com``).

    Raises:
        ConfigError: another member type, or not a service account's email; the message names
            ``DEDUP_ALLOWED_CALLERS`` and the fix.
    """
    value = entry.strip()
    if value[: len(SERVICE_ACCOUNT_MEMBER)].lower() == SERVICE_ACCOUNT_MEMBER.lower():
        value = value[len(SERVICE_ACCOUNT_MEMBER):].strip()
    elif ":" in value:
        kind = value.split(":", 1)[0]
        raise ConfigError(f"{VARIABLE} has {entry!r}, a {kind}: member: only service accounts can be the Scheduler "
                          "job's OIDC identity; list the job's oidcToken.serviceAccountEmail (e.g. "
                          "sched@PROJECT.iam.gserviceaccount.com)")
    email = value.lower()
    local, at, domain = email.partition("@")
    if not local or not at or not domain.endswith(SERVICE_ACCOUNT_DOMAIN):
        raise ConfigError(f"{VARIABLE} has {entry!r}, which is not a service account's email: Cloud Scheduler's "
                          "OIDC token always carries the job's service account; list emails such as "
                          "sched@PROJECT.iam.gserviceaccount.com")
    return email


def parse_allowed_callers(raw: str) -> frozenset[str]:
    """Every entry of comma-separated ``DEDUP_ALLOWED_CALLERS``, normalised by :func:`normalise_caller`.

    Raises:
        ConfigError: an entry is refused (the first, in order).
    """
    return frozenset(normalise_caller(entry) for entry in raw.split(",") if entry.strip())


def parse_allowed_caller_ids(raw: str) -> frozenset[str]:
    """Every entry of comma-separated ``DEDUP_ALLOWED_CALLER_IDS``: service accounts' unique ids (decimal digits,
    ``gcp.serviceaccount.Account.unique_id``), each compared exactly with the ID token's ``sub`` claim.

    Raises:
        ConfigError: an entry is not all digits; the message names the variable and the fix.
    """
    ids = frozenset(entry.strip() for entry in raw.split(",") if entry.strip())
    for entry in sorted(ids):
        if not entry.isascii() or not entry.isdigit():
            raise ConfigError(f"{IDS_VARIABLE} has {entry!r}, which is not a service account's unique id (decimal "
                              "digits, `gcloud iam service-accounts describe EMAIL --format 'value(uniqueId)'`); "
                              "list the Scheduler identity's unique id, or unset it")
    return ids
