"""The one printer for names from elsewhere: a fork's file names, a report's values, a manifest's or a costs file's
fields. Whatever they hold, they print as one line of visible characters: every control character (Unicode category
Cc: newline, carriage return, ESC, U+0085), line or paragraph separator (Zl U+2028, Zp U+2029), format character
(Cf: bidirectional overrides, zero-width ones) and unpaired surrogate (Cs: a file name's undecodable bytes) is
written as its escape (`\\n`, `\\x1b`, `\\u2028`). YAML and terminals break lines at U+0085, U+2028 and U+2029 too,
so a name can neither start a line of its choosing (a forged `fix:`, a YAML key, a shell command in a pasted block)
nor drive a terminal.
"""

from __future__ import annotations

import unicodedata

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def hidden(c: str) -> bool:
    """Whether `c` is a character a name from elsewhere may not print as it is."""
    return unicodedata.category(c) in _HIDDEN


def escaped(c: str) -> str:
    """The escape of one character, as Python and bash's $'...' write it."""
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def one_line(text: object) -> str:
    """`text` as one line of visible characters (str() of anything else first)."""
    s = str(text)
    if s.isprintable():  # no character of a hidden category (each is one isprintable refuses): at C speed
        return s
    return "".join(escaped(c) if hidden(c) else c for c in s)


def lines(text: object) -> str:
    """`text` with its own line breaks kept ("\\n"), every other hidden character escaped: a message of several lines
    that quotes names from elsewhere, on the way to a terminal."""
    return "\n".join(one_line(part) for part in str(text).split("\n"))


def first_hidden(text: object) -> str | None:
    """The first character of `text` that `one_line` would escape, or None."""
    return next((c for c in str(text) if hidden(c)), None)
