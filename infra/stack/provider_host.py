"""Host :class:`DedupScheduledJob` and :class:`DedupStore` as a Pulumi component provider, for stacks in other languages.

``infra/provider/`` holds ``PulumiPlugin.yaml`` (``runtime: python``) and a ``__main__.py`` that calls
:func:`main`. From a TypeScript, Go, C#, Java or YAML project::

    pulumi package add /path/to/scheduler-dedup/infra/provider

Pulumi starts the plugin, which runs :func:`pulumi.provider.experimental.component_provider_host`:
the schema (inputs, outputs, descriptions) is inferred by Pulumi's component analyzer from the
type annotations of :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs` and the output
annotations of the component, and an SDK is generated for the consuming language. The type token
is ``scheduler-dedup:index:DedupScheduledJob`` (and ``scheduler-dedup:index:DedupStore``; a job in another
language passes the store's outputs as its ``store`` input).
"""

from __future__ import annotations

from typing import Any

PACKAGE_NAME = "scheduler-dedup"
PACKAGE_VERSION = "0.1.0"


def components() -> list[Any]:
    """The component classes this provider hosts."""
    from scheduler_dedup.infra.job.component import DedupScheduledJob
    from scheduler_dedup.infra.stores.store import DedupStore

    return [DedupScheduledJob, DedupStore]


def schema() -> dict[str, Any]:
    """The package schema Pulumi derives for the hosted components (what ``GetSchema`` returns).

    Call it in a process that has not imported google-cloud-firestore: ``pulumi.provider``'s generated
    ``google.rpc.Status`` clashes with googleapis-common-protos' in protobuf's descriptor pool.

    Raises:
        Exception: whatever the analyzer raises for an unsupported annotation.
    """
    import json

    from pulumi.provider.experimental.component import ComponentProvider

    provider = ComponentProvider(components(), PACKAGE_NAME, version=PACKAGE_VERSION)
    if provider.schema is None:  # pragma: no cover - ComponentProvider always sets it
        raise RuntimeError("the component analyzer produced no schema")
    result: dict[str, Any] = json.loads(provider.schema)
    return result


def main() -> None:
    """Serve the provider over gRPC (the plugin's entry point; Pulumi passes the engine address in argv)."""
    from pulumi.provider.experimental import component_provider_host

    component_provider_host(components(), name=PACKAGE_NAME, version=PACKAGE_VERSION)
