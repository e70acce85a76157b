"""What a campaign did (:class:`CampaignReport`) and its tables: faults per store call and kind, then the tallies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from rich.table import Table

from scheduler_dedup.local.campaigns.results import ScenarioResult
from scheduler_dedup.local.campaigns.scenarios import CampaignConfig
from scheduler_dedup.local.faults.grpc_proxy import PROTOCOL_STEPS

@dataclass
class CampaignReport:
    """What a campaign did: per-step fault counts, tallies and the violations by scenario seed."""

    config: CampaignConfig
    results: list[ScenarioResult]
    faults: Counter[tuple[str, str]]
    calls: Counter[str]
    kills: int
    seconds: float

    @property
    def violations(self) -> list[tuple[int, str]]:
        return [(r.scenario.seed, v) for r in self.results for v in r.violations]


def tables(report: CampaignReport) -> Iterator[Table]:
    """The report as rich tables: faults per step and kind, then the tallies."""
    cfg = report.config
    faults = Table(title=f"Faults injected per store call (rate {cfg.fault_rate:.0%}, seeds {cfg.seed}.."
                         f"{cfg.seed + cfg.scenarios - 1})")
    faults.add_column("step")
    faults.add_column("calls", justify="right")
    for kind in cfg.kinds:
        faults.add_column(kind, justify="right")
    faults.add_column("faults", justify="right")
    faults.add_column("slow*", justify="right")
    faults.caption = "* calls the store server itself answered slower than 90% of the store timeout (not injected)"
    for step in [*PROTOCOL_STEPS, None]:
        steps = PROTOCOL_STEPS if step is None else (step,)
        row = [sum(report.faults.get((s, k), 0) for s in steps) for k in cfg.kinds]
        faults.add_row(step or "all", str(sum(report.calls.get(s, 0) for s in steps)), *map(str, row), str(sum(row)),
                       str(sum(report.faults.get((s, "slow"), 0) for s in steps)),
                       style="bold" if step is None else None)
    yield faults

    summary = Table(title="Campaign")
    summary.add_column("")
    summary.add_column("count", justify="right")
    rs = report.results
    answers = Counter(a.outcome for r in rs for a in r.answers)
    starts = [(r, e) for r in rs for e in r.events if e["event"] == "start"]
    ends = {e["attempt_id"]: e["outcome"] for r in rs for e in r.events if e["event"] == "end"}
    killed = sum(1 for r, e in starts if e["attempt_id"] in r.killed_at)
    statuses = Counter((r.record or {}).get("status", "missing") for r in rs)
    rows = [
        ("scenarios", len(rs)),
        ("with a job longer than the lease", sum(1 for r in rs if r.scenario.job_seconds > cfg.lease_seconds)),
        ("with concurrent duplicate deliveries", sum(1 for r in rs if r.scenario.wave > 1)),
        ("deliveries", sum(len(r.answers) for r in rs)),
        ("answers " + ", ".join(f"{k} {n}" for k, n in sorted(answers.items())), sum(answers.values())),
        ("executions (job starts)", len(starts)),
        ("  attempts SIGKILLed, or ended with their worker on a lost lease (may run again)", killed),
        ("  re-runs after a retryable failure", sum(1 for o in ends.values() if o == "retryable")),
        ("SIGKILLs of a handler process", report.kills),
        ("runs completed / failed", f"{statuses.get('completed', 0)} / {statuses.get('failed', 0)}"),
        ("faults injected", sum(n for (_, kind), n in report.faults.items() if kind != "slow")),
        ("violations", len(report.violations)),
        ("seconds", f"{report.seconds:.0f}"),
    ]
    for label, value in rows:
        summary.add_row(label, str(value), style="bold red" if label == "violations" and value else None)
    yield summary
