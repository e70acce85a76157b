"""The Redis store's settings and their checks, without redis-py (the component and the policy pack use them too).

Its environment variables are declared here (:func:`~scheduler_dedup.handler.core.variables.declare`), once, for the
reference page. The AUTH string is never read from an environment value: an environment is shown by ``gcloud run
services describe`` to anyone with ``run.services.get``, a mounted secret is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.variables import declare

if TYPE_CHECKING:
    from scheduler_dedup.handler.config.settings import Settings

DEFAULT_WAIT_TIMEOUT_MS = 500
MAX_WAIT_TIMEOUT_MS = 60_000
#: Variables of the Redis store; set while ``DEDUP_STORE`` is another store, they are a mistake.
REDIS_VARIABLES = ("DEDUP_REDIS_URL", "DEDUP_REDIS_AUTH_FILE", "DEDUP_REDIS_CA_FILE", "DEDUP_REDIS_WAIT_TIMEOUT_MS")
#: Query parameters redis-py reads from a URL (``redis.connection.URL_QUERY_ARGUMENT_PARSERS``, redis-py 8): the
#: only names a refused query is quoted with. Any other name may be a secret pasted in (``?AUTH_STRING``).
REDIS_URL_OPTIONS = frozenset({
    "db", "health_check_interval", "legacy_responses", "max_connections", "protocol", "retry_on_error",
    "retry_on_timeout", "socket_connect_timeout", "socket_keepalive", "socket_read_size", "socket_timeout",
    "ssl_check_hostname", "ssl_exclude_verify_flags", "ssl_include_verify_flags", "ssl_min_version", "timeout"})
#: Variables that would hold the AUTH string in plain sight: refused.
PLAIN_SECRET_VARIABLES = ("DEDUP_REDIS_PASSWORD", "DEDUP_REDIS_AUTH")

declare("DEDUP_REDIS_URL", "store", """
    With `DEDUP_STORE=redis`: `redis://HOST:PORT/DB`, or `rediss://HOST:PORT/DB` for TLS (Memorystore's in-transit
    encryption, port 6378). A password in it is refused at start-up: the AUTH string is mounted
    (`DEDUP_REDIS_AUTH_FILE`). See [Memorystore](../stores.md#memorystore-for-redis).""",
        component="the store's `rediss://` URL (a job on a `DedupStore` of kind `memorystore`)")
declare("DEDUP_REDIS_AUTH_FILE", "store", """
    Path of a file holding the Redis AUTH string (a Secret Manager secret mounted as a volume), read once at
    start-up, its trailing newline stripped.""",
        component="the mounted AUTH secret's path")
declare("DEDUP_REDIS_CA_FILE", "store", """
    PEM file of the CA that signed the Redis server's certificate (Memorystore's server CA), for `rediss://` only.""",
        component="the mounted server-CA secret's path")
declare("DEDUP_REDIS_WAIT_TIMEOUT_MS", "store", f"""
    How long a write that decides a run (claim, takeover, completion, failure) waits for one replica's
    acknowledgement (`WAIT 1 <ms>`) where the instance has replicas, 0 to {MAX_WAIT_TIMEOUT_MS} milliseconds; 0 turns
    `WAIT` off. Must stay under `DEDUP_STORE_TIMEOUT_SECONDS`. A write no replica acknowledged counts as unanswered:
    the handler reads it back and decides by attempt id, so on the primary it still reaches it finds its write and
    goes on. `WAIT` therefore protects a run only while the timeout outlasts the replication lag; a failover after a
    timed-out `WAIT` can still lose the write ([when a run can execute twice](../stores.md#when-a-run-can-execute-twice)).""",
        default=str(DEFAULT_WAIT_TIMEOUT_MS), component="the store's `wait_timeout_ms` (default 500)")
for _name in PLAIN_SECRET_VARIABLES:
    declare(_name, "renamed", "Refused at start-up: the Redis AUTH string is never an environment value; mount it "
                              "and name the file in `DEDUP_REDIS_AUTH_FILE`.")
_SECRET_FIX = ("put the AUTH string in Secret Manager, mount it into the service as a file and set "
               "DEDUP_REDIS_AUTH_FILE to its path (the component does this)")


@dataclass(frozen=True)
class RedisEndpoint:
    """A checked ``DEDUP_REDIS_URL``.

    Attributes:
        tls: True for ``rediss://``.
        host: host name or IP address.
        port: TCP port (default 6379, 6378 for ``rediss://`` as on Memorystore).
        db: database number (default 0).
        username: ACL user name, or None for the default user (Memorystore's AUTH).
    """

    tls: bool
    host: str
    port: int
    db: int
    username: str | None


def parse_redis_url(url: str) -> RedisEndpoint:
    """Check ``DEDUP_REDIS_URL`` and split it.

    Raises:
        ConfigError: not a redis:// or rediss:// URL with a host, a port, a database number and nothing else;
            or it holds a password (the message names the fix).
    """
    example = "e.g. redis://10.0.0.3:6379/0, or rediss://10.0.0.3:6378/0 with transit encryption"
    # Before parsing: an AUTH string holding "/", "?", "#" or "@" splits the URL elsewhere, and a parse error would
    # quote a piece of it. No refusal quotes any part of the URL but a port or a database number.
    userinfo, at, _ = url.strip().partition("://")[2].rpartition("@")
    if at and ":" in userinfo:
        raise ConfigError(f"DEDUP_REDIS_URL holds a password: remove it from the URL, {_SECRET_FIX}")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"DEDUP_REDIS_URL is not a URL ({exc}): use {example}") from None
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(f"DEDUP_REDIS_URL must start with redis:// or rediss://: use {example}")
    if parts.password is not None:
        raise ConfigError(f"DEDUP_REDIS_URL holds a password: remove it from the URL, {_SECRET_FIX}")
    if not parts.hostname:
        raise ConfigError(f"DEDUP_REDIS_URL has no host: use {example}")
    if parts.query or parts.fragment:
        names = {name for name, _ in parse_qsl(parts.query, keep_blank_values=True)}
        named = sorted(names & REDIS_URL_OPTIONS)
        if names - REDIS_URL_OPTIONS:
            named.append(f"{len(names - REDIS_URL_OPTIONS)} other parameter(s), not quoted")
        what = (f"a query ({', '.join(named)})" if named else "a query") if parts.query else "a fragment"
        raise ConfigError(f"DEDUP_REDIS_URL has {what}: timeouts and TLS come from DEDUP_STORE_TIMEOUT_SECONDS and "
                          f"DEDUP_REDIS_CA_FILE, the AUTH string from DEDUP_REDIS_AUTH_FILE; use {example}")
    path = parts.path.strip("/") or "0"
    if not path.isdigit() or int(path) > 15:
        raise ConfigError(f"DEDUP_REDIS_URL has database {path!r}: use a number 0 to 15 as the path, {example}")
    tls = parts.scheme == "rediss"
    return RedisEndpoint(tls=tls, host=parts.hostname, port=port or (6378 if tls else 6379), db=int(path),
                         username=unquote(parts.username) if parts.username else None)


@dataclass(frozen=True)
class RedisConfig:
    """The Redis store's own settings, read from the environment by :meth:`from_env` (the core
    :class:`~scheduler_dedup.handler.config.settings.Settings` holds it as ``store_config``).

    Attributes:
        url: ``DEDUP_REDIS_URL``, or None when unset.
        auth_file: ``DEDUP_REDIS_AUTH_FILE``, an absolute path, or None.
        ca_file: ``DEDUP_REDIS_CA_FILE``, an absolute path, or None.
        wait_timeout_ms: ``DEDUP_REDIS_WAIT_TIMEOUT_MS``, milliseconds (default :data:`DEFAULT_WAIT_TIMEOUT_MS`).
    """

    url: str | None = None
    auth_file: str | None = None
    ca_file: str | None = None
    wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS
    #: None that a command's options set: the instance is its URL, with its secrets, from the environment.
    where: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "RedisConfig":
        """Read the Redis variables of ``env``.

        Raises:
            ConfigError: ``DEDUP_REDIS_WAIT_TIMEOUT_MS`` is not a whole number.
        """
        return cls(url=env.get("DEDUP_REDIS_URL", "").strip() or None,
                   auth_file=env.get("DEDUP_REDIS_AUTH_FILE", "").strip() or None,
                   ca_file=env.get("DEDUP_REDIS_CA_FILE", "").strip() or None,
                   wait_timeout_ms=wait_timeout_ms_from_env(env))

    @staticmethod
    def env_problem(env: Mapping[str, str], store: str) -> str | None:
        """Why ``env`` (for a handler on ``store``) is refused because of a Redis variable, or None: an AUTH string
        in plain sight (any store), or a Redis variable set while ``DEDUP_STORE`` is another store."""
        plain = plain_secret_problem(env)
        if plain or store == "redis":
            return plain
        given = [name for name in REDIS_VARIABLES[:3] if env.get(name, "").strip()]
        if given:
            return (f"{given[0]} is set but DEDUP_STORE={store}: set DEDUP_STORE=redis to use Redis, or "
                    f"remove {given[0]}")
        return None

    def check(self, settings: "Settings") -> None:
        """The Redis settings' checks (formats and how they fit together; files are read when the store connects).

        Raises:
            ConfigError: the first problem, naming the variable and the fix.
        """
        if not self.url:
            raise ConfigError("DEDUP_STORE=redis needs DEDUP_REDIS_URL: set it to the instance's address, e.g. "
                              "redis://10.0.0.3:6379/0 (rediss://10.0.0.3:6378/0 with transit encryption)")
        endpoint = parse_redis_url(self.url)
        for name, path in (("DEDUP_REDIS_AUTH_FILE", self.auth_file), ("DEDUP_REDIS_CA_FILE", self.ca_file)):
            if path is not None and not path.startswith("/"):
                raise ConfigError(f"{name}={path!r} is not an absolute path: use the path the secret is mounted at, "
                                  "e.g. /secrets/redis/auth")
        if self.ca_file and not endpoint.tls:
            raise ConfigError("DEDUP_REDIS_CA_FILE is set but DEDUP_REDIS_URL is redis:// (no TLS): use rediss:// "
                              "(port 6378 on Memorystore with transit encryption) or remove DEDUP_REDIS_CA_FILE")
        wait_ms, store_timeout_seconds = self.wait_timeout_ms, settings.store_timeout_seconds
        if not 0 <= wait_ms <= MAX_WAIT_TIMEOUT_MS:
            raise ConfigError(f"DEDUP_REDIS_WAIT_TIMEOUT_MS={wait_ms} is out of range: use 0 (no WAIT) to "
                              f"{MAX_WAIT_TIMEOUT_MS} ms, e.g. {DEFAULT_WAIT_TIMEOUT_MS}")
        if wait_ms >= store_timeout_seconds * 1000:
            raise ConfigError(f"DEDUP_REDIS_WAIT_TIMEOUT_MS={wait_ms} is not under DEDUP_STORE_TIMEOUT_SECONDS="
                              f"{store_timeout_seconds:g}: a claim's WAIT is part of its call, so keep it to a fraction "
                              f"of the store timeout, e.g. {min(DEFAULT_WAIT_TIMEOUT_MS, int(store_timeout_seconds * 250))}")


def plain_secret_problem(env: Mapping[str, str]) -> str | None:
    """The refusal of an AUTH string given as a plain environment value, or None."""
    for name in PLAIN_SECRET_VARIABLES:
        if name in env:
            return f"{name} would hold the AUTH string in plain sight: remove it, {_SECRET_FIX}"
    return None


def wait_timeout_ms_from_env(env: Mapping[str, str]) -> int:
    """``DEDUP_REDIS_WAIT_TIMEOUT_MS`` as an integer (default :data:`DEFAULT_WAIT_TIMEOUT_MS`).

    Raises:
        ConfigError: not a whole number of milliseconds.
    """
    raw = env.get("DEDUP_REDIS_WAIT_TIMEOUT_MS", "").strip()
    if not raw:
        return DEFAULT_WAIT_TIMEOUT_MS
    if not raw.isdigit():
        raise ConfigError(f"DEDUP_REDIS_WAIT_TIMEOUT_MS={raw!r} is not a whole number of milliseconds: use e.g. "
                          f"{DEFAULT_WAIT_TIMEOUT_MS}, or 0 to turn WAIT off")
    return int(raw)
