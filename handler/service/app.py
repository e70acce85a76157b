"""Build the request handler from its settings, read from the environment (:mod:`scheduler_dedup.handler.config`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import flask

from scheduler_dedup.handler.callers.app_engine import AppEngineCallerCheck
from scheduler_dedup.handler.core.errors import store_config_error
from scheduler_dedup.handler.core.logs import LogField, configure_logging
from scheduler_dedup.handler.core.misconfiguration import log_store_config_error
from scheduler_dedup.handler.core.per_process import PerProcess
from scheduler_dedup.handler.core.paths import APP_ENGINE_RESERVED_PREFIX, CHECK_PATH, is_check_path
from scheduler_dedup.handler.core.statuses import DELIVERY, code
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.protocol.job import load_job
from scheduler_dedup.handler.protocol.lease import end_worker
from scheduler_dedup.handler.service.answers import json_errors, json_response
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.service.request_limits import bounded_body, leave_body_unread, oversized
from scheduler_dedup.handler.service.server import FUNCTION_TARGET
from scheduler_dedup.handler.service.startup import read_startup_settings
from scheduler_dedup.handler.stores import store_opener
from scheduler_dedup.handler.config.environment import read_environment
from scheduler_dedup.handler.config.secret_values import learn_secret_values
from scheduler_dedup.handler.stores.base import STORE_ERRORS, RunStore

if TYPE_CHECKING:
    from scheduler_dedup.handler.callers.oidc import CallerVerifier
    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.core.downstream import ExecutionControl
    from scheduler_dedup.handler.monitoring.job_state import JobStateReader
    from scheduler_dedup.handler.monitoring.run_check import RunCheck

log = logging.getLogger("scheduler_dedup")


def build_handler_from_env(environ: Mapping[str, str] | None = None) -> "HandlerView":
    """Return a Flask view for functions-framework, configured from ``environ`` (default ``os.environ``).

    The store's client is made in the process that serves, on its first request
    (:class:`~scheduler_dedup.handler.core.per_process.PerProcess`), or when :meth:`HandlerView.start_serving` is
    called there.

    The job is ``DEDUP_JOB`` (``DEDUP_TARGET_TYPE=python``, the default) or a proxy target
    (``DEDUP_TARGET_TYPE`` = ``workflows`` | ``cloud_run_job`` | ``cloud_build_trigger`` | ``http`` with
    ``DEDUP_TARGET``; see :mod:`scheduler_dedup.handler.targets`). With ``DEDUP_OIDC_AUDIENCE`` and
    ``DEDUP_ALLOWED_CALLERS`` set, callers are verified before the store is touched
    (:mod:`scheduler_dedup.handler.callers.oidc`); in trust mode (``DEDUP_TRUST_CLOUD_RUN_IAM=true``) the service's
    own IAM policy is read first, at start-up and every few minutes (:mod:`scheduler_dedup.handler.callers.trust_premise`).
    On App Engine, ``DEDUP_APP_ENGINE_CALLER=true`` checks App Engine's proof of a Scheduler delivery instead
    (:mod:`scheduler_dedup.handler.callers.app_engine`); paths under ``/_ah/`` (App Engine's own, e.g. ``/_ah/start``)
    answer 404 at once.
    ``POST`` to :data:`~scheduler_dedup.handler.core.paths.CHECK_PATH` is the watchdog's run check
    (:mod:`scheduler_dedup.handler.monitoring.run_check`), verified the same way. Oversized input is refused first
    (:mod:`scheduler_dedup.handler.service.request_limits`: 431, 413).
    Every answer is JSON, an unexpected exception included (500 ``internal_error``;
    :mod:`scheduler_dedup.handler.service.answers`).

    Raises:
        ConfigError: a ``DEDUP_*`` variable or ``GOOGLE_CLOUD_PROJECT`` is invalid.
    """
    env = read_environment(environ)
    configure_logging()
    learn_secret_values(environ)  # before anything can answer, record or log
    startup = read_startup_settings(env)  # the checks the component and the policy pack make too
    settings, target, auth_settings = startup.settings, startup.target, startup.caller_auth
    # Each module below is imported only by a handler configured to use it (google-auth, requests and the
    # targets' and run check's code are not what a delivery of a python job needs); each still runs at start-up,
    # so whatever it refuses (no credentials, a public service in trust mode) stops or names it there.
    executions = None
    if target.type == "python":
        job = load_job(env.get("DEDUP_JOB"))
    else:
        from scheduler_dedup.handler.targets.build_target import build_execution_control, build_target

        job = build_target(target)
        executions = build_execution_control(target)
    verifier: CallerVerifier | None = None
    if auth_settings is not None:
        from scheduler_dedup.handler.callers.oidc import build_caller_verifier

        premise = None
        if auth_settings.trust_cloud_run_iam:
            from scheduler_dedup.handler.callers.trust_premise import ServicePremise
            from scheduler_dedup.handler.targets.google_api import google_api_session

            assert settings.service is not None  # read_startup_settings refuses trust mode without DEDUP_SERVICE
            premise = ServicePremise(settings.service, google_api_session(target.auth), target.run_api)
            premise.check()  # at start-up: an ERROR line now if the service is public or its policy unreadable
        verifier = build_caller_verifier(auth_settings, premise)
    app_engine_check = AppEngineCallerCheck() if startup.app_engine_caller.required else None
    open_run_store = store_opener(settings)  # DEDUP_STORE: its library now (a missing one stops the instance)
    job_state = None
    if settings.scheduler_api and settings.scheduler_job:
        from scheduler_dedup.handler.monitoring.job_state import JobStateReader
        from scheduler_dedup.handler.targets.google_api import google_api_session

        job_state = JobStateReader(settings.scheduler_job, google_api_session(target.auth), settings.scheduler_api)

    def serving() -> _Serving:
        store = open_run_store()  # the run store behind the store contract
        probe_store(store, min(_PROBE_SECONDS, settings.store_timeout_seconds))  # names a misconfigured store now
        # A Python job runs in this worker: ending the worker is the one sure stop once its lease is lost. A
        # downstream execution is not cancelled (docs/failures.md, "Renewals fail").
        idempotency = Idempotency(store, settings.lease_seconds, settings.retention_seconds,
                                  on_lease_lost=end_worker if target.type == "python" else None)
        return _Serving(SchedulerHandler(settings, idempotency, job, executions),
                        _RunCheckOnFirstUse(settings, store, job_state, executions))

    parts = PerProcess(serving)

    @json_errors
    def view(request: flask.Request) -> flask.Response:
        try:
            return answer(request)
        finally:
            leave_body_unread(request)  # functions-framework would read the rest of any body, unbounded

    def answer(request: flask.Request) -> flask.Response:
        if request.path.startswith(APP_ENGINE_RESERVED_PREFIX):  # App Engine's /_ah/start: 404 is a started instance
            return json_response({"status": "not_found", "error": f"{request.path} is App Engine's, not a delivery"},
                                 code(DELIVERY, "not_found"))
        refusal = oversized(request) or (verifier.check(request.headers) if verifier is not None else None)
        if refusal is None and app_engine_check is not None:
            refusal = app_engine_check.check(request.headers)
        if refusal is not None:
            return json_response(refusal[0], refusal[1])
        if is_check_path(request.path):  # the watchdog: reads records, never claims or runs
            data = bounded_body(request)
            if not isinstance(data, bytes):
                return json_response(data[0], data[1])
            body, status, headers = parts.get().run_check.get().handle(request.headers, data)
        else:
            body, status, headers = parts.get().handler.handle(request.headers)
        return json_response(body, status, headers)

    return HandlerView(view, parts.get)


class HandlerView:
    """The Flask view functions-framework serves (call it with a request), and what opens its store."""

    def __init__(self, view: Callable[[flask.Request], flask.Response], start: Callable[[], object]):
        self._view, self._start = view, start

    def __call__(self, request: flask.Request) -> flask.Response:
        return self._view(request)

    def start_serving(self) -> None:
        """Open the store in this process and check it (:func:`probe_store`), if not done in this process yet.

        Raises:
            StoreRefusedError: the store's client cannot be created.
        """
        self._start()


@dataclass(frozen=True)
class _Serving:
    """What a delivery and the run check use that holds the store's client: made in the serving process."""

    handler: SchedulerHandler
    run_check: "_RunCheckOnFirstUse"


class _RunCheckOnFirstUse:
    """The watchdog's :class:`~scheduler_dedup.handler.monitoring.run_check.RunCheck`, built (and its modules imported:
    run history, fire times) on the first ``POST`` to :data:`CHECK_PATH`, which comes minutes after a delivery if
    ever; building it checks nothing, so nothing that start-up would refuse waits for it."""

    def __init__(self, settings: "Settings", store: RunStore, job_state: "JobStateReader | None",
                 executions: "ExecutionControl | None" = None):
        self._settings, self._store, self._job_state = settings, store, job_state
        self._executions = executions
        self._check: RunCheck | None = None
        self._lock = threading.Lock()

    def get(self) -> "RunCheck":
        with self._lock:
            if self._check is None:
                from scheduler_dedup.handler.monitoring.run_check import RunCheck
                from scheduler_dedup.handler.monitoring.run_history import RunHistory

                history = RunHistory(self._store, timeout_seconds=self._settings.store_timeout_seconds)
                self._check = RunCheck(self._settings, history, self._store.server_now, self._job_state,
                                       self._executions)
            return self._check


#: Longest the start-up probe of the store may take, seconds (a slow store delays the instance's start by that much).
_PROBE_SECONDS = 5.0
#: The record the probe reads: a run id no delivery has (run ids are SHA-256 hex digests), absent in every store.
_PROBE_RUN_ID = "0" * 64


def probe_store(store: RunStore, timeout_seconds: float) -> None:
    """Read one record that need not exist through the store contract, so that a store set up so that every call
    fails is named in the start-up log with its fix (:class:`~scheduler_dedup.handler.core.errors.StoreConfigError`,
    logged as ERROR once per process): a Firestore database in Datastore mode answers FAILED_PRECONDITION to any
    read, a missing database NOT_FOUND, a runtime identity without its role PERMISSION_DENIED.

    The instance serves all the same, and answers each delivery 500 ``store_misconfigured`` with the fix, rather
    than refusing to start: a Cloud Run revision whose container exits at start-up shows users only "the container
    failed to start" (the fix is buried in a crashed container's log, and Scheduler's retries meet no handler that
    could say it), cannot answer the run check, and needs a redeploy after the fix; a serving instance runs the job
    on the first delivery after the fix. Any other failure of the probe (the store slow or out of reach just now)
    is a WARNING: deliveries try again.

    Args:
        store: the run store.
        timeout_seconds: how long the read may take, seconds.
    """
    try:
        store.get(_PROBE_RUN_ID, timeout_seconds=timeout_seconds)
    except STORE_ERRORS as exc:
        config = store_config_error(exc)
        if config is not None:
            log_store_config_error(log, config, "start-up check of the run store",
                                   {LogField.OUTCOME: "store_misconfigured", LogField.ERROR: config.fix})
        else:
            log.warning("start-up check of the run store: %s did not answer (%s); deliveries will try again",
                        store.display_name, exc)


_process_view: HandlerView | None = None
_process_view_lock = threading.Lock()


def start_serving() -> None:
    """Open the store of the view :func:`process_handler` built, in this process, and check it (:func:`probe_store`):
    what a process that serves calls before its first request, so a misconfigured store is named at start-up.

    gunicorn's worker calls it once it has loaded the app (``post_worker_init``, set by
    :func:`~scheduler_dedup.handler.service.server.bound_server` under functions-framework; ``main.app`` on App
    Engine). A process that never calls it opens the store on its first request. Nothing if no view was built.

    Raises:
        StoreRefusedError: the store's client cannot be created (the worker then fails to boot).
    """
    if _process_view is not None:
        _process_view.start_serving()


def process_handler() -> HandlerView:
    """This process's one view, built from ``os.environ`` on first call (:func:`build_handler_from_env`).

    ``main.py`` calls it at import. functions-framework imports ``main.py`` once; App Engine's ``gunicorn
    main:app`` imports it, then builds :func:`wsgi_app`, which loads ``main.py`` a second time as
    functions-framework does: both loads get the same view, so one Firestore client and one set of settings serve
    the process.

    Raises:
        ConfigError: as :func:`build_handler_from_env` (the instance does not start).
    """
    global _process_view
    with _process_view_lock:
        if _process_view is None:
            _process_view = build_handler_from_env()
        return _process_view


def wsgi_app(main_py: str | Path) -> flask.Flask:
    """The WSGI app App Engine serves (``gunicorn main:app``): functions-framework's own Flask app for
    ``main.py``'s :data:`FUNCTION_TARGET`, exactly what ``functions-framework --target handle_scheduled_job``
    serves on Cloud Run (same routes for every path and method, same error handling).

    Args:
        main_py: the path of ``main.py``.

    Raises:
        ConfigError: a setting is invalid (gunicorn's worker then fails to boot and the instance does not start).
    """
    import functions_framework

    return functions_framework.create_app(FUNCTION_TARGET, str(main_py), "http")
