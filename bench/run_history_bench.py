"""Benchmark: ``scheduler-dedup runs`` over 1,000 and 10,000 run records: time to first row, total time, peak memory.

Starts the real Firestore emulator, has the real handler record one run, then copies that record's
fields to N runs of a ``* * * * *`` job (one a minute, batched writes), with every 97th fire time
left out so the report has missed runs to find. Each variant runs the installed command in a child
process, reading its stdout as a pipe:

- ``table``: the rich table (printed in fixed-width chunks as pages arrive) and the report;
- ``json``: one JSON object per line and the report;
- ``--no-report``: the table alone.

Peak memory is the child's maximum resident set size (``wait4``'s ``ru_maxrss``). Streaming keeps it
flat: 10,000 records should cost about what 1,000 do; the benchmark exits 1 if the peak grows by more
than 20 MiB from 1,000 to 10,000 records. Run: ``python bench/run_history_bench.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from google.cloud import firestore
from rich.table import Table

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.commands.console import make_console
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

SCHEDULE = "* * * * *"
START = datetime(2026, 6, 1, tzinfo=timezone.utc)
SKIP_EVERY = 97
FLAT_MEMORY_MIB = 20


def fill(emulator: FirestoreEmulator, job: str, count: int) -> None:
    """Record one real run through the handler, then write ``count - 1`` more with the same shape."""
    settings = Settings(project=emulator.project, schedule=SCHEDULE, time_zone="Europe/Berlin")
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    handler = SchedulerHandler(settings, Idempotency(store), lambda run: {"rows": 42, "ok": True})
    body, status, _ = handler.handle({"X-CloudScheduler-JobName": job,
                                      "X-CloudScheduler-ScheduleTime": rfc3339(START) or ""})
    assert status == 200, body
    template = store.get(body["run_id"])
    assert template is not None
    client = firestore.Client(project=emulator.project)
    collection = client.collection(settings.collection)
    batch, pending, written, minute = client.batch(), 0, 1, 0
    while written < count:
        minute += 1
        if minute % SKIP_EVERY == 0:
            continue  # never delivered: the report must find it missed
        when = START + timedelta(minutes=minute)
        offset = timedelta(minutes=minute)
        data = {**template.data, "schedule_time": when, "claimed_at": template.data["claimed_at"] + offset,
                "finished_at": template.data["finished_at"] + offset}
        batch.set(collection.document(RunKey(emulator.project, "", job, when).run_id), data)
        pending += 1
        written += 1
        if pending == 500:
            batch.commit()
            batch, pending = client.batch(), 0
    if pending:
        batch.commit()


def measure(emulator: FirestoreEmulator, job: str, count: int, *extra: str) -> tuple[float, float, int, int]:
    """Run the command; returns (seconds to first row, total seconds, peak RSS in MiB, output lines)."""
    until = START + timedelta(minutes=count + count // SKIP_EVERY + 2)
    cmd = [str(Path(sys.executable).parent / "scheduler-dedup"), "runs", "--job", job,
           "--since", rfc3339(START) or "", "--until", rfc3339(until) or "", *extra]
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator.host, "GOOGLE_CLOUD_PROJECT": emulator.project}
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    first, lines = 0.0, 0
    assert proc.stdout is not None
    for line in proc.stdout:
        lines += 1
        if not first and (line.startswith("2026-") or line.startswith('{"record": "run"')):
            first = time.perf_counter() - started
    _, status, usage = os.wait4(proc.pid, 0)
    total = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, 1), f"{cmd} exited {code}"
    return first, total, usage.ru_maxrss // 1024, lines


def main() -> int:
    console = make_console()
    table = Table(title="scheduler-dedup runs: time to first row and peak memory (real emulator, child process)")
    for column in ("records", "output", "first row (s)", "total (s)", "peak RSS (MiB)", "lines"):
        table.add_column(column, justify="right" if column != "output" else "left")
    peaks: dict[int, int] = {}
    with FirestoreEmulator() as emulator:
        os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host  # this process's clients too
        for count in (1_000, 10_000):
            job = f"bench-{count}"
            t0 = time.perf_counter()
            fill(emulator, job, count)
            console.print(f"wrote {count} records in {time.perf_counter() - t0:.1f} s")
            for label, extra in (("table + report", ()), ("json + report", ("--json",)),
                                 ("table, --no-report", ("--no-report",))):
                first, total, rss, lines = measure(emulator, job, count, *extra)
                peaks[count] = max(peaks.get(count, 0), rss)
                table.add_row(f"{count:,}", label, f"{first:.2f}", f"{total:.2f}", str(rss), f"{lines:,}")
    console.print(table)
    growth = peaks[10_000] - peaks[1_000]
    if growth > FLAT_MEMORY_MIB:
        console.print(f"FAIL: peak memory grew {growth} MiB from 1,000 to 10,000 records (limit {FLAT_MEMORY_MIB})")
        return 1
    console.print(f"OK: peak memory grew {growth} MiB from 1,000 to 10,000 records (limit {FLAT_MEMORY_MIB})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
