"""``scheduler-dedup demo --downstream``: runs forwarded to a Cloud Run job whose executions outlast the interval, with
overlap policy ``skip`` and ``replace`` side by side.

One real local store server, one handler per side forwarding to a local stand-in for the Cloud Run Admin API
(:mod:`scheduler_dedup.local.demo.fake_cloud_run`) whose executions take longer than the time between fire times.
Each run stays ``running_downstream`` while its execution runs; under ``skip`` the next fire time is recorded
``skipped_overlap``, under ``replace`` it cancels the running execution (recorded ``cancelled``) and starts its own.
At the end the watchdog's run check records how the last executions ended.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import requests
from rich.table import Table

from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.local.commands.console import make_console
from scheduler_dedup.local.demo.fake_cloud_run import LocalCloudRun
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import EmulatorNotFoundError, EmulatorStartError, store_server

JOB_NAME = "long-export"
CLOUD_RUN_JOB = "projects/demo-scheduler-dedup/locations/us-central1/jobs/long-export"
POLICIES = ("skip", "replace")


def run_downstream_demo(store: str = "firestore", runs: int = 6, interval_seconds: float = 1.0,
                        execution_seconds: float = 2.5) -> int:
    """Deliver ``runs`` fire times ``interval_seconds`` apart to a ``skip`` and a ``replace`` side; print both.

    Returns:
        0 if on both sides at most one execution ran at once, ``skip`` skipped fire times and ``replace`` cancelled
        executions; 1 if not; 2 if the store server cannot run.
    """
    console = make_console()
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=runs + 1)
    times = [base + timedelta(minutes=i) for i in range(runs)]
    console.print(f"[bold]Long downstream executions[/bold]: each run of {JOB_NAME} starts a Cloud Run job execution "
                  f"that takes {execution_seconds:g} s; fire times come every {interval_seconds:g} s (scaled down); "
                  "the same fire times go to a side with overlap policy skip and one with replace")
    try:
        server = store_server(store).start()
    except (EmulatorNotFoundError, EmulatorStartError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    apis = {policy: LocalCloudRun(CLOUD_RUN_JOB, execution_seconds).start() for policy in POLICIES}
    handlers: dict[str, HandlerServer] = {}
    answers: dict[str, list[str]] = {policy: [] for policy in POLICIES}
    statuses: dict[str, list[str]] = {policy: [] for policy in POLICIES}
    settled: dict[str, int] = {}
    try:
        for policy in POLICIES:
            server.prepare(f"runs_{policy}")
            handlers[policy] = HandlerServer({
                **server.endpoint_env(), "DEDUP_COLLECTION": f"runs_{policy}", "DEDUP_OVERLAP": policy,
                "DEDUP_TARGET_TYPE": "cloud_run_job", "DEDUP_TARGET": CLOUD_RUN_JOB, "DEDUP_RUN_API": apis[policy].url,
                "DEDUP_TARGET_AUTH": "none", "DEDUP_ALLOW_TEST_ENDPOINTS": "1", "DEDUP_SCHEDULE": "* * * * *",
                "DEDUP_TARGET_TIMEOUT_SECONDS": "10"}, threads=4).start()
        for t in times:
            for policy in POLICIES:
                answer = requests.post(handlers[policy].url, timeout=60, headers={
                    "X-CloudScheduler-JobName": JOB_NAME, "User-Agent": "Google-Cloud-Scheduler",
                    "X-CloudScheduler-ScheduleTime": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
                answers[policy].append(str(answer.json().get("status")))
            time.sleep(interval_seconds)
        time.sleep(execution_seconds)  # the last executions end
        for policy in POLICIES:
            check = requests.post(f"{handlers[policy].url}/dedup/run-check", timeout=120, json={
                "job_name": JOB_NAME, "grace_seconds": 0, "window_seconds": 3600})
            settled[policy] = len(check.json().get("settled", []))
            records = server.connect(f"runs_{policy}")
            try:
                for t in times:
                    record = records.get(RunKey(project=server.project, location="", job_name=JOB_NAME,
                                                schedule_time=t).run_id)
                    statuses[policy].append(record.status if record else "none")
            finally:
                records.close()
    finally:
        for handler in handlers.values():
            handler.stop()
            handler.remove_log()
        for api in apis.values():
            api.stop()
        server.stop()
    table = Table(title="Runs forwarded to a Cloud Run job: overlap policy skip and replace")
    table.add_column("fire time (UTC)")
    for policy in POLICIES:
        table.add_column(f"overlap={policy}: answer / record")
    for i, t in enumerate(times):
        table.add_row(t.strftime("%H:%M"), *(f"{answers[p][i]} / {statuses[p][i]}" for p in POLICIES))
    table.add_section()
    table.add_row("executions started", *(str(len(apis[p].executions)) for p in POLICIES))
    table.add_row("most at once", *(str(apis[p].most_at_once()) for p in POLICIES))
    table.add_row("settled by the run check", *(str(settled[p]) for p in POLICIES))
    console.print(table)
    ok = (all(apis[p].most_at_once() == 1 for p in POLICIES) and "skipped_overlap" in statuses["skip"]
          and "cancelled" in statuses["replace"] and len(apis["replace"].executions) == runs)
    if not ok:
        console.print("[red bold]FAIL[/red bold]: expected one execution at a time on both sides, skips under skip "
                      "and cancellations under replace")
        return 1
    console.print("[green bold]OK[/green bold]: one execution at a time on both sides. With skip, a fire time due "
                  "while an execution ran was recorded skipped_overlap; with replace, it cancelled that execution "
                  "(its run recorded cancelled) and started its own. Each run stayed running_downstream until its "
                  "execution ended, and the run check recorded the last ones.")
    return 0
