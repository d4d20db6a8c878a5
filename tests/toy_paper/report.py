"""A toy fifth paper (tests/test_paper_units.py): one section that tables our Original accuracy of
the ERM model beside the number its `numbers.yaml` quotes. It lives here alone: registering it is
one line in the test, and no file of the package changes."""

from debias_workbench.papers.paper import Paper, load_numbers
from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import mean_std
from debias_workbench.report.roles import Role
from debias_workbench.report.section import Section

HEADING = "Toy paper – Table 1"


def table1(doc: Document, ctx: ReportContext) -> None:
    quoted = load_numbers(__package__)["toy_table1"]
    ours = ctx.main.get(ctx.roles.get("toy_reference", ""), {}).get("original", [])
    doc.heading(HEADING)
    doc.table(["Model", "Original ↑"], [["Ours", mean_std(ours)], ["Paper", f"{quoted['original']:.1f}"]])


PAPER = Paper(
    sections=(Section("toy_table1", table1, ("last",)),),
    roles={"toy_reference": Role("erm", "original", "Toy reference")},
    intro="The toy paper's rows are quoted from its Table 1.",
)
