"""A Dockerfile subset, parsed into build steps (a pure function: no file is read here, nothing runs).

Accepted: ``FROM`` (one: an OCI reference, ``scratch``, or ``evalsi/runtime``, the runtime image), ``RUN`` (shell
and exec forms), ``COPY`` and ``ADD`` of files from the build context, ``ENV``, ``WORKDIR``, ``ARG`` (with
defaults, substituted as ``$NAME`` and ``${NAME}``, ``${NAME:-word}``, ``${NAME:+word}``), ``USER`` (a numeric
uid[:gid]), ``LABEL``, comments, line continuations, and parser directives (``# syntax=...``, ignored).

Everything else is refused, naming the file, the line and the instruction with what is accepted: a Docker engine
is not what builds these images (``image_build.py`` runs every RUN in a bubblewrap sandbox), so an instruction
whose meaning needs one (``ONBUILD``, ``HEALTHCHECK``, ``CMD``, ``EXPOSE``, a second stage ``FROM ... AS``,
``RUN --mount``, ``COPY --from``) is refused rather than silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from evalsi.errors import BadInputError

__all__ = [
    "MAX_BYTES",
    "MAX_INSTRUCTIONS",
    "MAX_LINE",
    "RUNTIME_BASE",
    "Dockerfile",
    "Step",
    "parse_dockerfile",
]

RUNTIME_BASE = "evalsi/runtime"
MAX_BYTES = 1 << 20
MAX_INSTRUCTIONS = 256
MAX_LINE = 64 * 1024  # one instruction, continuation lines joined
MAX_SOURCES = 64  # sources of one COPY
_MAX_NAME = 256

StepKind = Literal["RUN", "COPY", "ENV", "WORKDIR", "ARG", "USER", "LABEL"]
_ACCEPTED = "FROM, RUN, COPY, ADD, ENV, WORKDIR, ARG, USER, LABEL"
_ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2|tar\.xz|txz)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_DIRECTIVE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(.*)$")


@dataclass(frozen=True)
class Step:
    """One instruction after FROM, its variables substituted. ``argv`` for RUN (the exec form, or ``/bin/sh -c``
    with the shell form); ``sources`` and ``dest`` for COPY (ADD becomes COPY: local files only); ``pairs`` for
    ENV, LABEL and ARG (the ARG's value as the build saw it); ``value`` for WORKDIR and USER."""

    line: int
    kind: StepKind
    text: str  # the instruction as written (joined), for errors
    argv: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    dest: str = ""
    pairs: tuple[tuple[str, str], ...] = ()
    value: str = ""

    def canonical(self) -> str:
        """What identifies the step in the build cache's digest chain (its line number does not)."""
        return json.dumps([self.kind, list(self.argv), list(self.sources), self.dest,
                           [list(pair) for pair in self.pairs], self.value])


@dataclass(frozen=True)
class Dockerfile:
    base: str  # an OCI reference or absolute layout path, "scratch", or RUNTIME_BASE
    base_line: int
    steps: tuple[Step, ...] = field(default_factory=tuple)


def parse_dockerfile(text: str, name: str) -> Dockerfile:
    """The instructions of ``text`` (the Dockerfile ``name``, for errors) as steps; ``BadInputError`` naming
    ``name:line`` and the instruction for anything outside the subset, and for any bound passed."""
    if len(text.encode()) > MAX_BYTES:
        raise BadInputError(f"{name}: over the limit of {MAX_BYTES} bytes")
    variables: dict[str, str] = {}  # ARG values and ENV values, as later instructions see them
    build_args: dict[str, str] = {}
    base: str | None = None
    base_line = 0
    steps: list[Step] = []
    for line, keyword, rest, raw in _instructions(text, name):
        where = f"{name}:{line}: {keyword}"
        if keyword == "FROM":
            if base is not None:
                raise BadInputError(f"{where}: a second FROM (a multi-stage build) is not supported; one FROM, "
                                    "then " + _ACCEPTED.removeprefix("FROM, "))
            base, base_line = _from(rest, variables, where), line
            continue
        if keyword == "ARG":
            step = _arg(rest, variables, where, line, raw)
            build_args.update(step.pairs)
            variables.update(step.pairs)
            if base is None:
                continue  # an ARG before FROM serves FROM only
            steps.append(step)
            continue
        if base is None:
            raise BadInputError(f"{where}: the first instruction must be FROM (ARG may come before it)")
        if len(steps) >= MAX_INSTRUCTIONS:
            raise BadInputError(f"{where}: more than {MAX_INSTRUCTIONS} instructions")
        step = _step(keyword, rest, variables, build_args, where, line, raw)
        if step.kind == "ENV":
            variables.update(step.pairs)
        steps.append(step)
    if base is None:
        raise BadInputError(f"{name}: no FROM instruction; accepted bases: an OCI image reference, scratch, or "
                            f"{RUNTIME_BASE} (the runtime image)")
    return Dockerfile(base=base, base_line=base_line, steps=tuple(steps))


def _instructions(text: str, name: str) -> list[tuple[int, str, str, str]]:
    """(line, KEYWORD, arguments, joined text) per instruction: comments dropped, continuation lines joined."""
    out: list[tuple[int, str, str, str]] = []
    lines = text.splitlines()
    index = 0
    in_directives = True
    while index < len(lines):
        start = index + 1
        current = lines[index]
        index += 1
        stripped = current.strip()
        if stripped.startswith("#"):
            directive = _DIRECTIVE.match(stripped) if in_directives else None
            if directive and directive.group(1).lower() == "escape" and directive.group(2).strip() != "\\":
                raise BadInputError(f"{name}:{start}: parser directive escape={directive.group(2).strip()}: only "
                                    "the default escape character \\ is supported")
            in_directives = in_directives and directive is not None
            continue
        in_directives = False
        if not stripped:
            continue
        parts = [current]
        while parts[-1].rstrip().endswith("\\") and index < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            following = lines[index]
            index += 1
            if following.strip().startswith("#"):  # a comment inside a continued instruction is dropped
                parts.append("\\")
                continue
            parts.append(following)
            if sum(len(part) for part in parts) > MAX_LINE:
                raise BadInputError(f"{name}:{start}: an instruction over {MAX_LINE} characters")
        if parts[-1].rstrip().endswith("\\"):
            parts[-1] = parts[-1].rstrip()[:-1]
        joined = " ".join(part.strip() for part in parts).strip()
        if len(joined) > MAX_LINE:
            raise BadInputError(f"{name}:{start}: an instruction over {MAX_LINE} characters")
        keyword, _, rest = joined.partition(" ")
        if not keyword.isalpha():
            raise BadInputError(f"{name}:{start}: {keyword[:40]!r} is not an instruction; accepted: {_ACCEPTED}")
        out.append((start, keyword.upper(), rest.strip(), joined))
    return out


def _step(keyword: str, rest: str, variables: Mapping[str, str], build_args: Mapping[str, str], where: str,
          line: int, raw: str) -> Step:
    if keyword == "RUN":
        return _run(rest, build_args, where, line, raw)
    if keyword in ("COPY", "ADD"):
        return _copy(keyword, rest, variables, where, line, raw)
    if keyword in ("ENV", "LABEL"):
        pairs = _pairs(rest, variables, where, legacy=keyword == "ENV")
        return Step(line, "ENV" if keyword == "ENV" else "LABEL", raw, pairs=pairs)
    if keyword == "WORKDIR":
        value = _substitute(rest, variables, where).strip()
        if not value:
            raise BadInputError(f"{where}: a directory is required")
        return Step(line, "WORKDIR", raw, value=value)
    if keyword == "USER":
        value = _substitute(rest, variables, where).strip()
        if not re.fullmatch(r"\d{1,10}(:\d{1,10})?", value):
            raise BadInputError(f"{where}: {value[:100]!r}: a numeric uid[:gid] (names are not looked up in the "
                                "image's /etc/passwd)")
        return Step(line, "USER", raw, value=value)
    if keyword == "MAINTAINER":
        raise BadInputError(f"{where}: deprecated; write LABEL maintainer=... (accepted: {_ACCEPTED})")
    raise BadInputError(f"{where}: not supported in an environment's Dockerfile (images are built here without a "
                        f"Docker engine, and a sandbox's command is the environment's); accepted: {_ACCEPTED}")


def _from(rest: str, variables: Mapping[str, str], where: str) -> str:
    if rest.startswith("--"):
        raise BadInputError(f"{where}: {rest.split()[0][:40]}: FROM takes no flags here (the host's platform is "
                            "used)")
    words = _substitute(rest, variables, where).split()
    if len(words) != 1:
        raise BadInputError(f"{where}: one image (FROM IMAGE); a named stage (FROM ... AS NAME, multi-stage "
                            "builds) is not supported")
    return words[0]


def _arg(rest: str, variables: Mapping[str, str], where: str, line: int, raw: str) -> Step:
    name, eq, default = rest.strip().partition("=")
    name = name.strip()
    if not _NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise BadInputError(f"{where}: {name[:100]!r}: ARG NAME or ARG NAME=default, a name of letters, digits and _")
    value = _unquote(_substitute(default.strip(), variables, where), where) if eq else variables.get(name, "")
    return Step(line, "ARG", raw, pairs=((name, value),))


def _run(rest: str, build_args: Mapping[str, str], where: str, line: int, raw: str) -> Step:
    if rest.startswith("--"):
        raise BadInputError(f"{where}: {rest.split()[0][:40]}: RUN takes no flags here (no --mount, --network or "
                            "--security: the build's sandbox decides those)")
    if not rest:
        raise BadInputError(f"{where}: a command is required")
    argv = _exec_form(rest, where)
    if argv is None:
        argv = ("/bin/sh", "-c", rest)
    # ARG values reach RUN as variables (as with Docker), never substituted into its text.
    return Step(line, "RUN", raw, argv=argv, pairs=tuple(sorted(build_args.items())))


def _copy(keyword: str, rest: str, variables: Mapping[str, str], where: str, line: int, raw: str) -> Step:
    if rest.startswith("--"):
        raise BadInputError(f"{where}: {rest.split()[0][:40]}: {keyword} takes no flags here (no --from: one "
                            "stage; no --chown or --chmod: owners are not applied, modes come from the context)")
    words = _exec_form(rest, where)
    if words is None:
        words = tuple(_substitute(rest, variables, where).split())
    else:
        words = tuple(_substitute(word, variables, where) for word in words)
    if len(words) < 2:
        raise BadInputError(f"{where}: {keyword} SOURCE... DEST")
    sources, dest = words[:-1], words[-1]
    if len(sources) > MAX_SOURCES:
        raise BadInputError(f"{where}: more than {MAX_SOURCES} sources")
    for source in sources:
        if "://" in source or source.startswith("git@"):
            raise BadInputError(f"{where}: {source[:200]!r}: only files of the build context are copied (no URLs)")
        if keyword == "ADD" and _ARCHIVE.search(source):
            raise BadInputError(f"{where}: {source[:200]!r}: ADD does not unpack archives here; COPY it and unpack "
                                "it with RUN tar")
    if len(sources) > 1 and not dest.endswith("/"):
        raise BadInputError(f"{where}: with several sources the destination must be a directory ending in /")
    return Step(line, "COPY", raw, sources=sources, dest=dest)


def _exec_form(rest: str, where: str) -> tuple[str, ...] | None:
    """A JSON array of strings (the exec form), or None when ``rest`` is not one (the shell form)."""
    if not rest.startswith("["):
        return None
    try:
        value = json.loads(rest)
    except ValueError:
        return None  # Docker runs a malformed array with a shell too
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise BadInputError(f"{where}: the exec form is a non-empty JSON array of non-empty strings")
    return tuple(value)


def _pairs(rest: str, variables: Mapping[str, str], where: str, *, legacy: bool) -> tuple[tuple[str, str], ...]:
    """``KEY=value ...`` (values may be quoted), or the legacy ``ENV KEY value`` form."""
    if not rest:
        raise BadInputError(f"{where}: KEY=value is required")
    first = rest.split(maxsplit=1)[0]
    if legacy and "=" not in first:
        key, _, value = rest.partition(" ")
        return ((_key(key, where), _substitute(value.strip(), variables, where)),)
    pairs = []
    for token in _tokens(rest, where):
        key, eq, value = token.partition("=")
        if not eq:
            raise BadInputError(f"{where}: {token[:100]!r}: expected KEY=value")
        pairs.append((_key(_unquote(key, where), where), _unquote(_substitute(value, variables, where), where)))
    return tuple(pairs)


def _key(key: str, where: str) -> str:
    if not key or len(key) > _MAX_NAME or "\0" in key or "=" in key:
        raise BadInputError(f"{where}: {key[:100]!r}: a key is 1 to {_MAX_NAME} characters without '=' or NUL")
    return key


def _tokens(text: str, where: str) -> list[str]:
    """Whitespace-separated tokens, keeping quoted runs (with their quotes) whole."""
    tokens, current, quote = [], "", ""
    for char in text:
        if quote:
            current += char
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
            current += char
        elif char.isspace():
            if current:
                tokens.append(current)
            current = ""
        else:
            current += char
    if quote:
        raise BadInputError(f"{where}: an unterminated {quote} quote")
    if current:
        tokens.append(current)
    return tokens


def _unquote(text: str, where: str) -> str:
    out, quote, index = "", "", 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and quote != "'":
            out += text[index + 1]
            index += 2
            continue
        if quote and char == quote:
            quote = ""
        elif not quote and char in "\"'":
            quote = char
        else:
            out += char
        index += 1
    if quote:
        raise BadInputError(f"{where}: an unterminated {quote} quote")
    return out


def _substitute(text: str, variables: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        current = variables.get(name, "")
        if match.group(2) == "-":
            return current or match.group(3)
        if match.group(2) == "+":
            return match.group(3) if current else ""
        return current

    out = _VARIABLE.sub(value, text)
    if len(out) > MAX_LINE:
        raise BadInputError(f"{where}: over {MAX_LINE} characters once its variables are substituted")
    return out
