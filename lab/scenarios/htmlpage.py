"""Self-contained HTML pages: one file, inline CSS, images as data: URIs, no script.

The Content-Security-Policy forbids every fetch but inline styles and data: images, so a
report opened from a course's shared drive or a mail attachment can neither load nor send
anything. Every value from a student or a scenario goes through `esc`.
"""

from __future__ import annotations

import base64
import html
import re

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 72rem; padding: 0 1rem; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; font-size: 1.25rem; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: .6rem 0 1.2rem; }
th, td { border: 1px solid #ccd; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f2f3f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.passed, .complete { background: #e3f5e6; color: #145c24; }
.failed, .error, .failed\\+solve { background: #fbe4e4; color: #8a1616; }
.changed, .partial, .partial\\+solve, .complete\\+solve { background: #fff1d6; color: #7a4b00; }
.skipped { background: #eee; color: #555; }
.tag { display: inline-block; font-size: .8em; padding: 0 .35em; border-radius: .3em;
       background: #6b4fbb; color: #fff; margin-left: .3em; }
.check-ok::before { content: "\\2714\\FE0E  "; color: #145c24; }
.check-fail::before { content: "\\2718\\FE0E  "; color: #8a1616; }
.observed { color: #555; font-family: ui-monospace, monospace; font-size: .9em; }
figure { display: inline-block; margin: .5rem 1rem .5rem 0; }
figure img { max-width: 100%; border: 1px solid #ccd; }
figcaption { color: #555; font-size: .9em; }
ul.notes { color: #555; }
details { margin: .3rem 0; }
"""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def esc(value: object) -> str:
    """Text for HTML: escaped, control characters shown as \\xNN."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if value is None else str(value))
    return html.escape(text, quote=True)


def page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"{body}\n</body>\n</html>\n")


def png(data: bytes, alt: str, caption: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return (f"<figure><img alt=\"{esc(alt)}\" src=\"data:image/png;base64,{b64}\">"
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """`rows` hold ready HTML cells (`<td ...>...</td>`); headers are plain text."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "\n".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f"<table class=\"{esc(cls)}\"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n" \
           "</tbody></table>"


def td(text: object, cls: str = "") -> str:
    return f"<td class=\"{esc(cls)}\">{esc(text)}</td>" if cls else f"<td>{esc(text)}</td>"


def duration(seconds: object) -> str:
    """h:mm:ss, or nothing for a value that is not a number of seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return ""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
