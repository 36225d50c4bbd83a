"""The HTML around the plots: one self-contained document, every piece of text escaped.

Anchor ids, claims and reasons come from data files, so text is escaped by default: a cell or a
paragraph is plain text unless it is wrapped in ``Markup`` (HTML this module built itself).
"""
from __future__ import annotations

import html
from typing import Iterable, Sequence, Union

from lawbench.core.html.figures import verdict_colour
from lawbench.core.models import Verdict
from lawbench.core.untrusted_text import terminal


class Markup(str):
    """HTML built here, safe to insert as it is (everything else is escaped)."""


Content = Union[str, Markup]


def esc(text: object) -> Markup:
    """Text as HTML shows it literally, by lawbench.core.untrusted_text's rule first: cut (a record's
    100 KB string would otherwise fill the page), control characters written out (``\\x1b``)."""
    if isinstance(text, Markup):
        return text
    return Markup(html.escape(terminal("" if text is None else text), quote=True))


def tag(name: str, content: Content = "", **attrs: object) -> Markup:
    """``<name attrs>content</name>``; ``class_`` becomes ``class``; attribute values are escaped."""
    attr = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items()
                   if v is not None)
    return Markup(f"<{name}{attr}>{esc(content)}</{name}>")


def join(parts: Iterable[Content], sep: str = "\n") -> Markup:
    return Markup(sep.join(esc(p) for p in parts))


def verdict_badge(verdict: str) -> Markup:
    return tag("span", verdict, class_=f"verdict v-{verdict}")


def image(uri: str, alt: str) -> Markup:
    # Only data: URIs are embedded: the page must open offline, with nothing fetched.
    if not uri.startswith("data:image/"):
        raise ValueError("only embedded data: images belong in a lawbench report")
    return Markup(f'<img src="{uri}" alt="{esc(alt)}">')


def table(headers: Sequence[str], rows: Iterable[Sequence[Content]], class_: str = "") -> Markup:
    head = tag("tr", join((tag("th", h) for h in headers), ""))
    body = join(tag("tr", join((tag("td", c) for c in row), "")) for row in rows)
    return Markup(f'<table class="{esc(class_)}"><thead>{head}</thead><tbody>\n{body}\n</tbody></table>')


def definition_list(items: Iterable[tuple[str, Content]]) -> Markup:
    return tag("dl", join((Markup(f"{tag('dt', k)}{tag('dd', v)}") for k, v in items), ""))


def counts_line(counts: dict[str, int]) -> Markup:
    """`32 PASS 17 FAIL …` with each verdict's colour; zero counts shown too (they are news)."""
    parts = [Markup(f"{tag('b', str(counts.get(v.value, 0)))} {verdict_badge(v.value)}") for v in Verdict]
    if counts.get("history"):
        parts.append(esc(f"(+{counts['history']} history)"))
    return tag("p", join(parts, " "), class_="counts")


def _css() -> str:
    colours = "".join(f".v-{v.value}{{background:{verdict_colour(v.value)}}}" for v in Verdict)
    return ("body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;"
            "max-width:1250px;padding:0 1em;color:#1f2328;line-height:1.4}"
            "h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #d0d7de;margin-top:1.8em}"
            "h3{font-size:1.05em}"
            "table{border-collapse:collapse;font-size:0.85em;width:100%}"
            "th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}"
            "th{background:#f6f8fa}.num{white-space:nowrap}"
            "code,.id{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:0.95em}"
            ".verdict{color:#fff;border-radius:3px;padding:0 4px;font-weight:bold;font-size:0.9em}"
            f"{colours}"
            "dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{font-weight:bold}"
            "dd{margin:0}img{max-width:100%;height:auto;display:block;margin:0.5em 0}"
            ".side{display:flex;flex-wrap:wrap;gap:8px}.side img{max-width:600px}"
            ".attention li{margin:2px 0}.note{color:#57606a;font-size:0.9em}"
            ".warn{background:#fff8c5;border:1px solid #d4a72c;padding:4px 8px}")


def document(title: str, body: Content) -> str:
    """A whole page: no external style, script, font or image, so it reads the same offline."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"{tag('title', title)}<style>{_css()}</style></head>\n<body>\n{esc(body)}\n</body></html>\n")
