"""``scripts/e2e-gcp PROJECT``: a one-command proof of a deploy on a maintainer's sandbox project, with the Pulumi
and gcloud CLIs: deploy examples/hello_job on each store asked for, force runs and duplicate deliveries, check one
execution per run (run records and the job's log), read the alert policies back, then destroy everything and check
that nothing billable is left. ``--dry-run`` prints every call, in order, and runs none (:func:`plan` is the order).

It has never run against a real project from this repository (README, "What was and was not verified").
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from scheduler_dedup.handler.core.logs import LogEvent, LogField

ROOT = Path(__file__).resolve().parents[2]
STORES = ("firestore", "spanner", "memorystore")
#: The fire time both duplicate deliveries name: a past instant, so the handler keys it as a scheduled run.
DUPLICATE_TIME = "2026-01-01T00:00:00Z"
_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


@dataclass(frozen=True)
class Ref:
    """A value an earlier step captured: ``key`` of the JSON that step ``source`` printed (the whole text without)."""

    source: str
    key: str | None = None

    def __str__(self) -> str:
        return f"<{self.source}{'.' + self.key if self.key else ''}>"


Arg = str | Ref
#: Judges a step's output (stdout, every capture so far): a problem in words, or None.
Check = Callable[[str, Mapping[str, str]], "str | None"]


@dataclass(frozen=True)
class Step:
    """One call of the proof.

    Attributes:
        phase: ``deploy``, ``run``, ``check``, ``alerts``, ``destroy`` or ``verify`` (in this order).
        argv: the command; :class:`Ref` parts are filled from earlier captures.
        why: what the step proves or does, for the printout.
        capture: name its stdout is kept under, for later :class:`Ref` s.
        check: judges its stdout; a problem fails the proof (destroy still runs).
        secret: its stdout is a credential: never printed.
    """

    phase: str
    argv: tuple[Arg, ...]
    why: str
    capture: str | None = None
    check: Check | None = None
    secret: bool = False


@dataclass(frozen=True)
class StackPlan:
    """The stacks of one store: ``job`` and, for Memorystore, its ``store`` stack (deployed first, destroyed last)."""

    store: str
    job: str
    config: dict[str, str]
    store_stack: str | None = None
    store_config: dict[str, str] = field(default_factory=dict)


def stacks(project: str, region: str, stores: Sequence[str], run_id: str, channel: str, org: str) -> list[StackPlan]:
    """The stacks to deploy, one job per store, every name carrying ``run_id`` (what verify looks for)."""
    found = []
    for store in stores:
        name = f"e2e-{store[:2]}-{run_id}"
        config = {"gcp:project": project, "scheduler-dedup:name": name, "scheduler-dedup:region": region,
                  "scheduler-dedup:schedule": "*/10 * * * *", "scheduler-dedup:timeZone": "Etc/UTC",
                  "scheduler-dedup:jobSource": "examples/hello_job", "scheduler-dedup:job": "jobs:run",
                  "scheduler-dedup:protectDatabase": "false", "scheduler-dedup:alertNotificationChannels": channel}
        if store == "firestore":
            found.append(StackPlan(store, name, {**config, "scheduler-dedup:databaseId": f"{name}-runs",
                                                 "scheduler-dedup:databaseLocation": region}))
        elif store == "spanner":
            found.append(StackPlan(store, name, {**config, "scheduler-dedup:storeKind": "spanner"}))
        else:
            store_stack = f"{name}-store"
            found.append(StackPlan(store, name, {
                **config, "scheduler-dedup:storeKind": "memorystore",
                "scheduler-dedup:storeStack": f"{org}/scheduler-dedup/{store_stack}"}, store_stack, {
                "gcp:project": project, "scheduler-dedup:deploy": "store", "scheduler-dedup:storeKind": "memorystore",
                "scheduler-dedup:name": store_stack, "scheduler-dedup:region": region,
                "scheduler-dedup:protectDatabase": "false"}))
    return found


def _deploy(stack: str, config: Mapping[str, str]) -> Iterator[Step]:
    yield Step("deploy", ("pulumi", "stack", "init", stack, "--non-interactive"), f"a new stack {stack}")
    for key, value in config.items():
        path = ("--path",) if key.endswith("alertNotificationChannels") else ()
        yield Step("deploy", ("pulumi", "config", "set", *path,
                              f"{key}[0]" if path else key, value, "--stack", stack), f"{key} of {stack}")
    yield Step("deploy", ("pulumi", "up", "--yes", "--skip-preview", "--stack", stack), f"deploy {stack}")
    yield Step("deploy", ("pulumi", "stack", "output", "--json", "--stack", stack), f"{stack}'s outputs",
               capture=stack)


def _executions(source: str) -> Check:
    """A check that no run executed twice and at least one ran: in the job's log (``log``: delivery lines with
    ``executed: true``, counted per run id) or in its run records (``records``: ``runs --json``, one record per run,
    completed on its first attempt: a second delivery of it was a duplicate, never a second claim)."""
    def check(out: str, captured: Mapping[str, str]) -> str | None:
        counts: dict[str, int] = {}
        for entry in (_json_line(line) for line in out.splitlines()):
            if not isinstance(entry, dict):
                continue
            if source == "log":
                payload = entry.get("jsonPayload") or {}
                if payload.get(LogField.EXECUTED) is True:
                    run = str(payload.get(LogField.RUN_ID, "?"))
                    counts[run] = counts.get(run, 0) + 1
            elif entry.get("run_id"):
                counts[entry["run_id"]] = int(entry.get("attempts") or 1) if entry.get("status") == "completed" else 0
        twice = sorted(run for run, n in counts.items() if n > 1)
        if twice:
            return f"runs executed more than once ({source}): {', '.join(twice)}"
        return None if any(counts.values()) else f"no completed run found in the {source}"
    return check


def _answered(status: str) -> Check:
    """A check that the handler's answer is ``status`` (the first delivery ran the job, the second did not)."""
    def check(out: str, captured: Mapping[str, str]) -> str | None:
        got = _json_line(out).get("status") if isinstance(_json_line(out), dict) else None
        return None if got == status else f"the handler answered {out.strip()[:200]!r}, not status {status!r}"
    return check


def _json_line(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return {}


def _flattened_json(out: str) -> str:
    """gcloud's ``--format=json`` list as one JSON object per line (the checks read lines)."""
    try:
        return "\n".join(json.dumps(entry) for entry in json.loads(out or "[]"))
    except ValueError:
        return out


def _nothing_listed(what: str) -> Check:
    def check(out: str, captured: Mapping[str, str]) -> str | None:
        listed = json.loads(out or "[]") if out.strip().startswith("[") else [out] if out.strip() else []
        return f"{what} left behind: {json.dumps(listed)[:300]}" if listed else None
    return check


def _policies_found(name: str) -> Check:
    def check(out: str, captured: Mapping[str, str]) -> str | None:
        listed = json.loads(out or "[]")
        return None if listed else f"no alert policy of {name} read back"
    return check


def plan(project: str, *, region: str, stores: Sequence[str], run_id: str, channel: str, org: str) -> list[Step]:
    """Every call of the proof, in order: deploy (store stacks first), run, check, alerts, destroy (job stacks
    first), verify. Every gcloud call names ``project``; every stack's ``gcp:project`` is ``project``."""
    planned = stacks(project, region, stores, run_id, channel, org)
    where = ("--project", project)
    steps: list[Step] = []
    for p in planned:
        if p.store_stack:
            steps += _deploy(p.store_stack, p.store_config)
        steps += _deploy(p.job, p.config)
    for p in planned:
        job = Ref(p.job, "job_name")
        steps.append(Step("run", ("gcloud", "scheduler", "jobs", "run", job, "--location", region, *where),
                          f"force a run of {p.job}'s Scheduler job"))
        steps.append(Step("run", ("gcloud", "auth", "print-identity-token", "--impersonate-service-account",
                                  Ref(p.job, "scheduler_service_account_email"), "--audiences",
                                  Ref(p.job, "oidc_audience"), "--include-email"),
                          "an ID token of the Scheduler identity, with its email (the handler admits that one caller; needs "
                          "roles/iam.serviceAccountTokenCreator on it)",
                          capture=f"{p.job}-token", secret=True))
        for n in (1, 2):
            steps.append(Step("run", (
                "curl", "--fail-with-body", "-sS", "-X", "POST", Ref(p.job, "service_url"),
                "-H", Ref(f"{p.job}-token"), "-H", "X-CloudScheduler-JobName: " + p.job,
                "-H", f"X-CloudScheduler-ScheduleTime: {DUPLICATE_TIME}", "-H", f"X-Dedup-Project: {project}",
                "-H", f"X-Dedup-Location: {region}"), f"delivery {n} of one fire time, same headers",
                check=_answered("processed" if n == 1 else "duplicate")))
    steps.append(Step("run", ("sleep", "120"), "let the forced runs finish and the log lines arrive"))
    for p in planned:
        if p.store != "memorystore":  # a Memorystore instance answers only inside its VPC: its log says it
            # the job's own Spanner instance and database take the component's default ids
            store_args = (("--store", "spanner", "--instance", f"{p.job}-dedup", "--database", f"{p.job}-dedup")
                          if p.store == "spanner" else ("--database", f"{p.job}-runs"))
            steps.append(Step("check", ("scheduler-dedup", "runs", "--job", p.job, "--project", project, *store_args,
                                        "--since", "400d", "--no-report", "--json"),
                              f"{p.job}'s run records: one record per run", check=_executions("records")))
        log_filter = (f'resource.type="cloud_run_revision" AND resource.labels.service_name="{p.job}" AND '
                      f'jsonPayload.{LogField.EVENT}="{LogEvent.DELIVERY}"')
        steps.append(Step("check", ("gcloud", "logging", "read", log_filter, "--freshness", "1d", "--format", "json",
                                    *where), f"{p.job}'s log: each run id executed once", check=_executions("log")))
    for p in planned:
        steps.append(Step("alerts", ("gcloud", "monitoring", "policies", "list", "--filter",
                                     f'displayName:"scheduler-dedup {p.job}:"', "--format", "json", *where),
                          f"{p.job}'s alert policies, read back", check=_policies_found(p.job)))
    for p in planned:
        for stack in (p.job, *((p.store_stack,) if p.store_stack else ())):
            steps.append(Step("destroy", ("pulumi", "destroy", "--yes", "--skip-preview", "--stack", stack),
                              f"destroy {stack}"))
            steps.append(Step("destroy", ("pulumi", "stack", "rm", "--yes", "--stack", stack), f"remove {stack}"))
    # (command, what, the field of its listed objects that carries the name): gcloud lists Cloud Run services as
    # Admin API v1 objects (metadata.name), alert policies are named by number (their display name carries the stack's)
    verify = [
        (("gcloud", "run", "services", "list", "--region", region), "Cloud Run services", "metadata.name"),
        (("gcloud", "scheduler", "jobs", "list", "--location", region), "Scheduler jobs", "name"),
        (("gcloud", "storage", "buckets", "list"), "buckets", "name"),
        (("gcloud", "artifacts", "repositories", "list", "--location", region), "image repositories", "name"),
        (("gcloud", "firestore", "databases", "list"), "Firestore databases", "name"),
        (("gcloud", "spanner", "instances", "list"), "Spanner instances", "name"),
        (("gcloud", "redis", "instances", "list", "--region", region), "Memorystore instances", "name"),
        (("gcloud", "monitoring", "policies", "list"), "alert policies", "displayName"),
        (("gcloud", "iam", "service-accounts", "list"), "service accounts", "name"),
    ]
    for argv, what, key in verify:
        steps.append(Step("verify", (*argv, "--filter", f"{key}~e2e-..-{run_id}", "--format", "json", *where),
                          f"no {what} of this proof left", check=_nothing_listed(what)))
    return steps


def resolve(arg: Arg, captured: Mapping[str, str]) -> str:
    """``arg`` with a :class:`Ref` filled from ``captured`` (an ID token becomes an Authorization header)."""
    if not isinstance(arg, Ref):
        return arg
    text = captured[arg.source]
    if arg.key is None:
        return f"Authorization: Bearer {text.strip()}" if arg.source.endswith("-token") else text.strip()
    value = json.loads(text).get(arg.key, "")
    return value.rsplit("/", 1)[-1] if arg.key == "job_name" else str(value)


def execute(steps: Sequence[Step], *, dry_run: bool, echo: Callable[[str], None]) -> int:
    """Run (or, with ``dry_run``, print) every step; after a failure skip to destroy, which always runs.

    Returns:
        0 when every step ran and every check passed, else 1.
    """
    captured: dict[str, str] = {}
    failed = False
    for n, step in enumerate(steps, 1):
        if failed and step.phase not in ("destroy", "verify"):
            continue
        shown = shlex.join(str(a) for a in step.argv)
        echo(f"[{n:3}] {step.phase:7} {shown}\n        # {step.why}")
        if dry_run:
            continue
        argv = [resolve(a, captured) for a in step.argv]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        out = _flattened_json(done.stdout) if step.check and "logging" in argv else done.stdout
        if step.capture:
            captured[step.capture] = done.stdout
        problem = (f"exit {done.returncode}: {done.stderr.strip()[-500:]}" if done.returncode != 0
                   else step.check(out, captured) if step.check else None)
        if problem:
            echo(f"        FAILED: {problem}")
            failed = True
        elif not step.secret and done.stdout.strip() and step.phase in ("check", "alerts"):
            echo(f"        ok ({len(done.stdout.splitlines())} lines)")
    return 1 if failed else 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("project")
@click.option("--store", "stores", default="firestore", show_default=True,
              help="stores to prove, comma-separated: firestore, spanner, memorystore.")
@click.option("--region", default="us-central1", show_default=True, help="region of every resource.")
@click.option("--notification-channel", default=None,
              help="projects/PROJECT/notificationChannels/N the alert policies notify (required unless --dry-run).")
@click.option("--org", default="organization", show_default=True,
              help="Pulumi organization of the stacks (the local backend's is 'organization').")
@click.option("--run-id", default=None, help="suffix of every name [default: random].")
@click.option("--dry-run", is_flag=True, help="print every call in order; run none.")
def main(project: str, stores: str, region: str, notification_channel: str | None, org: str, run_id: str | None,
         dry_run: bool) -> None:
    """Deploy examples/hello_job on a sandbox PROJECT, prove one execution per run, destroy everything.

    Needs the Pulumi and gcloud CLIs, logged in, and rights to deploy the stack (docs/deploying.md, "What the
    deployer needs"). Everything it creates is named e2e-<fi|sp|me>-<run id> and destroyed at the end, also after a
    failed step; the last calls list what is left. Exit 1 if a step or a check failed.
    """
    asked = [s.strip() for s in stores.split(",") if s.strip()]
    unknown = sorted(set(asked) - set(STORES))
    if unknown or not asked:
        raise click.BadParameter(f"{', '.join(unknown) or 'none'}: use {', '.join(STORES)}", param_hint="--store")
    if not _PROJECT_RE.match(project):
        raise click.BadParameter(f"{project!r} is not a project id", param_hint="PROJECT")
    channel = notification_channel or (f"projects/{project}/notificationChannels/CHANNEL" if dry_run else None)
    if channel is None or not channel.startswith(f"projects/{project}/notificationChannels/"):
        raise click.BadParameter(f"a channel of {project} is required: projects/{project}/notificationChannels/N "
                                 "(`gcloud beta monitoring channels list`)", param_hint="--notification-channel")
    steps = plan(project, region=region, stores=list(dict.fromkeys(asked)), run_id=run_id or secrets.token_hex(3),
                 channel=channel, org=org)
    sys.exit(execute(steps, dry_run=dry_run, echo=click.echo))


if __name__ == "__main__":
    main()
