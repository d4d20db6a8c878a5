"""The report opens with its verdicts and its contents (issue 60): every verdict a section prints is
recorded where it is printed (`Document.verdict`, `Document.no_verdict`) and listed at the top of
report.md / report.html, each linking to its section; every heading has a GitHub-style anchor, unique,
and the contents list every heading. The report is built from rows written by hand for every run of the
demo config (`tests/report_rows.py`)."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
import yaml

from debias_workbench.core.statistics import Interval
from debias_workbench.papers.matrix import sections as matrix_sections
from debias_workbench.papers.matrix.selection import PAPER
from debias_workbench.papers.matrix.tables import build_matrix
from debias_workbench.papers.park.tables import amplification_sections
from debias_workbench.papers.paper import load_numbers
from debias_workbench.report import build
from debias_workbench.report.document import CONTENTS_HEADING, NOT_INFORMATIVE, SUMMARY_HEADING, Document, slug
from debias_workbench.training.methods.spec import LAST
from debias_workbench.workflow.config import deep_merge

from .report_rows import demo_config, demo_report, demo_rows
from .test_matrix import CMNIST, IN9
from .test_matrix import _config as matrix_config
from .test_matrix import _reference_rows as reference_rows
from .test_matrix import _rows as matrix_rows
from .test_report_sections import _park, _park_rows

#: one comparison of each place a section of the demo report records a verdict, with the verdict the rows give
JUDGED = {
    "CLAD vs Base (IN9), BG-GAP (lower is better)": "cannot tell",  # papers/clad/tables.py
    "Base (SIN9) vs Base (IN9), shape bias": "cannot tell",  # papers/clad/texture.py
    "S-CLAD vs Base (IN9), shape bias": "higher",
    "S-CLAD vs Base (IN9), Stylized IN-9 accuracy": "cannot tell",
    "MoCo-v2 + patch α = 2 vs MoCo-v2, original probe accuracy": "cannot tell",  # papers/ssl_negatives
    "ReBias vs Vanilla, unbiased accuracy, ρ = 0.3": "higher",  # papers/rebias
    "Ours (Park et al.) vs Vanilla (validation-selected), 1 % conflicting": "higher",  # papers/park
}


class Page(HTMLParser):
    """What the tests read of report.html: every element id, the h2 headings (id, text), and the links
    (href, text) of the summary table and of the contents."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.h2: list[tuple[str, str]] = []
        self.summary: list[tuple[str, str]] = []
        self.contents: list[tuple[str, str]] = []
        self._in: list[str] = []  # the open summary table / contents nav / h2 / link
        self._href, self._text = "", ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if (tag, a.get("class")) in (("table", "summary"), ("nav", "contents")) or tag == "h2":
            self._in.append(tag)
            if tag == "h2":
                self.h2.append((str(a["id"]), ""))
        if tag == "a" and self._in:
            self._href, self._text = str(a.get("href")), ""

    def handle_data(self, data: str) -> None:
        self._text += data
        if self._in and self._in[-1] == "h2" and not self._href:  # not the link back to the contents
            self.h2[-1] = (self.h2[-1][0], (self.h2[-1][1] + data).lstrip())

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href:
            if "table" in self._in:
                self.summary.append((self._href, self._text))
            elif "nav" in self._in:
                self.contents.append((self._href, self._text))
            self._href = ""
        if tag in ("table", "nav", "h2") and self._in and self._in[-1] == tag:
            self._in.pop()
            if tag == "h2":
                self.h2[-1] = (self.h2[-1][0], self.h2[-1][1].strip())


@pytest.fixture
def report(default_config, tmp_path, monkeypatch):
    """(the Document `build_report` wrote, report.md, a `Page` of report.html) of the demo report; `report.rows`
    rebuilds it from other rows."""

    def make(rows=None):
        made: list[Document] = []

        class Kept(Document):
            def __post_init__(self) -> None:
                super().__post_init__()
                made.append(self)

        monkeypatch.setattr(build, "Document", Kept)
        folder = demo_report(default_config, tmp_path / f"r{len(list(tmp_path.iterdir()))}", rows)
        return made[0], (folder / "report.md").read_text(), Page((folder / "report.html").read_text())

    return make


def _section_text(md: str, heading: str) -> str:
    """The Markdown of the section under `heading` (to the next heading)."""
    body = md.split(f"\n## {heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def test_the_summary_lists_every_recorded_verdict_with_a_working_link(report):
    doc, md, page = report()
    assert len(doc.verdicts) >= 30
    # the HTML summary: a row per section linking to its heading, above a row per comparison linking there too
    expected = []
    for i, v in enumerate(doc.verdicts):
        if i == 0 or doc.verdicts[i - 1].anchor != v.anchor:
            expected.append((f"#{v.anchor}", v.section))
        expected.append((f"#{v.anchor}", v.comparison))
    assert page.summary == expected
    assert len(page.ids) == len(set(page.ids))  # every anchor unique
    headings = dict(page.h2)
    assert all(headings[v.anchor] == v.section for v in doc.verdicts)  # each link leads to its section's heading
    # the Markdown summary: the same links; the headings are the HTML's, so GitHub gives them the same anchors
    assert [text for _, text in page.h2] == re.findall(r"^## (.+)$", md, re.M)
    for v in doc.verdicts:
        assert f"[{v.comparison}](#{v.anchor})" in md
    # a judged verdict's difference and interval are those its section prints
    for v in doc.verdicts:
        assert v.verdict == NOT_INFORMATIVE or v.outcome in _section_text(md, v.section), v


def test_the_contents_list_every_heading_in_order(report):
    doc, md, page = report()
    sections = page.h2[2:]  # after the summary and the contents
    assert page.h2[0][0] == slug(SUMMARY_HEADING) and page.h2[1][0] == slug(CONTENTS_HEADING)
    assert page.contents == [(f"#{a}", text) for a, text in sections]
    assert len(sections) >= 25
    md_sections = re.findall(r"^## (.+)$", md, re.M)[2:]
    listed = re.findall(r"^\d+\. \[(.+)\]\(#(.+)\)$", md.split(f"## {CONTENTS_HEADING}\n", 1)[1].split("\n## ")[0], re.M)
    assert listed == [(text, a) for (a, _), text in zip(sections, md_sections)]
    # the summary comes after the introduction, then the contents, then the first section
    intro = md.index("Statistics:")
    assert intro < md.index(f"## {SUMMARY_HEADING}") < md.index(f"## {CONTENTS_HEADING}") < md.index(
        f"## {md_sections[0]}\n")


def test_each_section_that_judges_appears_in_the_summary_with_its_verdict(report):
    """One comparison of each place that records a verdict: removing the record call there removes its row."""
    doc, md, _page = report()
    found = {v.comparison: v.verdict for v in doc.verdicts}
    assert {c: found.get(c) for c in JUDGED} == JUDGED
    summary = md.split(f"## {CONTENTS_HEADING}")[0]
    for comparison, verdict in JUDGED.items():
        assert re.search(rf"\[{re.escape(comparison)}\]\(#[^)]+\) \| {verdict} \|", summary), comparison


def test_a_comparison_not_judged_is_in_the_summary_as_not_informative_with_its_reason(default_config, report):
    """Every reference model below its capability line: the sections judge nothing, and the summary lists
    each comparison they would have judged as not informative, naming the check."""
    config = demo_config(default_config)
    low = {"base_mr": "only_fg", "base_sin9": "stylized", "moco": "original"}
    rows = []
    for r in demo_rows(config):
        exp = config["experiments"].get(r.get("experiment", ""), {})
        if low.get(r.get("experiment")) == r.get("variant") or (
                exp.get("method") == "vanilla" and r.get("variant") == "unbiased" and r["kind"] == "eval"):
            r = {**r, "value": 12.0}
        rows.append(r)
    doc, md, _page = report(rows)
    reasons = {v.comparison: v.outcome for v in doc.verdicts if v.verdict == NOT_INFORMATIVE}
    # judged all the same: the references' own shape biases, which the texture section prints before its check
    assert [v.comparison for v in doc.verdicts if v.verdict != NOT_INFORMATIVE] == [
        "Base (SIN9) vs Base (IN9), shape bias"]
    expected = {
        "CLAD vs Base (IN9), BG-GAP (lower is better)": "Base (MR) does not learn to recognise the foreground",
        "S-CLAD+ vs Base (IN9), shape bias": "Base (SIN9) does not learn to recognise shapes under a foreign texture",
        "BYOL + patch α = 0.05 vs BYOL, probe accuracy": "MoCo-v2 does not learn the classes from self-supervised",
        "ReBias vs Vanilla, unbiased accuracy, ρ = 0.7": "Vanilla does not learn the digits' shape",
        "Ours (Park et al.) vs LfF (validation-selected)": "Vanilla does not learn the classes beyond their bias",
    }
    for comparison, reason in expected.items():
        assert f"capability check: {reason}" in reasons[comparison]
        assert f"[{comparison}](#" in md and f"| {NOT_INFORMATIVE} | capability check: {reason}" in md


def test_the_ablation_and_the_matrix_record_their_verdicts(default_config, tmp_path):
    """Park et al.'s Table 3 (each row against the full method) and the methods x benchmarks table (each
    compared cell against its row's baseline, with its corrected verdict) record what they print."""
    config = _park(deep_merge(default_config, yaml.safe_load(open("config/park_ablation.yaml"))))
    score = {"vanilla": 40.0, "lff_be": 50.0, "from_d": 52.0, "from_cand": 53.0, "no_weight": 54.0, "no_guide": 51.0,
             "no_bn": 50.5, "full": 60.0, "through_both": 55.0, "target_raw": 45.0}
    doc = Document("t", with_summary=True)
    amplification_sections(doc, config, _park_rows(config, lambda key, p, seed: score[key] + p + seed,
                                                   grid="park_ablation"), load_numbers("debias_workbench.papers.park"),
                           tmp_path)
    found = {v.comparison: v for v in doc.verdicts}
    ablation = found["without L_guide vs Ours (Park et al.) (validation-selected), 1 % conflicting"]
    assert ablation.verdict == "lower" and ablation.section.startswith("Park et al. (CVPR 2024), Table 3 (ablation)")
    assert len([v for v in doc.verdicts if v.section == ablation.section]) == 7 * 2  # 7 rows against the full, 2 ratios

    doc = Document("t", with_summary=True)
    rows = matrix_rows("mx_cmnist", "conflict_1", CMNIST) + matrix_rows("mx_in9", "original", IN9) + reference_rows()
    matrix_sections.matrix(doc, SimpleNamespace(config=matrix_config(), all_rows=rows, out_dir=tmp_path))
    table, paper = build_matrix(matrix_config(), rows), build_matrix(matrix_config(), rows, PAPER)
    compared = {(key, j) for (key, j), cell in table.cells.items() if cell.status in ("compared", NOT_INFORMATIVE)}
    # the table at the last iterate, and of the papers' rules' table the cells it scores otherwise (not twice)
    otherwise = {key for key, cell in paper.cells.items() if cell.status == "compared" and cell.rule != LAST}
    assert len(doc.verdicts) == len(compared) + len(otherwise) and len(compared) > 0
    assert sum("by each paper's selection rule" in v.comparison for v in doc.verdicts) == len(otherwise)
    assert all(v.section.startswith("Every method on every benchmark") for v in doc.verdicts)
    lff = next(v for v in doc.verdicts if v.comparison.startswith("LfF vs ERM, cmnist conflict_1"))
    assert lff.verdict == "higher" and lff.reading == "better" and "Benjamini-Hochberg" in lff.outcome
    assert f"{lff.verdict}: {lff.reading}" in doc.markdown()


def test_headings_get_githubs_anchors_unique_in_the_document():
    """GitHub's slugs (github-slugger 2: these and the demo report's headings agree with its own output):
    lower case, punctuation and symbols dropped, a hyphen per space, a repeated one numbered; the title and
    the opening headings count first, as they come first."""
    assert slug("Table 2 – Background Challenge accuracy (%)") == "table-2--background-challenge-accuracy-"
    assert slug("Fig. 3 – rebias_mnist: accuracy per colour × digit cell (ρ = 0.5)") == (
        "fig-3--rebias_mnist-accuracy-per-colour--digit-cell-ρ--05")
    assert slug("Runs scored on `cmnist`: accuracy (%)") == "runs-scored-on-cmnist-accuracy-"
    assert slug("Shape bias (x², ½) — Table 7") == "shape-bias-x---table-7"  # other numbers, dashes dropped
    doc = Document("Report", with_summary=True)
    for text in ("Contents", "Results", "Results", "Results-1", "Report"):
        doc.heading(text)
    assert [body[1] for kind, body in doc.blocks] == ["contents-1", "results", "results-1", "results-1-1", "report-1"]


def test_a_verdict_is_recorded_under_the_heading_it_is_printed_below():
    doc = Document("t", with_summary=True)
    doc.para("Introduction.")
    doc.heading("First")
    judged = Interval(-3.0, -5.0, -1.0, True, (3, 3))
    doc.verdict("A vs B, gap", judged, "A narrows the gap")
    doc.heading("Second")
    doc.no_verdict("C vs D, gap", "capability check: D does not learn the task")
    doc.verdict("E vs F", Interval(math.nan, math.nan, math.nan, False, (0, 0)))
    assert [(v.section, v.anchor, v.verdict) for v in doc.verdicts] == [
        ("First", "first", "lower"), ("Second", "second", NOT_INFORMATIVE), ("Second", "second", "cannot tell")]
    assert doc.verdicts[0].outcome == "-3.0 points (95 % CI -5.0 to -1.0, paired over 3 seeds)"
    md = doc.markdown()
    assert md.index("Introduction.") < md.index("## Verdicts at a glance") < md.index("## Contents") < md.index(
        "## First")
    assert "| First | [A vs B, gap](#first) | lower: A narrows the gap | -3.0 points (95 % CI" in md
    assert "| Second | [C vs D, gap](#second) | not informative | capability check: D does not learn" in md
    assert "|  | [E vs F](#second) | cannot tell | no numbers |" in md
    assert "1 lower, 1 cannot tell, 1 not informative" in md
    page = doc.html()
    assert "<a href='#first'>A vs B, gap</a>" in page and "<h2 id='first'>First" in page
    assert not re.search(r"(src|href)=['\"](https?:|//)", page)  # standalone: nothing fetched from elsewhere


def test_a_document_without_verdicts_says_so_and_one_without_a_summary_has_none():
    doc = Document("t", with_summary=True)
    doc.heading("Only")
    assert "No section of this report judges a comparison" in doc.markdown() and "1. [Only](#only)" in doc.markdown()
    plain = Document("t")
    plain.heading("Only")
    plain.verdict("A vs B", Interval(1.0, 0.5, 1.5, True, (3, 3)))
    assert SUMMARY_HEADING not in plain.markdown() + plain.html() and "Contents" not in plain.markdown()


def test_the_html_renders_the_sections_markdown_emphasis_code_and_links():
    doc = Document("t")
    doc.para("**not informative**: see `config.yaml`, *Biased* and [the table](#table-1); 3 * 4 < 5")
    page = doc.html()
    assert ("<p><strong>not informative</strong>: see <code>config.yaml</code>, <em>Biased</em> and "
            "<a href='#table-1'>the table</a>; 3 * 4 &lt; 5</p>") in page
