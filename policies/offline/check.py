"""The offline policy check (``scheduler-dedup check``): the pack's rules without the Pulumi CLI or cloud credentials.

It runs a stack program under Pulumi mocks with a stack config: the program of the ``Pulumi.yaml`` in the working
directory (or above it), or the one ``--program`` names, else this project's root stack
(:func:`scheduler_dedup.infra.stack.mock_run.run_stack_config`); it feeds every registered resource and the
stack to the same rule functions the policy pack runs (:func:`scheduler_dedup.policies.rules.evaluate`),
prints a table of violations (rule, resource, level, message) and returns the exit code: 1 on any
mandatory violation, 0 otherwise, 2 for usage errors.

Differences from ``pulumi preview --policy-pack policies``: properties are the mocks' values (the
component's inputs plus plausible outputs such as the service URL), never unknown; a config the component
refuses at construction time (``DedupConfigError``) is reported as mandatory rows of the pseudo-rule
``component-config``, one per problem, each naming the field and the fix, exactly what ``pulumi preview`` would
fail with. A ``scheduler-dedup:*`` (or program-namespace) key of the stack file that the program never reads is a
mandatory row of ``unread-config`` naming the key and the keys the program does read; a ``pulumi.log`` warning the
program gives shows once: as the rule's row that says the same, else as a ``program-warning`` row.
"""

from __future__ import annotations

import json
import logging
import os
import runpy
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.offline.policy_config import PolicyConfigError, check_policy_config
from scheduler_dedup.policies.rules import Finding, evaluate

if TYPE_CHECKING:
    from scheduler_dedup.infra.errors import DedupConfigError

COMPONENT_CONFIG_RULE = "component-config"
"""Pseudo-rule of the row reported when the component refuses the stack config."""

PROGRAM_ERROR_RULE = "program-error"
"""Pseudo-rule of the row reported when the program fails for another reason."""

UNREAD_CONFIG_RULE = "unread-config"
"""Pseudo-rule of the row reported for a stack config key the program never reads (it would have no effect)."""

PROGRAM_WARNING_RULE = "program-warning"
"""Pseudo-rule of the row of a ``pulumi.log.warn`` message of the program that no rule's row already gives."""


#: This source checkout's root ``Pulumi.yaml`` (editable install), the program checked when none is named.
ROOT_PROJECT_FILE = Path(__file__).resolve().parents[2] / "Pulumi.yaml"


def find_project_file(start: Path | None = None) -> Path | None:
    """The ``Pulumi.yaml`` of the program to check: ``start`` itself (a ``Pulumi.yaml`` or the folder holding one),
    else the nearest one from ``start`` (default: the working directory) upwards, else this checkout's root one
    (:data:`ROOT_PROJECT_FILE`), else None."""
    here = (start or Path.cwd()).resolve()
    if here.is_file():
        return here
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder / "Pulumi.yaml"
    return ROOT_PROJECT_FILE if ROOT_PROJECT_FILE.is_file() else None


def is_root_project(project_file: Path | None) -> bool:
    """True when ``project_file`` is this project's root ``Pulumi.yaml`` (its program: the root stack)."""
    return project_file is None or project_file.resolve() == ROOT_PROJECT_FILE.resolve()


def program_entry(project_file: Path) -> Path:
    """The entry file of the Python program of ``project_file``: ``__main__.py`` in its ``main:`` folder (default the
    project folder), or ``main:`` itself when it names a file, as the Pulumi CLI runs it
    (https://www.pulumi.com/docs/iac/concepts/projects/project-file/, ``main``).

    Raises:
        ProgramNotFoundError: the project is not a Python program, or its entry file does not exist.
    """
    from scheduler_dedup.infra.stack.mock_run import _read_yaml_mapping

    project = _read_yaml_mapping(project_file, "config")
    runtime = project.get("runtime")
    name = runtime.get("name") if isinstance(runtime, Mapping) else runtime
    if name != "python":
        raise ProgramNotFoundError(f"{project_file}: runtime {name!r} is not python; the offline check runs Python "
                                   f"programs only (run `pulumi preview --policy-pack policies` for others)")
    entry = project_file.parent / str(project.get("main") or ".")
    entry = entry / "__main__.py" if entry.is_dir() else entry
    if not entry.is_file():
        raise ProgramNotFoundError(f"{project_file}: its program {entry} does not exist (Pulumi runs __main__.py in "
                                   f"the project folder, or the file or folder 'main:' names)")
    return entry


class ProgramNotFoundError(ValueError):
    """The program a ``Pulumi.yaml`` names cannot be run offline; the message names the file and the fix."""


def project_program(project_file: Path) -> Callable[[], None]:
    """The program of ``project_file`` as a callable for :func:`~scheduler_dedup.infra.stack.mock_run.run_program`:
    its entry file run as ``__main__`` with its folder as working directory and first on ``sys.path``, as the
    Pulumi CLI's Python host runs it.

    Raises:
        ProgramNotFoundError: see :func:`program_entry`.
    """
    entry = program_entry(project_file)

    def run() -> None:
        folder, cwd, path = str(entry.parent), os.getcwd(), list(sys.path)
        os.chdir(folder)
        sys.path.insert(0, folder)
        try:
            runpy.run_path(str(entry), run_name="__main__")
        finally:
            os.chdir(cwd)
            sys.path[:] = path

    return run


def resources_from_registered(registered: Sequence[Any]) -> list[Resource]:
    """:class:`Resource` values from :class:`scheduler_dedup.infra.stack.mock_run.RegisteredResource` records.

    Properties are the mocked state (the inputs in engine names plus the mocked outputs, e.g. a Cloud Run
    service's ``uri``), as the engine's stack analysis would see them after an update.
    """
    return [Resource(type=r.type, name=r.name, urn=r.urn, props=dict(r.state or r.inputs), parent=r.parent or None,
                     dependencies={key: list(urns) for key, urns in r.property_dependencies.items()})
            for r in registered]


def check_program(program: Callable[[], Any], config: Mapping[str, str] | None = None,
                  policy_config: Mapping[str, Any] | None = None) -> list[Finding]:
    """Run any Pulumi program under mocks (e.g. one written with raw pulumi-gcp resources) and apply the rules; a
    ``pulumi.log`` warning of the program that no rule's finding gives is an advisory ``program-warning`` finding
    (:func:`with_program_warnings`), never printed.

    Args:
        program: the program body; it registers resources.
        config: stack config as ``{"ns:key": "value"}``.
        policy_config: rule name -> level or config object, as in a ``--policy-pack-config`` file.
    """
    from scheduler_dedup.infra.stack.mock_run import run_program

    warnings = _WarningLog()
    registered = run_program(program, dict(config or {}), logger=warnings.logger)
    return with_program_warnings(evaluate(resources_from_registered(registered), policy_config), warnings.messages)


class _WarningLog(logging.Handler):
    """The program's ``pulumi.log`` warnings and errors under mocks, kept for the table instead of printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger(f"{__name__}.program.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def with_program_warnings(findings: list[Finding], warnings: Sequence[str], *,
                          wording: Callable[[str], str] = str) -> list[Finding]:
    """``findings`` plus one advisory ``program-warning`` row per warning that no finding already says, so each is
    printed once. The component warns each advisory that the pack's rule of the same concern reports, in the same
    words after the field it names first (``time_zone 'UTC' is an alias...``, the rule: ``timeZone 'UTC' is...``).
    ``wording`` rewrites a row's message (the root stack's: in stack config keys)."""
    said = [" ".join(f.message.split()) for f in findings]
    extra = []
    for warning in dict.fromkeys(" ".join(w.split()) for w in warnings):
        after_field = warning.split(" ", 1)[-1]
        if warning and not any(warning in message or after_field in message for message in said):
            extra.append(Finding(PROGRAM_WARNING_RULE, "advisory", None, wording(f"the program warns: {warning}")))
    return [*findings, *extra]


def unread_config_findings(config_file: Path, project: str, read_keys: set[str], *, stopped: bool,
                           already_named: Sequence[str] = ()) -> list[Finding]:
    """One mandatory ``unread-config`` finding per key of ``config_file`` in the ``scheduler-dedup`` or ``project``
    namespace that the program never looked up: Pulumi passes it without a word and it has no effect (a typo, or a
    root-stack key in a program that builds its own arguments).

    Each names the key and, of the keys the program reads, the same name in another namespace or the closest one,
    else all of them. Keys another row already names (``already_named``: its messages) are left out. ``stopped``:
    the program raised, so it may read a key after the point it stopped at; the message says so.
    """
    import difflib

    from scheduler_dedup.infra.stack.mock_run import PROJECT_NAME, _read_yaml_mapping

    namespaces = {PROJECT_NAME, project}
    written = [key if ":" in key else f"{PROJECT_NAME}:{key}"
               for key in (_read_yaml_mapping(config_file, "config").get("config") or {})]
    read = sorted(k for k in read_keys if k.partition(":")[0] in namespaces)
    findings = []
    for full_key in written:
        namespace, _, key = full_key.partition(":")
        if namespace not in namespaces or full_key in read_keys or any(full_key in m for m in already_named):
            continue
        same_name = [k for k in read if k.partition(":")[2] == key]
        close = difflib.get_close_matches(key, [k.partition(":")[2] for k in read], n=1, cutoff=0.6)
        if same_name:
            hint = f"it reads {same_name[0]}: rename the key"
        elif close:
            hint = f"did you mean {next(k for k in read if k.partition(':')[2] == close[0])}?"
        elif read:
            hint = f"the keys it reads: {', '.join(read)}"
        else:
            hint = (f"it reads no {' or '.join(f'{n}:*' for n in sorted(namespaces))} key: its settings are in its "
                    f"code, so set this one there")
        when = " before it stopped (a key it reads later shows here too)" if stopped else ""
        findings.append(Finding(UNREAD_CONFIG_RULE, "mandatory", None,
                                f"stack config {full_key} is set in {config_file.name}, but the program never reads "
                                f"it{when}, so it has no effect; {hint}; or remove it, or have the program read it "
                                f"(pulumi.Config({namespace!r}).get({key!r}))"))
    return findings


def check_stack_config(config_file: Path, project_file: Path | None,
                       policy_config: Mapping[str, Any] | None = None,
                       stack_outputs: Mapping[str, Mapping[str, Any]] | None = None) -> list[Finding]:
    """Run the program of ``project_file`` (this project's root program when it is the root ``Pulumi.yaml`` or None)
    for ``config_file`` under mocks and apply the rules.

    ``stack_outputs`` answers the program's ``StackReference`` s (a job stack's ``storeStack``), per stack name.

    A config the component refuses (:class:`~scheduler_dedup.infra.errors.DedupConfigError`) yields one
    mandatory ``component-config`` finding per problem (every problem at once); any other program failure one
    mandatory ``program-error`` finding.
    """
    from scheduler_dedup.infra.errors import DedupConfigErrors

    read_keys: set[str] = set()
    warnings = _WarningLog()
    try:
        registered = _run_config(config_file, project_file, stack_outputs, read_keys=read_keys, logger=warnings.logger)
    except Exception as error:  # noqa: BLE001 - reported as rows, never a traceback
        cause = _config_error_in(error)
        if cause is not None:
            refused = [Finding(COMPONENT_CONFIG_RULE, "mandatory", None,
                               f"the DedupScheduledJob component refuses this config: {each}")
                       for each in (cause.errors if isinstance(cause, DedupConfigErrors) else (cause,))]
        else:
            refused = [Finding(PROGRAM_ERROR_RULE, "mandatory", None,
                               f"the stack program failed under mocks: {type(error).__name__}: {error}")]
        # the root program refuses an unknown key before it stops (program._unknown_keys); another program may
        # still read a key after the point it stopped at, which the row says
        unread = [] if is_root_project(project_file) else unread_config_findings(
            config_file, _project_name(project_file), read_keys, stopped=True, already_named=[f.message for f in refused])
        return with_program_warnings([*refused, *unread], warnings.messages)
    findings = evaluate(resources_from_registered(registered), policy_config)
    wording: Callable[[str], str] = str
    if is_root_project(project_file):
        from scheduler_dedup.infra.stack.program import in_stack_config_terms

        findings, wording = [_in_stack_config_terms(finding) for finding in findings], in_stack_config_terms
    unread = unread_config_findings(config_file, _project_name(project_file), read_keys, stopped=False)
    return with_program_warnings([*unread, *findings], warnings.messages, wording=wording)


def _project_name(project_file: Path | None) -> str:
    """The ``name:`` of ``project_file`` (its program's own config namespace); this project's for the root."""
    from scheduler_dedup.infra.stack.mock_run import PROJECT_NAME, _read_yaml_mapping

    if project_file is None or is_root_project(project_file):
        return PROJECT_NAME
    return str(_read_yaml_mapping(project_file, "config").get("name") or "project")


def _run_config(config_file: Path, project_file: Path | None,
                stack_outputs: Mapping[str, Mapping[str, Any]] | None, *, read_keys: set[str] | None = None,
                logger: logging.Logger | None = None) -> Any:
    from scheduler_dedup.infra.stack.mock_run import run_program, run_stack_config, stack_config_from_file

    if project_file is None or is_root_project(project_file):
        return run_stack_config(config_file, project_file=project_file, stack_outputs=stack_outputs,
                                read_keys=read_keys, logger=logger)
    program = project_program(project_file)
    stack = config_file.name.split(".")[1] if config_file.name.count(".") >= 2 else "mock"
    return run_program(program, stack_config_from_file(config_file, project_file), project=_project_name(project_file),
                       stack=stack, stack_outputs=stack_outputs, read_keys=read_keys, logger=logger)


#: Resource properties (as rule messages name them) that the root stack sets, and the component input behind
#: each; :func:`scheduler_dedup.infra.stack.program.stack_key_for` turns the input into the stack config key.
PROPERTY_INPUTS: dict[str, str] = {
    "template.timeout": "request_timeout_seconds",
    "attemptDeadline": "attempt_deadline_seconds",
    "DEDUP_LEASE_SECONDS": "lease_seconds",
    "DEDUP_RETENTION_SECONDS": "retention_seconds",
    "DEDUP_MANUAL_TOLERANCE_SECONDS": "manual_tolerance_seconds",
    "DEDUP_TARGET_AUDIENCE": "http_target.audience",
    "retryCount": "retry.retry_count",
    "minBackoffDuration": "retry.min_backoff_seconds",
    "maxBackoffDuration": "retry.max_backoff_seconds",
    "maxRetryDuration": "retry.max_retry_duration_seconds",
    "maxDoublings": "retry.max_doublings",
    "timeZone": "time_zone",
    "oidcToken.audience": "oidc_audience",
}


def _in_stack_config_terms(finding: Finding) -> Finding:
    """``finding`` with the stack config key of each root-stack property its message names appended."""
    from scheduler_dedup.infra.stack.program import PROJECT_NAME, stack_key_for

    keys = []
    for prop, field in PROPERTY_INPUTS.items():
        key = stack_key_for(field)
        if prop in finding.message and key and f"{PROJECT_NAME}:{key}" not in keys:
            keys.append(f"{PROJECT_NAME}:{key}")
    if not keys:
        return finding
    return Finding(finding.rule, finding.level, finding.resource,
                   f"{finding.message} (in this stack's config: {', '.join(keys)})")


def _config_error_in(error: BaseException) -> "DedupConfigError | None":
    """The DedupConfigError behind ``error`` (Pulumi's test runner may wrap it), if any."""
    from scheduler_dedup.infra.errors import DedupConfigError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, DedupConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def render(findings: Sequence[Finding], console: Console, title: str) -> None:
    """Print ``findings`` as a table (rule, resource, level, message) and a one-line summary."""
    mandatory = sum(1 for f in findings if f.level == "mandatory")
    if not findings:
        console.print(f"[green]{title}: no policy violations[/green]")
        return
    table = Table(title=title, show_lines=True)
    table.add_column("rule", overflow="fold")
    table.add_column("resource", overflow="fold")
    table.add_column("level", no_wrap=True)
    table.add_column("message", overflow="fold", ratio=3)
    for finding in sorted(findings, key=lambda f: (f.level != "mandatory", f.rule)):
        style = "red" if finding.level == "mandatory" else "yellow"
        table.add_row(finding.rule, finding.resource_label, f"[{style}]{finding.level}[/{style}]", finding.message)
    console.print(table)
    console.print(f"{mandatory} mandatory, {len(findings) - mandatory} advisory violation(s)")


def run_check(stack: str | None, config_file: Path | None, *, policy_config: Path | None = None,
              stack_refs: Sequence[tuple[str, Path]] = (), console: Console,
              program: Path | None = None) -> int:
    """Check a stack config offline and print the violations.

    Args:
        stack: stack name: reads ``Pulumi.<stack>.yaml`` beside the program's ``Pulumi.yaml``.
        config_file: a stack config file instead (``Pulumi.<stack>.yaml`` format); the ``Pulumi.yaml``
            beside it supplies defaults and names the program, else the program's.
        program: the program to check: its folder or its ``Pulumi.yaml``. Default: the ``Pulumi.yaml`` in the
            working directory or above it, else this project's root stack (:func:`find_project_file`).
        policy_config: optional JSON file in ``pulumi preview --policy-pack-config`` format (rule name ->
            ``"advisory"``/``"mandatory"``/``"disabled"`` or ``{"enforcementLevel": ..., <config>}``).
        stack_refs: ``(stack name, its config file)`` pairs: each config runs under mocks first, and its exports
            answer the checked program's ``StackReference`` to that name (a job stack's ``storeStack``).
        console: where to print (the command line passes
            :func:`~scheduler_dedup.local.commands.console.make_console`'s).

    Returns:
        1 if any mandatory violation, 0 otherwise, 2 for usage errors (neither or both of ``stack`` and
        ``config_file``, a missing file, a stack config or ``--stack-ref`` file that is not valid YAML or not
        stack config, a ``storeStack`` without its ``--stack-ref``, an unreadable policy config, or one naming an unknown policy, level
        or setting, or giving a threshold out of range: :func:`~scheduler_dedup.policies.offline.policy_config.check_policy_config`).
    """
    out = console
    if (stack is None) == (config_file is None):
        out.print("[red]give exactly one of --stack NAME or --config FILE[/red]")
        return 2
    if program is not None and not (Path(program) if Path(program).is_file() else Path(program) / "Pulumi.yaml").is_file():
        out.print(f"[red]--program {program}: no Pulumi.yaml there; give the folder of your Pulumi.yaml or the file[/red]")
        return 2
    root_project = find_project_file(Path(program) if program is not None else None)
    if stack is not None:
        if root_project is None:
            out.print("[red]no Pulumi.yaml found in this folder or above: run from the project, or use --config FILE[/red]")
            return 2
        path = root_project.parent / f"Pulumi.{stack}.yaml"
        project_file: Path | None = root_project
    else:
        assert config_file is not None
        path = Path(config_file)
        beside = path.resolve().parent / "Pulumi.yaml"
        project_file = beside if beside.is_file() and program is None else root_project
    if not path.is_file():
        out.print(f"[red]stack config {path} does not exist[/red]")
        return 2
    levels: Mapping[str, Any] | None = None
    if policy_config is not None:
        try:
            levels = json.loads(Path(policy_config).read_text())
            check_policy_config(levels)
        except PolicyConfigError as error:
            out.print(f"[red]policy config {policy_config}: {escape(str(error))}[/red]", highlight=False)
            return 2
        except (OSError, ValueError) as error:
            out.print(f"[red]cannot read policy config {policy_config}: {error}[/red]")
            return 2
    from scheduler_dedup.infra.stack.mock_run import PROJECT_NAME, StackConfigFileError, stack_config_from_file

    try:  # a file that is not stack config is a usage error naming it, never a program-error row or a traceback
        for file in [*(Path(file) for _, file in stack_refs), path]:
            flat = stack_config_from_file(file.resolve(), project_file)
    except StackConfigFileError as error:
        out.print(f"[red]{error}[/red]", highlight=False)
        return 2
    store_stack = flat.get(f"{PROJECT_NAME}:storeStack")
    if store_stack and store_stack not in {name for name, _ in stack_refs}:
        out.print(f"[red]{path} sets {PROJECT_NAME}:storeStack {store_stack}: the check needs that stack's outputs; "
                  f"give its stack config, e.g. --stack-ref {store_stack}=Pulumi.store.yaml[/red]", highlight=False)
        return 2
    if project_file is not None and not is_root_project(project_file):
        try:
            program_entry(project_file)
        except (ProgramNotFoundError, StackConfigFileError) as error:
            out.print(f"[red]{error}[/red]", highlight=False)
            return 2
    quiet = _WarningLog().logger  # a referenced stack's own warnings belong to its own check
    outputs = {name: _run_config(Path(file).resolve(), project_file, None, logger=quiet).exports
               for name, file in stack_refs}
    findings = check_stack_config(path.resolve(), project_file, levels, outputs)
    which = "" if is_root_project(project_file) else f" (program {project_file.parent if project_file else ''})"
    render(findings, out, f"policy check of {path}{which}")
    return 1 if any(f.level == "mandatory" for f in findings) else 0
