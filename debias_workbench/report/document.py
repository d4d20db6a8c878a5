"""A tiny document model rendered to both Markdown and standalone HTML (one source of truth).

Every heading gets an anchor, GitHub's slug of its text (`slug`), unique in the document, so a link
`#anchor` works in the HTML and on the Markdown as GitHub renders it. A section that judges a comparison
records it (`Document.verdict`, `Document.no_verdict`) where it prints it; a document made `with_summary`
opens, after its introduction (the blocks before the first heading), with a table of every recorded verdict,
each linking to its section, and the contents (every heading, linked).
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from debias_workbench.core.statistics import Interval

#: the headings of the opening blocks of a document made `with_summary`
SUMMARY_HEADING, CONTENTS_HEADING = "Verdicts at a glance", "Contents"
#: the verdict of a comparison the report does not judge (a reference that fails its capability check, say)
NOT_INFORMATIVE = "not informative"
#: the summary table's header
SUMMARY_HEADER = ["Section", "Comparison (links to its section)", "Verdict", "Difference (95 % CI), or why none"]
STYLE = (
    "body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em;line-height:1.4}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .6em;"
    "text-align:right}td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}"
    "tr.quoted{color:#666;font-style:italic}img{max-width:100%}"
    "table.summary{width:100%}table.summary td,table.summary th{text-align:left;vertical-align:top}"
    "table.summary td:first-child{width:45%}table.summary td:nth-child(2){white-space:nowrap}"
    "a.back{font-size:.6em;font-weight:normal;margin-left:.8em;text-decoration:none}"
    "table.summary tr.section th{background:#eef2f6;padding-top:.5em}table.summary td:nth-child(2){font-weight:bold}"
    "tr.cannot-tell td:nth-child(2){color:#666;font-weight:normal}"
    "tr.not-informative{color:#777}tr.not-informative td:nth-child(2){font-weight:normal;font-style:italic}"
    "nav.contents ol{columns:2;column-gap:3em;padding-left:1.5em}nav.contents li{break-inside:avoid}"
    "code{background:#f3f3f3;padding:0 .2em}h2{margin-top:2em;border-bottom:1px solid #ddd}"
)


def slug(text: str) -> str:
    """GitHub's anchor of a heading (github-slugger 2): lower case; dropped, every character but letters,
    marks, decimal and letter numbers, connector punctuation (`_`), `-` and the plain space; each space a
    hyphen ("Table 2 – Accuracy (%)" -> "table-2--accuracy-")."""
    kept = "".join(
        c
        for c in text.strip().lower()
        if c in " -"
        or c.isalpha()
        or unicodedata.category(c) in ("Nd", "Nl", "Pc")
        or unicodedata.category(c)[0] == "M"
    )
    return kept.replace(" ", "-")


@dataclass(frozen=True)
class Verdict:
    """One comparison a section judged: the `section` (its heading) and its `anchor`, the `comparison` in
    words ("CLAD vs Base (IN9), BG-GAP"), the `verdict` ("higher" / "lower" / "cannot tell" from
    `core.statistics.Interval.verdict`, or `NOT_INFORMATIVE`), the `outcome` (the difference and its
    interval, `Interval.text()`, or why no verdict is drawn) and the `reading` (what the verdict means
    there: "better than ERM"; "" where the verdict says it all)."""

    section: str
    anchor: str
    comparison: str
    verdict: str
    outcome: str
    reading: str = ""


@dataclass
class Document:
    title: str
    #: (kind, body): the body a text, (text, anchor), (header, rows) or (path, caption) by kind
    blocks: list[tuple[str, Any]] = field(default_factory=list)
    #: open with the verdicts and the contents after the introduction (the blocks before the first heading)
    with_summary: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    anchors: set[str] = field(default_factory=set)  #: the anchors given out so far

    def __post_init__(self) -> None:
        # the title and the opening headings come first in the document, so GitHub numbers their slugs first
        for text in (self.title, *((SUMMARY_HEADING, CONTENTS_HEADING) if self.with_summary else ())):
            self._anchor(text)

    def _anchor(self, text: str) -> str:
        """The heading's slug, numbered as GitHub numbers a repeated one ("-1", "-2", ...)."""
        base = anchor = slug(text)
        n = 0
        while anchor in self.anchors:
            n += 1
            anchor = f"{base}-{n}"
        self.anchors.add(anchor)
        return anchor

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", (text, self._anchor(text))))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", (header, rows)))

    def image(self, path: str, caption: str) -> None:
        self.blocks.append(("img", (path, caption)))

    def verdict(
        self, comparison: str, judged: Interval, reading: str = "", corrected: tuple[str, str] | None = None
    ) -> None:
        """Records the verdict of `comparison` that the current section prints (`judged`: the interval of
        the difference, `core.statistics.difference`); `reading`: what that verdict means there; `corrected`:
        (verdict, how) where the section corrects its verdicts for the number of comparisons it draws, the
        corrected verdict replacing the interval's and `how` ("<correction>: q = 0.03") beside its interval."""
        outcome = judged.text().removeprefix(f"{judged.verdict}: ")
        if corrected is None:
            self._record(comparison, judged.verdict, outcome, reading)
        else:
            self._record(comparison, corrected[0], f"{outcome}; {corrected[1]}", reading)

    def no_verdict(self, comparison: str, reason: str) -> None:
        """Records a comparison the current section does not judge, and why (the summary: not informative)."""
        self._record(comparison, NOT_INFORMATIVE, reason, "")

    def _record(self, comparison: str, verdict: str, outcome: str, reading: str) -> None:
        section, anchor = next(
            (body for kind, body in reversed(self.blocks) if kind == "h2"), (self.title, slug(self.title))
        )
        self.verdicts.append(Verdict(section, anchor, comparison, verdict, outcome, reading))

    def _parts(self) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """(the introduction: the blocks before the first heading, the rest)."""
        first = next((i for i, (kind, _) in enumerate(self.blocks) if kind == "h2"), len(self.blocks))
        return self.blocks[:first], self.blocks[first:]

    def _summary_rows(self) -> list[tuple[Verdict, bool, list[str]]]:
        """(verdict, first of its section, [verdict, outcome]) per recorded verdict, in the document's order."""
        return [
            (
                v,
                i == 0 or self.verdicts[i - 1].anchor != v.anchor,
                [v.verdict + (f": {v.reading}" if v.reading else ""), v.outcome],
            )
            for i, v in enumerate(self.verdicts)
        ]

    def _tally(self) -> str:
        """ "35 comparisons: 9 higher, 24 cannot tell, 2 not informative." """
        counts = Counter(v.verdict for v in self.verdicts)
        order = ("higher", "lower", "cannot tell", NOT_INFORMATIVE)
        return f"{len(self.verdicts)} comparisons: " + ", ".join(f"{counts[k]} {k}" for k in order if counts[k]) + "."

    def markdown(self) -> str:
        intro, rest = self._parts()
        out = [f"# {self.title}", ""]
        for kind, body in intro:
            out += _markdown_block(kind, body)
        if self.with_summary:
            out += self._markdown_opening()
        for kind, body in rest:
            out += _markdown_block(kind, body)
        return "\n".join(out)

    def _markdown_opening(self) -> list[str]:
        out = [f"## {SUMMARY_HEADING}", "", f"{self._tally()} {SUMMARY_NOTE}" if self.verdicts else NO_VERDICT, ""]
        if self.verdicts:
            out += ["| " + " | ".join(SUMMARY_HEADER) + " |", "|" + "|".join("---" for _ in SUMMARY_HEADER) + "|"]
            for v, first, cells in self._summary_rows():
                section = _cell(v.section) if first else ""
                link = f"[{_cell(v.comparison)}](#{v.anchor})"
                out.append("| " + " | ".join([section, link, *map(_cell, cells)]) + " |")
            out.append("")
        out += [f"## {CONTENTS_HEADING}", ""]
        out += [f"{i}. [{text}](#{anchor})" for i, (text, anchor) in enumerate(self._headings(), start=1)]
        return [*out, ""]

    def _headings(self) -> list[tuple[str, str]]:
        return [body for kind, body in self.blocks if kind == "h2"]

    def html(self) -> str:
        esc = html.escape
        intro, rest = self._parts()
        out = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title>",
            f"<style>{STYLE}</style></head><body>",
            f"<h1 id='{slug(self.title)}'>{esc(self.title)}</h1>",
        ]
        out += [_html_block(kind, body) for kind, body in intro]
        if self.with_summary:
            out += self._html_opening()
        back = f" <a class='back' href='#{slug(CONTENTS_HEADING)}'>↑ contents</a>" if self.with_summary else ""
        out += [_html_block(kind, body, back) for kind, body in rest]
        out.append("</body></html>")
        return "\n".join(out)

    def _html_opening(self) -> list[str]:
        """The verdicts (a row per section, linking to it, above its comparisons) and the contents."""
        summary, contents = slug(SUMMARY_HEADING), slug(CONTENTS_HEADING)
        out = [f"<h2 id='{summary}'>{html.escape(SUMMARY_HEADING)}</h2>"]
        out.append(f"<p>{inline(f'{self._tally()} {SUMMARY_NOTE}' if self.verdicts else NO_VERDICT)}</p>")
        if self.verdicts:
            out.append("<table class='summary'><tr>" + "".join(f"<th>{h}</th>" for h in SUMMARY_HEADER[1:]) + "</tr>")
            for v, first, cells in self._summary_rows():
                href = f"href='#{html.escape(v.anchor)}'"
                if first:
                    out.append(f"<tr class='section'><th colspan='3'><a {href}>{inline(v.section)}</a></th></tr>")
                link = f"<td><a {href}>{inline(v.comparison)}</a></td>"
                out.append(f"<tr class='{slug(v.verdict)}'>{link}" + "".join(f"<td>{inline(c)}</td>" for c in cells))
            out.append("</table>")
        out.append(f"<h2 id='{contents}'>{html.escape(CONTENTS_HEADING)}</h2><nav class='contents'><ol>")
        out += [f"<li><a href='#{html.escape(a)}'>{inline(text)}</a></li>" for text, a in self._headings()]
        return [*out, "</ol></nav>"]


#: above the summary table: what it holds and how to read it
SUMMARY_NOTE = (
    "Each is the verdict its section prints, in the sections' order: \"higher\" or \"lower\" (the first model "
    "named against the second) only where the 95 % interval of the difference excludes 0 (in a section that "
    "corrects for its number of comparisons, only where the corrected q-value is below 0.05: the row names the "
    "correction), \"cannot tell\" otherwise, **not informative** where the section draws none (its reference "
    "model fails the capability check, say). Each comparison links to its section: the numbers, the capability "
    f"check and what the difference means there. The [contents](#{slug(CONTENTS_HEADING)}) follow the table."
)
NO_VERDICT = "No section of this report judges a comparison: no verdict to list."


def _cell(text: str) -> str:
    """A Markdown table cell: its pipes escaped, its line breaks spaces."""
    return text.replace("|", "\\|").replace("\n", " ")


def inline(text: str) -> str:
    """HTML of one line of the Markdown the sections write: escaped, with `code`, **bold**, *italics* and
    [links](#anchor)."""
    out = html.escape(str(text), quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])", r"<em>\1</em>", out)
    return re.sub(r"\[([^\]]+)\]\(#([^)\s]+)\)", r"<a href='#\2'>\1</a>", out)


def _markdown_block(kind: str, body: Any) -> list[str]:
    if kind == "h2":
        return [f"## {body[0]}", ""]
    if kind == "p":
        return [str(body), ""]
    if kind == "table":
        header, rows = body
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return [*out, *["| " + " | ".join(r) + " |" for r in rows], ""]
    path, caption = body
    return [f"![{caption}]({path})", "", f"*{caption}*", ""]


def _html_block(kind: str, body: Any, back: str = "") -> str:
    """One block's HTML; `back`: what a heading ends with (a link back to the contents)."""
    esc = html.escape
    if kind == "h2":
        return f"<h2 id='{esc(body[1])}'>{inline(body[0])}{back}</h2>"
    if kind == "p":
        return f"<p>{inline(body)}</p>"
    if kind == "table":
        header, rows = body
        out = ["<table><tr>" + "".join(f"<th>{inline(h)}</th>" for h in header) + "</tr>"]
        for r in rows:
            cls = " class='quoted'" if any("(paper)" in c for c in r) else ""
            out.append(f"<tr{cls}>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>")
        return "\n".join([*out, "</table>"])
    path, caption = body
    return f"<figure><img src='{esc(path)}' alt='{esc(caption)}'><figcaption>{inline(caption)}</figcaption></figure>"
