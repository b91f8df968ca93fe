"""Plain tables for terminals and Markdown, and the counts and lists in their lines. Cell text is untrusted: Markdown
cells are escaped."""

from __future__ import annotations

from collections.abc import Sequence

from ci.escape import one_line, redacted

# "&" first: the entities the others make must not be escaped again. Function names must not turn italic;
# failure text must not make links or images. Chained str.replace: a translate table with string values
# walks the text in Python-object steps, and was most of the time of writing a large report.md.
_MD_ESCAPES = (
    ("&", "&amp;"),
    ("|", "\\|"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ("\n", " "),
    ("\r", " "),
    ("`", "\\`"),
    ("_", "\\_"),
    ("*", "\\*"),
    ("[", "\\["),
    ("]", "\\]"),
)


def md_cell(value: object) -> str:
    """Escape text for a Markdown table cell: no pipes that split cells, no raw HTML, one line of visible characters
    (`ci.escape`), no URL's userinfo."""
    text = redacted(str(value))
    for char, escaped in _MD_ESCAPES:
        if char in text:
            text = text.replace(char, escaped)
    if not text.replace(_CUT, "").isprintable():  # ESC, U+2028 and kin: written escaped
        text = _CUT.join(one_line(part) for part in text.split(_CUT))
    return text


class Markdown(str):
    """A cell already written in Markdown (its text escaped with `md_cell`, its commands code spans: `code`), which
    the table keeps as it is: a command in a code span reads and pastes as it is, in the raw file too."""


def code(command: str) -> Markdown:
    """A command as a Markdown code span inside a table cell (a pipe escaped, as a table cell needs)."""
    command = one_line(command)  # a line break in it would end the cell and start a line of its own choosing
    fence = "``" if "`" in command else "`"
    pad = " " if fence == "``" else ""
    return Markdown(f"{fence}{pad}{command.replace('|', chr(92) + '|')}{pad}{fence}")


_CUT = "\x00"  # between cells while a whole table is escaped at once; a cell holding it is escaped alone


def markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table, every cell escaped (`md_cell`). The cells are escaped together, joined by a character
    no escape touches and split again: one pass per escape over the table, not eleven tests per cell."""
    width = len(headers)
    cells = [str(c) for row in (headers, *rows) for c in row]
    joined = _CUT.join(cells)
    written = any(isinstance(c, Markdown) for row in rows for c in row)
    if not written and joined.count(_CUT) == len(cells) - 1 and all(len(row) == width for row in rows):
        escaped = md_cell(joined).split(_CUT)
        table = [escaped[i : i + width] for i in range(0, len(escaped), width)]
    else:
        table = [[c if isinstance(c, Markdown) else md_cell(c) for c in row] for row in (headers, *rows)]
    lines = ["| " + " | ".join(row) + " |" for row in table]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines) + "\n"


def text(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[one_line(str(c).replace("\n", " ")) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


SHOWN = 3  # items of a long list a flag names; the JSON (--format json) holds every one


def folded(items: Sequence[str]) -> str:
    """A list in a line: all of it when short, else the first few and a count of the rest."""
    if len(items) <= SHOWN + 1:
        return ", ".join(items)
    return f"{', '.join(items[:SHOWN])} and {len(items) - SHOWN} more (all in --format json)"


def counted(n: int, noun: str, plural: str = "") -> str:
    """A count and its noun: "1 row", "2 rows", "1,024 rows" (`plural` where adding an s is not it)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
