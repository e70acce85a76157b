"""OIDC audiences: which ``aud`` a token must carry to pass each gate, decided in one place.

The gates disagree on spelling: the handler's own check compares ``aud`` exactly, as google-auth does
(:func:`handler_accepts`, which the handler, the component and the policy pack call); Cloud Run IAM also accepts its
``*.run.app`` URL with a trailing slash, or a custom audience; Cloud Functions needs the full function URL.
:func:`target_audience` is the audience the handler mints for an HTTP target by host kind (:data:`HOST_KINDS`), and
:func:`platform_accepts` says whether a value passes the gate in front of a URL. Sources:
docs/targets-and-auth.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal
from urllib.parse import urlsplit

HostKind = Literal["cloud_run", "cloud_functions", "other"]

#: What each host kind accepts as ``aud``, for documentation (docs/targets-and-auth.md).
HOST_KINDS: dict[HostKind, str] = {
    "cloud_run": "*.run.app: the service URL (origin, with or without a trailing '/') or a custom audience",
    "cloud_functions": "*.cloudfunctions.net: the full function URL https://REGION-PROJECT.cloudfunctions.net/FUNCTION",
    "other": "any other host: whatever the receiver checks; the default is the URL's origin",
}


def handler_accepts(audience: str, accepted: Iterable[str]) -> bool:
    """True when a token with ``aud`` = ``audience`` passes the handler's caller check.

    Args:
        audience: the token's ``aud`` claim (or the Scheduler job's ``oidcToken.audience``).
        accepted: the handler's ``DEDUP_OIDC_AUDIENCE`` values.

    Exact string equality, as google-auth's ``verify_token`` compares (see the module docstring).
    """
    return audience in tuple(accepted)


def split_audiences(raw: str) -> tuple[str, ...]:
    """``DEDUP_OIDC_AUDIENCE``'s comma-separated values, each stripped of surrounding blanks, empty ones dropped."""
    return tuple(value.strip() for value in raw.split(",") if value.strip())


def host_kind(url: str) -> HostKind:
    """Which gate stands in front of ``url``: ``cloud_run`` (``*.run.app``), ``cloud_functions``
    (``*.cloudfunctions.net``) or ``other``."""
    host = (urlsplit(url.strip()).hostname or "").lower()
    if host.endswith(".run.app"):
        return "cloud_run"
    if host.endswith(".cloudfunctions.net"):
        return "cloud_functions"
    return "other"


def url_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url``, lower-cased, or None when ``url`` is not absolute."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _function_url(url: str) -> str | None:
    """``https://REGION-PROJECT.cloudfunctions.net/FUNCTION`` of a Cloud Functions URL (first path segment)."""
    origin = url_origin(url)
    name = urlsplit(url.strip()).path.strip("/").split("/")[0]
    return f"{origin}/{name}" if origin and name else None


def routed_base(url: str) -> str | None:
    """What picks the receiver of a request to ``url``: the function URL on ``*.cloudfunctions.net`` (its first path
    segment names the function; many functions share a host), else the origin. None when ``url`` is not absolute."""
    return _function_url(url) if host_kind(url) == "cloud_functions" else url_origin(url)


def served_path(url: str) -> str:
    """The path the receiver sees for a request to ``url``: on ``*.cloudfunctions.net`` the platform strips the
    function's name before the function sees the request (GoogleCloudPlatform/functions-framework-python#54:
    "the Cloud Functions deployment strips the function name out of the URL"), so
    ``https://R-P.cloudfunctions.net/NAME/dedup/run-check`` serves ``/dedup/run-check``."""
    path = urlsplit(url.strip()).path
    if host_kind(url) == "cloud_functions":
        path = "/" + path.lstrip("/").partition("/")[2]
    return path


def target_audience(url: str) -> str:
    """The ID-token audience the handler uses for an HTTP target when ``DEDUP_TARGET_AUDIENCE`` is not set.

    ``*.run.app``: the origin (``https://svc-abc-ew.a.run.app``); ``*.cloudfunctions.net``: the full function
    URL (``https://us-central1-p.cloudfunctions.net/export-report``); other hosts: the origin (a receiver
    behind a custom domain usually lists it as a Cloud Run custom audience; set ``DEDUP_TARGET_AUDIENCE``
    otherwise).

    Raises:
        ValueError: ``url`` is not absolute, or a Cloud Functions URL names no function.
    """
    kind = host_kind(url)
    value = _function_url(url) if kind == "cloud_functions" else url_origin(url)
    if value is None:
        raise ValueError(f"{url!r} is not an absolute URL" if url_origin(url) is None else
                         f"{url!r} names no function: use https://REGION-PROJECT.cloudfunctions.net/FUNCTION")
    return value


def platform_accepts(audience: str, url: str, custom_audiences: Iterable[str] = ()) -> bool:
    """True when Google's gate in front of ``url`` admits a token with ``aud`` = ``audience``.

    Args:
        audience: the token's audience.
        url: the URL the request goes to (a Cloud Run service URL, a function URL, or any URL).
        custom_audiences: the Cloud Run service's ``customAudiences`` (compared exactly).

    ``*.run.app``: the origin of ``url``, with or without one trailing ``/``, or a custom audience.
    ``*.cloudfunctions.net``: exactly the function URL, or a custom audience (gen2 functions are Cloud Run
    services). Other hosts: a custom audience, the origin or ``url`` itself (the receiver decides;
    nothing stricter can be known). Sources in the module docstring.
    """
    if audience in tuple(custom_audiences):
        return True
    kind = host_kind(url)
    origin = url_origin(url)
    if kind == "cloud_run":
        return origin is not None and audience in (origin, origin + "/")
    if kind == "cloud_functions":
        return audience == _function_url(url)
    return audience in (origin, url.strip())


def misspelt_target_audience(audience: str, url: str) -> str | None:
    """Why ``audience`` cannot work for a token sent to ``url``, or None when it may.

    A value for the same origin as ``url`` that the gate in front of ``url`` refuses is a misspelling of
    the one value that works (``https://REGION-PROJECT.cloudfunctions.net`` for a function, or a run.app URL
    with a path); a value for another origin may be a custom audience of the receiver, and a host of kind
    ``other`` decides for itself: neither is judged.
    Used by the handler (``DEDUP_TARGET_AUDIENCE`` at start-up), the component (``http_target.audience``)
    and the policy pack.
    """
    if (host_kind(url) == "other" or url_origin(audience) is None or url_origin(audience) != url_origin(url)
            or platform_accepts(audience, url)):
        return None
    try:
        right = target_audience(url)
    except ValueError:
        return f"{audience!r} is not an audience {url} accepts"
    return (f"{audience!r} is not an audience {url} accepts ({HOST_KINDS[host_kind(url)]}); "
            f"the token would be refused with 401: use {right!r}")
