"""The HTML report: one file that fetches nothing and runs nothing, the run's and `evalsi compare`'s figures, data
escaped, and the record table bounded by --max-records."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from google.protobuf import json_format
from report_helpers import evalsi, huge_run

from evalsi.reports import build_report, render_html
from evalsi.runs.results import EvaluationResults, _fmt
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, VALUE_KIND_BOOLEAN, EvaluationResult, MetricSummary, Score

URL_ATTRIBUTES = {"src", "href", "xlink:href", "action", "formaction", "poster", "data", "srcset", "background"}


class Page(HTMLParser):
    """Every tag with its attributes, each table's rows (lists of cell texts, the header row first), the style."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[list[list[str]]] = []
        self.style = ""
        self.text: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "style":
            self._in_style = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row:
            self.tables[-1].append(self._row)
            self._row = None
        elif tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data
        if self._cell is not None:
            self._cell.append(data)
        self.text.append(data)


def table(page: Page, first_header: str) -> dict[str, list[str]]:
    """The body rows of the table whose first column header is ``first_header``, by their first cell."""
    rows = next(t for t in page.tables if t[0][0] == first_header and len(t[0]) > 2)
    return {row[0]: row for row in rows[1:]}


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def test_the_file_references_nothing_outside_itself_and_has_no_script(saved: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = evalsi("report", str(saved["candidate"]), "--compare", str(saved["baseline"]), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "wrote the html report of" in done.stderr  # the format comes from the .html suffix
    html = out.read_text()
    page = parse(html)
    tags = {tag for tag, _ in page.tags}
    assert "script" not in tags and not tags & {"iframe", "object", "embed", "link", "img", "base"}
    assert {"svg", "table", "style"} <= tags
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)  # no event handler
            if name in URL_ATTRIBUTES and value is not None:
                assert "//" not in value and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", value), (tag, name, value)
    assert "url(" not in page.style and "@import" not in page.style
    # The page's policy allows its own stylesheet by hash, and nothing else: nothing could load or run.
    csp = next(attrs["content"] for tag, attrs in page.tags if attrs.get("http-equiv") == "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256(page.style.encode()).digest()).decode()
    assert csp is not None and csp.startswith("default-src 'none'; ") and f"style-src 'sha256-{digest}'" in csp
    assert "prefers-color-scheme: dark" in page.style
    # Plots: error bars, a histogram per metric, the forest plot, each named for a screen reader.
    labels = [attrs.get("aria-label") or "" for tag, attrs in page.tags if tag == "svg"]
    assert len(labels) == 1 + 3 + 1 and all(labels)
    assert sum(label.startswith("Distribution of ") for label in labels) == 3


def test_the_tables_are_the_summaries_and_the_comparison(saved: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert evalsi("report", str(saved["candidate"]), "--compare", str(saved["baseline"]), "--format", "html",
                  "-o", str(out)).returncode == 0
    page = parse(out.read_text())
    run = EvaluationResults.load(saved["candidate"]).run
    metrics = table(page, "metric")
    assert list(metrics) == [s.metric for s in run.summaries]
    text = "".join(page.text)
    for summary in run.summaries:  # each mark of the error bars says what it draws
        assert f"{summary.metric}: {_fmt(summary.mean)} [{_fmt(summary.ci.low)}, {_fmt(summary.ci.high)}]" in text
    for summary in run.summaries:
        _metric, n, mean, ci, skipped, errors = metrics[summary.metric]
        assert (n, mean, ci, skipped, errors) == (str(summary.n), _fmt(summary.mean),
                                                  f"[{_fmt(summary.ci.low)}, {_fmt(summary.ci.high)}]", "0", "0")
    compared = json.loads(evalsi("compare", str(saved["baseline"]), str(saved["candidate"]), "--format",
                                 "json").stdout)
    by_metric = next({row[0]: row for row in t[1:]} for t in page.tables if t[0][:2] == ["metric", "pairs"])
    assert len(by_metric) == len(compared["metrics"]) == 3
    for m in compared["metrics"]:
        _, pairs, baseline, candidate, diff, ci, test, p, p_adjusted, verdict = by_metric[m["metric"]]
        assert (pairs, baseline, candidate, diff, test) == (m["nPairs"], _fmt(m["meanA"]), _fmt(m["meanB"]),
                                                            _fmt(m["diff"]), m["test"])
        assert (p, p_adjusted) == (_fmt(m["pValue"]), _fmt(m["pValueAdjusted"]))
        assert ci == f"[{_fmt(m['ci']['low'])}, {_fmt(m['ci']['high'])}]"
        assert verdict.endswith({"no significant difference": "no significant change"}.get(m["verdict"],
                                                                                              m["verdict"]))
    # The records whose outcome flipped, and the records themselves with input, output and reference read from
    # the run's own (unchanged) dataset file.
    text = "".join(page.text)
    assert "10 records changed outcome" in text
    assert "Who wrote 'Pride and Prejudice'?" in text and "Jane Austen" in text


def test_data_is_escaped_and_inert() -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    run = Run(id="r1", name=hostile)
    run.summaries.append(MetricSummary(metric="m<i>", evaluator="m", kind=VALUE_KIND_BOOLEAN, n=1, mean=1.0))
    run.results.append(EvaluationResult(record_id="id<b>", evaluator="m", outcome=OUTCOME_SCORED,
                                        scores=[Score(name="passed", passed=True, explanation=hostile)]))
    records = {("id<b>", 0): Record(id="id<b>", input=Content(text=hostile), output=Content(text=hostile))}
    html = render_html(build_report(run, records=records, title=hostile))
    page = parse(html)
    assert [tag for tag, _ in page.tags if tag in ("script", "img", "i", "b")] == []
    assert all(not name.startswith("on") for _, attrs in page.tags for name in attrs)
    text = "".join(page.text)
    assert text.count(hostile) == 6  # title, heading, identity (name), input, output, explanation: shown as text


def test_max_records_bounds_the_record_table_and_says_how_many_are_left_out(saved: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "few.html"
    assert evalsi("report", str(saved["baseline"]), "--max-records", "5", "-o", str(out)).returncode == 0
    page = parse(out.read_text())
    text = " ".join(page.text)
    assert "5 of 30 records, failing ones first; 25 left out (raise --max-records to see more)." in text
    record_rows = list(table(page, "record").values())
    assert len(record_rows) == 5
    # Failing records first: every row shown failed exact-match (13 records did).
    assert all("passed = fail" in " ".join(row) for row in record_rows)


def test_without_the_data_the_report_says_how_to_show_records(saved: dict[str, Path], tmp_path: Path) -> None:
    document = json.loads(saved["baseline"].read_text())
    document["manifest"]["dataset"] = document["spec"]["dataset"]["path"] = str(tmp_path / "gone.jsonl")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(document))
    done = evalsi("report", str(moved), "--format", "html")
    assert done.returncode == 0, done.stderr
    text = " ".join(parse(done.stdout).text)
    assert "give the data with --data" in text and "What is 12 * 12?" not in text
    # With --data the records come back.
    data = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qa.jsonl"
    again = evalsi("report", str(moved), "--format", "html", "--data", str(data))
    assert "What is 12 * 12?" in " ".join(parse(again.stdout).text)


def test_flips_and_records_are_bounded_by_max_records() -> None:

    report = build_report(huge_run(500, "cand", False), baseline=huge_run(500, "base", True), max_records=10)
    page = parse(render_html(report))
    assert "500 records changed outcome (500 worse) (490 more left out: raise --max-records to see them)" in \
        "".join(page.text)
    flips = next(t for t in page.tables if t[0][:3] == ["record", "trial", "metric"])
    assert len(flips) == 1 + 10
    records = next(t for t in page.tables if t[0][:2] == ["record", "trial"] and t[0][-1] == "results")
    assert len(records) == 1 + 10


def test_agent_trajectories_and_the_manifest_are_shown(saved: dict[str, Path]) -> None:
    run = EvaluationResults.load(saved["baseline"]).run
    record = json_format.ParseDict({
        "id": "q01",
        "input": {"text": "book a table"},
        "trajectory": {"steps": [
            {"type": "STEP_TYPE_LLM", "name": "plan", "output": {"text": "call the tool"}},
            {"type": "STEP_TYPE_TOOL", "name": "book",
             "toolCall": {"name": "book", "arguments": {"who": "<script>x</script>"}, "error": "no tables"}},
        ]},
    }, Record())
    page = parse(render_html(build_report(run, records={("q01", 0): record}, max_records=30)))
    rows = table(page, "record")
    headers = next(t for t in page.tables if t[0][:2] == ["record", "trial"])[0]
    assert headers == ["record", "trial", "input", "output", "reference", "trajectory", "results"]
    trajectory = rows["q01"][5]
    assert trajectory == ('1. llm plan: call the tool\n2. tool book book({"who": "<script>x</script>"}) → error: '
                          "no tables")
    assert [tag for tag, _ in page.tags if tag == "script"] == []
    assert rows["q02"][2] == "not in the data"  # only q01 was given
    text = "\n".join(page.text)
    for entry in ("dataset version", run.manifest.dataset_version, "version of scipy", "evaluator exact-match"):
        assert entry in text
