"""What the stack-level rules need to know about a stack: handler services, Scheduler jobs, and which job calls which service.

A service is what can serve the handler: a Cloud Run service (v2 or v1), a Cloud Functions gen2 function, or an App
Engine standard version. A job with an App Engine target (``appEngineHttpTarget``) is paired with the App Engine
version of this stack it routes to: the same ``appEngineRouting.service`` (``default`` when unset) and, when the
routing names one, the same version id; without a version in the routing, the service's only version in the stack.
A job with an HTTP target is paired with the Cloud Run service it calls, in this order:

1. by URL: the job's ``httpTarget.uri`` has the origin of the service's ``uri`` or one of its ``urls`` (on
   ``*.cloudfunctions.net``, the same function URL: many functions share that host)
   (known after the service exists, and under mocks when the mock returns them);
2. by property dependency: the engine reports that the job's ``httpTarget`` was computed from the
   service (``pulumi preview`` of a new stack, where both URLs are still unknown);
3. by elimination: the job's URI is unknown, missing or a ``*.run.app`` URL and the stack has exactly
   one Cloud Run service. Findings that rest on this pairing say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.schedule.retry_windows import APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS
from scheduler_dedup.policies.limits import CLOUD_RUN_TIMEOUT_DEFAULT_S
from scheduler_dedup.handler.callers.audience import routed_base, url_origin as origin
from scheduler_dedup.handler.callers.allowed import account_email
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource, get, host, is_unknown

SCHEDULER_JOB = "gcp:cloudscheduler/job:Job"
CLOUD_RUN_SERVICE = "gcp:cloudrunv2/service:Service"
CLOUD_RUN_SERVICE_V1 = "gcp:cloudrun/service:Service"
CLOUD_FUNCTION_V2 = "gcp:cloudfunctionsv2/function:Function"
APP_ENGINE_VERSION = "gcp:appengine/standardAppVersion:StandardAppVersion"
#: What can serve the handler (it is a functions-framework target): each is checked by the stack rules.
SERVICE_TYPES = (CLOUD_RUN_SERVICE, CLOUD_RUN_SERVICE_V1, CLOUD_FUNCTION_V2, APP_ENGINE_VERSION)
#: An App Engine standard version's request deadline, seconds: automatic scaling (the default) 10 minutes, basic
#: and manual scaling 24 hours (https://cloud.google.com/appengine/docs/standard/how-instances-are-managed#timeout).
APP_ENGINE_AUTOMATIC_DEADLINE_S = float(APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS)
APP_ENGINE_BASIC_MANUAL_DEADLINE_S = 86400.0
#: Cloud Functions gen2's default request timeout, seconds
#: (https://cloud.google.com/functions/docs/configuring/timeout).
CLOUD_FUNCTION_TIMEOUT_DEFAULT_S = 60
FIRESTORE_FIELD = "gcp:firestore/field:Field"
SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"


def service_env(service: Resource) -> dict[str, Any]:
    """The handler's environment on a service: name -> value.

    Read from ``template.containers[].envs[]`` (Cloud Run v2), ``template.spec.containers[].envs[]``
    (Cloud Run v1), ``serviceConfig.environmentVariables`` and ``.secretEnvironmentVariables`` (Cloud Functions
    gen2) or ``envVariables`` (App Engine standard version). Of several
    containers, the one carrying ``DEDUP_*`` variables counts (a sidecar listed first does not).
    A variable that comes from Secret Manager (v2 ``valueSource``, v1 ``valueFrom``) or whose value is unknown maps to
    :data:`UNKNOWN`; an unknown list makes every variable unknown (see :func:`env_value`).
    """
    return _env_and_secrets(service)[0]


def secret_env_names(service: Resource) -> frozenset[str]:
    """The variables of :func:`service_env` whose value comes from Secret Manager: never readable by the pack, not at
    ``pulumi preview`` and not at ``pulumi up`` (an output's value, also :data:`UNKNOWN` at preview, is known then)."""
    return _env_and_secrets(service)[1]


def _env_and_secrets(service: Resource) -> tuple[dict[str, Any], frozenset[str]]:
    """:func:`service_env` and :func:`secret_env_names`, read together."""
    if service.type in (CLOUD_FUNCTION_V2, APP_ENGINE_VERSION):
        variables = get(service.props, "serviceConfig.environmentVariables" if service.type == CLOUD_FUNCTION_V2
                        else "envVariables")
        if is_unknown(variables):
            return {"*": UNKNOWN}, frozenset()
        plain: dict[str, Any] = dict(variables) if isinstance(variables, Mapping) else {}
        secrets = get(service.props, "serviceConfig.secretEnvironmentVariables") \
            if service.type == CLOUD_FUNCTION_V2 else None
        secret_names = set()
        for item in secrets if isinstance(secrets, list) else []:
            key = get(item, "key")
            if isinstance(key, str) and not is_unknown(key) and key not in plain:
                plain[key] = UNKNOWN  # its value is the secret's: not readable here
                secret_names.add(key)
        return plain, frozenset(secret_names)
    path = "template.spec.containers" if service.type == CLOUD_RUN_SERVICE_V1 else "template.containers"
    containers = get(service.props, path)
    if is_unknown(containers):
        return {"*": UNKNOWN}, frozenset()
    read: list[tuple[dict[str, Any], frozenset[str]]] = []
    for container in containers if isinstance(containers, list) else []:
        env: dict[str, Any] = {}
        from_secrets = set()
        envs = get(container, "envs")
        if is_unknown(envs):
            env["*"] = UNKNOWN
        for item in envs if isinstance(envs, list) else []:
            name = get(item, "name")
            if not isinstance(name, str) or name in env:
                continue
            value = get(item, "value")
            from_secret = value is None and any(get(item, key) is not None for key in ("valueSource", "valueFrom"))
            env[name] = UNKNOWN if from_secret else value  # v2 valueSource, v1 valueFrom
            if from_secret:
                from_secrets.add(name)
        read.append((env, frozenset(from_secrets)))
    dedup = [pair for pair in read if any(name.startswith("DEDUP_") for name in pair[0])]
    return (dedup or read or [({}, frozenset())])[0]


def service_mount_paths(service: Resource) -> list[str]:
    """Where the service mounts volumes, as known now: each container's ``volumeMounts[].mountPath`` (Cloud Run v2
    and v1), a gen2 function's ``serviceConfig.secretVolumes[].mountPath``; unknown paths are left out."""
    if service.type == CLOUD_FUNCTION_V2:
        mounts = get(service.props, "serviceConfig.secretVolumes")
        return [p for p in (get(m, "mountPath") for m in (mounts if isinstance(mounts, list) else []))
                if isinstance(p, str) and not is_unknown(p)]
    containers = get(service.props, "template.spec.containers" if service.type == CLOUD_RUN_SERVICE_V1
                     else "template.containers")
    paths: list[str] = []
    for container in containers if isinstance(containers, list) else []:
        mounts = get(container, "volumeMounts")
        paths.extend(p for p in (get(m, "mountPath") for m in (mounts if isinstance(mounts, list) else []))
                     if isinstance(p, str) and not is_unknown(p))
    return paths


def env_value(env: Mapping[str, Any], name: str, default: Any) -> Any:
    """``env[name]``, :data:`UNKNOWN` when it (or the whole list) is unknown, else ``default``."""
    if name in env:
        value = env[name]
        return UNKNOWN if is_unknown(value) else (default if value is None else value)
    return UNKNOWN if "*" in env else default


def is_dedup_service(service: Resource) -> bool:
    """True when the service's env carries any ``DEDUP_*`` setting of the handler."""
    return any(name.startswith("DEDUP_") for name in service_env(service)) or "*" in service_env(service)


def service_timeout(service: Resource) -> Any:
    """The request timeout as a duration string (e.g. ``"300s"``), the platform default when unset, or :data:`UNKNOWN`.

    Cloud Run v2 ``template.timeout`` (default 300 s), v1 ``template.spec.timeoutSeconds`` (default
    300 s), Cloud Functions gen2 ``serviceConfig.timeoutSeconds`` (default 60 s), an App Engine standard version's
    request deadline (600 s with automatic scaling, 86400 s with ``basicScaling`` or ``manualScaling``).
    """
    if service.type == APP_ENGINE_VERSION:
        return f"{_app_engine_deadline(service):g}s"
    if service.type == CLOUD_RUN_SERVICE:
        value = get(service.props, "template.timeout")
        return f"{CLOUD_RUN_TIMEOUT_DEFAULT_S:g}s" if value is None else value
    path, default = (("serviceConfig.timeoutSeconds", CLOUD_FUNCTION_TIMEOUT_DEFAULT_S)
                     if service.type == CLOUD_FUNCTION_V2 else ("template.spec.timeoutSeconds", CLOUD_RUN_TIMEOUT_DEFAULT_S))
    value = get(service.props, path)
    if is_unknown(value):
        return UNKNOWN
    return f"{default if value is None else value:g}s" if isinstance(value, (int, float)) or value is None else value


def _app_engine_deadline(service: Resource) -> float:
    scaled = any(get(service.props, key) is not None for key in ("basicScaling", "manualScaling"))
    return APP_ENGINE_BASIC_MANUAL_DEADLINE_S if scaled else APP_ENGINE_AUTOMATIC_DEADLINE_S


def service_timeout_field(service: Resource) -> tuple[str, float]:
    """(property path, platform default in seconds) of the service's request timeout (App Engine: its scaling, which
    sets the deadline)."""
    if service.type == APP_ENGINE_VERSION:
        return "automaticScaling", _app_engine_deadline(service)
    if service.type == CLOUD_RUN_SERVICE:
        return "template.timeout", CLOUD_RUN_TIMEOUT_DEFAULT_S
    if service.type == CLOUD_FUNCTION_V2:
        return "serviceConfig.timeoutSeconds", float(CLOUD_FUNCTION_TIMEOUT_DEFAULT_S)
    return "template.spec.timeoutSeconds", CLOUD_RUN_TIMEOUT_DEFAULT_S


def service_urls(service: Resource) -> list[str]:
    """The service's known URLs (outputs ``uri`` and ``urls``)."""
    candidates = [get(service.props, "uri"), get(service.props, "url"), get(service.props, "serviceConfig.uri")]
    urls = get(service.props, "urls")
    if isinstance(urls, list):
        candidates.extend(urls)
    statuses = get(service.props, "statuses")  # Cloud Run v1
    if isinstance(statuses, list):
        candidates.extend(get(status, "url") for status in statuses)
    return [value for value in candidates if isinstance(value, str) and not is_unknown(value)]


@dataclass(frozen=True)
class Pairing:
    """A Scheduler job and the Cloud Run service it calls.

    Attributes:
        job: the ``gcp:cloudscheduler/job:Job``.
        service: the ``gcp:cloudrunv2/service:Service`` it targets.
        how: ``"url"``, ``"dependency"`` or ``"elimination"`` (see the module docstring).
    """

    job: Resource
    service: Resource
    how: str

    @property
    def note(self) -> str:
        """A sentence to append to findings that rest on an uncertain pairing ("" otherwise)."""
        if self.how == "elimination" and self.service.type == APP_ENGINE_VERSION:
            return (f" (job {self.job.name} was paired with App Engine version {self.service.name} because its "
                    "routing is not known yet and it is the only App Engine version in the stack)")
        if self.how == "elimination":
            return (f" (job {self.job.name} was paired with service {self.service.name} because its target URI is "
                    "not known yet and it is the only Cloud Run service in the stack)")
        return ""


@dataclass(frozen=True)
class Topology:
    """The stack's Scheduler jobs, Cloud Run services, Firestore fields and job-to-service pairings."""

    jobs: list[Resource]
    services: list[Resource]
    fields: list[Resource]
    pairings: list[Pairing]

    @classmethod
    def of(cls, resources: Sequence[Resource]) -> "Topology":
        """Classify ``resources`` and pair each HTTP-target job with the service it calls, if any."""
        jobs = [r for r in resources if r.type == SCHEDULER_JOB]
        services = [r for r in resources if r.type in SERVICE_TYPES]
        fields = [r for r in resources if r.type == FIRESTORE_FIELD]
        pairings = [p for p in (_pair(job, services) for job in jobs) if p is not None]
        return cls(jobs, services, fields, pairings)

    def jobs_of(self, service: Resource) -> list[Pairing]:
        """The pairings whose service is ``service``."""
        return [p for p in self.pairings if p.service.urn == service.urn]

    def service_of(self, job: Resource) -> Pairing | None:
        """The pairing of ``job``, or None when it calls no Cloud Run service of this stack."""
        return next((p for p in self.pairings if p.job.urn == job.urn), None)

    def dedup_services(self) -> list[Resource]:
        """Services running the dedup handler: ``DEDUP_*`` env, or called by a Scheduler job of the stack."""
        paired = {p.service.urn for p in self.pairings}
        return [s for s in self.services if s.urn in paired or is_dedup_service(s)]


@dataclass(frozen=True)
class Identities:
    """The service accounts a dedup job runs as: each dedup service's runtime and build accounts, and the
    account its Scheduler jobs send OIDC tokens as.

    Attributes:
        emails: ``email -> what it is`` (``runtime``, ``build`` or ``Scheduler``), for emails known now.
        accounts: ``URN of a gcp:serviceaccount/account:Account of the stack -> what it is``, found through
            property dependencies, so accounts created in this stack are known at preview, before their email is.
    """

    emails: dict[str, str]
    accounts: dict[str, str]

    @classmethod
    def of(cls, resources: Sequence[Resource]) -> "Identities":
        """The dedup identities of a stack."""
        topology = Topology.of(resources)
        account_urns = {r.urn for r in resources if r.type == SERVICE_ACCOUNT}
        emails: dict[str, str] = {}
        accounts: dict[str, str] = {}

        def note(what: str, resource: Resource, prop: str, value: Any) -> None:
            if isinstance(value, str) and not is_unknown(value):
                emails.setdefault(account_email(value), what)
            for urn in resource.dependencies.get(prop, ()):
                if urn in account_urns:
                    accounts.setdefault(urn, what)

        for service in topology.dedup_services():
            for path in ("template.serviceAccount", "template.spec.serviceAccountName", "serviceConfig.serviceAccountEmail",
                         "serviceAccount"):  # the last: an App Engine version's
                note("runtime", service, path.split(".")[0], get(service.props, path))
            for path in ("buildConfig.serviceAccount", "buildConfig.serviceAccountEmail"):
                note("build", service, "buildConfig", get(service.props, path))
        dedup = {s.urn for s in topology.dedup_services()}
        for pairing in topology.pairings:
            if pairing.service.urn in dedup:
                note("Scheduler", pairing.job, "httpTarget", get(pairing.job.props, "httpTarget.oidcToken.serviceAccountEmail"))
        return cls(emails, accounts)

    def in_grant(self, resource: Resource, members: Sequence[str]) -> list[tuple[str, str]]:
        """``(member, what)`` for each dedup identity an IAM resource grants to: its known ``members`` matched by
        email, and accounts of the stack its ``member``/``members`` properties depend on (unknown at preview)."""
        found: dict[str, str] = {}
        for member in members:
            email = account_email(member)  # IAM compares an account's email in any case
            if member.startswith("serviceAccount:") and email in self.emails:
                found[member] = self.emails[email]
        for prop in ("member", "members"):
            for urn in resource.dependencies.get(prop, ()):
                if urn in self.accounts and not found:
                    found[f"the {self.accounts[urn]} account ({urn.rsplit('::', 1)[-1]})"] = self.accounts[urn]
        return sorted(found.items())


def _pair_app_engine(job: Resource, services: Sequence[Resource]) -> Pairing | None:
    """The App Engine version the job's ``appEngineRouting`` names (see the module docstring), if in the stack."""
    versions = [s for s in services if s.type == APP_ENGINE_VERSION]
    routing = get(job.props, "appEngineHttpTarget.appEngineRouting") or {}
    wanted_service = get(routing, "service") or "default"
    wanted_version = get(routing, "version")
    if is_unknown(wanted_service) or is_unknown(wanted_version):
        if len(versions) == 1:
            return Pairing(job, versions[0], "elimination")
        return None
    same_service = [v for v in versions if get(v.props, "service") in (wanted_service, UNKNOWN) or
                    is_unknown(get(v.props, "service"))]
    if wanted_version is not None:
        for version in same_service:
            if get(version.props, "versionId") == wanted_version:
                return Pairing(job, version, "url")
        for dep in job.dependencies.get("appEngineHttpTarget", ()):
            if dep in {v.urn for v in same_service}:
                return next(Pairing(job, v, "dependency") for v in same_service if v.urn == dep)
        return None
    return Pairing(job, same_service[0], "url") if len(same_service) == 1 else None


def _pair(job: Resource, services: Sequence[Resource]) -> Pairing | None:
    if get(job.props, "appEngineHttpTarget") is not None:
        return _pair_app_engine(job, services)
    services = [s for s in services if s.type != APP_ENGINE_VERSION]
    if get(job.props, "httpTarget") is None or not services:
        return None
    uri = get(job.props, "httpTarget.uri")
    if isinstance(uri, str):
        job_origin = routed_base(uri)  # a function's URL, else the origin
        for service in services:
            if job_origin and any(routed_base(u) == job_origin for u in service_urls(service)):
                return Pairing(job, service, "url")
    service_urns = {s.urn: s for s in services}
    for dep in job.dependencies.get("httpTarget", ()):
        if dep in service_urns:
            return Pairing(job, service_urns[dep], "dependency")
    job_host = host(uri) if isinstance(uri, str) else None
    if len(services) == 1 and (uri is None or is_unknown(uri) or (job_host or "").endswith(".run.app")):
        return Pairing(job, services[0], "elimination")
    return None
