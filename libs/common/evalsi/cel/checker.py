"""A static type check of CEL expressions, for gates and policies, before anything runs.

cel-python parses and evaluates CEL but has no type checker: ``metric('a').n >= 0.5`` or ``metric('a').mean ==
'x'`` parse fine and fail only when evaluated, after the run they gate was spent. ``check_expression`` walks
cel-python's parse tree (the subset of CEL our gates and policies allow) against declared variables and functions
and returns every type problem with its line and column, and the expression's type.

Why a checker over the tree rather than evaluating against a sample activation: evaluation short-circuits
(``a || b`` never reads ``b`` when ``a`` is true) and follows one branch of ``?:``, so a type error in the part
a sample does not reach would pass; the walk visits every node.

Numbers: CEL compares across numeric types (``1 < 1.5``, ``2 == 2.0``) but does not mix them in arithmetic. The
checker accepts mixed comparisons and ``NUMERIC_COMPARISONS`` makes the evaluation agree (cel-python alone refuses
``IntType >= DoubleType``); arithmetic mixing ``int`` and ``double`` is refused up front with the conversion to
write. ``dyn`` (a map's values of unknown type) is accepted everywhere and checked when evaluated.
"""

from __future__ import annotations

import difflib
from typing import Any

from lark import Token, Tree

from evalsi.cel.tree import args_of, ident_name, literal_value, position, unwrap
from evalsi.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    ERROR,
    INT,
    NULL,
    NUMBERS,
    ORDERED,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    CelProblem,
    CelType,
    Declarations,
    Function,
    accepts,
    article,
    list_of,
    map_of,
)

# The deepest parse tree checked. The checker walks the tree recursively (about two frames a level, and a pair of
# parentheses is ~10 levels), so a deeper tree is refused as a problem rather than reaching Python's recursion limit
# (an internal error): 512 levels are ~50 nested parentheses, far beyond any gate or selector.
MAX_TREE_DEPTH = 512


def check_expression(tree: Tree, declarations: Declarations, expression: str) -> tuple[CelType, list[CelProblem]]:
    """The type of a parsed expression and every type problem in it, in the order written."""
    depth = _tree_depth(tree)
    if depth > MAX_TREE_DEPTH:
        return ERROR, [CelProblem(1, 1, f"nests too deeply to check ({depth} levels in its parse tree; at most "
                                        f"{MAX_TREE_DEPTH}, about 50 nested parentheses)")]
    checker = _Checker(declarations, expression)
    kind = checker.visit(tree)
    return kind, sorted(checker.problems, key=lambda p: (p.line, p.column))


def _tree_depth(tree: Tree) -> int:
    """How deep the parse tree goes, walked without recursion (it is what is being bounded)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
    return deepest


_RELATIONS = {
    "relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
    "relation_eq": "==", "relation_ne": "!=", "relation_in": "in",
}
_ARITHMETIC = {
    "addition_add": "+", "addition_sub": "-", "multiplication_mul": "*", "multiplication_div": "/",
    "multiplication_mod": "%",
}
_CONVERSIONS = {
    "int": (INT, {"int", "uint", "double", "string", "timestamp"}),
    "uint": (UINT, {"int", "uint", "double", "string"}),
    "double": (DOUBLE, {"int", "uint", "double", "string"}),
    "string": (STRING, {"int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp"}),
    "bool": (BOOL, {"bool", "string"}),
    "bytes": (BYTES, {"bytes", "string"}),
    "duration": (DURATION, {"string", "duration"}),
    "timestamp": (TIMESTAMP, {"string", "timestamp"}),
}
_STRING_METHODS = {"contains", "startsWith", "endsWith", "matches"}
_MACROS = {"all", "exists", "exists_one", "map", "filter"}


class _Checker:
    def __init__(self, declarations: Declarations, expression: str) -> None:
        self.declarations = declarations
        self.expression = expression
        self.problems: list[CelProblem] = []
        self.scopes: list[dict[str, CelType]] = []

    def problem(self, node: Tree | Token, message: str) -> CelType:
        line, column = position(node, None)
        self.problems.append(CelProblem(line, column, message))
        return ERROR

    def text(self, node: Tree) -> str:
        meta = node.meta
        return " ".join(self.expression[meta.start_pos:meta.end_pos].split())

    def visit(self, node: Tree) -> CelType:
        handler = getattr(self, f"_{node.data}", None)
        children = [c for c in node.children if c is not None]
        if handler is not None:
            result: CelType = handler(node, children)
            return result
        if len(children) == 1 and isinstance(children[0], Tree):  # a level of precedence with no operator
            return self.visit(children[0])
        return self.problem(node, f"{node.data} is not supported in this expression")  # pragma: no cover

    # -- logic and conditions --

    def _expr(self, node: Tree, children: list[Any]) -> CelType:
        if len(children) == 1:
            return self.visit(children[0])
        condition, then, otherwise = (self.visit(c) for c in children)
        if not accepts(BOOL, condition):
            self.problem(children[0], f"the condition of ?: must be a bool, got {condition}")
        return self._unify(node, then, otherwise, "the two branches of ?:", mixed_is_dyn=False)

    def _conditionalor(self, node: Tree, children: list[Any]) -> CelType:
        return self._logic(node, children, "||")

    def _conditionaland(self, node: Tree, children: list[Any]) -> CelType:
        return self._logic(node, children, "&&")

    def _logic(self, node: Tree, children: list[Any], op: str) -> CelType:
        if len(children) == 1:
            return self.visit(children[0])
        for child in children:
            kind = self.visit(child)
            if not accepts(BOOL, kind):
                self.problem(child, f"{op} needs bool operands; {self.text(child)!r} is {article(kind)}")
        return BOOL

    # -- relations --

    def _relation(self, node: Tree, children: list[Any]) -> CelType:
        if len(children) == 1:
            return self.visit(children[0])
        op_node, right_node = children
        op = _RELATIONS[op_node.data]
        left_node = op_node.children[0]
        left, right = self.visit(left_node), self.visit(right_node)
        if ERROR in (left, right):
            return BOOL
        where = self._operator_at(left_node, right_node, op)
        if op == "in":
            return self._membership(where, left, right)
        if left.name == "dyn" or right.name == "dyn":
            return BOOL
        if left.name in NUMBERS and right.name in NUMBERS:
            return BOOL  # compared as numbers (NUMERIC_COMPARISONS)
        if op in ("==", "!="):
            if left.name != right.name:
                self._at(where, f"{op} compares {left} with {right}, which are never equal")
            return BOOL
        if left.name != right.name or left.name not in ORDERED:
            self._at(where, f"{op} cannot order {left} and {right}")
        return BOOL

    def _membership(self, where: tuple[int, int], element: CelType, container: CelType) -> CelType:
        if container.name == "list" or container.name == "map":
            expected = container.params[0]
        elif container.name == "dyn":
            return BOOL
        else:
            self._at(where, f"in needs a list or a map on its right, got {container}")
            return BOOL
        if not accepts(expected, element):
            self._at(where, f"in looks for {article(element)} among {container}")
        return BOOL

    # -- arithmetic --

    def _addition(self, node: Tree, children: list[Any]) -> CelType:
        return self._arithmetic(node, children)

    def _multiplication(self, node: Tree, children: list[Any]) -> CelType:
        return self._arithmetic(node, children)

    def _arithmetic(self, node: Tree, children: list[Any]) -> CelType:
        if len(children) == 1:
            return self.visit(children[0])
        op_node, right_node = children
        op = _ARITHMETIC[op_node.data]
        left_node = op_node.children[0]
        left, right = self.visit(left_node), self.visit(right_node)
        if ERROR in (left, right):
            return ERROR
        if left.name == "dyn" or right.name == "dyn":
            return right if left.name == "dyn" else left
        where = self._operator_at(left_node, right_node, op)
        if left.name in NUMBERS and right.name in NUMBERS and left.name != right.name:
            integer = left_node if left.name != "double" else right_node
            self._at(where, f"{op} mixes {left} and {right}, which CEL does not do in arithmetic; convert one side, "
                            f"e.g. double({self.text(integer)})")
            return ERROR
        allowed = {
            "+": {"int", "uint", "double", "string", "bytes", "list"},
            "-": {"int", "uint", "double"}, "*": {"int", "uint", "double"}, "/": {"int", "uint", "double"},
            "%": {"int", "uint"},
        }[op]
        if left.name != right.name or left.name not in allowed:
            self._at(where, f"{op} does not apply to {left} and {right}")
            return ERROR
        return left

    def _unary(self, node: Tree, children: list[Any]) -> CelType:
        if len(children) == 1:
            return self.visit(children[0])
        op_node, operand = children
        kind = self.visit(operand)
        if op_node.data == "unary_not":
            if not accepts(BOOL, kind):
                return self.problem(operand, f"! needs a bool; {self.text(operand)!r} is {article(kind)}")
            return BOOL
        if kind.name not in ("int", "double", "dyn", "error"):
            return self.problem(operand, f"- needs an int or a double; {self.text(operand)!r} is {article(kind)}")
        return kind

    # -- members, calls, literals --

    def _member_dot(self, node: Tree, children: list[Any]) -> CelType:
        receiver_node, name_token = children
        receiver = self.visit(receiver_node)
        return self._field(name_token, receiver, str(name_token), self.text(receiver_node))

    def _field(self, token: Token, receiver: CelType, name: str, receiver_text: str) -> CelType:
        if receiver.name in ("dyn", "error"):
            return receiver
        if receiver.fields is not None:
            if name in receiver.fields:
                return receiver.fields[name]
            members = [*receiver.fields, *(f"{m}()" for m in receiver.methods or {})]
            close = difflib.get_close_matches(name, [*receiver.fields, *(receiver.methods or {})], n=1, cutoff=0.75)
            hint = f"did you mean {close[0]}? " if close else ""
            return self.problem(token, f"{receiver_text} has no field {name!r}; {hint}accepted: {', '.join(members)}")
        if receiver.name == "map":
            if not accepts(receiver.params[0], STRING):
                return self.problem(token, f".{name} reads a string key, but {receiver_text} is {article(receiver)}")
            return receiver.params[1]
        return self.problem(token, f"{receiver_text} is {article(receiver)}, which has no fields (.{name})")

    def _member_index(self, node: Tree, children: list[Any]) -> CelType:
        receiver_node, index_node = children
        receiver, index = self.visit(receiver_node), self.visit(index_node)
        if receiver.name in ("dyn", "error") or index.name == "error":
            return DYN if receiver.name == "dyn" else ERROR
        if receiver.name == "list":
            if not accepts(INT, index):
                return self.problem(index_node, f"a list index must be an int, got {index}")
            return receiver.params[0]
        if receiver.name == "map":
            if not accepts(receiver.params[0], index):
                return self.problem(index_node, f"{self.text(receiver_node)} has {receiver.params[0]} keys, "
                                                f"not {index}")
            return receiver.params[1]
        if receiver.fields is not None:
            if not accepts(STRING, index):
                return self.problem(index_node, f"a field name must be a string, got {index}")
            literal = literal_value(index_node)
            if isinstance(literal, str):
                return self._field(index_node, receiver, literal, self.text(receiver_node))
            return DYN
        return self.problem(index_node, f"{self.text(receiver_node)} is {article(receiver)}, which cannot be indexed")

    def _member_object(self, node: Tree, children: list[Any]) -> CelType:
        return self.problem(node, "message construction (Type{...}) is not supported here")

    def _member_dot_arg(self, node: Tree, children: list[Any]) -> CelType:
        receiver_node, name_token = children[0], children[1]
        name = str(name_token)
        args = args_of(children[2]) if len(children) > 2 else []
        if name in _MACROS:
            return self._macro(node, receiver_node, name_token, args)
        receiver = self.visit(receiver_node)
        arg_types = [self.visit(a) for a in args]
        receiver_text = self.text(receiver_node)
        if receiver.name == "error":
            return ERROR
        if receiver.methods is not None and name in receiver.methods:
            return self._apply(name_token, f"{receiver_text}.{name}", receiver.methods[name], args, arg_types)
        if name == "size" and not args:
            return self._size(name_token, receiver, receiver_text)
        if name in _STRING_METHODS and receiver.name in ("string", "dyn"):
            signature = Function((STRING,), BOOL)
            return self._apply(name_token, f"{receiver_text}.{name}", signature, args, arg_types)
        methods = sorted(receiver.methods or {})
        hint = f"; its methods: {', '.join(f'{m}()' for m in methods)}" if methods else ""
        if receiver.name == "dyn":
            return DYN
        return self.problem(name_token, f"{receiver_text} is {article(receiver)}, which has no method {name}(){hint}")

    def _macro(self, node: Tree, receiver_node: Tree, name_token: Token, args: list[Tree]) -> CelType:
        name = str(name_token)
        receiver = self.visit(receiver_node)
        if len(args) != 2:
            return self.problem(name_token, f"{name}() takes a variable and an expression, e.g. {name}(x, x > 0)")
        variable = ident_name(args[0])
        if variable is None:
            return self.problem(args[0], f"the first argument of {name}() must be a variable name")
        if receiver.name == "list" or receiver.name == "map":
            element = receiver.params[0]
        elif receiver.name in ("dyn", "error"):
            element = DYN
        else:
            iterated = self.text(receiver_node)
            return self.problem(name_token, f"{name}() iterates a list or a map; {iterated} is {article(receiver)}")
        self.scopes.append({variable: element})
        try:
            body = self.visit(args[1])
        finally:
            self.scopes.pop()
        if name == "map":
            return list_of(body if body.name != "error" else DYN)
        if not accepts(BOOL, body):
            condition = self.text(args[1])
            self.problem(args[1], f"the condition of {name}() must be a bool; {condition!r} is {article(body)}")
        if name == "filter":
            return list_of(element)
        return BOOL

    def _primary(self, node: Tree, children: list[Any]) -> CelType:
        return self.visit(children[0])

    def _member(self, node: Tree, children: list[Any]) -> CelType:
        return self.visit(children[0])

    def _paren_expr(self, node: Tree, children: list[Any]) -> CelType:
        return self.visit(children[0])

    def _ident(self, node: Tree, children: list[Any]) -> CelType:
        return self._variable(children[0])

    def _dot_ident(self, node: Tree, children: list[Any]) -> CelType:
        return self._variable(children[0])

    def _variable(self, token: Token) -> CelType:
        name = str(token)
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.declarations.variables:
            return self.declarations.variables[name]
        if name in _CONVERSIONS or name in ("list", "map", "null_type", "dyn", "type"):
            return TYPE
        known = [*self.declarations.variables, *(f"{f}()" for f in self.declarations.functions)]
        return self.problem(token, f"unknown name {name!r}; this expression can use {', '.join(known) or 'literals'}")

    def _ident_arg(self, node: Tree, children: list[Any]) -> CelType:
        name_token = children[0]
        name = str(name_token)
        args = args_of(children[1]) if len(children) > 1 else []
        if name == "has":
            return self._has(name_token, args)
        arg_types = [self.visit(a) for a in args]
        if name in self.declarations.functions:
            return self._apply(name_token, name, self.declarations.functions[name], args, arg_types)
        if name == "size" and len(args) == 1:
            return self._size(name_token, arg_types[0], self.text(args[0]))
        if name in _CONVERSIONS and len(args) == 1:
            result, sources = _CONVERSIONS[name]
            if arg_types[0].name not in (*sources, "dyn", "error"):
                return self.problem(args[0], f"{name}() does not convert {article(arg_types[0])}")
            return result
        if name == "dyn" and len(args) == 1:
            return DYN
        if name == "type" and len(args) == 1:
            return TYPE
        known = ", ".join(f"{f}()" for f in self.declarations.functions) or "none"
        return self.problem(name_token, f"unknown function {name}(); functions here: {known}, and CEL's size(), "
                                        "int(), double(), string()")

    def _dot_ident_arg(self, node: Tree, children: list[Any]) -> CelType:
        return self._ident_arg(node, children)

    def _has(self, token: Token, args: list[Tree]) -> CelType:
        target = unwrap(args[0]) if len(args) == 1 else None
        if target is None or target.data != "member_dot":
            return self.problem(token, "has() takes a field selection, e.g. has(span.attributes.user)")
        receiver_node, name_token = target.children
        assert isinstance(name_token, Token)  # member_dot: the member, then the field's name
        receiver = self.visit(receiver_node)
        if receiver.fields is not None and str(name_token) not in receiver.fields:
            self._field(name_token, receiver, str(name_token), self.text(receiver_node))
        elif receiver.fields is None and receiver.name not in ("map", "dyn", "error"):
            selected = self.text(receiver_node)
            self.problem(name_token, f"has() needs a map or an object; {selected} is {article(receiver)}")
        return BOOL

    def _size(self, token: Token, kind: CelType, text: str) -> CelType:
        if kind.name not in ("string", "bytes", "list", "map", "dyn", "error"):
            return self.problem(token, f"size() needs a string, bytes, list or map; {text} is {article(kind)}")
        return INT

    def _apply(self, token: Token, shown: str, signature: Function, args: list[Tree],
               arg_types: list[CelType]) -> CelType:
        if len(args) != len(signature.params):
            wanted = ", ".join(str(p) for p in signature.params)
            return self.problem(token, f"{shown}() takes {len(signature.params)} argument(s) ({wanted}), "
                                       f"got {len(args)}")
        for arg, expected, kind in zip(args, signature.params, arg_types, strict=True):
            if not accepts(expected, kind):
                self.problem(arg, f"{shown}() takes {article(expected)}; {self.text(arg)!r} is {article(kind)}")
        return signature.result

    def _literal(self, node: Tree, children: list[Any]) -> CelType:
        token = children[0]
        return {
            "INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "STRING_LIT": STRING, "MLSTRING_LIT": STRING,
            "BYTES_LIT": BYTES, "BOOL_LIT": BOOL, "NULL_LIT": NULL,
        }.get(token.type, DYN)

    def _list_lit(self, node: Tree, children: list[Any]) -> CelType:
        items = args_of(children[0]) if children else []
        element: CelType | None = None
        for item in items:
            kind = self.visit(item)
            element = kind if element is None else self._unify(item, element, kind, "the items of a list",
                                                               mixed_is_dyn=True)
        return list_of(element if element is not None and element.name != "error" else DYN)

    def _map_lit(self, node: Tree, children: list[Any]) -> CelType:
        entries = [c for c in children[0].children if c is not None] if children else []
        keys = [self.visit(e) for e in entries[0::2]]
        values = [self.visit(e) for e in entries[1::2]]
        key = keys[0] if keys and all(k == keys[0] for k in keys) else DYN
        value = values[0] if values and all(v == values[0] for v in values) else DYN
        return map_of(key, value)

    # -- helpers --

    def _unify(self, node: Tree, left: CelType, right: CelType, what: str, *, mixed_is_dyn: bool) -> CelType:
        """The one type of two values that must share it; ``mixed_is_dyn``: values of different kinds make a
        ``dyn`` (a list of several kinds is legal CEL) rather than a problem (the branches of ?:)."""
        if left.name in ("dyn", "error"):
            return right
        if right.name in ("dyn", "error") or left == right:
            return left
        if left.name in NUMBERS and right.name in NUMBERS:
            self.problem(node, f"{what} mix {left} and {right}; convert one of them, e.g. with double()")
            return ERROR
        if mixed_is_dyn:
            return DYN
        self.problem(node, f"{what} have different types, {left} and {right}")
        return ERROR

    def _operator_at(self, left: Tree, right: Tree, op: str) -> tuple[int, int]:
        """The line and column of the operator between two operands (the parse tree does not keep it)."""
        between = self.expression[left.meta.end_pos:right.meta.start_pos]
        offset = left.meta.end_pos + max(between.find(op), 0)
        line = self.expression.count("\n", 0, offset) + 1
        column = offset - (self.expression.rfind("\n", 0, offset) + 1) + 1
        return line, column

    def _at(self, where: tuple[int, int], message: str) -> None:
        self.problems.append(CelProblem(where[0], where[1], message))
