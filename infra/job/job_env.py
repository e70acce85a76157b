"""The job's own environment: plain variables (``env``) and Secret Manager secrets as variables (``secret_env``) or
files (``secret_files``).

Name rules are :func:`scheduler_dedup.handler.core.env_names.env_name_problem`'s (Cloud Run's, with their sources,
plus the handler's own names), the one check of a name that ``run-local`` and the policy pack apply too; at most
1000 variables per container (https://cloud.google.com/run/docs/configuring/services/overview-environment-variables).
:func:`credential_advisory` is the one place of its rule (the policy pack may call it too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.core.env_names import env_name_problem, home_mount_problem
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import Problems

#: Cloud Run: "a maximum of 1000 environment variables per container".
MAX_ENV_VARS = 1000
#: Cloud Run: a variable's maximum length is 32 KB.
MAX_ENV_VALUE_BYTES = 32 * 1024
#: Folders a secret volume may not be mounted on (system folders of the image, the functions runtime's source).
_SYSTEM_FOLDERS = ("/", "/dev", "/proc", "/sys", "/etc", "/usr", "/bin", "/lib", "/tmp", "/workspace")
#: A Memorystore store's secrets are mounted under these (:mod:`scheduler_dedup.infra.stores.memorystore`).
_STORE_MOUNT_PREFIX = "/secrets/redis-"
_SECRET_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_SECRET_NAME_RE = re.compile(r"^projects/([^/]+)/secrets/([^/]+)$")
_VERSION_RE = re.compile(r"^(latest|[1-9][0-9]*)$")
_CREDENTIAL_NAME_RE = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)", re.I)
_CREDENTIAL_VALUE_RES = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API key
    re.compile(r"\bgh[pousr]_[0-9A-Za-z]{36}\b"),  # GitHub token
    re.compile(r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),  # Slack token
    re.compile(r"\b[sr]k_live_[0-9A-Za-z]{16,}"),  # Stripe key
    re.compile(r"\"private_key\"\s*:"),  # a service account key file
    re.compile(r"://[^/\s:@]+:[^/\s@]+@"),  # a URL with a password
)


def credential_advisory(name: str, value: Any) -> str | None:
    """An advisory when plain variable ``name`` looks like it holds a credential (by its name or its value): plain
    values are readable by every project viewer (Cloud Run's best practice: keep secrets in Secret Manager)."""
    if not isinstance(value, str) or not value:
        return None
    by_value = any(pattern.search(value) for pattern in _CREDENTIAL_VALUE_RES)
    if not by_value and not _CREDENTIAL_NAME_RE.search(name):
        return None
    return (f"env.{name} looks like a credential ({'its value' if by_value else 'its name'}), and a plain environment "
            "variable is readable by anyone who can view the Cloud Run service: store it in Secret Manager and give it "
            "as secret_env or secret_files (docs/deploying.md, \"Give your job a secret\")")


@dataclass(frozen=True)
class SecretRef:
    """A secret version the job reads: ``secret_id`` in ``project``, ``version`` a number or ``latest``."""

    project: str
    secret_id: str
    version: str


@dataclass(frozen=True)
class SecretFile:
    """A secret version mounted as ``folder``/``file_name``."""

    ref: SecretRef
    folder: str
    file_name: str


def secret_ref(value: Any, field: str, project: str) -> SecretRef:
    """``value`` (``{secret, version}``) as a :class:`SecretRef` in ``project``.

    Raises:
        DedupConfigError: not a mapping, an unknown key, not a secret id or name, a secret of another project, or a
            version that is neither a number nor ``latest``.
    """
    if not isinstance(value, Mapping):
        raise DedupConfigError(field, f"must be a mapping with 'secret' (and 'version'), got {value!r}")
    secret = value.get("secret")
    if not isinstance(secret, str) or not secret:
        raise DedupConfigError(f"{field}.secret", "is required: the secret's id, or projects/P/secrets/S")
    named = _SECRET_NAME_RE.match(secret)
    secret_project, secret_id = (named.group(1), named.group(2)) if named else (project, secret)
    if secret_project != project:
        raise DedupConfigError(f"{field}.secret", f"{secret!r} is a secret of project {secret_project!r}, the job is in "
                                                  f"{project!r}: the job reads secrets of its own project only; copy "
                                                  "the secret there (or give its id, without projects/...)")
    if not _SECRET_ID_RE.match(secret_id):
        raise DedupConfigError(f"{field}.secret", f"{secret_id!r} is not a secret id: 1-255 letters, digits, '-' or '_'")
    version = value.get("version", "latest")
    version = str(version) if isinstance(version, int) and not isinstance(version, bool) else version
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise DedupConfigError(f"{field}.version", f"{version!r} is not a secret version: use a version number such "
                                                   "as '3' (pinned) or 'latest'")
    return SecretRef(project, secret_id, version)


def resolve_env(value: Any) -> dict[str, Any]:
    """``env`` checked: a mapping of valid names to strings.

    Raises:
        DedupConfigErrors: every bad name or value at once (:func:`env_name_problem`).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DedupConfigError("env", f"must be a mapping NAME: value, got {value!r}")
    problems = Problems()
    for name, item in value.items():
        problem = env_name_problem(name)
        if problem:
            problems.add(DedupConfigError(f"env.{name}", problem))
        elif isinstance(item, (bool, int, float)):
            problems.add(DedupConfigError(f"env.{name}", f"{item!r} is not a string: quote it, e.g. \"{item}\""))
        elif isinstance(item, str) and len(item.encode()) > MAX_ENV_VALUE_BYTES:
            problems.add(DedupConfigError(f"env.{name}", f"is longer than Cloud Run's {MAX_ENV_VALUE_BYTES} bytes: "
                                                         "mount it as a file (secret_files) instead"))
    problems.raise_any()
    return dict(value)


def resolve_secret_env(value: Any, project: str, env: Mapping[str, Any]) -> dict[str, SecretRef]:
    """``secret_env`` checked (names as :func:`resolve_env`, and none also in ``env``).

    Raises:
        DedupConfigErrors: every bad name or secret at once.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DedupConfigError("secret_env", f"must be a mapping NAME: {{secret, version}}, got {value!r}")
    problems = Problems()
    found: dict[str, SecretRef] = {}
    for name, item in value.items():
        problem = env_name_problem(name) or (f"{name!r} is also in env: give it once" if name in env else None)
        if problem:
            problems.add(DedupConfigError(f"secret_env.{name}", problem))
            continue
        ref = problems.run(lambda: secret_ref(item, f"secret_env.{name}", project), None)
        if ref is not None:
            found[name] = ref
    problems.raise_any()
    return found


def resolve_secret_files(value: Any, project: str) -> tuple[SecretFile, ...]:
    """``secret_files`` checked: absolute paths, one secret per folder, no system or home folder
    (:func:`~scheduler_dedup.handler.core.env_names.home_mount_problem`) or store mount.

    Raises:
        DedupConfigErrors: every bad entry at once.
    """
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise DedupConfigError("secret_files", f"must be a list of {{secret, path, version}}, got {value!r}")
    problems = Problems()
    found: list[SecretFile] = []
    folders: dict[str, int] = {}
    for index, item in enumerate(value):
        field = f"secret_files[{index}]"
        path = item.get("path") if isinstance(item, Mapping) else None
        if isinstance(item, Mapping) and (not isinstance(path, str) or not re.fullmatch(r"(/[A-Za-z0-9._-]+){2,}", path)):
            problems.add(DedupConfigError(f"{field}.path", f"{path!r} is not an absolute file path in a folder of its "
                                                           "own, e.g. /secrets/db/password"))
            continue
        ref = problems.run(lambda: secret_ref({k: v for k, v in item.items() if k != "path"}
                                              if isinstance(item, Mapping) else item, field, project), None)
        if ref is None or not isinstance(path, str):
            continue
        folder, file_name = path.rsplit("/", 1)
        home = home_mount_problem(folder)
        if home:
            problems.add(DedupConfigError(f"{field}.path", f"{path!r}: {home}{ref.secret_id}/{file_name}"))
        elif folder in _SYSTEM_FOLDERS or any(folder.startswith(f"{system}/") for system in _SYSTEM_FOLDERS[1:]) \
                or path.startswith(_STORE_MOUNT_PREFIX):
            problems.add(DedupConfigError(f"{field}.path", f"{path!r} is in a folder the container or the store needs "
                                                           "(a secret volume hides the folder's files): use e.g. "
                                                           f"/secrets/{ref.secret_id}/{file_name}"))
        elif folder in folders:
            problems.add(DedupConfigError(f"{field}.path", f"{folder} already holds secret_files[{folders[folder]}]: a "
                                                           "Cloud Run secret volume is one folder per secret; use "
                                                           f"another folder, e.g. /secrets/{ref.secret_id}/{file_name}"))
        else:
            folders[folder] = index
            found.append(SecretFile(ref, folder, file_name))
    problems.raise_any()
    return tuple(found)
