"""MkDocs hooks (``mkdocs.yml``: ``hooks``).

- The site's home page is README.md and its changelog CHANGELOG.md. Both live at the repository root, where a
  forge shows them; the site serves them as ``index.md`` and ``changelog.md``, with their links into ``docs/``
  made relative to the site, so each fact stays on one page.
- A long token (a dotted module path, a URL, an env var assignment) may break after its ``.``, ``/``, ``_``, ``=``
  or ``,`` (:func:`break_points`), so a narrow column or a phone's width breaks it there, never mid-word
  ("ALREADY_EX ISTS").
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


#: Tokens at least this long get break points; shorter ones fit any column.
LONG_TOKEN = 16
_TAG_OR_TEXT = re.compile(r"(<[^>]*>)")
_LONG_TOKEN = re.compile(rf"[^\s<>]{{{LONG_TOKEN},}}")
_BREAK_AFTER = re.compile(r"(?<=[./_=,])(?![./_=,]|$)")
_ENTITY = re.compile(r"(&[#A-Za-z0-9]+;)")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: Elements whose text is left as written: preformatted code keeps its lines, scripts and styles are not text.
_VERBATIM = ("pre", "script", "style", "textarea")


def break_points(html: str) -> str:
    """``html`` with a ``<wbr>`` after each run of ``.``, ``/``, ``_``, ``=`` and ``,`` in every text token of at least
    :data:`LONG_TOKEN` characters outside ``pre``, ``script``, ``style`` and ``textarea``: a line then breaks there
    (``scheduler_dedup.handler.<wbr>stores``), not mid-word, when the token is wider than its column (a camelCase
    token without these, between its humps); so does a
    highlighted signature (mkdocstrings' headings) after each ``.``, ``(`` and ``[`` span. Tags, their attributes and
    character references are left as they are; a ``<wbr>`` adds no text (search, copy)."""
    out, verbatim, after_punctuation = [], 0, False
    for part in _TAG_OR_TEXT.split(html):
        if part.startswith("<"):
            name = re.match(r"</?\s*([A-Za-z0-9]+)", part)
            if name and name.group(1).lower() in _VERBATIM and not part.endswith("/>"):
                verbatim += -1 if part.startswith("</") else 1
            out.append(part)
            if after_punctuation and part == "</span>":  # a highlighted signature's "." or "(" (its own span)
                out.append("<wbr>")
            after_punctuation = False
        elif verbatim == 0 and part in (".", "(", "["):
            out.append(part)
            after_punctuation = True
        elif verbatim > 0 or len(part) < LONG_TOKEN:
            out.append(part)
        else:
            out.append(_LONG_TOKEN.sub(lambda m: "".join(
                piece if _ENTITY.fullmatch(piece) else _with_breaks(piece) for piece in _ENTITY.split(m.group(0))),
                part))
    return "".join(out)


def _with_breaks(token: str) -> str:
    """``token`` with a ``<wbr>`` after each run of ``.``, ``/``, ``_``, ``=`` and ``,``; a part still
    :data:`LONG_TOKEN` characters long without ``-`` (where a line breaks anyway) also between its camelCase humps
    (``iam.<wbr>automatic<wbr>Iam<wbr>Grants...``)."""
    return "<wbr>".join(_CAMEL_HUMP.sub("<wbr>", part) if len(part) >= LONG_TOKEN and "-" not in part else part
                        for part in _BREAK_AFTER.split(token))


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return break_points(html)
