"""The Memorystore for Redis store: one Lua script per contract operation, Redis' own clock, exact key expiry.

==============================  =====================================================================
contract                        Redis (:mod:`.lua`)
==============================  =====================================================================
put-if-absent                   script ``create``: ``EXISTS``, then the hash and its index entries
read, with the store's clock    script ``read``: ``HGETALL`` and ``TIME``
fenced update / delete          scripts ``update`` / ``delete``: compare the record's version (``_v``)
server-side values              resolved inside the script (``TIME``; a stored number plus the increment)
run history                     a sorted set per job by ``schedule_time``; a lexicographic set of run ids
TTL                             ``PEXPIREAT`` at ``expire_at``: exact (Redis never returns an expired key)
==============================  =====================================================================

Each operation is one ``EVALSHA`` (one round trip): a first delivery costs 2 (claim, completion) plus one
renewal per third of the lease the job runs; a duplicate costs 1 on another instance (the claim's script answers
with the record it found, which serves the protocol's read at once) and 0 on the instance that ran it (its cache
of finished runs). A process's first call loads every script first (``SCRIPT LOAD``, one more round trip), and
so does the first call after a ``NOSCRIPT`` answer (a restarted or promoted server).

**WAIT.** Where the instance has replicas (``INFO replication``, checked at most once a minute, every 5 s while
there is none), a write that
decides a run (a claim or takeover, a completion, a failure) is followed on the same connection by
``WAIT 1 <DEDUP_REDIS_WAIT_TIMEOUT_MS>``, and counts as answered only once one replica has it. Without that
acknowledgement (a timeout, or the connection dropped by a failover) the write is unanswered, as a lost answer
is (and where the primary is still there, the read finds the write and the run goes on: a timed-out ``WAIT``
delays a run, it never stops one): :class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError`, so the protocol reads the record and decides
by attempt id. After a failover that read reaches the promoted replica: a lost claim is absent, so the delivery
answers ``store_error`` instead of running the job (a retry claims afresh), and a lost completion shows this
attempt's claim, so the completion is written again. The replicas are counted again after such a write.
A decisive write whose answer was lost is found by the retry (or the protocol's read) on a new connection, whose
``WAIT`` would acknowledge nothing: the read that follows first writes a no-op and waits for a replica to have
it, and with it the lost write (:meth:`RedisRunStore._confirm`). Redis' own caveat applies: "WAIT does not make Redis a strongly
consistent store": a failover can still promote a replica without acknowledged writes
(https://redis.io/docs/latest/commands/wait/). ``WAIT`` makes that rarer; only Firestore or Spanner rule it out.

**Errors.** A call, a new connection's set-up included, ends by the store timeout. A dropped connection or a call
unanswered within the store timeout is
:class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError` (the script may have run): the client retries
within the store timeout, and a retried write whose first try ran finds its own write ("exists", "changed").
``READONLY``, ``LOADING``, ``MASTERDOWN`` and ``BUSY`` (a failover or restart in progress) are retried the same way.
``OOM`` (a full instance with ``noeviction``), a failed AUTH, a server certificate the CA file does not vouch for
and a missing command are
:class:`~scheduler_dedup.handler.core.errors.StoreRefusedError`: nothing was written.
"""

from __future__ import annotations

import logging
import random
import ssl
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import redis
from redis import exceptions as rexc
from redis.backoff import NoBackoff
from redis.credentials import CredentialProvider
from redis.retry import Retry

from scheduler_dedup.handler.core.errors import (InvalidWriteError, StoreConfigError, StoreRefusedError,
                                                 StoreUnavailableError)
from scheduler_dedup.handler.core.record import FINAL_STATUSES, IN_PROGRESS, RUNNING_DOWNSTREAM, TTL_FIELD, RunRecord
from scheduler_dedup.handler.stores.redis import values as redis_values
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore
from scheduler_dedup.handler.stores.redis.config import (DEFAULT_WAIT_TIMEOUT_MS, RedisConfig, RedisEndpoint,
                                                          parse_redis_url)
from scheduler_dedup.handler.stores.redis.lua import SCRIPTS

log = logging.getLogger("scheduler_dedup")

#: Error replies of a server that is failing over, restarting or busy: nothing ran, try again.
_TRANSIENT = ("READONLY", "LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN")
#: How long the replica count from ``INFO replication`` is trusted, seconds: a count of one or more (until a
#: ``WAIT`` goes unacknowledged), and a count of none (a replica may be back: Memorystore recreates it after a
#: failover).
REPLICA_CHECK_SECONDS = 60.0
NO_REPLICA_CHECK_SECONDS = 5.0
#: How long the record a lost claim found serves the protocol's next read of it on that thread, seconds.
_FOUND_SECONDS = 1.0
#: What a TLS handshake refused for the server's certificate says (no retry can help: nothing was sent).
_CERTIFICATE_REFUSED = "certificate verify failed"
#: Statuses whose write decides a run: followed by ``WAIT`` where there are replicas.
_DECISIVE = (IN_PROGRESS, RUNNING_DOWNSTREAM, *FINAL_STATUSES)


class _Dropped(Exception):
    """A connection dropped or went silent mid-call: the answers read before (``answers``), the cause chained."""

    def __init__(self, answers: list[Any], cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.answers = answers
        self.cause = cause


#: The deadline (monotonic seconds) of the call that is getting a connection on this thread.
_CONNECTING = threading.local()


class _Bounded:
    """A connection whose set-up (TCP, TLS handshake, AUTH, ``SELECT``, ``CLIENT SETNAME``) ends by the deadline of the
    call that needs it (:data:`_CONNECTING`), not a whole socket timeout later; its socket timeout stays as set."""

    def connect(self) -> None:
        conn: Any = self
        until = getattr(_CONNECTING, "deadline", None)
        if until is None or conn._sock is not None:
            super().connect()  # type: ignore[misc]
            return
        saved = (conn.socket_connect_timeout, conn.socket_timeout)
        remaining = max(until - time.monotonic(), 0.001)
        conn.socket_connect_timeout = conn.socket_timeout = remaining
        try:
            super().connect()  # type: ignore[misc]
        finally:
            conn.socket_connect_timeout, conn.socket_timeout = saved
            if conn._sock is not None:
                conn._sock.settimeout(saved[1])


class _Credentials(CredentialProvider):
    """The ACL user and AUTH string every connection authenticates with when it connects (or reconnects); the store
    replaces :attr:`password` after a rotation of ``DEDUP_REDIS_AUTH_FILE``."""

    def __init__(self, username: str | None, password: str | None):
        self.username = username or ""
        self.password = password

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        password = self.password or ""
        return (self.username, password) if self.username else (password,)


class _Connection(_Bounded, redis.Connection):
    pass


class _SSLConnection(_Bounded, redis.SSLConnection):
    pass


class RedisRunStore(RunStore):
    """Run records of one collection (a key prefix) in one Redis database.

    Args:
        endpoint: the checked ``DEDUP_REDIS_URL``.
        collection: the collection id (the keys' hash tag ``{collection}``).
        timeout_seconds: how long one operation may take, retries included, in seconds.
        password: the AUTH string, or None.
        auth_file: the file ``password`` came from (``DEDUP_REDIS_AUTH_FILE``), or None. When Redis refuses the AUTH
            string (``WRONGPASS``, ``NOAUTH``), the file is read again, once per call: if it holds another string (a
            rotated secret, mounted as a volume), that one is used from then on and the call is tried again, on every
            connection made afterwards (a connection stays authenticated after a rotation; one made later is not).
        ca_file: PEM file of the server's CA for ``rediss://`` (None: the system's CAs); read by every new connection
            (redis-py loads it into each TLS handshake's context), so a rotated CA file needs nothing more.
        wait_timeout_ms: ``WAIT`` timeout of a decisive write where there are replicas; 0: never ``WAIT``.

    Raises (every method): the contract's errors (:mod:`scheduler_dedup.handler.stores.base`), with redis-py's
    exception chained.
    """

    kind: ClassVar[str] = "redis"
    display_name: ClassVar[str] = "Redis"

    def __init__(self, endpoint: RedisEndpoint, collection: str, timeout_seconds: float = 20.0, *,
                 password: str | None = None, auth_file: str | None = None, ca_file: str | None = None,
                 wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS):
        self.endpoint = endpoint
        self.collection = collection
        self.timeout_seconds = timeout_seconds
        self.wait_timeout_ms = wait_timeout_ms
        self.prefix = "{" + collection + "}:"
        self._auth_file = auth_file
        self._credentials = _Credentials(endpoint.username, password)
        kwargs: dict[str, Any] = dict(
            host=endpoint.host, port=endpoint.port, db=endpoint.db,
            **(dict(credential_provider=self._credentials) if password is not None else dict(username=endpoint.username)),
            socket_timeout=timeout_seconds, socket_connect_timeout=timeout_seconds, socket_keepalive=True,
            retry=Retry(NoBackoff(), 0), health_check_interval=0, client_name="scheduler-dedup",
            connection_class=_Connection,
        )
        if endpoint.tls:
            # The chain is verified against the instance's own server CA (DEDUP_REDIS_CA_FILE: Memorystore issues one
            # per instance); the name is not, since clients reach the instance by a private IP address.
            kwargs.update(connection_class=_SSLConnection, ssl_cert_reqs=ssl.CERT_REQUIRED,
                          ssl_ca_certs=ca_file, ssl_check_hostname=False)
        self._pool = redis.ConnectionPool(**kwargs)
        self._offset_lock = threading.Lock()
        self._clock_offset = 0.0  # Redis' clock minus ours, seconds
        self._replicas: tuple[int, float] | None = None  # (connected replicas, monotonic time checked)
        self._found = threading.local()
        self._loaded = False  # the scripts are loaded on the server (else the next call loads them first)
        #: Decisive writes whose ``WAIT`` ended without a replica's acknowledgement (for benchmarks and tests).
        self.unreplicated_writes = 0
        #: Round trips sent (each a pipeline of one or more commands on one connection).
        self.round_trips = 0

    # -- the wire --------------------------------------------------------------------------------

    def _roundtrip(self, commands: Sequence[tuple[Any, ...]], deadline: float) -> list[Any]:
        """Send ``commands`` pipelined on one connection and read every answer before ``deadline`` (monotonic).

        An error answer is returned in place (a ``ResponseError``), after every answer was read; a dropped or
        silent connection raises :class:`_Dropped` with the answers read so far. A refused AUTH raises redis-py's
        ``AuthenticationError``, another refused set-up command of a new connection (``SELECT``, ``CLIENT SETNAME``)
        its ``ResponseError``.
        """
        answers: list[Any] = []
        conn = None
        try:
            _CONNECTING.deadline = deadline
            try:
                conn = self._pool.get_connection()
            finally:
                _CONNECTING.deadline = None
            if deadline - time.monotonic() <= 0:
                raise rexc.TimeoutError("no time left for the call")
            with self._offset_lock:
                self.round_trips += 1
            conn.send_packed_command(conn.pack_commands(commands))
            for _ in commands:
                remaining = max(deadline - time.monotonic(), 0.001)
                try:
                    answers.append(conn.read_response(timeout=remaining, disconnect_on_error=True))
                except rexc.ResponseError as exc:
                    answers.append(exc)
            return answers
        except (rexc.AuthenticationError, rexc.AuthorizationError):
            raise
        except (rexc.ConnectionError, rexc.TimeoutError, OSError) as exc:
            if conn is not None:
                conn.disconnect()
            raise _Dropped(answers, exc) from exc
        finally:
            if conn is not None:
                self._pool.release(conn)

    def _deadline(self, timeout_seconds: float | None = None) -> float:
        """When a call started now must end (monotonic seconds): ``timeout_seconds`` or the store timeout from now."""
        return time.monotonic() + (self.timeout_seconds if timeout_seconds is None else timeout_seconds)

    def _call(self, commands: Sequence[tuple[Any, ...]], action: str, deadline: float,
              *, scripted: bool = True, dropped: list[BaseException] | None = None) -> list[Any]:
        """:meth:`_roundtrip` with retries of transient failures until ``deadline`` (monotonic seconds).

        ``commands[0]`` is the ``EVALSHA`` of a script when ``scripted``; a ``NOSCRIPT`` answer loads it and
        sends again (nothing ran). Returns the answers; raises the contract's error for ``commands[0]``'s failure.
        Each try that went unanswered (it may have run) adds its cause to ``dropped``.
        """
        seconds = deadline - time.monotonic()
        backoff = 0.05
        last: BaseException | None = None
        reread = False
        while True:
            refused_password = self._credentials.password
            try:
                if scripted and not self._loaded:
                    self._load(deadline)
                answers = self._roundtrip(commands, deadline)
            except (rexc.AuthenticationError, rexc.AuthorizationError) as exc:
                if isinstance(exc, rexc.AuthenticationError) and not reread:
                    reread = True
                    if self._reread_auth_file(refused_password):
                        continue  # nothing was sent under the refused AUTH string: try again with the new one
                raise self._refused(exc, action) from exc
            except rexc.ResponseError as exc:  # a set-up command refused (SELECT, CLIENT SETNAME): nothing was sent
                if not str(exc).startswith(_TRANSIENT):
                    raise self._refused(exc, action) from exc
                last = exc
            except _Dropped as exc:
                got = exc.answers
                if got and not isinstance(got[0], BaseException):
                    return got + [exc.cause] * (len(commands) - len(got))  # the script ran; a later one (WAIT) failed
                if _CERTIFICATE_REFUSED in str(exc.cause).lower():  # TLS refused before anything was sent
                    raise self._refused(exc.cause, action) from exc.cause
                last = exc.cause
                if dropped is not None:
                    dropped.append(last)
            else:
                first = answers[0]
                if not isinstance(first, rexc.ResponseError):
                    return answers
                text = str(first)
                if scripted and isinstance(first, rexc.NoScriptError):  # a restarted or promoted server
                    self._loaded = False
                    continue
                if not text.startswith(_TRANSIENT):
                    raise self._refused(first, action) from first
                last = first
            remaining = deadline - time.monotonic()
            if remaining <= 0.01:
                assert last is not None
                raise self._unavailable(last, action, seconds) from last
            time.sleep(min(backoff * (0.5 + random.random()), remaining / 2))
            backoff = min(backoff * 2, 1.0)

    def _reread_auth_file(self, refused: str | None) -> bool:
        """Read ``DEDUP_REDIS_AUTH_FILE`` again after Redis refused the AUTH string ``refused``; True if the store now
        uses another one (the file's, or one another thread read meanwhile), False if there is none to try."""
        if self._auth_file is None:
            return False
        try:
            current = read_auth_file(self._auth_file)
        except StoreRefusedError as exc:
            log.warning("Redis refused the AUTH string and DEDUP_REDIS_AUTH_FILE cannot be read again: %s", exc)
            return False
        with self._offset_lock:
            if current == refused:
                return self._credentials.password != refused  # another thread switched already: try its string
            self._credentials.password = current
        log.warning("Redis refused the AUTH string; DEDUP_REDIS_AUTH_FILE=%s holds a new one (a rotated secret): "
                    "using it from now on", self._auth_file)
        return True

    def _load(self, deadline: float) -> None:
        """Load every script (``SCRIPT LOAD``, one round trip); a server keeps them until it restarts."""
        try:
            answers = self._roundtrip([("SCRIPT", "LOAD", script.source) for script in SCRIPTS.values()], deadline)
        except _Dropped as exc:
            raise _Dropped([], exc.cause) from exc.cause  # none of the call's own answers
        for answer in answers:
            if isinstance(answer, BaseException):
                raise self._refused(answer, "load its scripts") from answer
        self._loaded = True

    def _script(self, name: str, run_id: str, args: Sequence[Any]) -> tuple[Any, ...]:
        return ("EVALSHA", SCRIPTS[name].sha, 1, self.prefix + "run:" + run_id, self.prefix, run_id, *args)

    def _refused(self, exc: BaseException, action: str) -> Exception:
        text = f"Redis refused to {action}: {type(exc).__name__}: {exc}"
        message = str(exc)
        if message.startswith("INVALID"):
            return InvalidWriteError(text, store=self.display_name)
        if isinstance(exc, (rexc.AuthenticationError, rexc.AuthorizationError, rexc.NoPermissionError)) or \
                message.startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            # Refused credentials or ACL: every call fails the same way (the AUTH file was read again already, by
            # _call) until someone changes the secret, the URL's user or its ACL.
            return StoreConfigError(text, store=self.display_name, fix=self._hint(exc))
        return StoreRefusedError(text, store=self.display_name, hint=self._hint(exc))

    def _unavailable(self, exc: BaseException, action: str, seconds: float) -> Exception:
        return StoreUnavailableError(f"Redis failed to {action} within {seconds:g} s: {type(exc).__name__}: {exc}",
                                     store=self.display_name, hint=self._hint(exc))

    def _hint(self, exc: BaseException) -> str:
        where = f"{'rediss' if self.endpoint.tls else 'redis'}://{self.endpoint.host}:{self.endpoint.port}"
        message = str(exc)
        if isinstance(exc, rexc.NoPermissionError) or message.startswith("NOPERM"):
            user = self.endpoint.username or "default"
            return (f"the ACL user {user} of DEDUP_REDIS_URL may not run a command the store needs: grant it every "
                    f"command on the collection's keys (e.g. ACL SETUSER {user} +@all ~*), or use the default user")
        if isinstance(exc, (rexc.AuthenticationError, rexc.AuthorizationError)) or message.startswith(
                ("NOAUTH", "WRONGPASS")):
            return f"the AUTH string in DEDUP_REDIS_AUTH_FILE was refused by {where}: mount the instance's current one"
        if _CERTIFICATE_REFUSED in message.lower():
            return (f"the certificate of {where} is not signed by the CA in DEDUP_REDIS_CA_FILE: mount the instance's "
                    "own server CA (its serverCaCerts)")
        if isinstance(exc, rexc.OutOfMemoryError) or message.startswith("OOM"):  # redis-py drops the "OOM" prefix
            return ("the instance is full and refuses writes (maxmemory-policy noeviction, as a dedup store must be): "
                    "scale it up, or shorten DEDUP_RETENTION_SECONDS")
        if "unknown command" in message.lower():
            return "the run store needs Redis 7.0 or newer (PEXPIRETIME, effects replication of scripts)"
        if isinstance(exc, rexc.TimeoutError) or isinstance(exc, rexc.ConnectionError):
            return (f"is Redis reachable at {where} (DEDUP_REDIS_URL)? On Cloud Run: Direct VPC egress on the "
                    "instance's authorized network")
        return ""

    def _observe(self, server_us: int) -> None:
        with self._offset_lock:
            self._clock_offset = server_us / 1e6 - time.time()

    def _record(self, run_id: str, flat: Sequence[bytes], read_us: int) -> RunRecord:
        raw = dict(zip(flat[::2], flat[1::2]))
        data: dict[str, Any] = {}
        for key, value in raw.items():
            if key.startswith(b"f:"):
                data[key[2:].decode("utf-8", "surrogatepass")] = redis_values.decode(value)
        version = int(raw[b"_v"])
        return RunRecord(
            run_id=run_id, status=str(data.get("status", "")), attempt_id=str(data.get("attempt_id", "")),
            lease_seconds=float(data.get("lease_seconds", 0) or 0),
            update_time=redis_values.from_micros(version), read_time=redis_values.from_micros(max(read_us, version)),
            data=data, create_time=redis_values.from_micros(int(raw.get(b"_c", version))),
        )

    @staticmethod
    def _write_args(fields: Mapping[str, Any]) -> list[Any]:
        """The writing scripts' ``ARGV`` after the expected version (see :mod:`.lua`).

        Raises:
            InvalidWriteError: a value has no stored form (``sent=False``).
        """
        job_op = st_op = exp_op = ""
        ops: list[Any] = []
        try:
            for name, value in fields.items():
                if value is SERVER_TIME:
                    ops += [b"t", name, b""]
                elif isinstance(value, Increment):
                    ops += [b"i", name, str(int(value.amount))]
                else:
                    ops += [b"v", name, redis_values.encode(value)]
                if name == "job_name":
                    job_op = "=" + value if isinstance(value, str) else "-"
                elif name == "schedule_time":
                    st_op = ("t" if value is SERVER_TIME else
                             "=%d" % redis_values.micros(value) if isinstance(value, datetime) else "-")
                elif name == TTL_FIELD:
                    exp_op = "=%d" % -(-redis_values.micros(value) // 1000) if isinstance(value, datetime) else "-"
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidWriteError(f"Redis cannot store the write: {type(exc).__name__}: {exc}", store="Redis",
                                    sent=False) from exc
        return [job_op.encode("utf-8", "surrogatepass"), st_op, exp_op, len(fields), *[
            o.encode("utf-8", "surrogatepass") if isinstance(o, str) else o for o in ops]]

    # -- WAIT ----------------------------------------------------------------------------------------

    def _wait_command(self, deadline: float) -> tuple[Any, ...] | None:
        """``WAIT 1 <ms>`` when decisive writes wait for a replica (the instance has one), else None."""
        if self.wait_timeout_ms <= 0:
            return None
        checked = self._replicas
        if checked is None or time.monotonic() - checked[1] > (
                REPLICA_CHECK_SECONDS if checked[0] else NO_REPLICA_CHECK_SECONDS):
            try:
                info = self._call([("INFO", "replication")], "read its replication state", deadline,
                                  scripted=False)[0]
            except (StoreUnavailableError, StoreRefusedError):
                return ("WAIT", 1, self.wait_timeout_ms)  # unknown: wait, at worst for the timeout
            count = 0
            for line in bytes(info).decode(errors="replace").splitlines():
                if line.startswith("connected_slaves:"):
                    count = int(line.split(":", 1)[1] or 0)
            checked = self._replicas = (count, time.monotonic())
        return ("WAIT", 1, self.wait_timeout_ms) if checked[0] > 0 else None

    def _waited(self, answers: list[Any], run_id: str, action: str) -> None:
        """Check the ``WAIT`` answer of a decisive write that committed on the server it reached.

        Raises:
            StoreUnavailableError: no replica acknowledged it (or the answer was lost): the write is in place on
                that server, but a failover may already have lost it, so the caller reads and decides as after
                any unanswered write. Read from the promoted replica, a lost claim is absent (the delivery
                answers ``store_error`` and a retry claims afresh: no double execution) and a lost completion is
                still this attempt's claim (written again); read from the same primary, the write is there.
        """
        if len(answers) < 2:
            return
        acked = answers[1]
        if isinstance(acked, int) and acked >= 1:
            return
        self.unreplicated_writes += 1
        self._replicas = None  # a replica gone (or a failover to a primary without one): count them again
        log.warning("%s of run %s committed, but no replica acknowledged it within %d ms (WAIT: %s); reading it "
                    "back to decide", action, run_id, self.wait_timeout_ms, acked)
        raise StoreUnavailableError(
            f"{action} of run {run_id} committed on the server it reached, but no replica acknowledged it within "
            f"{self.wait_timeout_ms} ms (WAIT answered {acked!r}): a failover may have lost it", store=self.display_name,
            hint="the instance's replica is down, lagging or being promoted; see the instance's replication state")

    def _decisive_call(self, commands: Sequence[tuple[Any, ...]], run_id: str, action: str, deadline: float,
                       waits: bool) -> list[Any]:
        """:meth:`_call` of a decisive write (followed by ``WAIT`` when ``waits``). Its answers gain a third
        element (True) when a try went unanswered: the write found ("exists", "changed") may be that try's own,
        which no ``WAIT`` covered. When the call raises unanswered, the next read of ``run_id`` confirms.
        """
        self._found.unconfirmed = None
        dropped: list[BaseException] = []
        try:
            answers = self._call(commands, action, deadline, dropped=dropped)
        except StoreUnavailableError:
            self._note_unconfirmed(run_id, waits and bool(dropped))
            raise
        return [*answers, True] if waits and dropped else answers

    def _note_unconfirmed(self, run_id: str, unconfirmed: bool) -> None:
        """Mark ``run_id`` for :meth:`_confirm` by this thread's next :meth:`get` of it, when ``unconfirmed``."""
        if unconfirmed:
            self._found.unconfirmed = run_id

    def _confirm(self, run_id: str, deadline: float) -> None:
        """Wait for a replica to acknowledge a decisive write of ``run_id`` whose answer was lost.

        ``WAIT`` acknowledges only what its own connection wrote, and the lost write's connection is gone. So this
        connection writes too (``INCRBY {C}:clock 0``, a no-op that enters the replication stream after the lost
        write), then waits: once a replica has that, it has the lost write as well. No acknowledgement is counted
        and logged as for any unreplicated decisive write (:meth:`_waited`); the read that follows decides.
        """
        wait = self._wait_command(deadline)
        if wait is None:
            return
        try:
            answers = self._call([("INCRBY", self.prefix + "clock", 0), wait],
                                 f"confirm a write of {run_id} whose answer was lost", deadline, scripted=False)
            self._waited(answers, run_id, "a write whose answer was lost")
        except (StoreUnavailableError, StoreRefusedError):
            pass  # counted and logged by _waited, or the read that follows meets the same failure

    # -- the contract ------------------------------------------------------------------------------

    def server_now(self) -> datetime:
        """Redis' current time as this instance last observed it (aware UTC); see :meth:`RunStore.server_now`."""
        with self._offset_lock:
            offset = self._clock_offset
        return datetime.now(timezone.utc) + timedelta(seconds=offset)

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        """Put-if-absent (script ``create``). Returns the write's commit time, or None if the record exists."""
        self._found.value = None
        args = self._write_args(fields)
        commands: list[tuple[Any, ...]] = [self._script("create", run_id, ["", *args])]
        deadline = self._deadline()
        wait = self._wait_command(deadline)
        if wait is not None:
            commands.append(wait)
        answers = self._decisive_call(commands, run_id, f"create {run_id}", deadline, wait is not None)
        created, server_us, *rest = answers[0]
        self._observe(server_us)
        if not created:
            self._note_unconfirmed(run_id, wait is not None and len(answers) > 2)
            # The record the claim met, read in the same atomic step: the protocol reads it next.
            self._found.value = (run_id, self._record(run_id, rest[0], server_us), time.monotonic())
            return None
        self._waited(answers, run_id, "the claim")
        return redis_values.from_micros(server_us)

    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        """Read one record (script ``read``); None if there is none.

        Right after :meth:`create` found the record on this thread, that record (read atomically by the claim's
        script, with the script's time as its read time) is the answer, without a second round trip.
        """
        found = getattr(self._found, "value", None)
        self._found.value = None
        if getattr(self._found, "unconfirmed", None) == run_id:
            self._found.unconfirmed = None
            self._confirm(run_id, self._deadline(timeout_seconds))
        if found is not None and found[0] == run_id and time.monotonic() - found[2] < _FOUND_SECONDS:
            record: RunRecord = found[1]
            return record
        server_us, flat = self._call([self._script("read", run_id, [])], f"read {run_id}",
                                     self._deadline(timeout_seconds))[0]
        self._observe(server_us)
        return self._record(run_id, flat, server_us) if flat else None

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        """Set fields only if the record's version is still ``update_time`` (script ``update``).

        Returns the new version, or None if the record changed or is gone since ``update_time``.
        """
        self._found.value = None
        args = self._write_args(fields)
        commands: list[tuple[Any, ...]] = [
            self._script("update", run_id, [str(redis_values.micros(update_time)), *args])]
        decisive = fields.get("status") in _DECISIVE
        deadline = self._deadline()
        wait = self._wait_command(deadline) if decisive else None
        if wait is not None:
            commands.append(wait)
        answers = self._decisive_call(commands, run_id, f"update {run_id}", deadline, wait is not None)
        written, server_us = answers[0]
        self._observe(server_us)
        if not written:
            self._note_unconfirmed(run_id, wait is not None and len(answers) > 2)
            return None
        if decisive:
            self._waited(answers, run_id, f"the {fields['status']} write")
        return redis_values.from_micros(server_us)

    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        """Delete only if the record's version is still ``update_time`` (script ``delete``)."""
        self._found.value = None
        answer = self._call([self._script("delete", run_id, [str(redis_values.micros(update_time))])],
                            f"delete {run_id}", self._deadline())[0]
        deleted, server_us = answer
        self._observe(server_us)
        return bool(deleted)

    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        """The record's size bound (:data:`.values.MAX_RECORD_BYTES`): Redis stores any JSON value."""
        return redis_values.result_refusal(result, record_fields)

    # -- run history ---------------------------------------------------------------------------

    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        """One ``job_page`` script per page, through the job's sorted set (``{C}:job:<job name>``)."""
        top = "+inf" if until is None else "(%d" % redis_values.micros(until)
        bottom = "-inf" if since is None else "%d" % redis_values.micros(since)
        cursor_score, cursor_id = b"", b""
        while True:
            command = ("EVALSHA", SCRIPTS["job_page"].sha, 0, self.prefix, job_name.encode("utf-8", "surrogatepass"),
                       top if not cursor_id else cursor_score, bottom, page_size, cursor_score, cursor_id)
            server_us, found = self._call([command], f"query the runs of {job_name}",
                                          self._deadline(timeout_seconds))[0]
            self._observe(server_us)
            page = [self._record(rid.decode(), flat, server_us) for rid, flat in found]
            yield page
            if len(page) < page_size:
                return
            last = page[-1]
            cursor_score = b"%d" % redis_values.micros(last.data["schedule_time"])
            cursor_id = last.run_id.encode()

    def runs_with_id_prefix(self, prefix: str, limit: int, *,
                            timeout_seconds: float | None = None) -> list[RunRecord]:
        """One ``id_prefix`` script: ``ZRANGEBYLEX`` on the set of run ids, reading at most ``limit`` records."""
        command = ("EVALSHA", SCRIPTS["id_prefix"].sha, 0, self.prefix, prefix, limit)
        server_us, found = self._call([command], f"query run ids starting {prefix}",
                                      self._deadline(timeout_seconds))[0]
        self._observe(server_us)
        return [self._record(rid.decode(), flat, server_us) for rid, flat in found]

    def close(self) -> None:
        """Close the pool's connections."""
        self._pool.disconnect()


def read_auth_file(path: str) -> str:
    """The AUTH string in ``path`` (a mounted secret), trailing newline stripped.

    Raises:
        StoreRefusedError: the file cannot be read, is not UTF-8 text, or is empty or blank.
    """
    try:
        text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise StoreRefusedError(f"cannot read DEDUP_REDIS_AUTH_FILE={path}: {exc}", store="Redis",
                                hint="mount the AUTH string's secret at that path (Cloud Run: a secret volume)") from exc
    except UnicodeDecodeError:
        raise StoreRefusedError(f"DEDUP_REDIS_AUTH_FILE={path} is not UTF-8 text", store="Redis",
                                hint="the secret's current version must hold the AUTH string as text") from None
    if not text.strip():
        raise StoreRefusedError(f"DEDUP_REDIS_AUTH_FILE={path} is empty", store="Redis",
                                hint="the secret's current version holds no AUTH string")
    return text


def from_settings(settings: Any, collection: str) -> RedisRunStore:
    """The store of the handler's settings (its :class:`~scheduler_dedup.handler.stores.redis.config.RedisConfig`:
    ``DEDUP_REDIS_URL``, ``DEDUP_REDIS_AUTH_FILE``, ``DEDUP_REDIS_CA_FILE``, ``DEDUP_REDIS_WAIT_TIMEOUT_MS``; and
    ``DEDUP_STORE_TIMEOUT_SECONDS``) on ``collection``.

    Raises:
        StoreRefusedError: the AUTH or CA file cannot be read.
    """
    config: RedisConfig = settings.store_config
    password = read_auth_file(config.auth_file) if config.auth_file else None
    if config.ca_file and not Path(config.ca_file).is_file():
        raise StoreRefusedError(f"DEDUP_REDIS_CA_FILE={config.ca_file} is not a file", store="Redis",
                                hint="mount the instance's server CA (its serverCaCerts) at that path")
    return RedisRunStore(parse_redis_url(config.url or ""), collection, settings.store_timeout_seconds,
                         password=password, auth_file=config.auth_file, ca_file=config.ca_file,
                         wait_timeout_ms=config.wait_timeout_ms)
