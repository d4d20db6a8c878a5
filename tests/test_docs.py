"""README.md and docs/ stay in step, and no link in them is dead.

The bug this catches: a figure changed in one place and not in the other. The README used to
quote the demo's duration in five places with different values, because each re-measurement
updated some of them. Now docs/measurements.md holds every measured figure once, with its
commit, date and machine, and the README quotes only a few of them (the demo's duration in the
set-up comment, the demo table). If someone changes a figure in README.md (a re-run, a typo) and
not in docs/measurements.md, or the other way round, `test_every_readme_figure_is_in_measurements`
fails and names the figure. The other tests catch a relative link to a file or section that was
moved, renamed or never written (the README's sections now live in docs/), and a README that
grows back past 200 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MEASUREMENTS = DOCS / "measurements.md"

#: a number as the docs write it: 91.6, 9,739, 0.31
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
#: units that mark a number as a measurement (longest first, so "ms" wins over "s")
_UNITS = ["job-minutes", "images/s", "img/s", "s/epoch", "CPU-s", "points", "min", "ms", "h", "s", "%", "×"]
#: a measured figure in prose or a table cell: a number, optionally a range (7.0–7.1) or a spread
#: (36.2 ± 3.1), then a unit; not a piece of a longer number, word or date
FIGURE = re.compile(
    rf"(?<![\w.,/-])(?P<num>(?:{_NUM})(?:\s?[–-]\s?(?:{_NUM}))?(?:\s?±\s?(?:{_NUM}))?)"
    rf"\s?(?P<unit>{'|'.join(re.escape(u) for u in _UNITS)})(?![\w/])")
#: a table cell that holds figures only (92.9 ± 1.4, 72.8 / 19.4, 0.017, 5 %)
_FIGURE_CELL = re.compile(r"[\d.,±/–\-\s%×]*\d[\d.,±/–\-\s%×]*")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _plain(markdown: str) -> str:
    """The text with emphasis and code marks removed and every run of whitespace one space."""
    text = markdown.replace("\u00a0", " ").replace("\u202f", " ").replace("\u2009", " ")
    text = text.replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text)


def _without_code(markdown: str) -> str:
    """The text without fenced code blocks and inline code spans (no links or headings in them)."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", markdown, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def prose_figures(markdown: str) -> list[str]:
    """Every number with a unit in the text, code blocks included, e.g. '91.6 min', '1.90×'."""
    return [f"{m['num']} {m['unit']}" for m in FIGURE.finditer(_plain(markdown))]


def _has_figure(figure: str, text: str) -> bool:
    num, unit = figure.rsplit(" ", 1)
    pattern = r"\s?".join(re.escape(part) for part in num.split(" "))
    return re.search(rf"(?<![\w.,/-]){pattern}\s?{re.escape(unit)}(?![\w/])", _plain(text)) is not None


def table_rows(markdown: str) -> list[tuple[str, list[str]]]:
    """(label, its figures in order) of every table row with a cell of figures only."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"\|[\s|:-]+\|", line):
            continue
        cells = [_plain(cell).strip() for cell in line.strip("|").split("|")]
        figures = [n for cell in cells[1:] if _FIGURE_CELL.fullmatch(cell) for n in re.findall(_NUM, cell)]
        if figures:
            rows.append((cells[0].strip("* "), figures))
    return rows


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _without_code(markdown), re.M):
        base = slug(heading)
        result.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return result


def dead_links(page: Path) -> list[str]:
    """The relative links of a Markdown page whose file, or whose section in a .md file, is missing."""
    dead = []
    for target in LINK.findall(_without_code(page.read_text())):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            dead.append(f"{target} (no file {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            dead.append(f"{target} (no section #{anchor} in {resolved.relative_to(ROOT)})")
    return dead


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/ (at most 200)"


def test_every_readme_figure_is_in_measurements():
    readme, measurements = README.read_text(), MEASUREMENTS.read_text()
    figures = prose_figures(readme)
    assert any(f.endswith(" min") for f in figures), "the extraction no longer sees the demo's duration"
    missing = [f for f in figures if not _has_figure(f, measurements)]
    assert not missing, f"README.md quotes figures that docs/measurements.md does not hold: {missing}"

    rows = table_rows(readme)
    assert rows, "the extraction no longer sees the README's demo table"
    measured = table_rows(measurements)
    stale = [f"{label}: {' / '.join(figs)}" for label, figs in rows if (label, figs) not in measured]
    assert not stale, f"README.md table rows that no table row of docs/measurements.md matches: {stale}"


def test_figure_extraction():
    text = ("(91.6 min on this\n#    2-core machine, 2026-11-25, commit 27d052d: over the 60-minute budget) "
            "9,739 s user; **1.90×** speed-up; 36.2 ± 3.1 %; 7.0-7.1 s/epoch; 3 seeds, 32 px, 150 jobs")
    assert prose_figures(text) == ["91.6 min", "9,739 s", "1.90 ×", "36.2 ± 3.1 %", "7.0-7.1 s/epoch"]
    assert _has_figure("91.6 min", "took **91.6\nmin**") and not _has_figure("91.6 min", "191.6 min")
    assert not _has_figure("1.6 min", "91.6 min") and not _has_figure("91.6 min", "91.6 ms")
    table = "| model | A | B |\n|---|---|---|\n| **CLAD** | 94.7 ± 0.5 | **19.3 ± 2.3** |\n| [x](y) | IN-9 | t |"
    assert table_rows(table) == [("CLAD", ["94.7", "0.5", "19.3", "2.3"])]


def test_every_relative_link_points_to_an_existing_file_and_section():
    dead = {page.relative_to(ROOT).as_posix(): dead_links(page) for page in pages()}
    assert not {page: links for page, links in dead.items() if links}, dead
    assert slug("Table 3, the ablation, and the reading of Eq. 9") == "table-3-the-ablation-and-the-reading-of-eq-9"
    assert slug("Base (IN) on the development photos") == "base-in-on-the-development-photos"


def test_the_readme_test_command_is_what_ci_runs():
    """The README's command 2 (the line after its `# 2.` comment) is .ci/run's last line, exactly:
    the install, the lint and format checks, and the tests (the type check among them)."""
    lines = README.read_text().splitlines()
    command = next(lines[i + 1] for i, line in enumerate(lines) if line.startswith("# 2."))
    assert command.startswith("pip install uv && uv pip install -e '.[test]' && ") and command.endswith(" && python -m pytest -q")
    assert "ruff check debias_workbench" in command and "ruff format --check debias_workbench" in command
    assert (ROOT / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1] == command
