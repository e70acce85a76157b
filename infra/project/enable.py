"""Enable Google APIs and wait until they are usable: the one way the job component and the store enable theirs.

``gcp.projects.Service`` per API (``disable_on_destroy=False``: other stacks may use it), then one
``time.Sleep`` of :data:`~scheduler_dedup.infra.project.apis.API_PROPAGATION_SECONDS` after all of them, which
resources that call those APIs depend on. The sleep is replaced (and waits again) when the set of APIs changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp
import pulumiverse_time

from scheduler_dedup.infra.project.apis import API_PROPAGATION_SECONDS


def enable_apis(name: str, project: pulumi.Input[str], apis: Sequence[str],
                parent: pulumi.Resource) -> list[pulumi.Resource]:
    """Enable ``apis`` in ``project`` as children of ``parent`` and return what a resource using them waits for.

    Args:
        name: the component's name; children are ``<name>-api-<service>`` and ``<name>-apis-usable``.
        project: the project id.
        apis: service names (``firestore.googleapis.com``); duplicates are enabled once.
        parent: the component.

    Returns:
        ``[the sleep]``, or ``[]`` when ``apis`` is empty (nothing enabled here, nothing to wait for).
    """
    unique = list(dict.fromkeys(apis))
    services = [
        gcp.projects.Service(
            f"{name}-api-{api.split('.')[0]}",
            gcp.projects.ServiceArgs(service=api, project=project, disable_on_destroy=False),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for api in unique
    ]
    if not services:
        return []
    # Enabled is not yet usable: an API enabled moments ago still answers 403 (API_PROPAGATION_SECONDS says why).
    return [pulumiverse_time.Sleep(
        f"{name}-apis-usable",
        pulumiverse_time.SleepArgs(create_duration=f"{API_PROPAGATION_SECONDS}s",
                                   triggers={"apis": ",".join(sorted(unique))}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(services)),
    )]
