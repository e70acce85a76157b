"""The ``scheduler-dedup`` command: ``demo`` (local end-to-end demo), ``campaign`` (seeded store-fault
campaign), ``check`` (offline policy check) and ``runs`` (run history and missed runs)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

# google-api-core warns at import that its Python 3.11 support ends in 2027; this project supports 3.11
# on purpose, and the warning would clutter every command's output. Set before anything imports it.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\._python_version_support")

from scheduler_dedup.local.runs_cli import runs  # noqa: E402  (after the warning filter)


@click.group()
def main() -> None:
    """scheduler-dedup: exactly one execution per Cloud Scheduler run."""


main.add_command(runs)


@main.command()
@click.option("--schedule", default="*/15 * * * *", show_default=True, help="unix-cron expression whose run times are played.")
@click.option("--runs", default=8, show_default=True, type=click.IntRange(6, 200), help="how many scheduled runs to deliver.")
@click.option("--seed", default=7, show_default=True, type=int, help="seed of the fault plan and of the skipped run.")
@click.option("--time-zone", default="Europe/Berlin", show_default=True, help="the schedule's tz database time zone.")
@click.option("--keep-emulator", is_flag=True, help="leave the emulator running, to try `scheduler-dedup runs` on it.")
def demo(schedule: str, runs: int, seed: int, time_zone: str, keep_emulator: bool) -> None:
    """Start the Firestore emulator and the handler, play at-least-once Scheduler traffic with faults (one fire
    time skipped on purpose), then show the run history and the runs it expected but did not find."""
    from scheduler_dedup.local.demo import run_demo

    sys.exit(run_demo(schedule=schedule, runs=runs, seed=seed, time_zone=time_zone, keep_emulator=keep_emulator))


@main.command()
@click.option("--scenarios", default=80, show_default=True, type=click.IntRange(1), help="how many scenarios to play.")
@click.option("--seed", default=1, show_default=True, type=int,
              help="seed of the first scenario (scenario i has seed SEED+i; a violation prints its seed).")
@click.option("--fault-rate", default=0.1, show_default=True, type=click.FloatRange(0, 1),
              help="probability that one store call is hit by a fault.")
@click.option("--instances", default=2, show_default=True, type=click.IntRange(2, 8), help="handler processes.")
@click.option("--concurrency", default=12, show_default=True, type=click.IntRange(1, 64),
              help="scenarios played at once.")
def campaign(scenarios: int, seed: int, fault_rate: float, instances: int, concurrency: int) -> None:
    """Play seeded fault scenarios against handler processes behind a gRPC fault proxy; exit 1 on a violation."""
    from scheduler_dedup.local.campaign import CampaignConfig, run_cli

    sys.exit(run_cli(CampaignConfig(scenarios=scenarios, seed=seed, fault_rate=fault_rate, instances=instances,
                                    concurrency=concurrency)))


@main.command()
@click.option("--stack", default=None, help="stack name: reads Pulumi.<stack>.yaml beside Pulumi.yaml.")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a stack config file (Pulumi.<stack>.yaml format).")
@click.option("--policy-config", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="enforcement levels and thresholds, as for `pulumi preview --policy-pack-config`.")
@click.option("--stack-ref", "stack_refs", multiple=True, metavar="NAME=FILE",
              help="answer a StackReference to NAME (e.g. storeStack) with the exports of stack config FILE run under "
                   "mocks, e.g. acme/scheduler-dedup/store=Pulumi.store.yaml; repeatable.")
def check(stack: str | None, config_file: Path | None, policy_config: Path | None, stack_refs: tuple[str, ...]) -> None:
    """Run the root program under Pulumi mocks and apply the policy pack offline; exit 1 on a mandatory violation."""
    from scheduler_dedup.policies.offline import run_check

    refs = []
    for item in stack_refs:
        name, sep, file = item.partition("=")
        if not sep or not name or not Path(file).is_file():
            raise click.BadParameter(f"{item!r}: give NAME=FILE with an existing stack config file", param_hint="--stack-ref")
        refs.append((name, Path(file)))
    sys.exit(run_check(stack=stack, config_file=config_file, policy_config=policy_config, stack_refs=refs))


if __name__ == "__main__":
    main()
