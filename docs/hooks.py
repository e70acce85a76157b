"""MkDocs hooks (``mkdocs.yml``: ``hooks``).

- The site's home page is README.md and its changelog CHANGELOG.md. Both live at the repository root, where a
  forge shows them; the site serves them as ``index.md`` and ``changelog.md``, with their links into ``docs/``
  made relative to the site, so each fact stays on one page.
- mkdocstrings reads the package from a temporary tree laid out as the wheel is (``scheduler_dedup/handler``...,
  symlinks to the folders here), because its loader cannot follow setuptools' editable-install mapping of
  ``scheduler_dedup.*`` to ``handler/``, ``infra/``... (``scripts/typecheck`` does the same for mypy).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
#: Root file -> its page in the site.
PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md"}
#: The folders of the ``scheduler_dedup`` package.
PACKAGES = ("handler", "infra", "policies", "local")


def package_tree() -> Path:
    """A temporary folder holding ``scheduler_dedup/<package>`` symlinks to this repository's folders; removed at
    exit."""
    tree = Path(tempfile.mkdtemp(prefix="scheduler-dedup-api-"))
    atexit.register(shutil.rmtree, tree, ignore_errors=True)
    (tree / "scheduler_dedup").mkdir()
    for package in PACKAGES:
        (tree / "scheduler_dedup" / package).symlink_to(ROOT / package, target_is_directory=True)
    return tree


@event_priority(100)  # before mkdocstrings' own on_config, which creates its handlers
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [str(package_tree()), *python.get("paths", [])]
    return config


def site_markdown(text: str) -> str:
    """Root-relative links as site-relative ones: ``docs/stores.md`` -> ``stores.md``, ``CHANGELOG.md`` ->
    ``changelog.md``."""
    text = re.sub(r"\]\(docs/", "](", text)
    for source, page in PAGES.items():
        text = re.sub(rf"\]\({re.escape(source)}(#|\))", rf"]({page}\1", text)
    return text


def docs_markdown(text: str, src_uri: str) -> str:
    """A page's links to the root README.md and CHANGELOG.md (``../README.md#deploy-it``, which work on a forge)
    as links to their site pages (``index.md#deploy-it``)."""
    depth = src_uri.count("/")
    for source, page in PAGES.items():
        text = re.sub(rf"\]\({re.escape('../' * (depth + 1) + source)}(#|\))", rf"]({'../' * depth}{page}\1", text)
    return text


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return markdown if page.file.src_uri in PAGES.values() else docs_markdown(markdown, page.file.src_uri)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for source, page in PAGES.items():
        files.append(File.generated(config, page, content=site_markdown((ROOT / source).read_text())))
    return files
