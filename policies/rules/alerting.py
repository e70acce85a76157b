"""Rules on noticing runs that never happen: a job through the dedup handler has a watchdog job calling the
handler's run check and an alert policy on its ``missed_run`` log lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.core.paths import CHECK_PATH
from scheduler_dedup.infra.job.log_query import missed_run_clause

from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import _calls_run_check, rule
from scheduler_dedup.policies.reading.topology import APP_ENGINE_VERSION, Topology


# ---------------------------------------------------------------- dedup-job-alerting

ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"


def _alerts_on_missed_runs(policy: Resource, service_name: Any) -> bool:
    """True when a condition of ``policy`` matches the handler's ``missed_run`` lines of ``service_name``
    (or cannot be told yet)."""
    conditions = get(policy.props, "conditions")
    if is_unknown(conditions):
        return True
    missed = missed_run_clause()
    for condition in conditions if isinstance(conditions, list) else []:
        text = get(condition, "conditionMatchedLog.filter")
        if is_unknown(text):
            return True
        if not isinstance(text, str) or missed not in text:
            continue
        if not isinstance(service_name, str) or is_unknown(service_name) or f'service_name="{service_name}"' in text:
            return True
    return False


@rule(name="dedup-job-alerting", enforcement="advisory",
      description="A job calling the dedup handler has a watchdog job calling the handler's run check and an alert "
                  "policy on its missed_run log lines, so a paused job or a broken handler does not go unnoticed.")
def dedup_job_alerting(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A job calling the dedup handler has a missed-run watchdog and an alert on it.

    A paused or deleted job, a crash-looping handler or a missing invoker grant leaves no record and
    no log line, so only an outside check notices. The stack needs (1) a Scheduler job that calls
    the handler's run check (``POST <service>/dedup/run-check``) and (2) an alert policy with a log-match
    condition on the handler's ``jsonPayload.event="missed_run"`` lines of that service. The component
    creates both (and more) with ``alerts={"notification_channels": [...]}``. Unknown URIs and filters
    (preview) pass. App Engine versions are not checked: the component's alerting is Cloud Run's only.
    """
    topology = Topology.of(resources)
    policies = [r for r in resources if r.type == ALERT_POLICY]
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        if service.type == APP_ENGINE_VERSION:
            continue  # the watchdog and the log queries are Cloud Run's; alerting is not available on App Engine yet
        pairings = topology.jobs_of(service)
        kinds = [_calls_run_check(p.job) for p in pairings]
        if not pairings or None in kinds:
            continue
        jobs = [p for p, is_check in zip(pairings, kinds) if not is_check]
        watchdog = any(kinds)
        alerted = any(_alerts_on_missed_runs(policy, get(service.props, "name")) for policy in policies)
        if not jobs or (watchdog and alerted):
            continue
        missing = [what for what, present in (
            (f"no Scheduler job calls {CHECK_PATH} on service {service.name} (the watchdog)", watchdog),
            (f"no alert policy matches its {missed_run_clause()} log lines", alerted)) if not present]
        for pairing in jobs:
            findings.append((pairing.job, f"job {pairing.job.name} runs through the dedup handler without alerting: "
                                          f"{'; '.join(missing)}. A paused job or a broken handler would go unnoticed. "
                                          "Pass alerts={'notification_channels': ['projects/P/notificationChannels/N']} "
                                          "to DedupScheduledJob (stack config scheduler-dedup:alertNotificationChannels)"
                                          + pairing.note))
    return findings
