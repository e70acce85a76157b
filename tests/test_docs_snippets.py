"""Every code block of the README and the docs runs, as Powertools tests its snippets.

- Python: executed; a block that uses ``scheduler_dedup.infra`` runs under Pulumi mocks
  (:func:`~scheduler_dedup.infra.stack.mock_run.run_program`) in a folder laid out as a user's project.
- ``scheduler-dedup`` commands: each is parsed by the real command line (every option and value checked by click);
  the ones that need only this machine run for real (``check``, ``run-local`` on the Firestore emulator, ``runs``
  against it).
- Python blocks of ``docs/idempotent.md`` run against the Firestore emulator (each on a wiped database, with this
  process's ``idempotent`` machinery made afresh), so their assertions check what the page claims.
- TOML blocks declare a run store's entry point (``scheduler_dedup.stores``) in the form the registry loads.
- JSON policy configs go through :func:`~scheduler_dedup.policies.offline.policy_config.check_policy_config`; YAML
  stack config through the stack config keys the program reads, an ``app.yaml`` through its entry point, and a
  Workflows definition through the check that each state-changing call carries the run id.
- What needs the Pulumi CLI, gcloud or a cloud project (``pulumi up``, ``gcloud ...``) cannot run here: its stack
  config keys must exist, the files it copies must exist, and its ``--policy-pack`` folder too.

A block preceded by ``<!-- snippet: output -->`` is sample output, not code; unlabelled blocks and ``text`` blocks
are output too.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml

from scheduler_dedup.infra.stack.mock_run import run_program
from scheduler_dedup.infra.stack.program import CONFIG_KEYS, PROJECT_NAME
from scheduler_dedup.local.commands.cli import main as cli
from scheduler_dedup.local.servers.firestore_emulator import INSTALL_HINT as FIRESTORE_HINT
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.servers.redis_server import INSTALL_HINT as REDIS_HINT
from scheduler_dedup.local.servers.spanner_emulator import INSTALL_HINT as SPANNER_HINT
from scheduler_dedup.local.servers.store_servers import GOOGLE_APT_REPOSITORY
from scheduler_dedup.policies.offline.policy_config import check_policy_config

pytestmark = pytest.mark.processes  # tests/costs.py: CLI runs

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CLI = str(Path(sys.executable).parent / "scheduler-dedup")
STACK_KEYS = {entry.key for entry in CONFIG_KEYS}
_FENCE = re.compile(r"^(?P<marker><!-- snippet: (?P<label>[^>]*) -->\n)?```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```",
                    re.S | re.M)


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    lang: str
    body: str
    label: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in _FENCE.finditer(text):
            found.append(Snippet(page, text[:m.start("lang")].count("\n") + 1, m["lang"], m["body"], m["label"] or ""))
    return found


SNIPPETS = [s for s in _snippets() if s.lang not in ("", "text") and s.label != "output"]


def _of(lang: str) -> list[Snippet]:
    return [s for s in SNIPPETS if s.lang == lang]


def _commands(body: str) -> list[str]:
    """The shell commands of a block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_code_block_has_a_kind_this_test_runs() -> None:
    assert {s.lang for s in SNIPPETS} <= {"python", "bash", "json", "yaml", "toml"}, {s.id: s.lang for s in SNIPPETS}
    assert len(SNIPPETS) >= 20, [s.id for s in SNIPPETS]


# --- Python -----------------------------------------------------------------------------------------------------

@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A folder as a user's project: job folders the snippets name, and this repository's examples."""
    for folder, module in (("jobs", "report"), ("jobs/nightly-report", "job"), ("jobs/hourly-sync", "job")):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / f"{module}.py").write_text("def run(scheduled):\n    return None\n")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


@pytest.mark.parametrize("snippet", _of("python"), ids=lambda s: s.id)
def test_python_block_runs(snippet: Snippet, user_project: Path, monkeypatch: pytest.MonkeyPatch,
                           request: pytest.FixtureRequest) -> None:
    monkeypatch.chdir(user_project)
    if snippet.page.name == "idempotent.md":  # against a real store: the emulator, wiped, and fresh machinery
        from scheduler_dedup.handler.protocol import idempotent as idempotent_module

        request.getfixturevalue("emulator")
        for name in ("DEDUP_STORE", "DEDUP_COLLECTION", "DEDUP_IDEMPOTENCY_DISABLED"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr(idempotent_module, "_built", {})
    path = user_project / "snippet.py"
    path.write_text(snippet.body)
    if "scheduler_dedup.infra" in snippet.body:
        registered = run_program(lambda: runpy.run_path(str(path), run_name="__main__"),
                                 {"gcp:project": "my-project"}, project="snippet")
        assert any(r.type == "gcp:cloudscheduler/job:Job" for r in registered) or \
            any(r.type.startswith("scheduler-dedup:") for r in registered), [r.type for r in registered]
    else:
        runpy.run_path(str(path), run_name="snippet")


# --- configs ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("snippet", _of("toml"), ids=lambda s: s.id)
def test_toml_block_declares_a_store_entry_point(snippet: Snippet) -> None:
    import tomllib

    from scheduler_dedup.handler.stores.registry import ENTRY_POINT_GROUP

    points = tomllib.loads(snippet.body)["project"]["entry-points"]
    assert list(points) == [ENTRY_POINT_GROUP], points
    assert all(re.fullmatch(r"[\w.]+:\w+", target) for target in points[ENTRY_POINT_GROUP].values()), points


@pytest.mark.parametrize("snippet", _of("json"), ids=lambda s: s.id)
def test_json_block_is_a_valid_policy_config(snippet: Snippet) -> None:
    check_policy_config(json.loads(snippet.body))


@pytest.mark.parametrize("snippet", _of("yaml"), ids=lambda s: s.id)
def test_yaml_block_is_valid_stack_config_or_app_yaml(snippet: Snippet) -> None:
    document = yaml.safe_load(snippet.body)
    assert isinstance(document, dict), snippet.body
    if "entrypoint" in document:  # an App Engine app.yaml: its gunicorn config module imports
        module = re.search(r"python:([\w.]+)", document["entrypoint"])
        assert module is not None, document
        __import__(module.group(1))
        return
    if "main" in document:  # a Workflows definition: each state-changing call passes the run id on
        from tests.test_examples_workflows import calls_without_the_key, http_calls
        assert list(http_calls(document)) and calls_without_the_key(document) == [], snippet.id
        return
    for key in document:
        namespace, _, name = str(key).partition(":")
        assert namespace == PROJECT_NAME and name in STACK_KEYS, (key, snippet.id)


# --- commands -----------------------------------------------------------------------------------------------------

#: Placeholders of the docs' commands, and what stands in for them when the command is parsed.
_PLACEHOLDERS = {"<the Scheduler job id>": "nightly-report", "path/to/Pulumi.dev.yaml": "Pulumi.example.yaml",
                 '"$(pulumi config get gcp:project)"': "my-project", '"$(pulumi stack output database_name)"': "db"}


def _cli_args(command: str) -> list[str] | None:
    """The arguments of a ``scheduler-dedup`` command line (placeholders filled in), or None for another program."""
    for placeholder, value in _PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    command = re.sub(r"\s*\[[^\]]*\]", "", command.split(" | ")[0])  # optional parts, a pipe into another program
    words = shlex.split(command)
    if not words or Path(words[0]).name != "scheduler-dedup":
        return None
    return words[1:]


def _parse(args: list[str], command: click.Command = cli, name: str = "scheduler-dedup",
           parent: click.Context | None = None) -> None:
    """Parse ``args`` as the real command line does (every option and value converted), without running it."""
    ctx = command.make_context(name, list(args), parent=parent)
    if isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if rest or not command.invoke_without_command:
            sub_name, sub, sub_args = command.resolve_command(ctx, rest)
            assert sub is not None and sub_name is not None, args
            _parse(sub_args, sub, sub_name, ctx)


BASH = [(s, c) for s in _of("bash") for c in _commands(s.body)]


@pytest.mark.parametrize("snippet, command", BASH, ids=[f"{s.id} {c[:40]}" for s, c in BASH])
def test_each_command_parses_or_names_what_exists(snippet: Snippet, command: str, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    args = _cli_args(command)
    if args is not None:
        for ref in [a for a in args if "=" in a and a.endswith(".yaml")]:  # --stack-ref NAME=FILE: a file there
            (ROOT / ref.split("=", 1)[1]).exists() or args.__setitem__(args.index(ref), ref.split("=")[0] + "=" + str(
                ROOT / "Pulumi.example-store.yaml"))
        _parse(args)
        return
    words = shlex.split(command)
    if words[0].startswith("./scripts/"):
        assert os.access(ROOT / words[0], os.X_OK), command
    elif words[:3] == ["pulumi", "config", "set"]:
        key = next(w for w in words[3:] if not w.startswith("-"))
        key = re.split(r"[.\[]", key.removeprefix(f"{PROJECT_NAME}:"))[0]  # a --path: its top-level key
        assert key in STACK_KEYS or key.startswith("gcp:"), (key, command)
    elif words[0] == "cp":
        assert (ROOT / words[1]).is_file(), command
    elif words[0] == "pulumi" and "--policy-pack" in words:
        assert (ROOT / words[words.index("--policy-pack") + 1] / "PulumiPolicy.yaml").is_file(), command
    elif words[0] in ("curl", "echo") or words[:3] == ["sudo", "apt-get", "update"]:  # adding Google's apt repository
        # the lines the install hints print
        assert " ".join(command.split()) in [" ".join(line.split()) for line in GOOGLE_APT_REPOSITORY.splitlines()]
    elif words[:3] == ["sudo", "apt-get", "install"]:  # the packages the install hints name
        hints = FIRESTORE_HINT + SPANNER_HINT + REDIS_HINT + "default-jre-headless"
        assert all(package in hints for package in words[4:]), command
    else:  # the Pulumi CLI, gcloud, a venv: nothing of ours to run without a cloud project
        assert words[0] in ("pulumi", "gcloud", "python3"), command


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, env={**full, **(env or {})},
                          timeout=600, check=False)


def _real(subcommand: str) -> list[list[str]]:
    return [args for _, c in BASH if (args := _cli_args(c)) and args[0] == subcommand]


@pytest.mark.parametrize("args", _real("check"), ids=" ".join)
def test_check_commands_run(args: list[str], tmp_path: Path) -> None:
    """In a copy of the project where the docs' ``cp`` lines have run (``Pulumi.store.yaml``, a job stack's file)."""
    for name in ("Pulumi.yaml", "__main__.py", *(p.name for p in ROOT.glob("Pulumi.example*.yaml"))):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "Pulumi.store.yaml").write_text((ROOT / "Pulumi.example-store.yaml").read_text())
    (tmp_path / "Pulumi.nightly-report.yaml").write_text((ROOT / "Pulumi.example-job-on-store.yaml").read_text())
    args = [a.replace("path/to/Pulumi.dev.yaml", "Pulumi.example.yaml") for a in args]
    out = _run(args, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("args", _real("run-local"), ids=" ".join)
def test_run_local_commands_run(args: list[str]) -> None:
    out = _run(args)
    assert out.returncode == 0 and "OK " in out.stdout, out.stdout + out.stderr


def test_runs_commands_run_against_a_local_store(firestore_emulator: FirestoreEmulator) -> None:
    # The emulator's first query of a collection can outlast the command's read timeout on a loaded machine: warm it.
    _run(["runs", "--job", "warm-up"], firestore_emulator.endpoint_env())
    for args in _real("runs"):
        args = [a for a in args if a not in ("--project", "my-project", "--database", "db")]
        out = _run(args, firestore_emulator.endpoint_env())
        assert out.returncode in (0, 1) and "Traceback" not in out.stderr and "Usage:" not in out.stderr, \
            (args, out.stdout + out.stderr)
