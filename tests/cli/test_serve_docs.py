"""docs/server.md lists every flag of `evalsi serve` and every key of evalsi.yaml, read from the code that parses
them: a flag or key added without its documentation fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click

from evalsi.cli.serve_cmd import serve_command
from evalsi.client_config import KEYS as CLIENT_KEYS
from evalsi.connections import AGENT_KEYS, JUDGE_KEYS
from evalsi.service.config import KEYS, ApiConfig, IngestConfig, SchedulerConfig, WorkerConfig

SERVER_MD = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()


def section(title: str) -> str:
    """The text of ``## <title>`` up to the next section of the same level (its subsections included)."""
    start = SERVER_MD.index(f"\n## {title}\n")
    end = SERVER_MD.find("\n## ", start + 1)
    return SERVER_MD[start : end if end >= 0 else None]


def yaml_blocks(text: str) -> str:
    return "\n".join(re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL))


def test_every_serve_flag_is_a_row_of_the_flag_table() -> None:
    flags = [opt for param in serve_command.params if isinstance(param, click.Option) for opt in param.opts]
    assert {"--datasets-dir", "--otlp-http-port", "--otlp-grpc-port"} <= set(flags)
    rows = [line for line in section("What `evalsi serve` starts").splitlines() if line.startswith("| `--")]
    missing = [flag for flag in flags if not any(re.search(rf"`{re.escape(flag)}[` ]", row) for row in rows)]
    assert not missing, f"docs/server.md's flag table of `evalsi serve` lacks {missing}"


def test_every_top_level_key_is_in_the_evalsi_yaml_listing() -> None:
    listing = yaml_blocks(section("`evalsi.yaml`"))
    missing = [key for key in KEYS if not re.search(rf"^{key}:", listing, flags=re.MULTILINE)]
    assert not missing, f"docs/server.md's evalsi.yaml listing lacks the top-level keys {missing}"


def test_every_key_of_every_section_is_in_the_evalsi_yaml_listing() -> None:
    listing = yaml_blocks(section("`evalsi.yaml`"))
    nested = {
        "nats": ("url", "credentials_file"), "metadata": ("url", "password_file"),
        "objects": ("url", "credentials_file"), "traces": ("url", "password_file"),
        **{name: tuple(f.name for f in dataclasses.fields(cls)) for name, cls in
           (("api", ApiConfig), ("ingest", IngestConfig), ("scheduler", SchedulerConfig))},
    }
    missing = []
    for name, keys in nested.items():
        # The section's block: its line, then the indented lines below it.
        block = re.search(rf"^{name}:.*\n((?:[ ]+.*\n)+)", listing + "\n", flags=re.MULTILINE)
        missing += [f"{name}.{key}" for key in keys if block is None or not re.search(rf"^\s+{key}:", block[1],
                                                                                          flags=re.MULTILINE)]
    workers = re.search(r"^workers:.*\n((?:[ ]+.*\n)+)", listing + "\n", flags=re.MULTILINE)
    assert workers is not None
    missing += [f"workers[].{f.name}" for f in dataclasses.fields(WorkerConfig) if f"{f.name}:" not in workers[1]]
    assert not missing, f"docs/server.md's evalsi.yaml listing lacks {missing}"


def test_every_key_of_a_judge_an_agent_and_the_client_is_documented() -> None:
    text = section("`evalsi.yaml`")
    for where, keys in (("judges.<name>", JUDGE_KEYS), ("agents.<name>", AGENT_KEYS), ("client", CLIENT_KEYS)):
        missing = [key for key in keys if not re.search(rf"\b{key}\b", text)]
        assert not missing, f"docs/server.md's evalsi.yaml section does not mention {where} keys {missing}"
