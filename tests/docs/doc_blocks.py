"""The shell and Python blocks of README.md and docs/, found and prepared to run as a reader would run them.

Every ```sh, ```bash and ```python block is run by ``test_doc_blocks.py`` unless the line right before its fence
marks it illustrative::

    <!-- doc-test: skip: a fragment of a worker's handler; no server to run it against -->

A block may also say what it needs, which the test starts before it runs and tears down after::

    <!-- doc-test: needs=serve,model files=qa.jsonl:examples/quickstart/qa.jsonl -->

- ``serve``: one ``evalsi serve`` on free ports for the whole module; the block's own ``evalsi serve`` lines are
  that server (a reader leaves it running in another terminal), so they are not run again.
- ``model``: a local OpenAI-compatible server (``evalsi.testing.providers``) that answers every model and judge
  call: OpenAI's URL, a local model server's ``127.0.0.1:8000`` and Python ``judge={"provider": "openai", ...}``
  point at it.
- ``agent``: the scripted agent of ``examples/cases/agent.yaml`` (``python -m evalsi.cases.testing``), where the
  docs' agent on ``127.0.0.1:8765`` is.
- ``own-serve``: the block starts its own ``evalsi serve`` (with a config of its own, in the background): its serve
  lines run, the docs' ports in their flags rewritten like every address, and what it leaves is killed after it.
- ``continues``: a Python block that goes on from the file's previous Python block (its imports and names), as in
  one interpreter session: the blocks before it back to one without ``continues`` run first, in the same process.
- ``files=DEST:SOURCE,...``: repository files (or directories) copied into the block's directory under the
  names the block uses.

The addresses the docs use (the api on 8080/8081, OTLP on 4318/4317, the scripted agents on 8765/8766, the local
issuer of examples/auth on 9400, OpenAI's URL, a local model server's ``127.0.0.1:8000``, ``URL`` and ``...`` after
``--server``) are rewritten to the
servers the test started, in the block and in the YAML files of its copy of ``examples/`` (whose specs name the
same addresses): ``rewrite_addresses`` and ``rewrite`` below are the whole list. A reader's install step is the
test environment itself, so ``python3 -m venv .venv`` and ``.venv/bin/pip install`` lines become no-ops and
``.venv/bin/`` names the running interpreter's directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs")
RUNNABLE = {"sh": "bash", "bash": "bash", "shell": "bash", "python": "python", "py": "python"}
NEEDS = frozenset({"serve", "own-serve", "model", "agent", "continues"})

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Directive:
    skip: str | None = None
    needs: frozenset[str] = frozenset()
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # the opening fence's line, 1-based
    language: str  # "bash" or "python"
    code: str
    directive: Directive = field(default_factory=Directive)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse_directive(body: str, where: str) -> Directive:
    """``skip: REASON`` or space-separated ``needs=a,b`` and ``files=DEST:SOURCE,...``."""
    if body.startswith("skip"):
        reason = body[len("skip"):].lstrip(":").strip()
        if not reason:
            raise ValueError(f"{where}: doc-test skip needs a reason (`<!-- doc-test: skip: why -->`)")
        return Directive(skip=reason)
    needs: frozenset[str] = frozenset()
    files: tuple[tuple[str, str], ...] = ()
    for token in body.split():
        key, _, value = token.partition("=")
        if key == "needs":
            needs = frozenset(value.split(","))
            unknown = needs - NEEDS
            if unknown:
                raise ValueError(f"{where}: doc-test needs {sorted(unknown)}; known: {sorted(NEEDS)}")
        elif key == "files":
            pairs = [item.split(":", 1) for item in value.split(",")]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"{where}: doc-test files= takes DEST:SOURCE pairs, got {value!r}")
            files = tuple((dest, source) for dest, source in pairs)
        else:
            raise ValueError(f"{where}: unknown doc-test key {key!r}; accepted: skip:, needs=, files=")
    return Directive(needs=needs, files=files)


def blocks_of(path: Path, root: Path = ROOT) -> list[Block]:
    """The runnable blocks of one Markdown file, each with the directive on the line before its fence."""
    relative = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        language = RUNNABLE.get(match.group(1))
        if language:
            where = f"{relative}:{index + 1}"
            previous = lines[index - 1] if index > 0 else ""
            directive_match = _DIRECTIVE.match(previous)
            directive = parse_directive(directive_match.group("body"), where) if directive_match else Directive()
            found.append(Block(relative, index + 1, language, "\n".join(lines[index + 1:end]) + "\n", directive))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [block for path in paths for block in with_sessions(blocks_of(path))]


def with_sessions(blocks: list[Block]) -> list[Block]:
    """A ``continues`` block carries the code of the Python blocks it goes on from, so it runs on its own."""
    out: list[Block] = []
    session = ""
    for block in blocks:
        if block.language == "python":
            if "continues" in block.directive.needs:
                block = replace(block, code=session + block.code)
            session = block.code
        out.append(block)
    return out


# The api's HTTP and gRPC, OTLP HTTP and gRPC, the scripted agents, the local OIDC issuer (examples/auth).
DOC_PORTS = (8080, 8081, 4318, 4317, 8765, 8766, 9400)


@dataclass(frozen=True)
class Addresses:
    """Where the servers a block meets really listen: each port the docs use mapped to a free one (the serve
    fixture's own where the block needs it), and the local model server's port (0: none)."""

    ports: dict[int, int]
    serving: bool = False
    model: int = 0
    own_serve: bool = False  # the block's own `evalsi serve` lines run (needs=own-serve)


def rewrite_addresses(text: str, addresses: Addresses) -> str:
    """The docs' fixed addresses in a block, or in a file of the block's copy of ``examples/``, replaced by the
    servers the test started."""
    for doc_port, port in addresses.ports.items():
        text = re.sub(rf"(?<=127\.0\.0\.1:){doc_port}\b|(?<=localhost:){doc_port}\b", str(port), text)
        text = re.sub(rf"(--(?:[a-z]+-)*port\s+){doc_port}\b", rf"\g<1>{port}", text)  # --port, --http-port ...
    if addresses.model:
        model_url = f"http://127.0.0.1:{addresses.model}/v1"
        text = text.replace("https://api.openai.com/v1", model_url).replace("http://127.0.0.1:8000/v1", model_url)
    return text


def rewrite(code: str, language: str, addresses: Addresses, bin_dir: str) -> str:
    """The block as the test runs it: its addresses rewritten (``rewrite_addresses``), the reader's install
    steps and ``evalsi serve`` lines made no-ops, ``# error`` lines required to fail."""
    code = rewrite_addresses(code, addresses)
    if addresses.serving:
        code = re.sub(r"(--server\s+)(URL|\.\.\.)(?=\s|$)", rf"\g<1>http://127.0.0.1:{addresses.ports[8080]}", code,
                      flags=re.M)
    if addresses.model:
        model_url = f"http://127.0.0.1:{addresses.model}/v1"
        if language == "python":
            code = code.replace('"provider": "openai",', f'"provider": "openai", "base_url": "{model_url}",')
    if language == "bash":
        code = re.sub(r"^python3 -m venv \.venv(\s*&&\s*\.venv/bin/pip install[^&\n]*)?(&&\s*)?", "", code, flags=re.M)
        code = re.sub(r"^\.venv/bin/pip install .*$", ":", code, flags=re.M)
        code = code.replace(".venv/bin/", f"{bin_dir}/")
        if not addresses.own_serve:
            code = re.sub(r"^evalsi serve\b.*$", ": evalsi serve is already running", code, flags=re.M)
        code = expect_errors(wait_for_background_ports(code))
    return code


def expect_errors(code: str) -> str:
    """A command whose comment starts ``# error`` shows a failure on purpose: it must fail, and the block goes on."""
    out = []
    for line in code.splitlines():
        match = re.match(r"^(?P<command>[^#]*?)\s+#\s*error\b.*$", line)
        if match:
            command = match.group("command")
            line = f"if {command}; then echo 'expected to fail: {command}' >&2; exit 1; fi"
        out.append(line)
    return "\n".join(out) + "\n"


def wait_for_background_ports(code: str) -> str:
    """After a line that starts a server in the background (``... --port N &``), wait until N answers, as a reader
    would before typing the next command."""
    out: list[str] = []
    for line in code.splitlines():
        out.append(line)
        match = re.search(r"--port\s+(\d+)\b.*&\s*(#.*)?$", line)
        if match:
            port = match.group(1)
            out.append(f"for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
                       "sleep 0.1; done")
    return "\n".join(out) + "\n"
