"""Local stand-ins for Workflows, Cloud Run jobs, Cloud Build triggers, an HTTP target and Google's OIDC certificates.

One :class:`FakeGoogle` is a stdlib ``ThreadingHTTPServer`` in a thread serving:

- ``POST /v1/{workflow}/executions`` and ``GET`` with ``filter=labels.dedup_run_id="..."``
  (Workflows Executions API),
- ``POST /v2/{job}:run`` and ``GET /v2/{job}/executions`` (Cloud Run Admin API v2),
- ``GET /v1/{trigger}``, ``POST /v1/{trigger}:run`` and ``GET /v1/projects/P/locations/L/builds`` with
  ``filter=trigger_id="..." AND create_time>="..."`` (Cloud Build API v1; triggers named by id or name),
- ``GET`` and ``POST ...:cancel`` of one Workflows execution, Cloud Run execution or Cloud Build build: each runs
  until :meth:`FakeGoogle.end` ends it (succeeded or failed) or a cancel does,
- ``GET /v1/{job}`` (Cloud Scheduler API v1): the Job's ``state`` and ``userUpdateTime`` from
  :attr:`FakeGoogle.scheduler_jobs`; a job not there answers 403 (no ``cloudscheduler.jobs.get``),
- ``POST /hook`` (an HTTP target that deduplicates on ``Idempotency-Key``),
- ``POST /echo`` (an HTTP target answering 400 with :attr:`FakeGoogle.echo`, e.g. a body that quotes a token),
- ``GET /certs`` (``{kid: PEM certificate}``, as https://www.googleapis.com/oauth2/v1/certs), with
  ``Cache-Control: public, max-age=<certs_max_age>`` when that is set,
- ``GET /v2/{service}`` and ``GET /v2/{service}:getIamPolicy`` (Cloud Run Admin API v2): the service's
  ``invokerIamDisabled`` and IAM bindings from :attr:`FakeGoogle.services`; a service not there answers 404, and
  :attr:`FakeGoogle.policy_status` answers getIamPolicy with that status instead (403: no permission).

Every request is recorded. :attr:`FakeGoogle.get_faults` answers the next executions.get / builds.get with a
status or a body not JSON. :meth:`FakeGoogle.refuse_next_list` answers the next existence-check GET (a
``list``, or Cloud Build's ``triggers.get``) with a status. :meth:`FakeGoogle.fail_next` queues faults for the next POSTs:
an HTTP status (500, 429, 400...), ``"hang"`` (answer nothing until the server stops) or
``"drop"`` (start the execution, then close the connection without answering).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from scheduler_dedup.local.servers.loopback_http import serve_loopback


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGoogle:
    requests: list[Received] = field(default_factory=list)
    faults: list[int | str] = field(default_factory=list)
    list_faults: list[int] = field(default_factory=list)
    #: Faults for the next executions.get / builds.get: an HTTP status, or ``"garbage"`` (200 with a body not JSON).
    get_faults: list[int | str] = field(default_factory=list)
    workflow_executions: list[dict[str, Any]] = field(default_factory=list)
    job_executions: list[dict[str, Any]] = field(default_factory=list)
    builds: list[dict[str, Any]] = field(default_factory=list)
    hook_executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    certs: dict[str, str] = field(default_factory=dict)
    certs_max_age: int | None = None
    #: Cloud Run services: name -> {"invokerIamDisabled": bool, "bindings": [{"role", "members"}]}.
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    policy_status: int | None = None
    #: Cloud Scheduler jobs: name -> the Job as ``GET /v1/{name}`` answers it (``state``, ``userUpdateTime``); a job
    #: not there answers 403, as the API does to a caller without ``cloudscheduler.jobs.get``.
    scheduler_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The substitutions a Cloud Build trigger declares (``Trigger.substitutions``, its defaults), as ``triggers.get``
    #: answers them.
    trigger_substitutions: dict[str, str] = field(default_factory=dict)
    #: executions.get / builds.get of a name here answers this body instead (an API, or whoever answers its URL,
    #: naming another execution than the one asked for).
    answered_instead: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What ``POST /echo`` answers, with status 400: a downstream whose error body quotes what it was sent.
    echo: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "FakeGoogle":
        self.server, self.url = serve_loopback(self._serve)
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, *faults: int | str) -> None:
        with self.lock:
            self.faults.extend(faults)

    def refuse_next_list(self, status: int) -> None:
        """Answer the next executions.list with ``status`` (e.g. 403: the caller lacks list permission)."""
        with self.lock:
            self.list_faults.append(status)

    def end(self, kind: str, outcome: str = "completed", index: int = -1, message: str = "") -> dict[str, Any]:
        """End the ``index``-th execution of ``kind`` (a target type) as its API would show it: ``completed`` or
        ``failed`` (with ``message``), ten seconds ago (nanoseconds, as Google's APIs write times); returns it."""
        ended = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=10)
        now = ended.strftime("%Y-%m-%dT%H:%M:%S.%f123Z")
        with self.lock:
            if kind == "workflows":
                execution = self.workflow_executions[index]
                execution.update({"state": "SUCCEEDED" if outcome == "completed" else "FAILED", "endTime": now})
                if outcome != "completed":
                    execution["error"] = {"payload": message or "HTTP step failed", "context": "step1"}
            elif kind == "cloud_run_job":
                execution = self.job_executions[index]
                ok = outcome == "completed"
                execution.update({"completionTime": now, "succeededCount": int(ok), "failedCount": int(not ok),
                                  "conditions": [{"type": "Completed",
                                                  "state": "CONDITION_SUCCEEDED" if ok else "CONDITION_FAILED",
                                                  "message": "" if ok else message or "Task exited with code 1"}]})
            else:
                execution = self.builds[index]
                execution.update({"status": "SUCCESS" if outcome == "completed" else "FAILURE", "finishTime": now,
                                  "statusDetail": "" if outcome == "completed" else message or "step 0 exited 1"})
            return execution

    def executions(self, kind: str) -> list[dict[str, Any]]:
        return {"workflows": self.workflow_executions, "cloud_run_job": self.job_executions,
                "cloud_build_trigger": self.builds}[kind]

    def posts(self) -> list[Received]:
        return [r for r in self.requests if r.method == "POST"]

    def gets(self, path_part: str = "") -> list[Received]:
        return [r for r in self.requests if r.method == "GET" and path_part in r.path]

    # -- serving -------------------------------------------------------------------------------

    def _serve(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with self.lock:
            self.requests.append(Received(method, url.path, parse_qs(url.query), dict(h.headers.items()), body))
            fault = self.faults.pop(0) if method == "POST" and self.faults else None
            if method == "GET" and _is_existence_check(url.path) and self.list_faults:
                fault = self.list_faults.pop(0)
            if method == "GET" and _ONE_EXECUTION.fullmatch(url.path) and self.get_faults:
                fault = self.get_faults.pop(0)
        if fault == "garbage":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "14")
            h.end_headers()
            h.wfile.write(b"<html>oops</ht")
            return
        if fault == "hang":
            self.release.wait(60)
            h.close_connection = True
            return
        if isinstance(fault, int):
            return self._answer(h, fault, {"error": {"code": fault, "message": "injected fault"}})
        status, answer = self._route(method, url.path, parse_qs(url.query), dict(h.headers.items()), body)
        if fault == "drop":
            h.close_connection = True  # the execution started; the caller never hears of it
            return
        extra = ({"Cache-Control": f"public, max-age={self.certs_max_age}, must-revalidate, no-transform"}
                 if url.path == "/certs" and self.certs_max_age is not None else None)
        self._answer(h, status, answer, extra)

    def private_service(self, name: str, invoker: str = "serviceAccount:sched@p1.iam.gserviceaccount.com") -> None:
        """Publish a Cloud Run service that enforces IAM and grants run.invoker to ``invoker`` only."""
        with self.lock:
            self.services[name] = {"invokerIamDisabled": False,
                                   "bindings": [{"role": "roles/run.invoker", "members": [invoker]}]}

    def _answer(self, h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        if 300 <= status < 400 and isinstance(body, dict) and "location" in body:
            h.send_header("Location", body["location"])
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str],
               body: Any) -> tuple[int, Any]:
        with self.lock:
            if path == "/certs" and method == "GET":
                return 200, dict(self.certs)
            m = re.fullmatch(r"/v2/(projects/[^/]+/locations/[^/]+/services/[^/:]+)(:getIamPolicy)?", path)
            if m and method == "GET":
                service = self.services.get(m.group(1))
                if service is None:
                    return 404, {"error": {"code": 404, "status": "NOT_FOUND", "message": f"{m.group(1)} not found"}}
                if m.group(2) is None:
                    return 200, {"name": m.group(1), "invokerIamDisabled": service["invokerIamDisabled"]}
                if self.policy_status is not None:
                    return self.policy_status, {"error": {"code": self.policy_status, "message": "Permission "
                                                          "'run.services.getIamPolicy' denied"}}
                return 200, {"version": 1, "etag": "BwY=", "bindings": service["bindings"]}
            m = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+)", path)
            if m and method == "GET":
                job = self.scheduler_jobs.get(m.group(1))
                if job is None:
                    return 403, {"error": {"code": 403, "message": "Permission 'cloudscheduler.jobs.get' denied"}}
                return 200, {"name": m.group(1), **job}
            one = self._one_execution(method, path)
            if one is not None:
                return one
            m = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+/workflows/[^/]+)/executions", path)
            if m and method == "POST":
                execution = {"name": f"{m.group(1)}/executions/{uuid.uuid4()}", "state": "ACTIVE",
                             "argument": body["argument"], "labels": body.get("labels", {})}
                self.workflow_executions.append(execution)
                return 200, execution
            if m and method == "GET":
                wanted = re.fullmatch(r'labels\.(\w+)="([^"]*)"', query.get("filter", [""])[0])
                found = [e for e in self.workflow_executions
                         if wanted is None or e["labels"].get(wanted.group(1)) == wanted.group(2)]
                return 200, {"executions": found[::-1]}
            m = re.fullmatch(r"/v2/(projects/[^/]+/locations/[^/]+/jobs/[^/]+):run", path)
            if m and method == "POST":
                overrides = (body or {}).get("overrides", {})
                env = [e for c in overrides.get("containerOverrides", []) for e in c.get("env", [])]
                execution = {"name": f"{m.group(1)}/executions/j-{uuid.uuid4().hex[:5]}",
                             "template": {"containers": [{"image": "img", "env": env}]}}
                self.job_executions.append(execution)
                operation = f"{m.group(1).rsplit('/jobs/', 1)[0]}/operations/{uuid.uuid4()}"
                return 200, {"name": operation, "metadata": {"name": execution["name"]}}
            m = re.fullmatch(r"/v2/(projects/[^/]+/locations/[^/]+/jobs/[^/]+)/executions", path)
            if m and method == "GET":
                return 200, {"executions": self.job_executions[::-1]}
            m = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+)/triggers/([^/:]+)(:run)?", path)
            if m and method == "GET" and not m.group(3):
                return 200, {"id": trigger_id(m.group(2)), "name": m.group(2),
                             **({"substitutions": self.trigger_substitutions} if self.trigger_substitutions else {})}
            if m and method == "POST" and m.group(3):
                if body.get("triggerId") != m.group(2) or "substitutions" not in (body.get("source") or {}):
                    return 400, {"error": {"code": 400, "message": "triggerId or source.substitutions missing"}}
                build_id = str(uuid.uuid4())
                build = {"id": build_id, "name": f"{m.group(1)}/builds/{build_id}", "status": "QUEUED",
                         "buildTriggerId": trigger_id(m.group(2)), "substitutions": body["source"]["substitutions"],
                         "createTime": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
                self.builds.append(build)
                return 200, {"name": f"{m.group(1)}/operations/{uuid.uuid4()}",
                             "metadata": {"@type": "type.googleapis.com/google.devtools.cloudbuild.v1."
                                                   "BuildOperationMetadata", "build": build}}
            m = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+)/builds", path)
            if m and method == "GET":
                return 200, self._list_builds(query)
            if path == "/moved":  # an endpoint behind a redirect (http->https, a trailing slash...)
                return 302, {"location": "/landing"}
            if path == "/landing":
                return 200, {"landed": method}
            if path == "/echo" and method == "POST":
                return 400, self.echo
            if path == "/hook" and method == "POST":
                key = headers.get("Idempotency-Key", "")
                if key not in self.hook_executions:
                    self.hook_executions[key] = {"body": body, "authorization": headers.get("Authorization")}
                return 200, {"ok": True, "key": key}
        return 404, {"error": f"no route {method} {path}"}


    def _one_execution(self, method: str, path: str) -> tuple[int, Any] | None:
        """executions.get / builds.get and their ``:cancel`` (the caller holds the lock); None if not such a path."""
        m = _ONE_EXECUTION.fullmatch(path)
        if m is None or (method == "GET") == bool(m.group(2)):
            return None
        if method == "GET" and m.group(1) in self.answered_instead:
            return 200, self.answered_instead[m.group(1)]
        found = next((e for e in (*self.workflow_executions, *self.job_executions, *self.builds)
                      if e.get("name") == m.group(1)), None)
        if found is None:
            return 404, {"error": {"code": 404, "status": "NOT_FOUND", "message": f"{m.group(1)} not found"}}
        if m.group(2):
            now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if "/builds/" in m.group(1):
                if found["status"] not in ("QUEUED", "WORKING"):
                    return 400, {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "build ended"}}
                found.update({"status": "CANCELLED", "finishTime": now})
            elif "/workflows/" in m.group(1):
                if found["state"] != "ACTIVE":
                    return 400, {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "ended"}}
                found.update({"state": "CANCELLED", "endTime": now})
            else:
                if found.get("completionTime"):
                    return 400, {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "ended"}}
                found.update({"completionTime": now, "cancelledCount": 1,
                              "conditions": [{"type": "Completed", "state": "CONDITION_FAILED", "reason": "Cancelled"}]})
        return 200, dict(found)

    def _list_builds(self, query: dict[str, list[str]]) -> dict[str, Any]:
        """builds.list: the filter's trigger_id and create_time terms, newest first, pageSize / pageToken."""
        wanted = re.fullmatch(r'trigger_id="([^"]*)" AND create_time>="([^"]*)"', query.get("filter", [""])[0])
        if wanted is None:
            return {"builds": []}
        since = dt.datetime.fromisoformat(wanted.group(2))
        found = [b for b in self.builds[::-1] if b["buildTriggerId"] == wanted.group(1)
                 and dt.datetime.fromisoformat(b["createTime"]) >= since]
        size = int(query.get("pageSize", ["100"])[0])
        start = int(query.get("pageToken", ["0"])[0] or 0)
        page = {"builds": found[start:start + size]}
        if start + size < len(found):
            page["nextPageToken"] = str(start + size)
        return page


def trigger_id(trigger: str) -> str:
    """The id the fake gives a trigger named ``trigger`` (a trigger given by id keeps it)."""
    return trigger if re.fullmatch(r"[0-9a-f-]{36}", trigger) else str(uuid.uuid5(uuid.NAMESPACE_URL, trigger))


#: executions.get / builds.get and their ``:cancel``.
_ONE_EXECUTION = re.compile(r"/v[12]/(projects/[^/]+/locations/[^/]+/(?:workflows|jobs)/[^/]+/executions/[^/:]+"
                            r"|projects/[^/]+/locations/[^/]+/builds/[^/:]+)(:cancel)?")


def _is_existence_check(path: str) -> bool:
    return path.endswith(("/executions", "/builds")) or bool(re.fullmatch(r"/v1/.*/triggers/[^/:]+", path))


# -- OIDC tokens signed with a local key ---------------------------------------------------------


class LocalSigner:
    """An RSA key and its self-signed certificate; signs ID tokens as Google would."""

    def __init__(self, kid: str = "local-key-1"):
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-google-oidc")])
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
                .not_valid_after(now + dt.timedelta(days=1)).sign(self.key, hashes.SHA256()))
        self.cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
        self.signer = crypt.RSASigner.from_string(pem, key_id=kid)

    def token(self, *, audience: str, email: str, email_verified: bool = True, lifetime_seconds: int = 3600,
              issued_ago_seconds: int = 0, issuer: str = "https://accounts.google.com", **extra: Any) -> str:
        """A signed ID token; ``extra`` claims are added (or, with value None, removed)."""
        now = int(dt.datetime.now(dt.timezone.utc).timestamp()) - issued_ago_seconds
        claims: dict[str, Any] = {"iss": issuer, "aud": audience, "sub": "1234567890", "email": email,
                                  "email_verified": email_verified, "iat": now, "exp": now + lifetime_seconds}
        claims.update(extra)
        return jwt.encode(self.signer, {k: v for k, v in claims.items() if v is not None}).decode()
