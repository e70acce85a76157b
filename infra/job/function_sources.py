"""The buckets the Functions API copies a function's source into, and the IAM condition that pins the build
identity's read to them (one expression, which the component grants and the policy pack recognises).

The Functions API stores a deployed archive in ``gcf-v2-sources-PROJECT_NUMBER-REGION`` ("function code is stored in
a separate source bucket", https://cloud.google.com/functions/docs/building) and the build fetches it from there. The
bucket is made at the project's first function deploy, so no bucket-level grant can name it beforehand: the grant is
on the project, pinned by Cloud Storage's ``resource.name``
(https://cloud.google.com/iam/docs/conditions-attribute-reference#resource-name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What the Functions API's source buckets' names start with.
FUNCTION_SOURCES_BUCKET_PREFIX = "gcf-v2-sources-"
#: The role the build identity holds on them: reading the archive's copy.
FUNCTION_SOURCES_ROLE = "roles/storage.objectViewer"
#: The condition of that project grant: those buckets and their objects only.
FUNCTION_SOURCES_CONDITION = f'resource.name.startsWith("projects/_/buckets/{FUNCTION_SOURCES_BUCKET_PREFIX}")'


def is_function_sources_grant(role: str | None, condition: Any) -> bool:
    """True for the component's grant of :data:`FUNCTION_SOURCES_ROLE` pinned by :data:`FUNCTION_SOURCES_CONDITION`
    (``condition`` as the engine sends it: ``{"expression": ..., "title": ...}``)."""
    return (role == FUNCTION_SOURCES_ROLE and isinstance(condition, Mapping)
            and condition.get("expression") == FUNCTION_SOURCES_CONDITION)
