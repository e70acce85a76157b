"""The ``scheduler-dedup`` command: ``demo`` (local end-to-end demo) and ``check`` (offline policy check)."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.group()
def main() -> None:
    """scheduler-dedup: exactly one execution per Cloud Scheduler run."""


@main.command()
@click.option("--schedule", default="*/15 * * * *", show_default=True, help="unix-cron expression whose run times are played.")
@click.option("--runs", default=8, show_default=True, type=click.IntRange(6, 200), help="how many scheduled runs to deliver.")
@click.option("--seed", default=7, show_default=True, type=int, help="seed of the fault plan.")
def demo(schedule: str, runs: int, seed: int) -> None:
    """Start the Firestore emulator and the handler, then play at-least-once Scheduler traffic with faults."""
    from scheduler_dedup.local.demo import run_demo

    sys.exit(run_demo(schedule=schedule, runs=runs, seed=seed))


@main.command()
@click.option("--stack", default=None, help="stack name: reads Pulumi.<stack>.yaml beside Pulumi.yaml.")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a stack config file (Pulumi.<stack>.yaml format).")
@click.option("--policy-config", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="enforcement levels and thresholds, as for `pulumi preview --policy-pack-config`.")
def check(stack: str | None, config_file: Path | None, policy_config: Path | None) -> None:
    """Run the root program under Pulumi mocks and apply the policy pack offline; exit 1 on a mandatory violation."""
    from scheduler_dedup.policies.offline import run_check

    sys.exit(run_check(stack=stack, config_file=config_file, policy_config=policy_config))


if __name__ == "__main__":
    main()
