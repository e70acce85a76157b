"""Where ``backfill`` and ``runs rerun`` may send the operator's OIDC ID token: decided in one place, before any
token is minted or any record is touched.

A loopback handler (judged by address: every address the host resolves to is loopback) gets no token, over http
or https. Any other URL must be https, and the token goes only to the audience's own origin, or to the one origin
the operator names with ``--token-origin`` when the audience is not a URL of the handler (the component's custom
audience ``https://scheduler-dedup.invalid/...``): a Cloud Run service's run.app URL holds a hash or the project
number, neither derivable from the audience (https://cloud.google.com/run/docs/triggering/https-request, "Service
URL"), so nothing proves it belongs. docs/targets-and-auth.md ("Operator commands") tells the story.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from scheduler_dedup.handler.callers.audience import url_origin


class DestinationRefused(ValueError):
    """The URL may not receive the operator's token (or a delivery at all); the message names the option to fix."""


@dataclass(frozen=True)
class Destination:
    """Where a delivery goes, and whether it carries the operator's token.

    Attributes:
        url: the handler's URL as given.
        audience: the token's audience, or None: a loopback handler gets no token.
    """

    url: str
    audience: str | None


def is_loopback_host(host: str, port: int | None = None) -> bool:
    """True when every address ``host`` resolves to is a loopback address (``ipaddress.is_loopback``).

    An IP literal is judged as it is; a name is resolved (``localhost.example.com`` is judged by where it points,
    not by its spelling). A name that does not resolve is not loopback.
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port or 0, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]) for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addresses)


def token_destination(url: str, audience: str | None, token_origin: str | None = None) -> Destination:
    """Decide whether ``url`` may receive a delivery and the operator's ID token for ``audience``.

    Args:
        url: ``--url``, the handler's URL.
        audience: ``--audience`` (default: the URL's origin).
        token_origin: ``--token-origin``: the origin the operator names as the handler's when ``audience`` is not
            a URL of ``url``'s origin; it must equal ``url``'s origin.

    Returns:
        The destination; ``audience`` None for a loopback URL (no token is sent).

    Raises:
        DestinationRefused: not an absolute http(s) URL; plain http to a host that is not loopback; or https to
            an origin that is neither the audience's nor the one named by ``--token-origin``.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationRefused(f"--url {url!r} is not an absolute http(s) URL: give the handler's URL, e.g. "
                                 "https://SERVICE-HASH-REGION.a.run.app or http://127.0.0.1:8080")
    try:
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"--url {url!r} has a bad port: {exc}") from None
    if is_loopback_host(parts.hostname, port):
        return Destination(url, None)
    origin = url_origin(url)
    if parts.scheme != "https":
        raise DestinationRefused(f"--url {url!r} is plain http to {parts.hostname}, which is not a loopback address: "
                                 "the operator's ID token would travel in clear. Use the handler's https URL")
    chosen = audience or origin
    assert origin is not None and chosen is not None
    if url_origin(chosen) == origin:
        return Destination(url, chosen)
    if token_origin is None:
        raise DestinationRefused(
            f"--url {url!r} is not the origin of --audience {chosen!r}: an ID token for that audience is sent only "
            f"to its own origin. If {origin} is the handler's (its run.app URL, `gcloud run services describe "
            f"SERVICE --format 'value(status.url)'`), say so with --token-origin {origin}")
    if url_origin(token_origin) != origin:
        raise DestinationRefused(f"--token-origin {token_origin!r} is not --url's origin {origin}: the token is sent "
                                 "only to the origin named there")
    return Destination(url, chosen)
