"""A Cloud Scheduler simulator: delivers scheduled runs at least once, with the faults real delivery has.

It follows Cloud Scheduler's HTTP target semantics
(https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig):
a delivery that does not answer 2xx within the attempt deadline is retried after a backoff of
``min_backoff * 2**n`` seconds (capped at ``max_backoff``), at most ``retry_count`` times.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from urllib.parse import urlparse

import requests

from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE

FAULTS = ("clean", "deadline", "lost_response", "concurrent", "crash", "failure")
FAULT_TITLES = {
    "clean": "no fault",
    "deadline": "job outlasts attempt deadline; retried while running",
    "lost_response": "2xx lost; retried after the job finished",
    "concurrent": "8 concurrent duplicate deliveries",
    "crash": "instance SIGKILLed mid-job; retried",
    "failure": "job fails once (retryable); retried",
    "skipped": "not delivered on purpose (as if Scheduler were paused)",
}


def schedule_times(schedule: str, runs: int, now: datetime | None = None,
                   time_zone: str = DEFAULT_TIME_ZONE) -> list[datetime]:
    """The last ``runs`` fire times of a unix-cron ``schedule`` in ``time_zone`` before ``now``, oldest first (aware UTC).

    Fire times come from :func:`scheduler_dedup.handler.schedule.cron.fire_times.fire_times`, as run history expects them;
    a wall-clock time that occurs twice is delivered at its first instant, one that does not exist is
    not delivered.

    Raises:
        ValueError: ``schedule`` is not a unix-cron expression Cloud Scheduler accepts, or the zone is unknown.
    """
    end = now or datetime.now(timezone.utc)
    span = timedelta(days=1)
    while True:
        times = [f.first for f in fire_times(schedule, time_zone, end - span, end) if f.required]
        if len(times) >= runs or span > timedelta(days=3660):
            return times[-runs:]
        span *= 4


@dataclass
class RetryConfig:
    """Scheduler's retry config, in seconds (scaled down for the demo)."""

    attempt_deadline: float = 1.5
    retry_count: int = 5
    min_backoff: float = 0.5
    max_backoff: float = 4.0

    def backoffs(self) -> Iterator[float]:
        for n in range(self.retry_count):
            yield min(self.min_backoff * 2**n, self.max_backoff)


@dataclass
class Delivery:
    """One HTTP delivery attempt and what came back (``status`` 0: no response); ``error`` and ``output``: the
    answer's error (the job's exception) and the tail of the job's output, when it failed."""

    status: int
    outcome: str
    error: str = ""
    output: str = ""


@dataclass
class RunReport:
    """All deliveries of one scheduled run."""

    schedule_time: datetime
    fault: str
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)

    @property
    def acknowledged(self) -> bool:
        return any(200 <= d.status < 300 for d in self.deliveries)


def _post(url: str, headers: dict[str, str], timeout: float) -> Delivery:
    try:
        response = requests.post(url, headers=headers, data=b"", timeout=timeout)
    except requests.Timeout:
        return Delivery(0, "deadline exceeded")
    except requests.ConnectionError:
        return Delivery(0, "connection failed")
    try:
        body = response.json()
    except ValueError:
        return Delivery(response.status_code, "non-json")
    if not isinstance(body, dict):
        return Delivery(response.status_code, "non-json")
    return Delivery(response.status_code, str(body.get("status", "")), str(body.get("error") or ""),
                    str(body.get("output") or ""))


def _post_and_drop_response(url: str, headers: dict[str, str]) -> Delivery:
    """Send the request and close the connection without reading the answer: a lost 2xx."""
    parsed = urlparse(url)
    lines = [f"POST {parsed.path or '/'} HTTP/1.1", f"Host: {parsed.hostname}:{parsed.port}", "Content-Length: 0",
             *(f"{k}: {v}" for k, v in headers.items()), "Connection: close", "", ""]
    with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 80), timeout=5) as sock:
        sock.sendall("\r\n".join(lines).encode())
        time.sleep(0.05)
    return Delivery(0, "response lost")


class Scheduler:
    """Plays scheduled runs against a service, choosing an instance per delivery.

    Args:
        instances: returns the current instance URLs (a load balancer's view).
        job_name: the Scheduler job id sent in ``X-CloudScheduler-JobName``.
        retry: the retry config.
        crash: called with a run's report for the ``crash`` fault, after the first delivery was
            sent: it must kill the instance serving it mid-job and bring up a replacement.
    """

    def __init__(self, instances: Callable[[], list[str]], job_name: str, retry: RetryConfig,
                 crash: Callable[[str], None]):
        self.instances = instances
        self.job_name = job_name
        self.retry = retry
        self.crash = crash
        self._next = 0

    def _url(self) -> str:
        urls = self.instances()
        self._next += 1
        return urls[self._next % len(urls)]

    def headers(self, schedule_time: datetime) -> dict[str, str]:
        return {"X-CloudScheduler-JobName": self.job_name,
                "X-CloudScheduler-ScheduleTime": schedule_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "User-Agent": "Google-Cloud-Scheduler"}

    def play(self, schedule_time: datetime, fault: str) -> RunReport:
        """Deliver one run with ``fault`` and retry until acknowledged or retries run out (``skipped``: deliver nothing)."""
        report = RunReport(schedule_time, fault)
        headers = self.headers(schedule_time)
        if fault == "skipped":
            return report
        if fault == "lost_response":
            report.add(_post_and_drop_response(self._url(), headers))
        elif fault == "concurrent":
            threads = [threading.Thread(target=lambda u=self._url(): report.add(_post(u, headers, self.retry.attempt_deadline)))
                       for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elif fault == "crash":
            url = self._url()
            first = threading.Thread(target=lambda: report.add(_post(url, headers, self.retry.attempt_deadline * 4)))
            first.start()
            self.crash(url)
            first.join()
        else:
            report.add(_post(self._url(), headers, self.retry.attempt_deadline))
        for backoff in self.retry.backoffs():
            if report.acknowledged:
                break
            time.sleep(backoff)
            report.add(_post(self._url(), headers, self.retry.attempt_deadline))
        return report
