"""Rules on every run-record store: record retention that outlasts the job's retries; and :func:`store_of`, the
store a dedup service uses, which each store's rules (:mod:`.stores`) start from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores.registry import DEFAULT_STORE

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.readings import read_retry
from scheduler_dedup.policies.reading.model import Resource, is_unknown
from scheduler_dedup.policies.rules.base import _env_seconds, _env_shown, _fmt, _seconds_cfg, rule
from scheduler_dedup.policies.reading.topology import Topology, env_value, service_env

_ENV_STORE = "DEDUP_STORE"


def store_of(service: Resource) -> Any:
    """The run store a dedup service uses (env ``DEDUP_STORE``, default ``firestore``); UNKNOWN while unknown."""
    return env_value(service_env(service), _ENV_STORE, DEFAULT_STORE) or DEFAULT_STORE


def same(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are equal or either is unknown yet (preview): a match that cannot be refuted."""
    return is_unknown(a) or is_unknown(b) or a == b


# ---------------------------------------------------------------- dedup-retention-covers-retries

def job_retry_window_seconds(job_props: Mapping[str, Any]) -> float | None:
    """The longest time, in seconds, from a run's first attempt until Scheduler stops retrying it; None if a value
    is unknown or unreadable (see :func:`~scheduler_dedup.policies.reading.readings.read_retry`).

    The arithmetic is :func:`scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds`, the one the component uses.
    """
    reading = read_retry(job_props)
    return None if reading.problems else reading.window_at_least()


@rule(name="dedup-retention-covers-retries", enforcement="mandatory",
      description="Run record retention (DEDUP_RETENTION_SECONDS) outlasts the job's retry window.",
      config_schema={"marginSeconds": {"type": "number", "default": 0, "minimum": 0,
                                       "description": "extra seconds retention must exceed the retry window by"}})
def dedup_retention_covers_retries(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """``DEDUP_RETENTION_SECONDS`` (default 604800 = 7 days) outlasts the retry window of each job calling the service.

    A run record deleted by the TTL policy before Scheduler's last retry lets that retry run the job a
    second time. The window is :func:`~scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds` of the job's
    retry settings (:func:`~scheduler_dedup.policies.reading.readings.read_retry`); a setting that cannot be read is
    a finding of its own, and the window is still checked with it counted at its lowest (0 s), so what can
    be read is checked. Config ``marginSeconds`` (default 0) adds slack.
    """
    margin = _seconds_cfg(config, "marginSeconds")
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        retention, error = _env_seconds(service, limits.ENV_RETENTION, limits.DEFAULT_RETENTION_S)
        if error:
            findings.append((service, error))
        for pairing in topology.jobs_of(service):
            reading = read_retry(pairing.job.props)
            findings += [(pairing.job, f"job {pairing.job.name}: {problem}; the retry window cannot be known, so "
                                       "record retention cannot be checked against it" + pairing.note)
                         for problem in reading.problems]
            window = reading.window_at_least()
            if window is None or not isinstance(retention, float) or retention >= window + margin:
                continue
            span = f"at least {_fmt(window)} (counting unreadable settings as 0s)" if reading.problems else _fmt(window)
            shown = _env_shown(service, limits.ENV_RETENTION, retention)
            findings.append((pairing.job, f"env {limits.ENV_RETENTION}={shown} of service {service.name} is "
                                          f"shorter than job {pairing.job.name}'s retry window {span}"
                                          + (f" plus {_fmt(margin)}" if margin else "") + ": a late retry would find "
                                          f"no record and run again. Set {limits.ENV_RETENTION} to at least "
                                          f"{window + margin:g} (604800 = 7 days is usual) or shorten retryConfig"
                                          + pairing.note))
    return findings
