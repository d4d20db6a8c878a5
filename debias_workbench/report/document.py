"""A tiny document model rendered to both Markdown and standalone HTML (one source of truth)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Document:
    title: str
    #: (kind, body): the body a text, (header, rows) or (path, caption) by kind
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", (header, rows)))

    def image(self, path: str, caption: str) -> None:
        self.blocks.append(("img", (path, caption)))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for kind, body in self.blocks:
            if kind == "h2":
                out += [f"## {body}", ""]
            elif kind == "p":
                out += [str(body), ""]
            elif kind == "table":
                header, rows = body
                out.append("| " + " | ".join(header) + " |")
                out.append("|" + "|".join("---" for _ in header) + "|")
                out += ["| " + " | ".join(r) + " |" for r in rows]
                out.append("")
            else:
                path, caption = body
                out += [f"![{caption}]({path})", "", f"*{caption}*", ""]
        return "\n".join(out)

    def html(self) -> str:
        esc = html.escape
        out = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title>",
            "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
            "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .6em;"
            "text-align:right}td:first-child,th:first-child,td:nth-child(2){text-align:left}"
            "tr.quoted{color:#666;font-style:italic}img{max-width:100%}</style></head><body>",
            f"<h1>{esc(self.title)}</h1>",
        ]
        for kind, body in self.blocks:
            if kind == "h2":
                out.append(f"<h2>{esc(str(body))}</h2>")
            elif kind == "p":
                out.append(f"<p>{esc(str(body))}</p>")
            elif kind == "table":
                header, rows = body
                out.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
                for r in rows:
                    cls = " class='quoted'" if any("(paper)" in c for c in r) else ""
                    out.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
                out.append("</table>")
            else:
                path, caption = body
                out.append(
                    f"<figure><img src='{esc(path)}' alt='{esc(caption)}'><figcaption>{esc(caption)}"
                    "</figcaption></figure>"
                )
        out.append("</body></html>")
        return "\n".join(out)
