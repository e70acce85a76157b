"""Text a job supplied, made safe to store in Firestore, answer in JSON and log.

A Python ``str`` can hold characters UTF-8 cannot encode: lone surrogates, which ``os.listdir``,
``os.environ`` and ``sys.argv`` produce for undecodable bytes (PEP 383 ``surrogateescape``). Firestore
stores UTF-8 strings only (https://firebase.google.com/docs/firestore/manage-data/data-types), and an
exception's ``__str__`` is user code that may itself raise. Error text therefore goes through
:func:`exception_text` before it is recorded, answered or logged.

**Credentials.** Text that leaves the handler (an answer, a run record, a log line) can carry what a job, a
downstream or a library put into it: an ``Authorization`` header echoed by a downstream, a token quoted by a
parser's error message. :func:`scrub_secrets` is the one function that removes credential-shaped text
(bearer and basic credentials, JWTs such as Google ID tokens, Google OAuth access tokens and API keys, a URL's
``user:password@``, query parameters such as ``key=`` or ``sig=``, ``key=value`` pairs whose key names a secret); :func:`exception_text` and every refusal and downstream summary go
through it. It recognises shapes, not meaning: a secret of no known shape in an exception message is not
found, unless the handler knows its value: :func:`hide_values` registers the job's secret values
(:mod:`~scheduler_dedup.handler.config.secret_values`), which :func:`scrub_secrets` then replaces wherever they appear.

**Target URLs.** A webhook URL carries its secret in its path (``https://hooks.example.com/services/T0/B0/XYZ``), a
signed URL in its query: no shape tells it from any other URL. So a target URL is shown as its scheme, host and a
hash of the rest, and nowhere whole (:func:`shown_url`). The handler registers its target URL when it reads it
(:func:`hide_url`); from then on :func:`scrub_secrets` replaces that URL, and its path and query alone (as
urllib3's errors or a downstream's 404 page quote them), wherever they appear in text that leaves the process.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote, urlsplit

#: ``Bearer <credentials>`` / ``Basic <credentials>`` (RFC 6750, RFC 7617), any case.
_AUTH_SCHEME_RE = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
#: A JWS in compact form (RFC 7515 section 7.1): its header is a JSON object, so base64url-encoded it starts
#: with ``eyJ`` (``{"``); the signature segment may be empty (``alg: none``) or Cloud Run's placeholder.
_JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")
#: Google OAuth 2.0 access tokens (``ya29.`` prefix).
_ACCESS_TOKEN_RE = re.compile(r"\bya29\.[A-Za-z0-9._-]+")
#: Google API keys: ``AIza`` and 35 more characters (https://cloud.google.com/docs/authentication/api-keys).
_API_KEY_RE = re.compile(r"\bAIza[0-9A-Za-z_-]{35}")
#: A URL's userinfo, ``scheme://user:password@host`` (RFC 3986 section 3.2.1: "deprecated", yet URLs still carry it).
_URL_USERINFO_RE = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@")
#: Query parameters that carry a credential by name alone: ``key`` (Google API keys), ``sig`` / ``signature``
#: (shared-access and signed URLs), ``X-Goog-Signature`` / ``X-Amz-Signature`` (Cloud Storage and S3 signed URLs).
_QUERY_CREDENTIAL_RE = re.compile(r"(?P<key>[?&;](?:key|sig|signature|x-goog-signature|x-amz-signature)=)[^&#\s\"']+",
                                  re.IGNORECASE)
#: ``key=value`` / ``"key": "value"`` where the key names a credential (prose such as "ID token: ..." is not a pair).
_SECRET_PAIR_RE = re.compile(
    r"""(?P<key>(?:(?P<q>["'])[A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|authorization|cookie|"""
    r"""credentials?)[A-Za-z0-9_-]*(?P=q)\s*:|\b[A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|"""
    r"""credentials?)[A-Za-z0-9_-]*=)\s*)(?P<value>"[^"]*"|'[^']*'|[^\s,;&}]+)""",
    re.IGNORECASE)
REDACTED = "[redacted]"
#: Hex digits of SHA-256 that :func:`shown_url` keeps of a URL's path, query and fragment (64 bits: enough to tell
#: two URLs apart, too few to be worth brute-forcing a high-entropy secret for).
URL_HASH_HEX_DIGITS = 16
#: Pieces of a hidden URL (path, query) shorter than this many characters are no secret and are not searched for.
MIN_HIDDEN_PIECE_CHARS = 6
#: Secret values shorter than this many characters are not searched for (``1``, ``true``: they would redact prose).
MIN_SECRET_VALUE_CHARS = 4
#: ``(text, replacement)`` for each registered URL's forms, longest text first (:func:`hide_url`).
_hidden: tuple[tuple[str, str], ...] = ()
_hidden_lock = threading.Lock()


def shown_url(url: str) -> str:
    """How a target URL is recorded, answered and logged: ``scheme://host[:port]/[sha256:<16 hex>]``.

    The hash covers everything after the host (path, query, fragment); a URL with nothing after its host (or only
    ``/``) is shown as ``scheme://host[:port]/``. Userinfo (``user:password@``) is dropped. Text that is not an
    absolute URL is shown as ``[sha256:<16 hex>]`` alone. Never raises.
    """
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return _url_hash(url)
    if not parts.scheme or not host:
        return _url_hash(url)
    origin = f"{parts.scheme.lower()}://{f'[{host}]' if ':' in host else host}{f':{port}' if port else ''}"
    rest = _rest(url.strip())
    return f"{origin}/{_url_hash(rest)}" if rest not in ("", "/") else f"{origin}/"


def hide_url(url: str) -> str:
    """Register ``url`` so that :func:`scrub_secrets` shows it, in any text, as :func:`shown_url` does; returns that.

    Also hidden: what follows the host (``/path?query``, percent-encoded or not, as an HTTP library's error quotes
    the request target), and the path and the query each alone when at least :data:`MIN_HIDDEN_PIECE_CHARS`
    characters long. Thread-safe; registering a URL twice changes nothing.
    """
    global _hidden
    shown = shown_url(url)
    stripped = url.strip()
    rest = _rest(stripped)
    forms: dict[str, str] = {stripped: shown}
    if len(rest) >= MIN_HIDDEN_PIECE_CHARS:
        hashed = _url_hash(rest)
        for text in (rest, rest.partition("#")[0]):
            for variant in (text, unquote(text), quote(unquote(text), safe="!#$%&'()*+,/:;=?@[]~")):
                forms.setdefault(variant, f"/{hashed}" if variant.startswith("/") else hashed)
        try:
            parts = urlsplit(stripped)
        except ValueError:
            parts = None
        for piece in ((parts.path, parts.query, parts.fragment) if parts is not None else ()):
            for variant in (piece, unquote(piece)):
                if len(variant) >= MIN_HIDDEN_PIECE_CHARS:
                    forms.setdefault(variant, REDACTED)
    with _hidden_lock:
        merged = dict(_hidden)
        merged.update({text: replacement for text, replacement in forms.items() if text not in merged})
        _hidden = tuple(sorted(merged.items(), key=lambda item: -len(item[0])))
    return shown


def hide_values(values: Iterable[str]) -> int:
    """Register secret ``values`` so that :func:`scrub_secrets` replaces each with ``[redacted]`` wherever it
    appears: as it is, percent-encoded, and base64-encoded (standard and URL-safe alphabets). Blanks around a value
    are ignored; values shorter than :data:`MIN_SECRET_VALUE_CHARS` are skipped. Thread-safe.

    Returns:
        How many values were registered.
    """
    global _hidden
    forms: dict[str, str] = {}
    count = 0
    for value in values:
        value = value.strip()
        if len(value) < MIN_SECRET_VALUE_CHARS:
            continue
        count += 1
        raw = value.encode("utf-8", "surrogatepass")
        for form in (value, quote(value, safe=""), base64.b64encode(raw).decode().rstrip("="),
                     base64.urlsafe_b64encode(raw).decode().rstrip("=")):
            forms[form] = REDACTED
    with _hidden_lock:
        merged = dict(_hidden)
        merged.update(forms)
        _hidden = tuple(sorted(merged.items(), key=lambda item: -len(item[0])))
    return count


def _rest(url: str) -> str:
    """What follows ``scheme://netloc`` in ``url`` (path, query, fragment), or all of ``url`` if it has no netloc."""
    scheme, sep, after = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (after.find(c) for c in "/?#") if i >= 0), default=len(after))
    return after[cut:]


def _url_hash(text: str) -> str:
    return f"[sha256:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:URL_HASH_HEX_DIGITS]}]"


def scrub_secrets(text: str) -> str:
    """``text`` with every credential-shaped part replaced by ``[redacted]``, and every registered URL
    (:func:`hide_url`) shown as :func:`shown_url` shows it (see the module docstring).

    Idempotent: scrubbing scrubbed text changes nothing.
    """
    for hidden, replacement in _hidden:
        if hidden in text:
            text = text.replace(hidden, replacement)
    text = _AUTH_SCHEME_RE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _JWT_RE.sub(REDACTED, text)
    text = _ACCESS_TOKEN_RE.sub(REDACTED, text)
    text = _API_KEY_RE.sub(REDACTED, text)
    text = _URL_USERINFO_RE.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _QUERY_CREDENTIAL_RE.sub(lambda m: m.group("key") + REDACTED, text)
    return _SECRET_PAIR_RE.sub(lambda m: m.group("key") + (m.group("value") if REDACTED in m.group("value")
                                                           else REDACTED), text)


def utf8_safe(text: str) -> str:
    """``text`` with each character UTF-8 cannot encode (a lone surrogate) replaced by its ``\\uXXXX`` escape.

    Text that encodes already is returned unchanged.
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def is_utf8(text: str) -> bool:
    """True when ``text`` encodes as UTF-8 (holds no lone surrogate), as Firestore and strict JSON need."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def exception_text(exc: BaseException, limit: int) -> str:
    """``"<ExceptionType>: <message>"`` for ``exc``, UTF-8 encodable, credentials scrubbed
    (:func:`scrub_secrets`), at most ``limit`` characters.

    Never raises: an exception whose ``__str__`` raises is described by its type and that failure.
    """
    try:
        message = str(exc)
    except Exception as failure:  # the exception's own __str__ is user code
        message = f"<its message could not be read: {type(failure).__name__}>"
    return scrub_secrets(utf8_safe(f"{type(exc).__name__}: {message}"))[:limit]
