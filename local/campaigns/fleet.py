"""The handler processes a campaign delivers to (:class:`Fleet`): started warm, SIGKILLed by process group, and
replaced in the background as Cloud Run replaces a dead instance.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures
from pathlib import Path

import requests

from scheduler_dedup.local.servers.handlers import HandlerServer

def _group_members(pgid: int) -> list[int]:
    """The pids of the processes in process group ``pgid`` (from /proc; the group's leader included)."""
    members = [pgid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
            if len(fields) > 2 and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def _running(pid: int) -> bool:
    """True while process ``pid`` exists and is no zombie (from /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


class Fleet:
    """The handler processes; a killed one is replaced by a fresh process in the background."""

    def __init__(self, env: dict[str, str], count: int, baseline: bool = False):
        self._env = env
        self._baseline = baseline
        self._lock = threading.Lock()
        self.servers: list[HandlerServer | None] = []
        self.killed_pids: dict[int, float] = {}  # pid of every process of a killed group -> time of its SIGKILL
        # pid of a handler's process that ended by itself (a worker ending itself once its lease is lost, which
        # gunicorn then replaces) -> when it was first seen gone: at or after its end, never before
        self.exited_pids: dict[int, float] = {}
        self.kills = 0
        with futures.ThreadPoolExecutor(count) as pool:
            self.servers = list(pool.map(lambda _: self._start(), range(count)))
        self._restarts: list[threading.Thread] = []
        self._watching = threading.Event()
        self._watcher = threading.Thread(target=self._watch_exits, daemon=True)
        self._watcher.start()

    def ended_pids(self) -> dict[int, float]:
        """pid -> when its process ended: SIGKILLed by the campaign, or ended by itself (:attr:`exited_pids`)."""
        with self._lock:
            return {**self.exited_pids, **self.killed_pids}

    def _watch_exits(self, poll_seconds: float = 0.02) -> None:
        """Record when a process of a live handler ends other than by :meth:`kill_group` (polled from /proc every
        ``poll_seconds``; a zombie counts as ended)."""
        known: set[int] = set()
        while not self._watching.wait(poll_seconds):
            with self._lock:
                groups = [s.proc.pid for s in self.servers if s is not None and s.proc is not None]
            alive = {pid for pgid in groups for pid in _group_members(pgid) if _running(pid)}
            now = time.monotonic()
            with self._lock:
                for pid in known - alive:
                    if pid not in self.killed_pids:
                        self.exited_pids.setdefault(pid, now)
            known = (known & alive) | alive

    def _start(self) -> HandlerServer:
        """A new handler process, warmed with a run of its own (store connection, imports) as Cloud Run's
        startup probe would, so its first scenario's store calls are not slowed past the store timeout."""
        server = HandlerServer(self._env, threads=32, baseline=self._baseline).start()
        warm_up = {"X-CloudScheduler-JobName": f"warm-up-{server.port}-{time.monotonic_ns()}",
                   "X-CloudScheduler-ScheduleTime": "2000-01-01T00:00:00Z"}
        for _ in range(3):  # the warm-up meets faults like any run; it only has to reach the store once
            try:
                if requests.post(server.url, headers=warm_up, timeout=60).status_code < 500:
                    break
            except requests.RequestException:
                pass
        return server

    def url(self, index: int) -> str | None:
        """The URL of process ``index``, or of a live one while it is being replaced (Cloud Run routes
        requests to live instances only); None if none is up."""
        with self._lock:
            live = [s for s in self.servers[index:] + self.servers[:index] if s is not None]
        return live[0].url if live else None

    def owner_of(self, pid: int) -> int | None:
        """The process group (the handler process) of a live pid, or None if it is gone."""
        try:
            return os.getpgid(pid)
        except OSError:
            return None

    def kill_group(self, pgid: int) -> bool:
        """SIGKILL the handler process whose process group is ``pgid`` and start a replacement."""
        with self._lock:
            found = [i for i, s in enumerate(self.servers) if s is not None and s.proc is not None
                     and s.proc.pid == pgid]
            if not found:
                return False
            index = found[0]
            victim = self.servers[index]
            self.servers[index] = None
            self.kills += 1
        assert victim is not None
        now = time.monotonic()
        for pid in _group_members(pgid):
            self.killed_pids[pid] = now
        victim.kill()
        victim.stop()
        thread = threading.Thread(target=self._replace, args=(index, victim), daemon=True)
        thread.start()
        self._restarts.append(thread)
        return True

    def _replace(self, index: int, victim: HandlerServer) -> None:
        victim.remove_log()
        server = self._start()
        with self._lock:
            self.servers[index] = server

    def close(self) -> None:
        self._watching.set()
        self._watcher.join(timeout=5)
        for thread in self._restarts:
            thread.join(timeout=60)
        with self._lock:
            servers, self.servers = [s for s in self.servers if s is not None], []
        for server in servers:
            server.stop()
            server.remove_log()
