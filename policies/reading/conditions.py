"""What an IAM condition limits a grant to, read from its CEL expression (parsed with cel-python, never searched).

A grant with a condition applies to a request only while the condition holds
(https://cloud.google.com/iam/docs/conditions-overview). A project-, folder- or organization-wide grant is narrowed
to some resources only if **every** way to satisfy its condition pins ``resource.name`` to them or their children
(``resource.name`` is the one attribute that names a resource; ``resource.type`` and ``resource.service`` name whole
kinds: https://cloud.google.com/iam/docs/conditions-attribute-reference). So:

- ``resource.name == "X"``, ``"X" == resource.name``, ``resource.name in ["X", "Y"]`` pin X (and Y);
- ``resource.name.startsWith("X/")`` (or ``"X" + "/"``) pins the children of X, when X is a resource name
  (``collection/id`` pairs, no wildcard: ``projects/p/databases/d``) or a collection of one
  (``projects/p/locations/l/workflows/w/executions``);
- ``a && b`` pins what either side pins; ``a || b`` and ``c ? a : b`` pin only when both branches pin;
- anything else (``!``, ``endsWith``, ``matches``, ``request.time``, ``resource.type``, ``true``) pins nothing, so
  ``resource.name.startsWith("projects/") || true`` narrows nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree
from lark.exceptions import LarkError

from scheduler_dedup.policies.reading.model import get, is_unknown

#: Grammar nodes that only wrap one child (cel-python's Lark tree for CEL).
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                       "member", "primary", "paren_expr"})


@dataclass(frozen=True)
class ConditionScope:
    """What an IAM binding's condition limits the grant to.

    Attributes:
        pins: resource names the grant is limited to (each with its children); None when the condition does not
            narrow the grant to named resources (no condition, or one that some request satisfies unpinned).
        unknown: the condition is not known yet (an output at ``pulumi preview``): callers give it the benefit of
            the doubt, as the engine checks again at ``pulumi up``.
        reason: why the condition narrows nothing, for messages ("" when it narrows or is absent).
    """

    pins: frozenset[str] | None
    unknown: bool = False
    reason: str = ""

    @property
    def narrows(self) -> bool:
        """True when the grant is limited to named resources (or the condition is unknown)."""
        return self.unknown or self.pins is not None

    def inside(self, intended: Iterable[str]) -> bool:
        """True when every pinned resource is one of ``intended`` or inside one (unknown: True).

        ``intended`` holds resource names (``projects/p/databases/(default)``), a ``*`` segment matching any one
        segment (``projects/*/databases/*``: any Firestore database). A pin above them (``projects/p``, which
        ``resource.name.startsWith("projects/p/")`` pins) or beside them is not inside.
        """
        if self.unknown:
            return True
        wanted = [name.rstrip("/").split("/") for name in intended]
        return self.pins is not None and all(any(_under(pin.split("/"), name) for name in wanted) for pin in self.pins)


def _under(pin: list[str], name: list[str]) -> bool:
    """``pin`` is ``name`` or inside it, segment by segment (``*`` in ``name`` matches any one segment)."""
    return len(pin) >= len(name) and all(n in ("*", p) for p, n in zip(pin, name))


def _is_resource_name(name: str, *, collection: bool = False) -> bool:
    """``collection/id`` pairs (``projects/p/databases/d``); with ``collection``, also a collection of one
    (``.../workflows/w/executions``)."""
    parts = name.split("/")
    return (len(parts) >= 2 and (len(parts) % 2 == 0 or (collection and len(parts) >= 3)) and all(parts)
            and "*" not in name)


def _strip(node: Any) -> Any:
    while isinstance(node, Tree) and node.data in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return node


def _string(node: Any) -> str | None:
    """The value of a string literal or a ``+`` of string literals, else None."""
    node = _strip(node)
    if isinstance(node, Tree) and node.data == "literal" and node.children:
        token = node.children[0]
        text = str(token)
        if isinstance(token, Token) and len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" and \
                not text.startswith(("'''", '"""')):
            return bytes(text[1:-1], "utf-8").decode("unicode_escape")
        return None
    if isinstance(node, Tree) and node.data == "addition" and len(node.children) == 2:
        left, right = node.children
        if isinstance(left, Tree) and left.data == "addition_add":
            a, b = _string(left.children[0]), _string(right)
            return a + b if a is not None and b is not None else None
    return None


def _is_resource_name_attr(node: Any) -> bool:
    node = _strip(node)
    if not (isinstance(node, Tree) and node.data == "member_dot" and len(node.children) == 2):
        return False
    receiver, name = _strip(node.children[0]), node.children[1]
    return (str(name) == "name" and isinstance(receiver, Tree) and receiver.data == "ident"
            and str(receiver.children[0]) == "resource")


def _strings(node: Any) -> list[str] | None:
    node = _strip(node)
    if isinstance(node, Tree) and node.data == "list_lit":
        items = node.children[0].children if node.children else []
        values = [_string(item) for item in items]
        return [v for v in values if v is not None] if all(v is not None for v in values) else None
    return None


def _pins(node: Any) -> frozenset[str] | None:
    """Resource names every satisfying evaluation of ``node`` pins ``resource.name`` to, or None."""
    node = _strip(node)
    if not isinstance(node, Tree):
        return None
    kids = node.children
    if node.data == "expr" and len(kids) == 3:  # c ? a : b
        a, b = _pins(kids[1]), _pins(kids[2])
        return a | b if a is not None and b is not None else None
    if node.data == "conditionalor" and len(kids) == 2:
        a, b = _pins(kids[0]), _pins(kids[1])
        return a | b if a is not None and b is not None else None
    if node.data == "conditionaland" and len(kids) == 2:
        a, b = _pins(kids[0]), _pins(kids[1])
        if a is not None and b is not None:
            return a | b
        return a if a is not None else b
    if node.data == "literal" and kids and str(kids[0]) == "false":
        return frozenset()  # never holds: the grant never applies
    if node.data == "relation" and len(kids) == 2 and isinstance(kids[0], Tree):
        op, rhs = kids[0], kids[1]
        lhs = op.children[0] if op.children else None
        if op.data == "relation_eq":
            for attr, value in ((lhs, rhs), (rhs, lhs)):
                name = _string(value)
                if _is_resource_name_attr(attr) and name is not None and _is_resource_name(name):
                    return frozenset({name})
        if op.data == "relation_in" and _is_resource_name_attr(lhs):
            names = _strings(rhs)
            if names is not None and all(_is_resource_name(n) for n in names):
                return frozenset(names)
        return None
    if node.data == "member_dot_arg" and len(kids) == 3 and str(kids[1]) == "startsWith":
        args = kids[2].children if isinstance(kids[2], Tree) else []
        prefix = _string(args[0]) if len(args) == 1 else None
        if _is_resource_name_attr(kids[0]) and prefix is not None and prefix.endswith("/") and \
                _is_resource_name(prefix[:-1], collection=True):
            return frozenset({prefix[:-1]})
    return None


def condition_scope(condition: Any) -> ConditionScope:
    """What the IAM ``condition`` of a member, binding or policy binding (``{"expression": ...}``) limits the grant to.

    Returns a :class:`ConditionScope`: ``pins`` None for an absent condition, one that does not parse (IAM would
    refuse it; nothing is assumed) or one some request satisfies without a pinned ``resource.name``; ``unknown``
    when the condition or its expression is not known yet (preview).
    """
    if condition in (None, {}):
        return ConditionScope(None)
    if is_unknown(condition):
        return ConditionScope(None, unknown=True)
    expression = get(condition, "expression") if isinstance(condition, Mapping) else None
    if is_unknown(expression):
        return ConditionScope(None, unknown=True)
    if not isinstance(expression, str) or not expression.strip():
        return ConditionScope(None, reason="the condition has no expression")
    from celpy import celparser

    try:
        tree = celparser.CELParser().parse(expression)
    except (celparser.CELParseError, LarkError) as error:
        return ConditionScope(None, reason=f"its expression does not parse as CEL ({str(error).splitlines()[0]})")
    pins = _pins(tree)
    if pins is None:
        return ConditionScope(None, reason=f"its expression {expression!r} holds for requests whose resource.name "
                                           "is not pinned to a resource (only resource.name == X, resource.name in "
                                           "[...] and resource.name.startsWith(X + \"/\") pin it, on every branch of "
                                           "an ||)")
    return ConditionScope(pins)
