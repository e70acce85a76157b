"""The user's job entry point ``module:function``, judged without importing the user's code (an AST check of
the module), so a name the handler would refuse at start-up fails ``pulumi preview``."""

from __future__ import annotations

from pathlib import Path


def entry_point_problem(module_file: Path, name: str) -> str | None:
    """Why the handler could not find ``name`` in ``module_file``, or None when it may (judged without importing
    the user's code). Counted as binding the name: a module-level ``def``, ``class``, assignment or import, also
    under ``if``/``try``/``with``; a ``*`` import or a module ``__getattr__`` may bind anything, so they pass.
    """
    import ast

    try:
        tree = ast.parse(module_file.read_text(encoding="utf-8"), filename=str(module_file))
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        return f"{module_file.name} cannot be parsed ({error}), so it cannot be imported"
    bound: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field_name in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field_name, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    if name in bound or "__getattr__" in bound:
        return None
    defined = sorted(n for n in bound if not n.startswith("_"))
    return (f"{module_file.name} defines no {name!r} at module level"
            + (f" (it defines {', '.join(defined[:8])})" if defined else "") + ": fix the function name after ':'")
