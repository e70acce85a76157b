"""The code's layout: no import cycle between our modules, the layers, no store named where none belongs, and no
ticket numbers in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scheduler_dedup.handler.stores import registry
from tests.paths import ROOT

PACKAGES = ("handler", "infra", "policies", "local")


def _modules() -> dict[str, Path]:
    """``scheduler_dedup.<dotted name>`` -> file, for every module of the installed packages."""
    modules = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "__pycache__" in parts or "examples" in parts or parts[:2] == ("infra", "provider"):
                continue
            name = ".".join(("scheduler_dedup", *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, at module level or inside a function (a deferred import that
    only exists to break a cycle is still the cycle)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                candidates = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            imported |= {c for c in candidates if c in modules and c != name}
        graph[name] = imported
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_our_modules() -> None:
    """A cycle (``infra/job/alerts.py`` -> ``infra/job/settings.py`` -> ``infra/stores/store.py`` -> ``infra/job/alerts.py`` was one)
    makes the import order matter and hides which module is the lower layer: move the shared names down instead."""
    graph = import_graph()
    assert "scheduler_dedup.infra.job.alerts" in graph and graph["scheduler_dedup.infra.job.alerts"], "the graph is empty"
    assert cycles(graph) == []


#: A ticket reference: "issue 5", "issues #12", "ticket 7", "(#42)", "PR 3".
_TICKET = re.compile(r"\b(?:issues?|tickets?|PR)\s*#?\d+\b|\(#\d+\)", re.IGNORECASE)
#: Citations of other projects' threads are sources, not our tickets.
_CITATION = re.compile(r"[\w.-]+/[\w.-]+#\d+|github\.com/\S+")


def test_no_ticket_numbers_in_the_code() -> None:
    """The code explains itself; which ticket asked for a line is the history's business (git log)."""
    offenders = []
    files = [p for top in (*PACKAGES, "tests", "bench", "examples", "scripts", ".ci") for p in (ROOT / top).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix in ("", ".py", ".sh", ".yaml", ".toml")]
    files += [ROOT / name for name in ("pyproject.toml", "__main__.py", "mkdocs.yml")] + sorted(ROOT.glob("Pulumi*.yaml"))
    for path in files:
        if not path.exists() or path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _TICKET.search(_CITATION.sub("", line)):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


#: The layers, lowest first: a module may import our modules of its own folder and of the folders before it, never
#: of a folder after it. A package's ``__init__`` that only re-exports (the public API) is exempt.
LAYERS = (
    # the handler: what Cloud Run runs
    "handler.core",        # shared vocabulary: errors, records, statuses, logs, variables
    "handler.schedule",    # Cloud Scheduler's rules: cron, time zones, retry windows, run keys
    "handler.stores",      # the store contract (base, wire) and, below it in the same folder, one folder per store
    "handler.config",      # the handler's settings, read from the environment
    "handler.protocol",    # claim, lease, fence, complete: imports only the store contract
    "handler.monitoring",  # run history and the run check
    "handler.callers",     # caller verification
    "handler.targets",     # downstream targets
    "handler.service",     # the HTTP service
    "handler.main",
    # the component
    "infra.errors", "infra.args", "infra.project", "infra.stores", "infra.job", "infra.stack",
    # the policy pack
    "policies.limits", "policies.reading", "policies.rules", "policies.pack", "policies.offline", "policies.__main__",
    # what runs on your machine
    "local.faults", "local.servers", "local.demo", "local.campaigns", "local.commands",
)
_FACADES = {"scheduler_dedup.handler", "scheduler_dedup.infra", "scheduler_dedup.policies", "scheduler_dedup.local"}


def _layer(module: str) -> int:
    name = module.removeprefix("scheduler_dedup.")
    ranks = [i for i, layer in enumerate(LAYERS) if name == layer or name.startswith(layer + ".")]
    assert ranks, f"{module} is in no layer of LAYERS: add its folder where it belongs"
    return ranks[-1]


def _runtime_imports() -> dict[str, set[str]]:
    """Like :func:`import_graph`, without imports under ``if TYPE_CHECKING:`` (no import happens at run time) and
    counting ``from package import module`` as the module only."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                       for n in ast.walk(node)}
        imported: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                subs = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
                imported |= subs or ({base} & modules.keys())
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names} & modules.keys()
        graph[name] = imported - {name}
    return graph


def test_no_module_imports_a_layer_above_its_own() -> None:
    """Each folder says what it may import by its place in :data:`LAYERS`; an upward import is a concern in the
    wrong folder (move the shared name down)."""
    upward = [f"{a} imports {b}" for a, bs in sorted(_runtime_imports().items()) if a not in _FACADES
              for b in sorted(bs) if b not in _FACADES and _layer(b) > _layer(a)]
    assert not upward, "\n".join(upward)


def test_a_facade_is_only_a_facade() -> None:
    """The exemption from layering holds only while a package's ``__init__`` re-exports and defines nothing."""
    for facade in _FACADES:
        tree = ast.parse(_modules()[facade].read_text())
        defined = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        assert not defined, f"{facade} defines {defined}: a class belongs in a module of its layer"


def test_the_protocol_and_the_monitoring_import_only_the_store_contract() -> None:
    """Store-specific code lives behind the contract: the protocol never names a store."""
    contract = {"scheduler_dedup.handler.stores", "scheduler_dedup.handler.stores.base",
                "scheduler_dedup.handler.stores.registry"}
    named = [f"{a} imports {b}" for a, bs in sorted(_runtime_imports().items())
             if a.startswith(("scheduler_dedup.handler.protocol", "scheduler_dedup.handler.monitoring"))
             for b in sorted(bs) if b.startswith("scheduler_dedup.handler.stores") and b not in contract]
    assert not named, "\n".join(named)


#: Every name of a registered store: its ``DEDUP_STORE`` id and its ``DedupStore`` kind.
_STORE_NAMES = frozenset({kind.id for kind in registry.STORES} | {kind.component_kind for kind in registry.STORES})


def store_kind_branches(source: str, names: frozenset[str] = _STORE_NAMES) -> list[str]:
    """Each comparison in ``source`` against a store's name (``kind == "spanner"``, ``kind in ("redis",)``), as
    ``line: code``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        constants = [c for o in operands for c in ([o] if isinstance(o, ast.Constant) else
                                                   o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [])]
        if any(isinstance(c, ast.Constant) and c.value in names for c in constants):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_job_names_no_store() -> None:
    """``DedupScheduledJob`` leaves every store's part to the store's component piece (``infra/stores/base.py``
    lists what a piece provides): no module of ``infra/job/`` compares with a store's name or imports a piece, so a
    new store needs no line there."""
    offenders = [f"{path.relative_to(ROOT)}:{hit}" for path in sorted((ROOT / "infra" / "job").glob("*.py"))
                 for hit in store_kind_branches(path.read_text())]
    allowed = {"scheduler_dedup.infra.stores.base", "scheduler_dedup.infra.stores.store"}
    offenders += [f"{a} imports {b}" for a, bs in sorted(_runtime_imports().items())
                  if a.startswith("scheduler_dedup.infra.job") for b in sorted(bs)
                  if b.startswith("scheduler_dedup.infra.stores.") and b not in allowed]
    assert not offenders, "\n".join(offenders)


def test_the_store_name_check_finds_a_branch() -> None:
    assert store_kind_branches('if s.store_kind == "spanner":\n    pass\nx = kind in ("x", "redis")\n'
                               'y = "memorystore" != k\nz = kind == "other"\n') == [
        "1: s.store_kind == 'spanner'", "3: kind in ('x', 'redis')", "4: 'memorystore' != k"]


def test_the_layer_check_finds_an_upward_import() -> None:
    assert _layer("scheduler_dedup.handler.protocol.lease") > _layer("scheduler_dedup.handler.stores.base")
    assert _layer("scheduler_dedup.handler.stores.redis.store") == _layer("scheduler_dedup.handler.stores.base")
    assert _layer("scheduler_dedup.local.commands.cli") > _layer("scheduler_dedup.policies.offline.check")


def test_only_the_config_reads_the_process_environment() -> None:
    """One reader turns the environment into settings (``handler/config/environment.py``); every other module of the
    handler takes settings, so a setting cannot be read, defaulted or checked twice."""
    readers = []
    for name, path in sorted(_modules().items()):
        if not name.startswith("scheduler_dedup.handler.") or name == "scheduler_dedup.handler.config.environment":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            attribute = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "os" and node.attr in ("environ", "environb", "getenv", "putenv")
            imported = isinstance(node, ast.ImportFrom) and node.module == "os" and \
                any(alias.name in ("environ", "environb", "getenv") for alias in node.names)
            if attribute or imported:
                readers.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}")
    assert not readers, "read the environment in handler/config (read_environment) and pass settings:\n" + \
        "\n".join(readers)


def _children(package: Path) -> set[str]:
    """The modules and module folders directly in ``package`` (``examples/`` too when it holds Python)."""
    found = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    return found | {p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__" and any(p.rglob("*.py"))}


#: How a package's docstring names one of its modules: ``:mod:`.name```, ``name/`` or ``name.py``.
_LISTED = re.compile(r":mod:`~?\.(\w+)|``(\w+)/``|``(\w+)\.py``")


def test_a_package_that_lists_its_modules_lists_them_all() -> None:
    """A folder's first lines say what lives there: naming some of its modules and not the others misleads."""
    partial = []
    for top in PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            listed = {next(g for g in m.groups() if g) for m in _LISTED.finditer(doc)}
            missing = _children(init.parent) - listed
            if listed and missing:
                partial.append(f"{init.relative_to(ROOT)} names {sorted(listed)} but not {sorted(missing)}")
    assert not partial, "\n".join(partial)


#: A reference in a docstring or comment: ``:func:`~scheduler_dedup.x.y```, ``:mod:`.sibling```...
_REFERENCE = re.compile(r":(?:func|class|meth|data|mod|attr|exc):`~?((?:scheduler_dedup)?\.[\w.]+|scheduler_dedup)`")


def _top_level_names(path: Path) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update({n.id: node for n in ast.walk(target) if isinstance(n, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, ast.If):  # names imported under TYPE_CHECKING
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update({(a.asname or a.name).split(".")[0]: sub for a in sub.names})
    return names


def _resolves(dotted: str, modules: dict[str, Path]) -> bool:
    """True if ``dotted`` is one of our modules, or a name a module defines (a class's member one level down)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            rest = parts[cut:]
            if not rest:
                return True
            node = _top_level_names(modules[module]).get(rest[0])
            if node is None or len(rest) == 1 or not isinstance(node, ast.ClassDef):
                return node is not None and len(rest) <= 2
            members = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            members |= {t.id for n in node.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)}
            members |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            return rest[1] in members
    return False


def test_references_to_our_modules_name_what_exists() -> None:
    """A docstring's ``:mod:``/``:func:``... reference to a module of ours (dotted, or relative to its package) names
    a module or name that exists: a module renamed or split leaves none pointing at its old name."""
    modules = _modules()
    stale = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in _REFERENCE.finditer(line):
                target = match.group(1)
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    base = package.split(".")[: len(package.split(".")) - level + 1]
                    target = ".".join([*base, target.lstrip(".")]).rstrip(".")
                if not _resolves(target, modules):
                    stale.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert not stale, "\n".join(stale)


def test_the_reference_check_finds_a_stale_one() -> None:
    modules = _modules()
    assert _resolves("scheduler_dedup.handler.schedule.cron.fire_times.FireTime.ambiguous", modules)
    assert _resolves("scheduler_dedup.handler.targets", modules)
    assert not _resolves("scheduler_dedup.handler.targets.targets", modules)
    assert not _resolves("scheduler_dedup.handler.schedule.cron.fire_times.is_fire_times", modules)
