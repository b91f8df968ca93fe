"""The one printer for names from elsewhere: a fork's file names, a report's values, a manifest's or a costs file's
fields. Whatever they hold, they print as one line of visible characters: every control character (Unicode category
Cc: newline, carriage return, ESC, U+0085), line or paragraph separator (Zl U+2028, Zp U+2029), format character
(Cf: bidirectional overrides, zero-width ones) and unpaired surrogate (Cs: a file name's undecodable bytes) is
written as its escape (`\\n`, `\\x1b`, `\\u2028`). YAML and terminals break lines at U+0085, U+2028 and U+2029 too,
so a name can neither start a line of its choosing (a forged `fix:`, a YAML key, a shell command in a pasted block)
nor drive a terminal.

It is also the one place that keeps secrets and shells out of what is printed: the userinfo of every URL (a token in
`https://user:TOKEN@host/…`) is written `***` (`redacted`), in every line it prints, every error, every report cell,
every pipeline; and every value of every command it prints (a fix line, a next step, a re-run line) is quoted by
`quote`, so a shell reads the same argument back and nothing else.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable

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
    """`text` as one line of visible characters (str() of anything else first), no URL's userinfo in it."""
    s = redacted(str(text))
    if s.isprintable():  # no character of a hidden category (each is one isprintable refuses): at C speed
        return s
    return "".join(escaped(c) if hidden(c) else c for c in s)


def lines(text: object) -> str:
    """`text` with its own line breaks kept ("\\n"), every other hidden character escaped: a message of several lines
    that quotes names from elsewhere, on the way to a terminal."""
    return "\n".join(one_line(part) for part in str(text).split("\n"))


# a URL's scheme, then its userinfo: everything up to the last "@" before the host (a password may hold "@" unescaped)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#'\"<>\\]*)@")
_SSH = ("ssh://", "git+ssh://", "ssh+git://")  # their user name is no secret (a key authenticates), a password is


def redacted(text: str) -> str:
    """`text` with the userinfo of every URL in it written `***`: `https://***@github.com/o/r.git`. An ssh URL's bare
    user name (`ssh://git@host/…`) is kept: it is no credential, and the URL works without it otherwise."""
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(_redact, text)


def _redact(m: re.Match[str]) -> str:
    scheme, userinfo = m.group("scheme"), m.group("userinfo")
    if scheme.lower() in _SSH and ":" not in userinfo:
        return m.group(0)
    return f"{scheme}***@"


def quote(arg: object) -> str:
    """One argument of a printed command, as a POSIX shell reads it back: `shlex.quote`, except that an argument
    holding a control or line-break character is written in bash's $'...' form, its characters escaped (the line
    stays one line of visible characters); a URL's userinfo redacted first. The one quoting function of every command
    stackgate prints."""
    text = redacted(str(arg))
    if first_hidden(text) is None:
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(c) for c in text) + "'"


def command(argv: Iterable[object]) -> str:
    """A command as one line, each argument `quote`d."""
    return " ".join(quote(a) for a in argv)


def _ansi_c(c: str) -> str:
    if c in "\\'":
        return "\\" + c
    if "\udc80" <= c <= "\udcff":  # a byte a file name held that is no UTF-8 (os.fsdecode): the byte again
        return f"\\x{ord(c) - 0xDC00:02x}"
    if not hidden(c):
        return c
    # bash reads $'\xHH' as that byte, not as the character: U+0080 to U+00FF are written \u00HH (UTF-8's bytes)
    return f"\\u{ord(c):04x}" if 0x80 <= ord(c) < 0x100 else escaped(c)


def first_hidden(text: object) -> str | None:
    """The first character of `text` that `one_line` would escape, or None."""
    return next((c for c in str(text) if hidden(c)), None)
