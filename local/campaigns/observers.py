"""What a campaign watches besides the answers: the recording job's executions log, shared by every handler process
(:class:`ExecutionsLog`), and per run the faults the proxy injected and the calls the store answered slowly
(:class:`FaultLog`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler_dedup.local.faults.grpc_proxy import Call, FaultPlan

class ExecutionsLog:
    """Tails the recording job's executions log shared by all handler processes."""

    def __init__(self, path: Path):
        self.path = path
        self._cond = threading.Condition()
        self._by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._offset = 0  # bytes of the log read so far
        self._partial = b""  # the start of a line still being written
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="executions-log", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self._offset)
                    chunk = fh.read()
            except FileNotFoundError:
                continue
            if not chunk:
                continue
            lines = (self._partial + chunk).split(b"\n")
            partial = lines.pop()
            seen = time.monotonic()
            events = [{**json.loads(line), "seen": seen} for line in lines if line.strip()]
            with self._cond:
                for event in events:
                    self._by_job[event["job_name"]].append(event)
                self._offset += len(chunk)
                self._partial = partial
                self._cond.notify_all()

    def sync(self, timeout: float = 10.0) -> None:
        """Wait until every event written before this call has been read (a killed attempt's last
        event may have been written a moment before its process died)."""
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return
        self.wait(lambda: self._offset >= size and not self._partial, timeout)

    def events(self, job_name: str) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._by_job.get(job_name, ()))

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class FaultLog:
    """Per document (run id): the faults the proxy injected and the calls the store took too long to answer.

    :meth:`of` lists ``(monotonic time the call arrived, step, kind)``; ``kind`` is a fault kind, or
    ``"slow"`` for a call without a fault that the proxy held longer than ``slow_seconds`` (the
    emulator itself was slower than the store timeout, e.g. on a loaded machine). Faults are known
    from the moment the call arrives, so a call still held by a ``delay`` counts.
    """

    def __init__(self, proxy: FaultPlan, slow_seconds: float) -> None:
        self._proxy = proxy
        self._lock = threading.Lock()
        self._slow_seconds = slow_seconds
        self._slow: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
        self.calls: dict[str, Counter[str]] = defaultdict(Counter)

    def __call__(self, call: Call, kind: str | None, seconds: float) -> None:
        if not call.document:
            return
        with self._lock:
            self.calls[call.document][call.step] += 1
            if kind is None and seconds >= self._slow_seconds:
                self._slow[call.document].append((time.monotonic() - seconds, call.step, "slow"))

    def of(self, run_id: str) -> list[tuple[float, str, str]]:
        injected = [(i["time"], i["step"], i["kind"]) for i in self._proxy.injected_on(run_id)]
        with self._lock:
            return sorted(injected + self._slow.get(run_id, []))
