"""Evaluator params that name a file are refused by the server.

Some evaluators read a file their params name (``builtin/json-schema``'s ``schema_file``, ``builtin/prompt-judge``'s
``template_file``). Embedded, the file is the caller's own; on a server it is the server's: binding the params
reads it (a parse error quotes its lines back in the 400) and a judge template is sent to a model. So a request
(Evaluate, a run spec, a policy) may not name one: the content goes inline instead. Params that name files end in
``_file``, ``_path`` or ``_dir`` by convention, and the refusal goes by that convention, before anything binds.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import struct_pb2

from evalsi.errors import BadInputError

_FILE_SUFFIXES = ("_file", "_path", "_dir")
# What to send instead, for the params the built-in packs have.
_INSTEAD = {
    "schema_file": "give the schema inline (params.schema)",
    "template_file": "prompt-judge with a template file runs embedded only (evalsi eval, evalsi run)",
}


def refuse_file_params(evaluators: Iterable[tuple[str, struct_pb2.Struct]]) -> None:
    """BadInputError naming ``<where>.params.<name>`` for the first param that names a file; ``evaluators`` are
    (field path, params) pairs, e.g. ``("spec.evaluators[0]", ref.params)``."""
    for where, params in evaluators:
        for name, value in params.fields.items():
            if name.endswith(_FILE_SUFFIXES) and value.WhichOneof("kind") not in (None, "null_value"):
                instead = _INSTEAD.get(name, "give the content inline")
                raise BadInputError(
                    f"{where}.params.{name}: a server reads no file a request names (it would disclose the server's "
                    f"files); {instead}"
                )
