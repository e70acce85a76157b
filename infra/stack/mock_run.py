"""Run the root stack program under ``pulumi.runtime.set_mocks`` and return what it registered.

Shared by this package's tests and the offline policy checker (``scheduler-dedup check``):

    from scheduler_dedup.infra.stack.mock_run import run_stack_config
    resources = run_stack_config("Pulumi.example.yaml")
    for r in resources:
        print(r.type, r.name, r.parent, r.inputs)

No Pulumi CLI and no cloud access is needed. Mocked outputs are plausible values (service
account emails, a run.app URL), derived from the inputs, so ``Output`` chains resolve. A
``StackReference`` answers with the outputs given for that stack name (``stack_outputs``), e.g.
those another stack program exported (:attr:`MockRun.exports`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks

from scheduler_dedup.infra.stack.program import PROJECT_NAME, main


@dataclass
class RegisteredResource:
    """One resource the program registered.

    Attributes:
        type: type token, e.g. ``gcp:cloudscheduler/job:Job``.
        name: logical (Pulumi) name.
        inputs: the inputs as sent to the engine (Pulumi property names, camelCase), outputs resolved.
        parent: URN of the parent resource ('' for the stack's direct children).
        urn: this resource's URN.
        custom: False for component resources.
        state: the mocked outputs returned for it.
        protect: the resource option ``protect`` (a plan deleting or replacing it would fail).
        dependencies: URNs of the resources it waits for (``depends_on``, and those whose outputs are its inputs).
        ignore_changes: the resource option ``ignore_changes`` (inputs whose changes a later update keeps as they were).
        property_dependencies: input name -> URNs of the resources its value came from (the engine's property
            dependencies, which the policy pack reads too: ``role=custom_role.name`` depends on the custom role).
    """

    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    urn: str
    custom: bool
    state: dict[str, Any] = field(default_factory=dict)
    protect: bool = False
    dependencies: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)


class _Mocks(Mocks):
    def __init__(self, stack_outputs: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.stack_outputs = dict(stack_outputs or {})
        self.providers: dict[str, dict[str, Any]] = {}  # an explicit provider's id -> its inputs

    def provider_project(self, reference: str) -> Any:
        """The ``project`` of the provider a call names (``URN::ID``): an explicit one's input, else ``gcp:project``."""
        inputs = self.providers.get(reference.rsplit("::", 1)[-1]) if reference else None
        if inputs is not None:
            return inputs.get("project")
        from pulumi.runtime.config import CONFIG

        return CONFIG.get().get("gcp:project")

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        if args.typ == STACK_REFERENCE:
            stack = str(args.inputs.get("name") or args.name)
            if stack not in self.stack_outputs:
                raise KeyError(f"no outputs mocked for stack {stack!r}: check with --stack-ref {stack}=<its stack "
                               f"config file>, or pass stack_outputs={{{stack!r}: {{...}}}} to run_program")
            return stack, {"name": stack, "outputs": dict(self.stack_outputs[stack]), "secretOutputNames": []}
        inputs = dict(args.inputs)
        if args.typ == "gcp:appengine/application:Application" and args.resource_id:  # Application.get(id=project)
            inputs.setdefault("project", args.resource_id)
        resource_id, state = mock_outputs(args.typ, args.name, inputs)
        if args.typ.startswith("pulumi:providers:"):
            self.providers[resource_id] = dict(args.inputs)
        return resource_id, state

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        # Data sources (get_project, get_iam_policy...) answer with their own arguments: enough for
        # programs to run offline. No failures: an empty list, since None would crash pulumi's MockMonitor.Invoke.
        result = dict(args.args)
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":  # the calling provider's project
            result["project"] = self.provider_project(args.provider)
        if args.token.endswith("/getIAMPolicy:getIAMPolicy"):  # the policy document the bindings make
            result["policyData"] = json.dumps({"bindings": result.get("bindings") or []})
        return result, []


class _RecordingMonitor(MockMonitor):
    """A MockMonitor that also keeps each RegisterResource request's parent and inputs."""

    def __init__(self, stack_outputs: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__(_Mocks(stack_outputs))
        self.registered: list[RegisteredResource] = []


    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            from pulumi.runtime import rpc

            inputs = rpc.deserialize_properties(request.object)
            urn = response.urn
            state = self.resources[urn].state if urn in self.resources else {}
            self.registered.append(
                RegisteredResource(
                    type=request.type, name=request.name, inputs=_plain(inputs), parent=request.parent,
                    urn=urn, custom=bool(request.custom), state=_plain(state), protect=bool(request.protect),
                    dependencies=tuple(request.dependencies), ignore_changes=tuple(request.ignoreChanges),
                    property_dependencies={key: tuple(deps.urns)
                                           for key, deps in request.propertyDependencies.items()},
                )
            )
        return response

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        """Reads (``StackReference``, ``Resource.get``) are recorded too, with their properties as inputs."""
        response = super().ReadResource(request)
        from pulumi.runtime import rpc

        state = self.resources[response.urn].state if response.urn in self.resources else {}
        self.registered.append(
            RegisteredResource(
                type=request.type, name=request.name, inputs=_plain(rpc.deserialize_properties(request.properties)),
                parent=request.parent, urn=response.urn, custom=True, state=_plain(state),
            )
        )
        return response


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def mock_outputs(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Plausible ``(id, outputs)`` for a resource, derived from its inputs."""
    state = dict(inputs)
    project = inputs.get("project", "mock-project")
    if typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
        # uniqueId: 21 decimal digits, derived from the email so a test can name it
        unique_id = str(int(hashlib.sha256(email.encode()).hexdigest(), 16) % 10 ** 21).zfill(21)
        state.update(email=email, member=f"serviceAccount:{email}", name=f"projects/{project}/serviceAccounts/{email}",
                     uniqueId=unique_id)
        return f"projects/{project}/serviceAccounts/{email}", state
    if typ == "gcp:cloudrunv2/service:Service":
        state["uri"] = f"https://{inputs.get('name', name)}-abc123xyz-uc.a.run.app"
        return f"projects/{project}/locations/{inputs.get('location')}/services/{inputs.get('name', name)}", state
    if typ == "gcp:cloudfunctionsv2/function:Function":  # the function URL, and the service it runs as
        function, location = inputs.get("name", name), inputs.get("location")
        state["url"] = f"https://{location}-{project}.cloudfunctions.net/{function}"
        state["serviceConfig"] = {**(inputs.get("serviceConfig") or {}),
                                  "service": f"projects/{project}/locations/{location}/services/{function}",
                                  "uri": f"https://{function}-abc123xyz-uc.a.run.app"}
        return f"projects/{project}/locations/{location}/functions/{function}", state
    if typ == "gcp:storage/bucket:Bucket":
        state.setdefault("name", f"{name}-0a1b2c3")
        state["url"] = f"gs://{state['name']}"
        return str(state["name"]), state
    if typ == "gcp:storage/bucketObject:BucketObject":
        state["outputName"] = inputs.get("name", name)
        return f"{inputs.get('bucket')}-{state['outputName']}", state
    if typ == "gcp:cloudscheduler/job:Job":
        job_id = f"projects/{project}/locations/{inputs.get('region')}/jobs/{inputs.get('name', name)}"
        return job_id, state
    if typ == "gcp:redis/instance:Instance":  # a private IP of the peered range; TLS port with transit encryption
        tls = inputs.get("transitEncryptionMode") == "SERVER_AUTHENTICATION"
        state.update(host="10.128.0.3", port=6378 if tls else 6379, authString="mock-auth-string",
                     # two CAs, as during a CA rotation: the instance may present either
                     serverCaCerts=[{"cert": "-----BEGIN CERTIFICATE-----\nmock\n-----END CERTIFICATE-----\n"},
                                    {"cert": "-----BEGIN CERTIFICATE-----\nnext\n-----END CERTIFICATE-----\n"}])
        return f"projects/{project}/locations/{inputs.get('region')}/instances/{inputs.get('name', name)}", state
    if typ == "gcp:appengine/application:Application":  # read with Application.get(name, id=project)
        app_project = str(inputs.get("project") or "mock-project")
        # the application's region is unknown offline: the component checks app_engine.location instead
        state.update(project=app_project, app_id=app_project, location_id=None,
                     default_hostname=f"{app_project}.uc.r.appspot.com")
        return str(app_project), state
    if typ == "gcp:appengine/standardAppVersion:StandardAppVersion":
        state["name"] = f"apps/{project}/services/{inputs.get('service')}/versions/{inputs.get('versionId')}"
        return str(state["name"]), state
    if typ in ("gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:organizations/iAMCustomRole:IAMCustomRole"):
        parent = f"projects/{project}" if typ.startswith("gcp:projects/") else f"organizations/{inputs.get('orgId')}"
        state["name"] = f"{parent}/roles/{inputs.get('roleId')}"  # the role's name, as IAM gives it
        return str(state["name"]), state
    if typ == "gcp:firestore/database:Database":
        return f"projects/{project}/databases/{inputs.get('name')}", state
    if typ == "time:index/static:Static":  # the time it was created (or, when given, the time asked for)
        state.setdefault("rfc3339", MOCK_NOW)
        return f"{name}-{state['rfc3339']}", state
    return f"{name}-id", state


#: The time a mocked ``time.Static`` records: the moment this process first ran a program (RFC 3339, UTC).
MOCK_NOW = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class StackConfigFileError(ValueError):
    """A ``Pulumi.<stack>.yaml`` (or ``Pulumi.yaml``) that is not stack config: not valid YAML, or not a mapping
    whose ``config:`` maps keys to values. The message names the file, and for bad YAML the line and column."""


def _read_yaml_mapping(path: Path, section: str) -> Mapping[str, Any]:
    """``path``'s ``section`` block (``config``) as a mapping, checked as Pulumi reads it.

    Raises:
        StackConfigFileError: not valid YAML, not a mapping, or ``section`` not a mapping.
    """
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        context = getattr(error, "context", None)  # e.g. "while scanning a quoted scalar": where it began
        mark = getattr(error, "context_mark" if context else "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        where += f" ({context})" if context else ""
        problem = getattr(error, "problem", None) or str(error)
        raise StackConfigFileError(f"{path} is not valid YAML{where}: {problem}") from None
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise StackConfigFileError(f"{path} must be a mapping with a '{section}:' key (got a "
                                   f"{type(document).__name__}), as in Pulumi.example.yaml")
    block = document.get(section) or {}
    if not isinstance(block, Mapping):
        raise StackConfigFileError(f"{path}: '{section}:' must map keys to values, e.g. "
                                   f"'scheduler-dedup:schedule: \"0 3 * * *\"' (got a {type(block).__name__})")
    return document


def stack_config_from_file(config_file: Path, project_file: Path | None = None) -> dict[str, str]:
    """Flatten a ``Pulumi.<stack>.yaml`` into ``{"ns:key": "value"}`` as the engine passes config.

    Defaults from the ``config:`` block of ``project_file`` (``Pulumi.yaml``) apply first; keys without
    a namespace there belong to the project. Non-string values are JSON-encoded (``true``, ``180``).

    Raises:
        StackConfigFileError: either file is not valid YAML or not stack config (the message names the file).
    """
    flat: dict[str, str] = {}
    if project_file is not None and project_file.is_file():
        project = _read_yaml_mapping(project_file, "config")
        for key, spec in (project.get("config") or {}).items():
            full = key if ":" in key else f"{project.get('name', PROJECT_NAME)}:{key}"
            value = spec.get("default") if isinstance(spec, Mapping) else spec
            if value is not None:
                flat[full] = _config_value(value)
    stack = _read_yaml_mapping(config_file, "config")
    for key, value in (stack.get("config") or {}).items():
        full = key if ":" in key else f"{PROJECT_NAME}:{key}"
        flat[full] = _config_value(value)
    return flat


def _config_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


STACK_REFERENCE = "pulumi:pulumi:StackReference"


class MockRun(list[RegisteredResource]):
    """What a program registered, in order (a list), its stack outputs (:attr:`exports`) and the config keys it read
    (:attr:`read_keys`)."""

    exports: dict[str, Any]
    read_keys: set[str]


class _ReadRecordingConfig(dict[str, Any]):
    """The runtime's config map (``pulumi.runtime.config.CONFIG``) that records each full key looked up in it.

    Every read of a program goes through ``pulumi.runtime.config.get_config`` (``pulumi.Config.get``,
    ``require_int``, ``get_object``...), which asks ``key in CONFIG`` first, set or not; listing the map (as
    :func:`~scheduler_dedup.infra.stack.program._unknown_keys` does) is not a read.
    """

    def __init__(self, values: Mapping[str, Any], reads: set[str]) -> None:
        super().__init__(values)
        self.reads = reads

    def __contains__(self, key: object) -> bool:
        self.reads.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)


def run_program(
    program: Callable[[], Any], config: Mapping[str, str], *, project: str = PROJECT_NAME, stack: str = "mock",
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None, read_keys: set[str] | None = None,
    logger: logging.Logger | None = None,
) -> MockRun:
    """Run ``program`` under mocks with ``config`` and return every registered resource, in order.

    Args:
        program: the Pulumi program.
        config: stack config, ``{"ns:key": "value"}``.
        project, stack: the project and stack names the program sees.
        stack_outputs: per stack name (``org/project/stack``), the outputs a ``StackReference`` to it returns.
        read_keys: filled with every full config key the program looked up (set or not), also when it raises.
        logger: where ``pulumi.log`` messages go (default: the root logger, so warnings reach stderr).

    Returns:
        The registered resources; ``.exports`` holds the program's stack outputs, ``.read_keys`` the config keys
        it looked up.

    Raises:
        Whatever ``program`` raises (e.g. :class:`~scheduler_dedup.infra.errors.DedupConfigError`).
        KeyError: a ``StackReference`` names a stack without mocked outputs.
    """
    _ensure_event_loop()
    monitor = _RecordingMonitor(stack_outputs)
    pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor,
                             logger=logger)
    reads: set[str] = read_keys if read_keys is not None else set()
    from pulumi.runtime.config import CONFIG

    CONFIG.set(_ReadRecordingConfig(config, reads))  # what set_all_config does, recording the reads
    # set_mocks keeps the root stack resource of an earlier run in this process: start its exports afresh
    root = pulumi.runtime.get_root_resource()
    if root is not None and isinstance(getattr(root, "outputs", None), dict):
        root.outputs.clear()  # type: ignore[attr-defined]

    exports: dict[str, Any] = {}

    @pulumi.runtime.test
    def _run() -> Any:
        program()
        # The stack's exports (pulumi.export), resolved; the engine would register them when the program ends.
        root = pulumi.runtime.get_root_resource()
        outputs = dict(getattr(root, "outputs", None) or {})
        return pulumi.Output.from_input(outputs).apply(lambda values: exports.update(_plain(values)))

    try:
        _run()
    finally:
        pulumi.runtime.set_all_config({})
    run = MockRun(monitor.registered)
    run.exports = exports
    run.read_keys = reads
    return run


def run_stack_config(
    config_file: str | Path, *, project_file: str | Path | None = None, stack: str | None = None,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None, read_keys: set[str] | None = None,
    logger: logging.Logger | None = None,
) -> MockRun:
    """Run the root program (:func:`scheduler_dedup.infra.stack.program.main`) for a stack config file.

    Args:
        config_file: a ``Pulumi.<stack>.yaml`` file.
        project_file: the ``Pulumi.yaml`` whose ``config:`` defaults apply; default: the one beside
            ``config_file`` if it exists. A relative ``jobSource`` is relative to its folder.
        stack: stack name; default: taken from ``Pulumi.<stack>.yaml``'s file name.
        stack_outputs: outputs of the stacks the config refers to (``storeStack``), per stack name.
        read_keys: as for :func:`run_program`.
        logger: as for :func:`run_program`.

    Returns:
        The registered resources (type, name, inputs, parent, urn, custom, state), components included.

    Raises:
        DedupConfigError: the config is invalid (raised by the component before any child exists).
    """
    config_path = Path(config_file).resolve()
    project_path = Path(project_file).resolve() if project_file else config_path.parent / "Pulumi.yaml"
    stack_name = stack or (config_path.name.split(".")[1] if config_path.name.count(".") >= 2 else "mock")
    config = stack_config_from_file(config_path, project_path)
    base_dir = project_path.parent
    return run_program(lambda: main(base_dir=base_dir), config, stack=stack_name, stack_outputs=stack_outputs,
                       read_keys=read_keys, logger=logger)


def _ensure_event_loop() -> None:
    """Give this thread an event loop when it has none: Pulumi's mocks run on ``asyncio.get_event_loop()``, which
    raises in a thread where ``asyncio.run`` has ended (it leaves no loop set), e.g. a process that ran an
    ``async def`` idempotent function before checking a stack."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
