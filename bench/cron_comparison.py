"""Compare our cron expansion with cronsim (the library Healthchecks.io computes expected fire times with).

Cases:

* every five-field expression of cronsim's own test suite (``tests/test_cronsim.py`` of its source
  distribution, fetched with ``pip download`` unless ``--cronsim-tests FILE`` names it) that Cloud Scheduler
  accepts, in UTC over the first quarter of 2020;
* :data:`DST_EXPRESSIONS` in each of :data:`ZONES`, over four days around each of the zone's 2026 clock changes.

Each case is expanded three ways: cronsim (reference), croniter reading the expression itself, without
Cloud Scheduler's cron page's expansion (``baseline``), and :func:`scheduler_dedup.handler.schedule.cron.fire_times.fire_times`
(``ours``). A case agrees when every cronsim instant is a candidate instant of one of our fire times and every
fire time we require has a candidate cronsim gives: around a clock change we list every instant the docs allow,
and for a form the cron page does not settle every reading it allows (:func:`unsettled_cron_forms`), so such
a case can agree with cronsim whichever instant or reading it picks. The disagreements are printed with a reason.

    .venv/bin/pip install cronsim && .venv/bin/python bench/cron_comparison.py

Not a test: it needs cronsim (not a dependency) and its source distribution from PyPI.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tarfile
import tempfile
import zoneinfo
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from croniter import croniter

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.cron.fire_times import FireTime, fire_time_at, fire_times
from scheduler_dedup.handler.schedule.cron.readings import unsettled_cron_forms

UTC = timezone.utc
ZONES = ("America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago")
DST_EXPRESSIONS = (
    "* * * * *", "*/5 * * * *", "*/15 * * * *", "*/30 * * * *", "0 * * * *", "30 * * * *", "45 * * * *",
    "0 */2 * * *", "0 */3 * * *", "0 0 * * *", "30 0 * * *", "0 1 * * *", "30 1 * * *", "59 1 * * *",
    "0 2 * * *", "15 2 * * *", "30 2 * * *", "59 2 * * *", "0 3 * * *", "30 3 * * *", "0 4 * * *",
    "0 12 * * *", "45 23 * * *", "0 1-3 * * *", "*/20 1-3 * * *", "*/10 2 * * *", "5 0-4 * * *",
    "0 2 * * 0", "0 2 * * 7", "0 2 * * 7-7", "0 3 * * SUN", "0 2 * * SAT-SUN", "0 2 * * 6-7", "0 2 * * 1-5",
    "0 2 * * 0,7", "30 2 * * 7/2", "0 0 * * 5-5", "0 2-2 * * *", "0 2 1,15 * *", "0 2 1 * *", "0 2 */2 * *",
    "0 2 */2 * 0", "0 0 1-7 * 0", "0 22-2 * * *", "0 2 * 3,4,10 0", "0 2 * * 1/2",
)


def _expressions_of_cronsim_tests(path: Path) -> list[str]:
    """The string literals passed first to ``CronSim(...)`` in cronsim's test file, five fields, de-duplicated."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CronSim" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and len(first.value.split()) == 5:
                found[" ".join(first.value.split())] = None
    return list(found)


def _fetch_cronsim_tests(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "cronsim", "-d", str(folder)], check=True)
    (sdist,) = folder.glob("cronsim-*.tar.gz")
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("tests/test_cronsim.py"))
        archive.extract(member, folder, filter="data")
    return folder / member.name


def _cronsim(expression: str, zone: str, since: datetime, until: datetime) -> list[datetime] | None:
    from cronsim import CronSim, CronSimError

    tz = zoneinfo.ZoneInfo(zone)
    try:
        it = CronSim(expression, since.astimezone(tz) - timedelta(seconds=1))
    except CronSimError:
        return None
    out = []
    for value in it:
        instant = value.astimezone(UTC)
        if instant >= until:
            return out
        out.append(instant)
    return out


def _baseline(expression: str, zone: str, since: datetime, until: datetime) -> Iterator[FireTime]:
    """Main's expansion before this change: croniter on the expression as written, on the zone's wall clock."""
    tz = zoneinfo.ZoneInfo(zone)
    it = croniter(expression, since.astimezone(tz).replace(tzinfo=None) - timedelta(days=1, microseconds=1))
    end = until.astimezone(tz).replace(tzinfo=None) + timedelta(days=1)
    while (local := it.get_next(datetime)) < end:
        fire = fire_time_at(local, tz)
        if any(since <= c < until for c in fire.candidates):
            yield fire


def _ours(expression: str, zone: str, since: datetime, until: datetime) -> Iterator[FireTime]:
    return fire_times(expression, zone, since, until)


def _agrees(fires: Iterable[FireTime], reference: list[datetime]) -> bool:
    fires = list(fires)
    candidates = {c for f in fires for c in f.candidates}
    given = set(reference)
    return given <= candidates and all(given & set(f.candidates) for f in fires if f.required)


def _windows(zone: str) -> list[tuple[datetime, datetime]]:
    """Four days around each 2026 clock change of ``zone`` (UTC bounds)."""
    tz = zoneinfo.ZoneInfo(zone)
    out = []
    day = datetime(2026, 1, 1, 12, tzinfo=UTC)
    while day.year == 2026:
        following = day + timedelta(days=1)
        if day.astimezone(tz).utcoffset() != following.astimezone(tz).utcoffset():
            out.append((day - timedelta(days=2), following + timedelta(days=2)))
        day = following
    return out


def cases(cronsim_tests: Path) -> list[tuple[str, str, list[tuple[datetime, datetime]]]]:
    out = [(e, "Etc/UTC", [(datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 4, 1, tzinfo=UTC))])
           for e in _expressions_of_cronsim_tests(cronsim_tests) if unix_cron_problem(e) is None]
    out += [(e, zone, _windows(zone)) for zone in ZONES for e in DST_EXPRESSIONS]
    return out


def compare(expand: Callable[[str, str, datetime, datetime], Iterable[FireTime]],
            all_cases: list[tuple[str, str, list[tuple[datetime, datetime]]]]) -> tuple[int, list[tuple[str, str, str]]]:
    """(cases that agree, [(expression, zone, why) for each that does not]) of one expansion against cronsim."""
    agree, differ = 0, []
    for expression, zone, windows in all_cases:
        verdicts = []
        for since, until in windows:
            reference = _cronsim(expression, zone, since, until)
            if reference is None:
                verdicts.append("cronsim refuses it")
                continue
            try:
                ok = _agrees(expand(expression, zone, since, until), reference)
            except Exception as error:  # noqa: BLE001 - a refusal is a disagreement, reported
                verdicts.append(f"refused: {type(error).__name__}")
                continue
            if not ok:
                verdicts.append("unsettled form" if unsettled_cron_forms(expression) else
                                "around a clock change" if zone != "Etc/UTC" else "different fire times")
        if verdicts:
            differ.append((expression, zone, verdicts[0]))
        else:
            agree += 1
    return agree, differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cronsim-tests", type=Path, help="cronsim's tests/test_cronsim.py (default: fetch it)")
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = args.cronsim_tests or _fetch_cronsim_tests(Path(folder))
        all_cases = cases(path)
        extracted = len(_expressions_of_cronsim_tests(path))
    suite = len(all_cases) - len(ZONES) * len(DST_EXPRESSIONS)
    print(f"{len(all_cases)} cases: {suite} of the {extracted} five-field expressions in cronsim's tests (the others use "
          f"extensions Cloud Scheduler refuses), {len(DST_EXPRESSIONS)} expressions x {len(ZONES)} zones around 2026's "
          "clock changes")
    for name, expand in (("baseline (croniter as written)", _baseline), ("ours", _ours)):
        agree, differ = compare(expand, all_cases)
        print(f"{name}: {agree} of {len(all_cases)} cases agree with cronsim")
        print("  disagreements by reason:", dict(Counter(why for _, _, why in differ)))
        if not args.quiet:
            for expression, zone, why in differ:
                print(f"    {expression!r:26} {zone:20} {why}")


if __name__ == "__main__":
    main()
