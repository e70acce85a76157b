"""The ``scheduler-dedup`` command: ``demo`` (local end-to-end demo), ``campaign`` (seeded store-fault
campaign), ``failover-campaign`` (what a Redis failover costs), ``check`` (offline policy check), ``runs`` (run history
and missed runs; ``runs rerun`` re-runs a failed run), ``backfill`` (deliver fire times that never ran) and ``store
init`` (a Spanner store's table)."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType


def _end_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _quiet_signals() -> dict[int, object]:
    """Until a command owns something (:func:`_owned_lifetime`), Ctrl-C, SIGTERM and SIGHUP end the process at once
    with the shell's status (130 for Ctrl-C) and no traceback: while the imports run (a second or more on a busy
    machine) nothing is started yet. Returns the handlers replaced (none outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {each: signal.signal(each, _end_quietly) for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def _restore_signals(previous: dict[int, object]) -> None:
    for each, handler in previous.items():  # None: a handler not set from Python, i.e. the default
        signal.signal(each, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]


_AT_IMPORT = _quiet_signals()

from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

import click  # noqa: E402

from scheduler_dedup.handler.core.logs import ignore_python_version_warning  # noqa: E402
from scheduler_dedup.handler.schedule.overlap_policy import DEFAULT_OVERLAP, OVERLAP_POLICIES, REPLACE  # noqa: E402

ignore_python_version_warning()  # before anything imports google.api_core

from scheduler_dedup.local.commands.backfill import backfill, rerun  # noqa: E402
from scheduler_dedup.local.commands.runs import runs  # noqa: E402  (after the warning filter)
from scheduler_dedup.local.commands.store_init import store  # noqa: E402
from scheduler_dedup.local.commands.store_option import StoreName  # noqa: E402

_restore_signals(_AT_IMPORT)  # imported (by a test, say): the handlers as they were; main() sets them again


@contextmanager
def _owned_lifetime() -> Iterator[None]:
    """The lifetime of a command that starts local servers: Ctrl-C, SIGTERM and SIGHUP run its cleanup
    (:func:`~scheduler_dedup.local.commands.lifetime.ends_on_signals`); Ctrl-C then exits 130 with one line."""
    from scheduler_dedup.local.commands.lifetime import ends_on_signals

    try:
        with ends_on_signals():
            yield
    except KeyboardInterrupt:
        click.echo("interrupted: every server and temporary file this command started is gone", err=True)
        sys.exit(130)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scheduler-dedup", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context) -> None:
    """scheduler-dedup: exactly one execution per Cloud Scheduler run."""
    previous = _quiet_signals()  # a command's own imports run before it owns anything
    ctx.call_on_close(lambda: _restore_signals(previous))


runs.add_command(rerun)
main.add_command(runs)
main.add_command(backfill)
main.add_command(store)

_STORE_OPTION = click.option("--store", default="firestore", show_default=True, type=StoreName(local_server=True),
                             help="the run store (DEDUP_STORE) whose real local server is started.")


@main.command()
@click.option("--schedule", default="*/15 * * * *", show_default=True, help="unix-cron expression whose run times are played.")
@click.option("--runs", default=8, show_default=True, type=click.IntRange(6, 200), help="how many scheduled runs to deliver.")
@click.option("--seed", default=7, show_default=True, type=int, help="seed of the fault plan and of the skipped run.")
@click.option("--time-zone", default="Europe/Berlin", show_default=True, help="the schedule's tz database time zone.")
@click.option("--keep-emulator", is_flag=True, help="leave the store server running, to try `scheduler-dedup runs` on it.")
@click.option("--overlap", is_flag=True, help="instead: a job slower than its interval, overlap policy allow and "
                                              "skip side by side (about 20 s).")
@click.option("--downstream", is_flag=True, help="instead: runs forwarded to a Cloud Run job (a local stand-in of its "
                                                 "API) whose executions outlast the interval, overlap policy skip and "
                                                 "replace side by side (about 20 s).")
@_STORE_OPTION
def demo(schedule: str, runs: int, seed: int, time_zone: str, keep_emulator: bool, overlap: bool, downstream: bool,
         store: str) -> None:
    """Start a local store server (the Firestore emulator by default) and the handler, play at-least-once
    Scheduler traffic with faults (one fire time skipped on purpose), then show the run history and the runs
    it expected but did not find. With --overlap: a job slower than its interval, with and without skip. With
    --downstream: long downstream executions under skip and replace."""
    from scheduler_dedup.local.commands.setting_options import option_problems, print_advisories

    problems = option_problems(schedule, time_zone)  # as `check` and `pulumi preview` read them
    if problems:
        raise click.UsageError("\n".join(problems))
    if downstream:
        from scheduler_dedup.local.commands.demo_downstream import run_downstream_demo

        with _owned_lifetime():
            sys.exit(run_downstream_demo(store=store))
    if overlap:
        from scheduler_dedup.local.commands.demo_overlap import run_overlap_demo

        with _owned_lifetime():
            sys.exit(run_overlap_demo(store=store))
    from scheduler_dedup.local.commands.console import make_console
    from scheduler_dedup.local.commands.demo import run_demo

    print_advisories(make_console(), schedule, time_zone)

    with _owned_lifetime():
        sys.exit(run_demo(schedule=schedule, runs=runs, seed=seed, time_zone=time_zone, keep_emulator=keep_emulator,
                          store=store))


@main.command("run-local")
@click.option("--source", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="folder of your job module (it goes on the handler's PYTHONPATH, as in the deploy archive).")
@click.option("--job", "job", required=True, help="your job callable as module:function (DEDUP_JOB), e.g. jobs:run.")
@click.option("--schedule", required=True, help="the Scheduler job's unix-cron schedule, e.g. '*/5 * * * *'.")
@click.option("--time-zone", default="Etc/UTC", show_default=True, help="the schedule's tz database time zone.")
@click.option("--speed", default=1.0, show_default=True, type=float,
              help="1: real time (wait for each upcoming fire time); N > 1: replay the last --runs fire times N times faster.")
@click.option("--runs", default=None, type=click.IntRange(1, 10_000),
              help="fire times to deliver [default: until Ctrl-C in real time, 10 when faster].")
@click.option("--job-name", default=None, help="Scheduler job id sent in X-CloudScheduler-JobName [default: from --job].")
@click.option("--delivery-faults", default="", help="simulator faults applied to runs in turn, comma-separated: "
              "clean, lost_response, concurrent, crash, skipped.")
@click.option("--store-fault", "store_faults", multiple=True,
              help="a store fault between handler and store server as step:kind, e.g. completion:lose_answer; repeatable.")
@click.option("--store-fault-rate", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="probability of a random store fault (unavailable, deadline, lose_answer) per store call.")
@click.option("--seed", default=1, show_default=True, type=int, help="seed of the random store faults.")
@click.option("--lease", "lease_seconds", default=10.0, show_default=True, type=float, help="DEDUP_LEASE_SECONDS.")
@click.option("--attempt-deadline", default=10.0, show_default=True, type=float,
              help="seconds the simulated Scheduler waits for an answer before it retries.")
@click.option("--env", "env_pairs", multiple=True, help="KEY=VALUE for your job's environment; repeatable.")
@click.option("--secret-file", "secret_files", multiple=True,
              help="NAME=path: env var NAME holds the file's text, standing in for a secret_env secret; repeatable.")
@click.option("--keep-emulator", is_flag=True, help="leave the store server running, so the printed runs command "
              "keeps working afterwards.")
@click.option("--overlap", default=DEFAULT_OVERLAP, show_default=True,
              help=f"the job's overlap policy (DEDUP_OVERLAP): {', '.join(p for p in OVERLAP_POLICIES if p != REPLACE)} "
                   "(replace cancels a downstream execution, which a Python job is not); each fire time is "
                   "delivered on schedule, so a job slower than the schedule's interval overlaps the next.")
@click.option("--catch-up-window", default=0.0, show_default=True, type=float,
              help="the job's catch-up window in seconds (DEDUP_CATCH_UP_WINDOW_SECONDS; 0: off).")
@_STORE_OPTION
def run_local_command(source: Path, job: str, schedule: str, time_zone: str, speed: float, runs: int | None,
                      job_name: str | None, delivery_faults: str, store_faults: tuple[str, ...],
                      store_fault_rate: float, seed: int, lease_seconds: float, attempt_deadline: float,
                      env_pairs: tuple[str, ...], secret_files: tuple[str, ...], keep_emulator: bool,
                      overlap: str, catch_up_window: float, store: str) -> None:
    """Run your own job locally as in production: a local store server (the Firestore emulator by default),
    the handler under functions-framework with DEDUP_JOB, and the Scheduler simulator firing your schedule,
    with optional delivery and store faults. Prints each run's history row as it lands, then the report.

    \b
    Example:
      scheduler-dedup run-local --source examples/hello_job --job jobs:run \\
          --schedule '*/5 * * * *' --time-zone Europe/Berlin --speed 300 --runs 6
    """
    from scheduler_dedup.local.commands.run_local import LocalRunError, env_pairs_env, run_local, secret_file_env

    try:
        extra_env = env_pairs_env(env_pairs)
    except LocalRunError as exc:
        raise click.BadParameter(str(exc), param_hint="--env") from None
    faults = [f.strip() for f in delivery_faults.split(",") if f.strip()]
    try:
        extra_env.update(secret_file_env(secret_files))
        with _owned_lifetime():
            code = run_local(source, job, schedule, time_zone=time_zone, runs=runs, speed=speed, job_name=job_name,
                             delivery_faults=faults, store_faults=store_faults, store_fault_rate=store_fault_rate,
                             seed=seed, lease_seconds=lease_seconds, attempt_deadline=attempt_deadline,
                             extra_env=extra_env, store=store, keep_emulator=keep_emulator, overlap=overlap,
                             catch_up_window=catch_up_window)
    except LocalRunError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    sys.exit(code)


@main.command()
@click.option("--scenarios", default=80, show_default=True, type=click.IntRange(1), help="how many scenarios to play.")
@click.option("--seed", default=1, show_default=True, type=int,
              help="seed of the first scenario (scenario i has seed SEED+i; a violation prints its seed).")
@click.option("--fault-rate", default=0.1, show_default=True, type=click.FloatRange(0, 1),
              help="probability that one store call is hit by a fault.")
@click.option("--instances", default=2, show_default=True, type=click.IntRange(2, 8), help="handler processes.")
@click.option("--concurrency", default=12, show_default=True, type=click.IntRange(1, 64),
              help="scenarios played at once.")
@_STORE_OPTION
def campaign(scenarios: int, seed: int, fault_rate: float, instances: int, concurrency: int, store: str) -> None:
    """Play seeded fault scenarios against handler processes behind a fault proxy; exit 1 on a violation."""
    from scheduler_dedup.local.campaigns.campaign import run_cli
    from scheduler_dedup.local.campaigns.scenarios import CampaignConfig

    with _owned_lifetime():
        sys.exit(run_cli(CampaignConfig(scenarios=scenarios, seed=seed, fault_rate=fault_rate, instances=instances,
                                        concurrency=concurrency, store=store)))


@main.command("failover-campaign")
@click.option("--rounds", default=8, show_default=True, type=click.IntRange(1, 200), help="failovers per mode.")
@click.option("--scenarios-per-round", default=24, show_default=True, type=click.IntRange(1, 500),
              help="scenarios played around each failover.")
@click.option("--seed", default=1, show_default=True, type=int, help="seed of the first scenario and of the failovers.")
@click.option("--lag-ms", default=100, show_default=True, type=click.IntRange(0, 10_000),
              help="how far the replica is behind the primary, ms.")
@click.option("--wait-ms", "wait_modes", default=(0, 500), show_default=True, multiple=True,
              type=click.IntRange(0, 10_000), help="DEDUP_REDIS_WAIT_TIMEOUT_MS values to compare (0: no WAIT); repeatable.")
def failover_campaign(rounds: int, scenarios_per_round: int, seed: int, lag_ms: int, wait_modes: tuple[int, ...]) -> None:
    """Measure what the store contract cannot promise on Redis: a failover to a replica that had not caught up,
    with and without WAIT, and the double executions it causes (a report; exit 0)."""
    from scheduler_dedup.local.campaigns.failover import FailoverConfig, run_cli

    with _owned_lifetime():
        sys.exit(run_cli(FailoverConfig(rounds=rounds, scenarios_per_round=scenarios_per_round, seed=seed,
                                        lag_ms=lag_ms, wait_modes=tuple(wait_modes))))


@main.command()
@click.option("--program", default=None, type=click.Path(exists=True, path_type=Path),
              help="the Pulumi program to check: its folder or its Pulumi.yaml [default: the Pulumi.yaml in this "
                   "folder or above, else this project's root stack].")
@click.option("--stack", default=None, help="stack name: reads Pulumi.<stack>.yaml beside the program's Pulumi.yaml.")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a stack config file (Pulumi.<stack>.yaml format).")
@click.option("--policy-config", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="enforcement levels and thresholds, as for `pulumi preview --policy-pack-config`.")
@click.option("--stack-ref", "stack_refs", multiple=True, metavar="NAME=FILE",
              help="answer a StackReference to NAME (e.g. storeStack) with the exports of stack config FILE run under "
                   "mocks, e.g. acme/scheduler-dedup/store=Pulumi.store.yaml; repeatable.")
def check(program: Path | None, stack: str | None, config_file: Path | None, policy_config: Path | None,
          stack_refs: tuple[str, ...]) -> None:
    """Run a Pulumi program under Pulumi mocks and apply the policy pack offline; exit 1 on a mandatory violation.

    The program is the one of the Pulumi.yaml in this folder (or above), or the one --program names; this
    project's root stack only when there is none."""
    from scheduler_dedup.local.commands.console import make_console
    from scheduler_dedup.policies.offline.check import run_check

    refs = []
    for item in stack_refs:
        name, sep, file = item.partition("=")
        if not sep or not name or not Path(file).is_file():
            raise click.BadParameter(f"{item!r}: give NAME=FILE with an existing stack config file", param_hint="--stack-ref")
        refs.append((name, Path(file)))
    sys.exit(run_check(stack=stack, config_file=config_file, policy_config=policy_config, stack_refs=refs,
                       console=make_console(), program=program))


if __name__ == "__main__":
    main()
