"""Benchmark: cold start of the handler against bare functions-framework, side by side in one run.

Each round starts two processes the way Cloud Run starts the handler (functions-framework's gunicorn, through
:class:`~scheduler_dedup.local.servers.handlers.HandlerServer`) and times process start to first answer:

- **bare**: functions-framework serving a function that answers ``ok`` (the floor of any Python service);
- **handler**: ``scheduler_dedup.handler.main`` on the Firestore emulator, answering its first Scheduler delivery
  (claim, job, completion: ``200 processed``).

The rounds alternate the two, so load on the machine falls on both alike; the table gives each one's median and
the ratio of the medians. Run: ``python bench/cold_start.py [--rounds 9]`` (starts the emulator itself). Prints the
table and the import time of ``scheduler_dedup.handler.main`` measured with ``-X importtime`` (the modules a first
delivery pays for). Our target, from docs/proof.md: a ratio of at most 1.5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests
from rich.console import Console
from rich.table import Table

from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.servers.handlers import HandlerServer

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "examples" / "hello_job"
BARE = '''def bare(request):\n    return "ok"\n'''


def _first_answer(server: HandlerServer, headers: dict[str, str] | None) -> float:
    """Seconds from starting ``server`` to its first 200 answer."""
    started = time.perf_counter()
    server.start()
    method = requests.post if headers is not None else requests.get
    while True:
        try:
            answer = method(server.url, headers=headers or {}, data=b"", timeout=30)
        except requests.ConnectionError:
            continue
        if answer.status_code == 200:
            return time.perf_counter() - started
        raise RuntimeError(f"{server.url} answered {answer.status_code}: {answer.text[:300]}")


def _handler_env(emulator: FirestoreEmulator) -> dict[str, str]:
    return {"FIRESTORE_EMULATOR_HOST": emulator.host, "GOOGLE_CLOUD_PROJECT": emulator.project,
            "DEDUP_JOB": "jobs:run", "PYTHONPATH": str(HELLO), "DEDUP_COLLECTION": f"cold-{uuid.uuid4().hex[:8]}"}


def import_seconds(env: dict[str, str]) -> float:
    """Cumulative import time of ``scheduler_dedup.handler.main`` (``-X importtime``), in seconds."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import scheduler_dedup.handler.main"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=HELLO)
    line = next(ln for ln in done.stderr.splitlines() if ln.rstrip().endswith("| scheduler_dedup.handler.main"))
    return int(line.split("|")[1]) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds of both processes (default 9)")
    rounds = parser.parse_args().rounds
    console = Console()
    with tempfile.TemporaryDirectory() as tmp, FirestoreEmulator(project="demo-cold-start") as emulator:
        bare_file = Path(tmp) / "bare.py"
        bare_file.write_text(BARE)
        env = _handler_env(emulator)
        times: dict[str, list[float]] = {"bare": [], "handler": []}
        for i in range(rounds):
            for name in (("bare", "handler") if i % 2 == 0 else ("handler", "bare")):
                if name == "bare":
                    server = HandlerServer({}, target=(str(bare_file), "bare"))
                    headers = None
                else:
                    server = HandlerServer(env)
                    when = f"2026-01-01T00:{i:02d}:00Z"
                    headers = {"X-CloudScheduler-JobName": "cold-start", "X-CloudScheduler-ScheduleTime": when}
                try:
                    times[name].append(_first_answer(server, headers))
                finally:
                    server.stop()
                    server.remove_log()
        imported = import_seconds(env)
    bare, ours = statistics.median(times["bare"]), statistics.median(times["handler"])
    table = Table(title=f"Process start to first answer, median of {rounds} alternating rounds")
    for column in ("process", "median s", "min s", "max s"):
        table.add_column(column, justify="right" if column != "process" else "left")
    for name, values in times.items():
        table.add_row(name, f"{statistics.median(values):.3f}", f"{min(values):.3f}", f"{max(values):.3f}")
    console.print(table)
    console.print(f"ratio handler / bare: {ours / bare:.2f} (target <= 1.5); "
                  f"import of scheduler_dedup.handler.main: {imported:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
