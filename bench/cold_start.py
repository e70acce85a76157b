"""Benchmark: cold start of the handler against bare functions-framework, side by side in one run.

Everything runs in the deploy archive's own environment, as Cloud Run installs it: a venv of the runtime's Python
(python312 by default) holding only the archive's ``requirements.txt`` (:mod:`scheduler_dedup.infra.job.archive`:
its pins, and whatever pip resolves for what they leave open), made once and kept under
``~/.cache/scheduler-dedup/deploy-venvs/``. Each round starts, with that venv's ``functions-framework`` command as
Cloud Run does (``THREADS`` as the component sets it):

- **bare**: functions-framework serving a function that answers ``ok`` (the floor of any Python service);
- **handler**: the unpacked deploy archive of ``examples/hello_job`` on a real local store (``--store``, default the
  Firestore emulator), with the environment the component gives a Cloud Run python job (:data:`HANDLER_ENV`),
  answering its first Scheduler delivery (claim, job, completion: ``200``);
- **before** (with ``--compare REF``): the same archive built from the ``handler/`` of git revision ``REF``.

and times, from process start, **listening** (the port accepts a TCP connection: what Cloud Run's default start-up
probe waits for) and **first answer** (the first request's 200). The rounds rotate the order, so load on the
machine falls on all alike; the table gives medians and the ratio of medians to bare. It then prints each
handler's ``-X importtime`` of ``main`` (start-up included: the store's client is opened and probed there) and the
costliest packages of the current one by their own import time.

Run: ``python bench/cold_start.py [--rounds 9] [--store firestore] [--python PYTHON] [--compare REF]`` (starts
the store's local server itself; the first run installs the venv). Our target, from docs/proof.md: a first-answer
ratio of at most 1.5.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import http.client
import io
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from scheduler_dedup.handler.service.server import FUNCTION_TARGET, SERVER_THREADS
from scheduler_dedup.infra.job.archive import APP_ENGINE_RUNTIME, build_deploy_archive, requirements_for
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, reserve_port, store_server

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "examples" / "hello_job"
BARE = '''def bare(request):\n    return "ok"\n'''
PROJECT = "demo-cold-start"
#: What the component sets for a python job on Cloud Run beside the store's variables
#: (:func:`scheduler_dedup.infra.job.environment.handler_environment`), except caller verification
#: (``DEDUP_OIDC_AUDIENCE``, ``DEDUP_ALLOWED_CALLERS``, trust mode): its tokens come from Google, and its premise
#: check reads the service's IAM policy from Cloud Run.
HANDLER_ENV = {"DEDUP_JOB": "jobs:run", "DEDUP_SCHEDULE": "* * * * *", "DEDUP_TIME_ZONE": "Etc/UTC",
               "DEDUP_SCHEDULER_JOB": f"projects/{PROJECT}/locations/us-central1/jobs/cold-start",
               "DEDUP_LEASE_SECONDS": "600", "DEDUP_STORE_TIMEOUT_SECONDS": "45", "DEDUP_TARGET_TYPE": "python"}
#: The runtime's Python, from the archive's App Engine runtime (``python312`` -> ``python3.12``), which is also
#: the Cloud Run functions base image's.
_RUNTIME_DIGITS = APP_ENGINE_RUNTIME.removeprefix("python")
RUNTIME_PYTHON = f"python{_RUNTIME_DIGITS[0]}.{_RUNTIME_DIGITS[1:]}"


def deploy_venv(python: str, requirements: str) -> Path:
    """The venv of ``python`` with exactly ``requirements`` installed (pip), made once per (Python, requirements).

    Raises:
        SystemExit: ``python`` does not run, or pip fails (its output is shown).
    """
    try:
        version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                                 text=True, check=True, timeout=60).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"{python} does not run ({exc}): pass --python with a Python of the runtime's version "
                         f"({RUNTIME_PYTHON}), e.g. --python ~/.pyenv/versions/3.12.1/bin/python") from exc
    key = hashlib.sha256(f"{version}\n{requirements}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scheduler-dedup" / "deploy-venvs"
    venv = cache / f"py{version}-{key}"
    if (venv / "ready").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    req = venv / "requirements.txt"
    req.write_text(requirements)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(req)],
                          capture_output=True, text=True, timeout=1200)
    if done.returncode:
        raise SystemExit(f"pip could not install the deploy requirements into {venv}:\n{done.stderr[-3000:]}")
    (venv / "ready").write_text(version + "\n")
    return venv


def unpack_archive(directory: Path, store: str, handler_dir: Path | None = None) -> str:
    """Unpack the deploy archive of ``examples/hello_job`` on ``store`` (of ``handler_dir``, default this checkout's
    handler) into ``directory``. Returns its ``requirements.txt``."""
    archive = build_deploy_archive(HELLO, store=store, handler_dir=handler_dir)
    zipfile.ZipFile(io.BytesIO(archive.content)).extractall(directory)
    return (directory / "requirements.txt").read_text()


def handler_of_revision(revision: str, directory: Path) -> Path:
    """``handler/`` of git revision ``revision``, extracted into ``directory``; returns its folder."""
    directory.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "handler"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=tar.stdout, check=True)
    return directory / "handler"


@dataclass
class Variant:
    """One process to start each round: its app folder, target, environment and the request that it answers."""

    name: str
    app_dir: Path
    target: str
    env: dict[str, str]
    delivery: bool
    listening: list[float] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes of process group ``pgid`` (gunicorn's arbiter and its
    worker), from ``/proc``: what a cold start costs whatever else the machine runs meanwhile."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the command's ")": state, ppid, pgrp, ... utime (12), stime (13)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def start_and_answer(venv: Path, variant: Variant, round_no: int) -> tuple[float, float, float]:
    """Start ``variant`` with the venv's ``functions-framework``; seconds from start to listening, to first 200, and
    the CPU seconds its processes used until then."""
    reservation = reserve_port()
    port = int(reservation.getsockname()[1])
    command = [str(venv / "bin" / "functions-framework"), "--source", str(variant.app_dir / "main.py"),
               "--target", variant.target, "--host", "127.0.0.1", "--port", str(port)]
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
           "THREADS": str(SERVER_THREADS), "PYTHONUNBUFFERED": "1", **variant.env}
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=variant.app_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            reservation.close()
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"{variant.name} exited with {proc.returncode}:\n"
                                       f"{log.read().decode(errors='replace')[-3000:]}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.002)
            listening = time.perf_counter() - started
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if variant.delivery:
                conn.request("POST", "/", body=b"", headers={
                    "X-CloudScheduler-JobName": "cold-start",
                    "X-CloudScheduler-ScheduleTime": f"2026-01-01T{round_no // 60:02d}:{round_no % 60:02d}:00Z"})
            else:
                conn.request("GET", "/")
            answer = conn.getresponse()
            body = answer.read()
            answered = time.perf_counter() - started
            cpu = group_cpu_seconds(proc.pid)
            conn.close()
            if answer.status != 200:
                raise RuntimeError(f"{variant.name} answered {answer.status}: {body[:300]!r}")
            return listening, answered, cpu
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")


def import_profile(venv: Path, variant: Variant) -> tuple[float, list[tuple[str, float]]]:
    """``-X importtime`` of ``import main`` in the variant's venv and folder: (cumulative seconds, the costliest
    packages by their modules' own time, seconds)."""
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), **variant.env}
    done = subprocess.run([str(venv / "bin" / "python"), "-X", "importtime", "-c", "import main"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=variant.app_dir)
    total = 0.0
    groups: collections.Counter[str] = collections.Counter()
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if not match:
            continue
        own, cumulative, name = int(match[1]) / 1e6, int(match[2]) / 1e6, match[4]
        if name == "main" and not match[3]:
            total = cumulative
            continue
        parts = name.split(".")
        depth = (3 if parts[:2] in (["google", "cloud"], ["scheduler_dedup", "handler"])
                 else 2 if parts[0] == "google" else 1)
        groups[".".join(parts[:depth])] += own
    if not total:
        raise RuntimeError(f"no import time for main in {variant.app_dir}:\n{done.stderr[-3000:]}")
    return total, groups.most_common(12)


_SHOWN_PINS = {"functions-framework", "flask", "gunicorn", "google-cloud-firestore", "google-api-core", "google-auth",
               "grpcio", "protobuf", "proto-plus", "redis", "google-cloud-spanner", "croniter"}


def _ratio(values: list[float], floor: list[float]) -> float:
    return statistics.median(values) / statistics.median(floor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds of every process (default 9)")
    parser.add_argument("--store", choices=SERVER_KINDS, default="firestore", help="the run store (default firestore)")
    parser.add_argument("--python", default=RUNTIME_PYTHON,
                        help=f"Python of the deploy venv (default {RUNTIME_PYTHON}, the runtime's)")
    parser.add_argument("--compare", metavar="REF", help="also time the handler of git revision REF ('before')")
    args = parser.parse_args()
    console = Console(width=120)
    with tempfile.TemporaryDirectory() as tmp_name, store_server(args.store, project=PROJECT) as server:
        tmp = Path(tmp_name)
        requirements = unpack_archive(tmp / "handler", args.store)
        if requirements.splitlines()[1:] != list(requirements_for(args.store)):
            raise RuntimeError(f"the archive's requirements.txt is not the {args.store} handler's pins")
        venv = deploy_venv(args.python, requirements)
        (tmp / "bare").mkdir()
        (tmp / "bare" / "main.py").write_text(BARE)

        def handler_env() -> dict[str, str]:
            collection = f"cold_{uuid.uuid4().hex[:8]}"
            server.prepare(collection)
            return {**server.endpoint_env(), **HANDLER_ENV, "DEDUP_COLLECTION": collection}

        variants = [Variant("bare", tmp / "bare", "bare", {}, delivery=False),
                    Variant("handler", tmp / "handler", FUNCTION_TARGET, handler_env(), delivery=True)]
        if args.compare:
            (tmp / "before").mkdir()
            before_requirements = unpack_archive(tmp / "before", args.store,
                                                 handler_of_revision(args.compare, tmp / "src"))
            if before_requirements != requirements:
                console.print(f"[yellow]{args.compare}'s archive pins other requirements; timed in this venv[/]")
            variants.insert(1, Variant(f"before ({args.compare})", tmp / "before", FUNCTION_TARGET, handler_env(),
                                       delivery=True))
        for variant in variants:
            # the .pyc files and the page cache every round after a container's first finds; not counted
            subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", str(variant.app_dir)], check=True)
            start_and_answer(venv, variant, 0)
        load_before = os.getloadavg()[0]
        for i in range(1, args.rounds + 1):
            shift = i % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                listening, answered, cpu = start_and_answer(venv, variant, i)
                variant.cpu.append(cpu)
                variant.listening.append(listening)
                variant.answered.append(answered)
        load_after = os.getloadavg()[0]
        profiles = {variant.name: import_profile(venv, variant) for variant in variants if variant.delivery}
        frozen = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                                text=True, check=True).stdout.split()
    bare = variants[0]
    table = Table(title=f"Process start to listening and to first answer, {args.rounds} rotating rounds, "
                        f"{args.store}, deploy venv {venv.name}")
    for column in ("process", "listening s", "first answer s", "min s", "max s", "ratio", "CPU s", "CPU ratio"):
        table.add_column(column, justify="left" if column == "process" else "right")
    for variant in variants:
        table.add_row(variant.name, f"{statistics.median(variant.listening):.3f}",
                      f"{statistics.median(variant.answered):.3f}", f"{min(variant.answered):.3f}",
                      f"{max(variant.answered):.3f}", f"{_ratio(variant.answered, bare.answered):.2f}",
                      f"{statistics.median(variant.cpu):.2f}", f"{_ratio(variant.cpu, bare.cpu):.2f}")
    console.print(table)
    console.print("medians; ratio: to bare's; CPU s: user + system CPU of the process and its worker until the answer")
    console.print(f"{os.cpu_count()} cores, load average {load_before:.1f} before the rounds, {load_after:.1f} after; "
                  f"{len(frozen)} distributions in the venv: " + ", ".join(
                      pin for pin in frozen if pin.split("==")[0].lower() in _SHOWN_PINS))
    for name, (total, groups) in profiles.items():
        console.print(f"{name}: import of main (start-up included) {total:.3f} s")
    console.print("costliest packages of handler's start-up, own import time: "
                  + ", ".join(f"{group} {seconds * 1000:.0f} ms" for group, seconds in profiles["handler"][1]))
    console.print(f"ratio handler / bare, first answer: {_ratio(variants[-1].answered, bare.answered):.2f} "
                  f"(target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
