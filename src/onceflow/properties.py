"""Java properties text (`java.util.Properties.load`), read by the broker's config file,
meta.properties and the CLI's `--command-config`.

`#`/`!` comment lines; `key=value`, `key: value` or `key value` (whitespace around the
separator ignored); a line ending in an odd number of backslashes continues on the next, whose
leading whitespace is dropped; backslash escapes `\\t \\n \\r \\f`, `\\uXXXX`, and any other
character taken literally (`\\=`, `\\:`, `\\ `, `\\\\`). A later key wins.
"""

from __future__ import annotations

__all__ = ["parse_properties"]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text: `#`/`!` comments, `=`, `:` or blank separators, `\\` escapes
    and line continuations."""
    result: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _ends_with_continuation(line):
            logical.append(line[:-1])
            continue
        logical.append(line)
        key, value = _split_property("".join(logical))
        logical.clear()
        result[key] = value
    if logical:
        key, value = _split_property("".join(logical))
        result[key] = value
    return result


def _ends_with_continuation(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _split_property(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            key_chars.append(_ESCAPES.get(line[i + 1], line[i + 1]))
            i += 2
            continue
        if c in "=: \t\f":
            break
        key_chars.append(c)
        i += 1
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return "".join(key_chars), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)
