"""At-least-once delivery as Cloud Scheduler does it: one scenario's first wave of concurrent duplicates, retries
after the attempt deadline until a 2xx arrives in time, a late duplicate, and the SIGKILL of the process running the
job (:func:`play`).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import requests

from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.campaigns.fleet import Fleet
from scheduler_dedup.local.campaigns.observers import ExecutionsLog, FaultLog
from scheduler_dedup.local.campaigns.results import Answer, ScenarioResult
from scheduler_dedup.local.campaigns.scenarios import CampaignConfig, Scenario

def deliver(url: str | None, headers: dict[str, str], answer: Answer, deadline: float) -> None:
    sent = answer.sent_at = time.monotonic()
    try:
        if url is None:
            answer.error = "instance down"
            return
        response = requests.post(url, headers=headers, data=b"", timeout=90)
        answer.status = response.status_code
        answer.text = response.text[:300]
        answer.in_time = time.monotonic() - sent <= deadline
        try:
            body = response.json()
        except ValueError:
            body = None
        answer.body = body if isinstance(body, dict) else None
    except requests.RequestException as exc:
        answer.error = type(exc).__name__
    finally:
        answer.answered_at = time.monotonic()
        answer.done.set()


def play(scenario: Scenario, cfg: CampaignConfig, fleet: Fleet, log: ExecutionsLog, faults: FaultLog,
         records: RunStore) -> ScenarioResult:
    """Deliver one scenario's run at least once, as Cloud Scheduler would, and gather what happened."""
    rng = random.Random(f"deliveries:{scenario.seed}")
    headers = {"X-CloudScheduler-JobName": scenario.job_name, "X-CloudScheduler-ScheduleTime": scenario.schedule_time,
               "User-Agent": "Google-Cloud-Scheduler"}
    answers: list[Answer] = []
    threads: list[threading.Thread] = []
    started = time.monotonic()

    def send() -> Answer:
        answer = Answer(instance=rng.randrange(cfg.instances))
        answers.append(answer)
        thread = threading.Thread(target=deliver, args=(fleet.url(answer.instance), headers, answer,
                                                         cfg.attempt_deadline), daemon=True)
        thread.start()
        threads.append(thread)
        return answer

    def acked() -> bool:
        return any(a.in_time and 200 <= a.status < 300 for a in answers)

    killer: threading.Thread | None = None
    if scenario.kill_after is not None:
        def kill() -> None:
            starts: list[dict[str, Any]] = []

            def started() -> bool:
                starts[:] = [e for e in log.events(scenario.job_name) if e["event"] == "start"]
                return bool(starts)

            if log.wait(started, timeout=30):
                time.sleep(scenario.kill_after or 0)
                owner = fleet.owner_of(int(starts[0]["pid"]))
                ended = any(e["event"] == "end" and e["attempt_id"] == starts[0]["attempt_id"]
                            for e in log.events(scenario.job_name))
                if owner is not None and not ended:
                    fleet.kill_group(owner)

        killer = threading.Thread(target=kill, daemon=True)

    wave = [send() for _ in range(scenario.wave)]
    if killer is not None:
        killer.start()
    current = wave[-1]
    sent = len(wave)
    backoff = 0.25
    while True:
        current.done.wait(cfg.attempt_deadline)
        if acked() or sent >= cfg.max_deliveries:
            break
        time.sleep(backoff)
        backoff = min(backoff * 2, 2.0)
        if acked():
            break
        current = send()
        sent += 1
    acknowledged = acked()
    if acknowledged and scenario.late_duplicate:
        send()
    if killer is not None:
        killer.join(timeout=60)
    for thread in threads:
        thread.join(timeout=120)

    def executions_settled() -> bool:
        events = log.events(scenario.job_name)
        open_attempts = {e["attempt_id"]: e["pid"] for e in events if e["event"] == "start"}
        for e in events:
            if e["event"] == "end":
                open_attempts.pop(e["attempt_id"], None)
        ended = fleet.ended_pids()
        return all(int(pid) in ended for pid in open_attempts.values())

    log.wait(executions_settled, timeout=60)
    log.sync()
    events = log.events(scenario.job_name)
    ended = fleet.ended_pids()  # SIGKILLed, or ended by itself once its lease was lost
    killed_at = {str(e["attempt_id"]): ended[int(e["pid"])] for e in events
                 if e["event"] == "start" and int(e["pid"]) in ended}
    run_ids = {str(a.body["run_id"]) for a in answers if a.body and a.body.get("run_id")} | \
        {str(e["run_id"]) for e in events}
    docs = [r for page in records.job_run_pages(scenario.job_name, since=None, until=None, page_size=20)
            for r in page]
    run_ids |= {d.run_id for d in docs}
    run_id = sorted(run_ids)[0] if len(run_ids) == 1 else ",".join(sorted(run_ids))
    record = dict(docs[0].data) if len(docs) == 1 else None
    return ScenarioResult(scenario=scenario, answers=answers, events=events, killed_at=killed_at, record=record,
                          run_id=run_id, faults=faults.of(run_id), acknowledged=acknowledged, started=started)
