"""Component package for other languages: Pulumi's component analyzer derives the documented schema."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import yaml

from scheduler_dedup.infra.job.component import TYPE_TOKEN
from scheduler_dedup.infra.stack.provider_host import PACKAGE_NAME
from scheduler_dedup.infra.stores.store import TYPE_TOKEN as STORE_TYPE_TOKEN
from scheduler_dedup.infra.stack.program import CONFIG_KEYS
from tests.paths import ROOT

OUTPUTS = {"serviceUrl", "jobName", "schedulerServiceAccountEmail", "runtimeServiceAccountEmail", "databaseName", "oidcAudience"}


def _schema() -> dict[str, Any]:
    """The schema, computed in a fresh interpreter as the plugin process would.

    (pulumi.provider's generated google.rpc.Status clashes with googleapis-common-protos' in one
    process's protobuf descriptor pool, so it cannot be imported after google-cloud-firestore.)
    """
    code = "import json; from scheduler_dedup.infra.stack.provider_host import schema; print(json.dumps(schema()))"
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    spec: dict[str, Any] = json.loads(result.stdout)
    return spec


def test_analyzer_schema_has_every_input_and_output() -> None:
    spec = _schema()
    assert spec["name"] == PACKAGE_NAME
    resource = spec["resources"][TYPE_TOKEN]
    assert resource["isComponent"] is True
    inputs = resource["inputProperties"]
    # every component input that the root stack's config can set is in the schema, camelCased
    top_level = {k.arg.split(".")[0] for k in CONFIG_KEYS if k.arg}
    camel = {"".join(w.capitalize() if i else w for i, w in enumerate(a.split("_"))) for a in top_level}
    assert camel <= set(inputs)
    assert set(resource["requiredInputs"]) == {"schedule", "region"}
    assert set(resource["properties"]) == OUTPUTS and set(resource["required"]) >= OUTPUTS
    assert inputs["attemptDeadlineSeconds"]["type"] == "integer"
    assert "15 to 1800" in inputs["attemptDeadlineSeconds"]["description"]
    assert inputs["retry"]["$ref"] == f"#/types/{PACKAGE_NAME}:index:RetryConfigArgs"
    retry = spec["types"][f"{PACKAGE_NAME}:index:RetryConfigArgs"]["properties"]
    assert set(retry) == {"retryCount", "maxRetryDurationSeconds", "minBackoffSeconds", "maxBackoffSeconds", "maxDoublings"}
    workflow = spec["types"][f"{PACKAGE_NAME}:index:WorkflowTargetArgs"]
    assert workflow["required"] == ["workflow"]


def test_analyzer_schema_has_the_store_and_the_jobs_store_input() -> None:
    """Another language's stack creates a DedupStore, or reads one's outputs, and passes them to a job."""
    spec = _schema()
    store = spec["resources"][STORE_TYPE_TOKEN]
    assert store["isComponent"] is True and store["requiredInputs"] == ["location"]
    assert set(store["inputProperties"]) == {"kind", "location", "project", "databaseId", "createDatabase",
                                             "collections", "deletionProtection", "protectDatabase",
                                             "instanceId", "createInstance", "instanceConfig", "processingUnits",
                                             "memorySizeGb", "authorizedNetwork", "subnetwork", "waitTimeoutMs"}
    assert store["inputProperties"]["collections"]["items"]["type"] == "string"
    outputs = {"kind", "project", "instanceId", "databaseId", "databaseResourceName", "location", "collections",
               "ttlField"}
    assert set(store["properties"]) == outputs == set(store["required"])
    job_inputs = spec["resources"][TYPE_TOKEN]["inputProperties"]
    assert job_inputs["store"]["$ref"] == f"#/types/{PACKAGE_NAME}:index:DedupStoreRefArgs"
    assert {"schedulerServiceAccountEmail", "buildServiceAccountEmail"} <= set(job_inputs)
    ref = spec["types"][f"{PACKAGE_NAME}:index:DedupStoreRefArgs"]
    assert set(ref["required"]) == {"project", "databaseId", "collections"}, "the store's outputs, by their names"
    memorystore = {"kind", "redisHost", "redisPort", "authSecret", "caSecret", "network", "subnetwork", "waitTimeoutMs"}
    assert set(ref["properties"]) - {"ttlOwner"} <= outputs | memorystore


def test_plugin_folder_is_a_python_component_package() -> None:
    plugin = ROOT / "infra" / "provider"
    assert yaml.safe_load((plugin / "PulumiPlugin.yaml").read_text()) == {"runtime": "python"}
    main = (plugin / "__main__.py").read_text()
    assert "scheduler_dedup.infra.stack.provider_host import main" in main
