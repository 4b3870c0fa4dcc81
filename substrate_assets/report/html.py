"""One self-contained HTML page: inline CSS, charts as inline SVG, tables of rounded figures. It loads nothing — no
script, font, stylesheet or image from anywhere — and its Content-Security-Policy says so, so the page reads the
same offline, attached to a mail or years later.

Every text is escaped here: trial ids, suite names and labels come from users. Markup built by this module is
:class:`Html`; anything else given to it is text.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from substrate_assets.report.figures import MISSING, figure

# Directions and verdicts a table colours, so a regression stands out in a column of them.
MARKED_WORDS = frozenset({"regressed", "improved", "unchanged", "no change", "inconclusive", "met", "exceeded",
                          "disturbed"})

CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f7f9; color: #1d2430; font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
       Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #1d2a3a; color: #fff; padding: 18px 32px 14px; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; overflow-wrap: anywhere; }
header .subtitle { font-size: 15px; color: #d6dde8; margin-bottom: 6px; overflow-wrap: anywhere; }
header .meta { font-size: 12px; color: #a9b6c8; overflow-wrap: anywhere; }
main { max-width: 1180px; margin: 0 auto; padding: 8px 32px 40px; }
section { background: #fff; border: 1px solid #dfe3ea; border-radius: 6px; margin: 18px 0; padding: 14px 20px 18px; }
h2 { font-size: 17px; margin: 0 0 10px; font-weight: 600; }
h3 { font-size: 14px; margin: 16px 0 6px; font-weight: 600; color: #3b4656; }
p { margin: 6px 0; }
.note { color: #5b6676; font-style: italic; }
.warning { background: #fff4e0; border-left: 4px solid #c77700; color: #5c3b00; padding: 8px 12px; margin: 8px 0; }
figure { margin: 8px 0; overflow-x: auto; }
figure svg { width: 100%; max-width: 960px; height: auto; display: block; overflow: visible; }
.columns { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 8px 24px;
           align-items: start; }
.columns h3 { margin-top: 4px; }
figcaption { color: #5b6676; font-size: 12px; margin-top: 4px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e6e9ef; text-align: left; vertical-align: top; }
thead th { background: #eef1f5; font-weight: 600; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.missing { color: #9aa3af; text-align: center; }
td.time { white-space: nowrap; }
table.figures th { background: #f3f5f8; font-weight: 500; color: #3b4656; white-space: nowrap; }
table.figures td:not(.num) { overflow-wrap: anywhere; }
td.word-regressed, td.word-exceeded { color: #b3261e; font-weight: 600; }
td.word-improved, td.word-met { color: #1e7a34; font-weight: 600; }
td.word-inconclusive { color: #8a5a00; font-weight: 600; }
td.word-disturbed { color: #8a5a00; }
a { color: #1f5fa8; }
nav { background: #2a3a4f; padding: 6px 32px; font-size: 13px; }
nav a { color: #dbe6f5; margin-right: 18px; text-decoration: none; }
nav a:hover { text-decoration: underline; }
"""


class Html(str):
    """Markup this module built: put into a page as it is, never escaped again."""


@dataclass(frozen=True)
class Link:
    """A link to another page of a site, by a path relative to the page it is on: a table cell of one shows
    ``label`` leading there."""

    href: str
    label: str


def _href(link: Link) -> str:
    # A page links only to pages beside it: a path of its own making, never a scheme a user's text could choose.
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", link.href) or link.href.startswith(("/", "\\")):
        raise ValueError(f"{link.href!r} is not a relative path")
    return link.href


def anchor(link: Link) -> Html:
    return Html(f'<a href="{text(_href(link))}">{text(link.label)}</a>')


def text(value: Any) -> Html:
    """Any text, escaped."""
    return Html(html.escape(str(value), quote=True))


def _cell(value: Any, column: str, unit: str | None) -> Html:
    if value is None:
        return Html(f'<td class="missing">{MISSING}</td>')
    if isinstance(value, Link):
        return Html(f"<td>{anchor(value)}</td>")
    numeric = isinstance(value, int | float | Decimal) and not isinstance(value, bool)
    classes = ["num"] if numeric else ["time"] if isinstance(value, datetime) else []
    if isinstance(value, str) and value in MARKED_WORDS:
        classes.append(f"word-{value}")
    attribute = f' class="{" ".join(classes)}"' if classes else ""
    return Html(f"<td{attribute}>{text(figure(value, column, unit))}</td>")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Html:
    """The rows as an HTML table, one column per key (``columns``, else every key in order of first appearance). A
    row's ``unit`` key, when it has one, tells how its figures round."""
    if columns is None:
        columns = list(dict.fromkeys(itertools.chain.from_iterable(rows)))
    head = "".join(f"<th>{text(column)}</th>" for column in columns)
    body = "".join("<tr>" + "".join(_cell(row.get(column), column, row.get("unit")) for column in columns) + "</tr>"
                   for row in rows)
    return Html(f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')


def key_values(row: Mapping[str, Any], columns: Sequence[str] | None = None) -> Html:
    """One row as a two-column table, a figure per line: for a row too wide to read across."""
    names = [column for column in (columns if columns is not None else list(row)) if column in row]
    lines = "".join(f"<tr><th>{text(name)}</th>{_cell(row[name], name, row.get('unit'))}</tr>" for name in names)
    return Html(f'<div class="table-wrap"><table class="figures"><tbody>{lines}</tbody></table></div>')


_SVG_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str) -> Html:
    """An SVG document as markup inside the page: without its XML declaration, and each id (clip paths,
    gradients) prefixed, because ids share one namespace across the page and a second chart's ``clip1`` would clip
    by the first's."""
    body = re.sub(r"^\s*<\?xml[^>]*\?>\s*", "", svg)
    for name in sorted(set(_SVG_ID.findall(body)), key=len, reverse=True):
        escaped = re.escape(name)
        body = re.sub(rf'\bid="{escaped}"', f'id="{prefix}-{name}"', body)
        body = re.sub(rf"url\(#{escaped}\)", f"url(#{prefix}-{name})", body)
        body = re.sub(rf'href="#{escaped}"', f'href="#{prefix}-{name}"', body)
    return Html(body)


def chart(svg: str, caption: str | None = None) -> Html:
    """A rendered chart (an SVG document from :func:`substrate_assets.report.plots.svg`) as a figure."""
    below = f"<figcaption>{text(caption)}</figcaption>" if caption else ""
    # Named by its content: the same chart gets the same ids on every run, and two charts never share one.
    prefix = "chart-" + hashlib.sha256(svg.encode()).hexdigest()[:10]
    return Html(f"<figure>{inline_svg(svg, prefix)}{below}</figure>")


def paragraph(words: str) -> Html:
    return Html(f"<p>{text(words)}</p>")


def note(words: str) -> Html:
    """A muted line: a figure that is not there, and why."""
    return Html(f'<p class="note">{text(words)}</p>')


def warning(words: str) -> Html:
    """A line a person must not miss: the figures below it do not mean what they usually mean."""
    return Html(f'<p class="warning" role="alert">{text(words)}</p>')


def heading(words: str) -> Html:
    return Html(f"<h3>{text(words)}</h3>")


def side_by_side(blocks: Iterable[Html]) -> Html:
    """Blocks side by side, as many as the page is wide enough for."""
    return Html(f'<div class="columns">{"".join(f"<div>{block}</div>" for block in blocks)}</div>')


def section(title: str, parts: Iterable[Html]) -> Html:
    return Html(f"<section><h2>{text(title)}</h2>{''.join(parts)}</section>")


def page(title: str, sections: Iterable[Html], *, subtitle: str | None = None, warehouse: str | None = None,
         generated_at: datetime | None = None, navigation: Sequence[Link] = ()) -> str:
    """The whole page: its title, when it was generated (UTC) and from which warehouse, the links of its site's
    ``navigation`` when it is one of a site's pages, then the sections."""
    moment = (generated_at or datetime.now(UTC)).astimezone(UTC)
    meta = [f"generated {moment.strftime('%Y-%m-%d %H:%M:%S')} UTC"]
    if warehouse:
        meta.append(f"warehouse {warehouse}")
    sub = f'<div class="subtitle">{text(subtitle)}</div>' if subtitle else ""
    nav = f"<nav>{''.join(anchor(link) for link in navigation)}</nav>\n" if navigation else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{text(CONTENT_SECURITY_POLICY)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<header><h1>{text(title)}</h1>{sub}<div class=\"meta\">{text(' · '.join(meta))}</div></header>\n"
        f"{nav}<main>\n{''.join(sections)}\n</main>\n</body>\n</html>\n"
    )
