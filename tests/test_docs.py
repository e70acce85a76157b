"""The README and the documentation site: the README stays short, the generated reference pages are what the code
generates, and the site builds strictly (a broken link, a missing anchor or a page left out of the nav fails)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler_dedup.local.commands import reference
from tests.missing_tools import missing
from tests.paths import ROOT
README = ROOT / "README.md"


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text) <= 12_000, f"README.md is {len(text):,} characters; move detail into a page under docs/"
    first_screen = "\n".join(text.splitlines()[:40])
    assert "./scripts/demo" in first_screen and "./scripts/test" in first_screen, "the set-up commands left screen one"


def test_the_generated_pages_are_up_to_date() -> None:
    out_of_date = [str(path.relative_to(ROOT)) for path in reference.stale()]
    assert not out_of_date, f"run scripts/gen_docs: {out_of_date} differ from what the code generates"


def test_a_changed_source_makes_its_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler_dedup.handler.core import variables
    variable = variables.VARIABLES["DEDUP_LEASE_SECONDS"]
    monkeypatch.setitem(variables.VARIABLES, variable.name, variable.__class__(
        variable.name, variable.group, variable.doc + " Changed.", variable.default, variable.component))
    assert reference.stale() == [ROOT / "docs/reference/environment.md"]


def test_every_stack_key_and_input_is_on_the_stack_config_page() -> None:
    from scheduler_dedup.infra import args
    from scheduler_dedup.infra.stack.program import CONFIG_KEYS

    page = (ROOT / "docs/reference/stack-config.md").read_text()
    for entry in CONFIG_KEYS:
        assert f"| `{entry.key}` |" in page, entry.key
    for cls in (args.DedupScheduledJobArgs, args.RetryConfigArgs, args.HttpTargetArgs, args.DedupStoreArgs,
                args.AlertsArgs, args.DedupStoreRefArgs):
        for field in cls.__annotations__:
            assert f'id="{reference._anchor(cls.__name__, field)}"' in page, (cls.__name__, field)


def test_an_undocumented_input_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler_dedup.infra import args
    monkeypatch.setitem(args.RetryConfigArgs.__annotations__, "jitter_seconds", int)
    with pytest.raises(reference.UndocumentedError, match="RetryConfigArgs: no docstring for jitter_seconds"):
        reference.stack_config_page()


def test_a_stack_key_for_a_missing_input_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler_dedup.infra.stack import program as stack_program
    key = stack_program.ConfigKey("retryJitter", "integer", "retry.jitter_seconds", "jitter")
    monkeypatch.setattr(stack_program, "CONFIG_KEYS", (*stack_program.CONFIG_KEYS, key))
    with pytest.raises(reference.UndocumentedError, match="no field 'jitter_seconds'"):
        reference.stack_config_page()


def test_every_variable_and_rule_is_on_its_page() -> None:
    from scheduler_dedup.handler.core.variables import VARIABLES
    from scheduler_dedup.policies.rules import RULES

    environment = (ROOT / "docs/reference/environment.md").read_text()
    assert all(f'<span id="{name.lower()}"></span>`{name}`' in environment for name in VARIABLES)
    rules = (ROOT / "docs/reference/policy-rules.md").read_text()
    assert all(f"\n## {rule.name}\n\n**{rule.enforcement_level}**" in rules for rule in RULES)


def test_markdown_turns_docstring_markup_into_markdown() -> None:
    assert reference.markdown("``x`` and :func:`~a.b.c` and :mod:`a.b`, see https://example.com/p.") == \
        "`x` and `c` and `a.b`, see <https://example.com/p>."
    assert reference.markdown("``https://example.com``") == "`https://example.com`"


def test_every_page_under_docs_is_in_the_nav() -> None:
    """mkdocs only warns (here: fails, under --strict) about pages missing from the nav; this names them at once."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    assert pages and all(page in nav for page in pages), [page for page in pages if page not in nav]


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason=missing("the docs extra is not installed (pip install -e '.[docs]')"))
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, a missing anchor, a page outside the nav or a docstring mkdocstrings
    cannot render fails the build (mkdocs.yml's validation settings make them warnings, --strict errors)."""
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    started = time.monotonic()
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "reference/python-api.html").is_file()
    api = (tmp_path / "site" / "reference/python-api.html").read_text()
    for name in ("DedupScheduledJob", "DedupStore", "idempotent_endpoint", "NonRetryableJobError", "RunInProgressError"):
        assert re.search(rf'id="[^"]*{name}"', api), f"the Python API page does not render {name}"
    print(f"mkdocs build --strict: {time.monotonic() - started:.1f} s; serve it locally with `mkdocs serve`")
    _opens_from_disk(tmp_path / "site")


def _opens_from_disk(site: Path) -> None:
    """The built site works opened as files (file://): its search index is a script (the offline plugin's
    ``search/search_index.js``), its links name ``.html`` files, and every script it loads is its own, the Web
    Worker shim search needs under file:// included (over file:// a browser refuses a worker, and the plugin's
    default shim is on another host). tests/test_docs_browser.py searches it in a real browser."""
    assert (site / "search" / "search_index.js").read_text().startswith("var __index = ")
    for page in site.rglob("*.html"):
        html = page.read_text()
        scripts = re.findall(r'<script[^>]* src="([^"]+)"', html)
        assert scripts and not [s for s in scripts if "://" in s or s.startswith("//")], (page, scripts)
        assert any(s.endswith("javascripts/iframe-worker-shim.js") for s in scripts), (page, scripts)
    home = (site / "index.html").read_text()
    assert 'href="stores.html' in home and 'href="stores/"' not in home


def test_the_broken_link_check_works(tmp_path: Path) -> None:
    """The validation the strict build relies on: a link to a missing anchor is an error."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip(missing("the docs extra is not installed (pip install -e '.[docs]')"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[there](other.md#nowhere)\n")
    (docs / "other.md").write_text("# Other\n")
    (docs / "orphan.md").write_text("# Orphan\n")
    config = (ROOT / "mkdocs.yml").read_text()
    validation = config[config.index("validation:"):config.index("nav:\n  - Home")]
    (tmp_path / "mkdocs.yml").write_text(f"site_name: t\nstrict: true\n{validation}nav:\n  - index.md\n  - other.md\n")
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode != 0
    assert "nowhere" in done.stderr and "orphan.md" in done.stderr, done.stderr


def test_every_docs_page_the_code_names_exists() -> None:
    """A message or docstring that sends the reader to ``docs/<page>.md`` names a page that is there (a refusal of a
    job's env var once pointed at docs/reference/settings.md, which never existed)."""
    named = {(path, page) for top in ("handler", "infra", "policies", "local") for path in (ROOT / top).rglob("*.py")
             for page in re.findall(r"docs/[\w./-]+\.md", path.read_text())}
    assert named, "the scan found no page at all"
    missing = sorted(f"{path.relative_to(ROOT)}: {page}" for path, page in named if not (ROOT / page).is_file())
    assert not missing, "\n".join(missing)


def _hooks() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_long_token_breaks_at_its_punctuation_never_mid_word() -> None:
    """A dotted path, URL or camelCase name wider than its column (a table's, a phone's) gets break points after
    its ``.``, ``/``, ``_``, ``=`` and ``,`` (and between camelCase humps), so it breaks there rather than inside a
    word; preformatted code and tags are left as written."""
    break_points = _hooks().break_points  # type: ignore[attr-defined]
    html = ('<p><code>scheduler_dedup.handler.stores</code> <a href="https://a.b/c_d">https://cloud.google.com/run</a>'
            ' <code>iam.automaticIamGrantsForDefault</code> short_name &amp;x.y.z.w.v.u.t.s.r</p>'
            '<pre><code>scheduler_dedup.handler.stores.firestore</code></pre>'
            '<h2><code><span class="n">scheduler_dedup</span><span class="o">.</span><span class="n">infra</span></code></h2>')
    out = break_points(html)
    assert "<code>scheduler_<wbr>dedup.<wbr>handler.<wbr>stores</code>" in out
    assert 'href="https://a.b/c_d">https://<wbr>cloud.<wbr>google.<wbr>com/<wbr>run</a>' in out
    assert "iam.<wbr>automatic<wbr>Iam<wbr>Grants<wbr>For<wbr>Default" in out and " short_name " in out
    assert "&amp;x.<wbr>y" in out  # a character reference stays whole
    assert "<pre><code>scheduler_dedup.handler.stores.firestore</code></pre>" in out
    assert '<span class="o">.</span><wbr><span class="n">infra</span>' in out  # a highlighted signature
    assert re.sub("<wbr>", "", out) == html  # it adds break points, no text
