"""Consoles for the command line: tables keep their width when output goes to a file or a pipe."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console

#: Width, in characters, of output that is not a terminal (rich would use 80 and squeeze tables).
PIPE_WIDTH = 160


def make_console(file: TextIO | None = None, *, stderr: bool = False) -> Console:
    """A rich console on ``file`` (default stdout, or stderr).

    On a terminal it uses the terminal's width. Otherwise (CI logs, ``| less``, ``> file``) it uses
    ``$COLUMNS`` if set, else :data:`PIPE_WIDTH`, so tables are not wrapped to 80 columns, and
    prints no colour codes.
    """
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    console = Console(file=stream)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) >= 40 else PIPE_WIDTH
    return Console(file=stream, width=width, no_color=True, highlight=False)


def self_command() -> str:
    """How to run this ``scheduler-dedup`` from another shell, as a printed command line.

    The absolute path of this installation's ``scheduler-dedup`` script (e.g. ``/work/proj/.venv/bin/scheduler-dedup``),
    else ``python -m scheduler_dedup.local.commands.cli`` with this interpreter's absolute path. Never the bare name: the
    project's scripts put their virtual environment on PATH for themselves only, so a bare name found on this
    process's PATH may be on no PATH of the shell the reader pastes the command into.
    """
    script = Path(sys.executable).parent / "scheduler-dedup"
    if script.is_file():
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m scheduler_dedup.local.commands.cli"


def runs_command_line(env: str, job_name: str, since: str | None = None, until: str | None = None,
                 grace_zero: bool = False) -> str:
    """The printed ``scheduler-dedup runs`` command line that reads ``job_name``'s records.

    Args:
        env: ``KEY=VALUE`` words that point it at the store (``StoreServer.shell_env()``).
        job_name: the Scheduler job id.
        since, until: RFC 3339 UTC bounds of the fire times to check (``until`` exclusive); a local run that has
            stopped delivering passes its own window, else the check would find every later fire time late,
            then missed, although nothing was ever going to deliver it.
        grace_zero: ``--grace 0``: the window's deliveries are over, so a fire time without a record is missed.
    """
    window = (f" --since {since}" if since else "") + (f" --until {until}" if until else "")
    return f"{env} {self_command()} runs --job {job_name}{window}{' --grace 0' if grace_zero else ''}"



def in_words(seconds: float) -> str:
    """A wait for a person to read: ``45 s``, ``12 min 5 s``, ``14 h 27 min``, ``3 d 2 h`` (rounded down to the
    second; the two largest units)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"
