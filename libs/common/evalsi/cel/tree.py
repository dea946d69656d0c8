"""Reading cel-python's parse tree: positions, literal arguments and the calls of declared functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lark import Token, Tree

from evalsi.cel.types import Call


def calls(tree: Tree, names: frozenset[str]) -> Iterator[Call]:
    """Every call of the named global functions, with methods called on their results."""
    for node in tree.iter_subtrees_topdown():
        if node.data == "ident_arg" and str(node.children[0]) in names:
            yield _call(node)
        elif node.data == "member_dot_arg":
            receiver = unwrap(node.children[0])
            if receiver is not None and receiver.data == "ident_arg" and str(receiver.children[0]) in names:
                base = _call(receiver)
                args = tuple(literal_value(a) for a in args_of(node.children[2]))
                token = node.children[1]
                yield Call(str(token), args, *position(token, node), receiver=base)


def position(node: Tree | Token, fallback: Tree | None) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 1, node.column or 1
    meta = node.meta if not getattr(node.meta, "empty", True) else (fallback.meta if fallback else None)
    if meta is None:
        return 1, 1
    return meta.line, meta.column


def args_of(exprlist: Any) -> list[Tree]:
    if not isinstance(exprlist, Tree):
        return []
    return [c for c in exprlist.children if isinstance(c, Tree)]


def unwrap(node: Any) -> Tree | None:
    """The innermost node under levels of precedence that have a single child and no operator."""
    while isinstance(node, Tree) and node.data in (
        "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
        "primary",
    ):
        children = [c for c in node.children if c is not None]
        if len(children) != 1 or not isinstance(children[0], Tree):
            return node
        node = children[0]
    return node if isinstance(node, Tree) else None


def ident_name(node: Tree) -> str | None:
    inner = unwrap(node)
    if inner is not None and inner.data == "ident":
        return str(inner.children[0])
    return None


def literal_value(node: Any) -> Any:
    """The value of a literal argument (a string's text, an int); None when the argument is not a literal."""
    inner = unwrap(node)
    if inner is None or inner.data != "literal":
        return None
    token = inner.children[0]
    if not isinstance(token, Token):
        return None
    text = str(token)
    if token.type in ("STRING_LIT", "MLSTRING_LIT"):
        raw = text[1:] if text[:1] in "rR" else text
        quotes = 3 if token.type == "MLSTRING_LIT" else 1
        return raw[quotes:-quotes]
    if token.type == "INT_LIT":
        try:
            return int(text, 0)
        except ValueError:
            return None
    return None


def _call(node: Tree) -> Call:
    token = node.children[0]
    args = tuple(literal_value(a) for a in args_of(node.children[1] if len(node.children) > 1 else None))
    return Call(str(token), args, *position(token, node))
