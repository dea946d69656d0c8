"""The Dockerfile subset's parser (a pure function): every accepted instruction, continuation lines, comments and
parser directives, ARG and ENV substitution, and each refusal naming the file, the line and the instruction; and
sandboxd refusing a Dockerfile root (embedded only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.dockerfile import MAX_INSTRUCTIONS, MAX_LINE, RUNTIME_BASE, parse_dockerfile
from evalsi.sandbox.model import DEFAULT_RESOURCES, Level, RootFilesystem, SandboxSpec
from evalsi.sandbox.wire import spec_from_proto, spec_to_proto

FULL = """\
# syntax=docker/dockerfile:1
# check=skip=all
ARG BASE=evalsi/runtime
FROM ${BASE}
ARG MODE=fast
ENV APP=demo \\
    GREETING="hello world" HOME_DIR=/home/$APP
ENV LEGACY value with spaces
# a comment between instructions
WORKDIR /app
WORKDIR src
COPY a.txt b.txt ./
add ["dir with space/", "/opt/${MODE}/"]
RUN echo $MODE && \\
    # a comment inside a continued RUN is dropped
    touch made
RUN ["python3", "-c", "print(1)"]
USER 65534:65534
LABEL org.example.title="the app" version=1
"""


def test_every_instruction_of_the_subset_parses_with_its_variables() -> None:
    parsed = parse_dockerfile(FULL, "Dockerfile")
    assert (parsed.base, parsed.base_line) == (RUNTIME_BASE, 4)
    steps = {(step.line, step.kind): step for step in parsed.steps}
    assert [key for key in steps] == [(5, "ARG"), (6, "ENV"), (8, "ENV"), (10, "WORKDIR"), (11, "WORKDIR"),
                                      (12, "COPY"), (13, "COPY"), (14, "RUN"), (17, "RUN"), (18, "USER"),
                                      (19, "LABEL")]
    assert steps[5, "ARG"].pairs == (("MODE", "fast"),)
    # ENV values see earlier ENV values of the same file (not of the same instruction, as Docker)
    assert steps[6, "ENV"].pairs == (("APP", "demo"), ("GREETING", "hello world"), ("HOME_DIR", "/home/"))
    assert steps[8, "ENV"].pairs == (("LEGACY", "value with spaces"),)
    assert (steps[10, "WORKDIR"].value, steps[11, "WORKDIR"].value) == ("/app", "src")
    assert (steps[12, "COPY"].sources, steps[12, "COPY"].dest) == (("a.txt", "b.txt"), "./")
    assert (steps[13, "COPY"].sources, steps[13, "COPY"].dest) == (("dir with space/",), "/opt/fast/")
    shell = steps[14, "RUN"]
    assert shell.argv == ("/bin/sh", "-c", "echo $MODE &&  touch made")  # not substituted: the shell does it
    assert shell.pairs == (("BASE", "evalsi/runtime"), ("MODE", "fast"))  # ARG values reach RUN as variables
    assert steps[17, "RUN"].argv == ("python3", "-c", "print(1)")
    assert steps[18, "USER"].value == "65534:65534"
    assert steps[19, "LABEL"].pairs == (("org.example.title", "the app"), ("version", "1"))


def test_substitution_forms_and_the_canonical_step_ignore_the_line() -> None:
    text = "FROM scratch\nARG A=x\nARG EMPTY\nWORKDIR /${A:-no}/${EMPTY:-dflt}/${A:+set}/${EMPTY:+unset}/$A\n"
    parsed = parse_dockerfile(text, "D")
    assert parsed.base == "scratch"
    assert parsed.steps[-1].value == "/x/dflt/set//x"
    moved = parse_dockerfile("FROM scratch\n\n\nARG A=x\nARG EMPTY\nWORKDIR /${A:-no}/${EMPTY:-dflt}/${A:+set}/"
                             "${EMPTY:+unset}/$A\n", "D")
    assert moved.steps[-1].line != parsed.steps[-1].line
    assert moved.steps[-1].canonical() == parsed.steps[-1].canonical()


@pytest.mark.parametrize(("text", "message"), [
    ("FROM evalsi/runtime\nHEALTHCHECK CMD true\n", r"D:2: HEALTHCHECK: not supported .*accepted: FROM, RUN, COPY"),
    ("FROM evalsi/runtime\nONBUILD RUN true\n", r"D:2: ONBUILD: not supported"),
    ("FROM evalsi/runtime\nCMD [\"sh\"]\n", r"D:2: CMD: not supported"),
    ("FROM python:3.12 AS build\n", r"D:1: FROM: one image .*FROM \.\.\. AS NAME"),
    ("FROM evalsi/runtime\nFROM scratch\n", r"D:2: FROM: a second FROM \(a multi-stage build\)"),
    ("FROM --platform=linux/arm64 scratch\n", r"D:1: FROM: --platform=linux/arm64: FROM takes no flags"),
    ("FROM evalsi/runtime\n\nRUN --mount=type=cache,target=/x true\n", r"D:3: RUN: --mount=type=cache"),
    ("FROM evalsi/runtime\nCOPY --from=build /a /b\n", r"D:2: COPY: --from=build: COPY takes no flags here"),
    ("FROM evalsi/runtime\nADD https://example.com/x.txt /x\n", r"D:2: ADD: .*no URLs"),
    ("FROM evalsi/runtime\nADD data.tar.gz /x/\n", r"D:2: ADD: 'data.tar.gz': ADD does not unpack archives"),
    ("FROM evalsi/runtime\nCOPY a b c\n", r"D:2: COPY: with several sources the destination must be a directory"),
    ("FROM evalsi/runtime\nUSER app\n", r"D:2: USER: 'app': a numeric uid\[:gid\]"),
    ("RUN true\n", r"D:1: RUN: the first instruction must be FROM"),
    ("# just a comment\n", r"D: no FROM instruction"),
    ("# escape=`\nFROM scratch\n", r"D:1: parser directive escape=`"),
    ("FROM evalsi/runtime\nENV A=\"unterminated\n", r"D:2: ENV: an unterminated \" quote"),
    ("FROM evalsi/runtime\nRUN [\"\"]\n", r"D:2: RUN: the exec form is a non-empty JSON array"),
    ("FROM evalsi/runtime\n1RUN true\n", r"D:2: '1RUN' is not an instruction"),
])
def test_anything_outside_the_subset_is_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        parse_dockerfile(text, "D")


def test_bounds_instructions_line_length_and_size() -> None:
    many = "FROM scratch\n" + "ENV A=1\n" * (MAX_INSTRUCTIONS + 1)
    with pytest.raises(BadInputError, match=rf"D:{MAX_INSTRUCTIONS + 2}: ENV: more than {MAX_INSTRUCTIONS}"):
        parse_dockerfile(many, "D")
    long_line = "FROM scratch\nRUN " + "x" * MAX_LINE + "\n"
    with pytest.raises(BadInputError, match=rf"D:2: an instruction over {MAX_LINE} characters"):
        parse_dockerfile(long_line, "D")
    continued = "FROM scratch\nRUN true \\\n" + ("  && true \\\n" * (MAX_LINE // 10)) + "  && true\n"
    with pytest.raises(BadInputError, match=rf"D:2: an instruction over {MAX_LINE} characters"):
        parse_dockerfile(continued, "D")
    with pytest.raises(BadInputError, match="D: over the limit of 1048576 bytes"):
        parse_dockerfile("#" * (1 << 20 + 1), "D")


def test_sandboxd_refuses_a_dockerfile_root_naming_the_kinds_it_takes() -> None:
    spec = SandboxSpec(root=RootFilesystem("dockerfile", "/srv/task/Dockerfile", "/srv/task"))
    with pytest.raises(BadInputError, match=r"spec.root.kind: 'dockerfile'; accepted: runtime, image, tarball, oci"):
        spec_from_proto(spec_to_proto(spec), default_level=Level.NAMESPACED, default_resources=DEFAULT_RESOURCES,
                        image_roots=(Path("/srv"),))
