"""Labels on every resource the component creates, under Pulumi mocks with typed Args: every child whose type takes a
labels-like input (``labels``, ``user_labels``, a Cloud Run template's ``labels``...) carries the user's labels.

Which types take labels is read from pulumi-gcp's own Args classes, not listed here, so a child added later that
takes labels and gets none fails this test.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob
from scheduler_dedup.infra.args import DedupScheduledJobArgs
from scheduler_dedup.infra.job.labels import MANAGED_BY
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from tests.paths import HELLO_JOB

USER_LABELS = {"team": "data", "cost-center": "cc_42"}
WANTED = {**MANAGED_BY, **USER_LABELS}
#: Input names that hold a resource's labels (a map of strings), in pulumi-gcp's snake_case.
_LABEL_INPUT = re.compile(r"^(labels|[a-z_]+_labels)$")
_FORWARD = re.compile(r"ForwardRef\('(\w+Args)'\)")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _args_class(token: str) -> type | None:
    """pulumi-gcp's Args class of a type token (``gcp:spanner/instance:Instance``: ``pulumi_gcp.spanner.InstanceArgs``)."""
    package, module_path, kind = token.split(":")
    if package != "gcp":
        return None
    module = importlib.import_module(f"pulumi_gcp.{module_path.split('/')[0]}")
    return getattr(module, f"{kind}Args", None)


def _label_paths(args: type, module: Any, prefix: tuple[str, ...] = (), depth: int = 3) -> Iterator[tuple[str, ...]]:
    """Paths (Pulumi property names) from a resource's inputs to each labels-like map in them, nested Args included
    (a Cloud Run service's ``template.labels``); lists of Args are followed into each element."""
    for name, parameter in inspect.signature(args.__init__).parameters.items():
        annotation = str(parameter.annotation)
        if _LABEL_INPUT.match(name) and annotation.startswith("typing.Union[typing.Mapping[str,"):
            yield (*prefix, _camel(name))
        elif depth > 1:
            for nested in dict.fromkeys(_FORWARD.findall(annotation)):
                cls = getattr(module, nested, None)
                if isinstance(cls, type):
                    yield from _label_paths(cls, module, (*prefix, _camel(name)), depth - 1)


def _values_at(inputs: Any, path: tuple[str, ...]) -> Iterator[tuple[bool, Any]]:
    """``(present, value)`` at ``path`` for each object on the way that exists (a nested object that is not set holds
    no labels to check)."""
    if isinstance(inputs, list):
        for item in inputs:
            yield from _values_at(item, path)
        return
    if not isinstance(inputs, dict):
        return
    key, *rest = path
    if not rest:
        yield key in inputs, inputs.get(key)
    elif key in inputs:
        yield from _values_at(inputs[key], tuple(rest))


def _unlabelled(resources: list[RegisteredResource]) -> list[str]:
    missing: list[str] = []
    for r in resources:
        args = _args_class(r.type) if r.custom else None
        if args is None:
            continue
        module = importlib.import_module(args.__module__.rsplit(".", 1)[0] + "._inputs")
        for path in dict.fromkeys(_label_paths(args, module)):
            for present, value in _values_at(r.inputs, path):
                if not present or value != WANTED:
                    missing.append(f"{r.type} {r.name} {'.'.join(path)}: {value if present else 'not set'}")
    return missing


def _maximal(**extra: Any) -> DedupScheduledJobArgs:
    """Every child the component makes on Cloud Run: a source deploy, a Spanner instance of its own, every alert,
    secrets, VPC egress and the job's own roles."""
    args: dict[str, Any] = {
        "schedule": "0 3 * * *", "region": "us-central1", "job_source": str(HELLO_JOB), "job": "jobs:run",
        "store_kind": "spanner", "labels": USER_LABELS,
        "env": {"REPORT_BUCKET": "acme-reports"},
        "secret_env": {"DB_PASSWORD": {"secret": "db-password", "version": "3"}},
        "secret_files": [{"secret": "projects/p1/secrets/sa-key", "path": "/secrets/sa/key.json"}],
        "cpu": "2", "memory": "2Gi",
        "vpc": {"network": "default", "subnetwork": "default", "egress": "PRIVATE_RANGES_ONLY"},
        "job_roles": [{"role": "roles/storage.objectCreator", "resource": "buckets/acme-reports"}],
        "alerts": {"notification_channels": ["projects/p1/notificationChannels/1"], "failure_threshold": 3,
                   "max_runtime_seconds": 1800, "renotify_seconds": 3600},
        **extra,
    }
    return args  # type: ignore[return-value]


def _deploy(args: DedupScheduledJobArgs) -> list[RegisteredResource]:
    return run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})


def test_the_label_walk_finds_labels_inputs_nested_ones_included() -> None:
    """What makes the next test able to fail: the types that take labels are found, nested paths too."""
    import pulumi_gcp as gcp

    paths = set(_label_paths(gcp.cloudrunv2.ServiceArgs, importlib.import_module("pulumi_gcp.cloudrunv2._inputs")))
    assert {("labels",), ("template", "labels")} <= paths
    assert ("userLabels",) in set(_label_paths(gcp.monitoring.AlertPolicyArgs,
                                               importlib.import_module("pulumi_gcp.monitoring._inputs")))
    # a list of label descriptors is no labels map: a metric's descriptor is not a labelled child
    assert not list(_label_paths(gcp.logging.MetricArgs, importlib.import_module("pulumi_gcp.logging._inputs")))
    bare = RegisteredResource(type="gcp:spanner/instance:Instance", name="x", inputs={}, parent="", urn="u", custom=True)
    assert _unlabelled([bare]) == ["gcp:spanner/instance:Instance x labels: not set"]


#: The maximal configurations: on Cloud Run with a Spanner instance of its own, an adopted instance or Firestore; on
#: App Engine (which takes no secrets, VPC egress, CPU or memory, and gets no alerts).
CASES = {
    "spanner-instance-of-its-own": _maximal(),
    "adopted-instance": _maximal(spanner_instance="shared"),
    "firestore": _maximal(store_kind="firestore"),
    "app-engine": {"schedule": "0 3 * * *", "region": "us-central1", "job_source": str(HELLO_JOB), "job": "jobs:run",
                   "store_kind": "spanner", "labels": USER_LABELS, "env": {"REPORT_BUCKET": "acme-reports"},
                   "app_engine": {"service": "dedup", "location": "us-central"}},
}


@pytest.mark.parametrize("case", CASES)
def test_every_child_that_takes_labels_carries_the_users_labels(case: str) -> None:
    resources = _deploy(typing.cast(DedupScheduledJobArgs, CASES[case]))
    labelled = {r.type for r in resources if r.custom and (a := _args_class(r.type)) is not None
                and any(_label_paths(a, importlib.import_module(a.__module__.rsplit(".", 1)[0] + "._inputs")))}
    assert "gcp:storage/bucket:Bucket" in labelled  # the walk saw labelled children at all
    assert _unlabelled(resources) == []


def test_labels_google_refuses_are_refused_at_preview_for_every_labelled_child() -> None:
    """One check (Google's label rules) guards every child that takes labels: Spanner's and Cloud Monitoring's
    rules are the same (keys ``[a-z][a-z0-9_-]{0,62}``, values ``[a-z0-9_-]{0,63}``, at most 64)."""
    with pytest.raises(DedupConfigError) as info:
        _deploy(_maximal(labels={"Team": "Data"}))
    assert "labels.Team" in str(info.value)
    assert typing.cast(Any, _LABEL_INPUT).match("user_labels")
