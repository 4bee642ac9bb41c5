"""Text made safe to show on a terminal or in a text log line.

Control characters (C0 but tab and newline, DEL, C1) become ``\\xNN`` and Unicode format
characters (category Cf: bidirectional overrides, zero-width characters, ...) become
``\\uNNNN``, so text stored by anyone who can call the API (names, descriptions, job output
and errors) cannot move the cursor, clear the screen, retitle the window or reorder what an
operator reads.
"""

from __future__ import annotations

import functools
import unicodedata

__all__ = ["escape_controls"]


@functools.cache
def _escapes() -> dict[int, str]:
    """The translation table, built on first use (about 8 ms: every code point in the
    planes that hold format characters is looked up once)."""
    table = {
        code: f"\\x{code:02x}"
        for code in [*range(0x00, 0x20), *range(0x7F, 0xA0)]
        if code not in (0x09, 0x0A)
    }
    for plane in (range(0x20000), range(0xE0000, 0xE1000)):
        for code in plane:
            if unicodedata.category(chr(code)) == "Cf":
                table[code] = f"\\u{code:04x}"
    return table


def escape_controls(text: str) -> str:
    """``text`` with control and format characters written as visible escapes.

    Args:
        text (str): any text.

    Returns:
        str: the same text where every C0 control but tab and newline, DEL, every C1
        control (``\\xNN``) and every Unicode format character (``\\uNNNN``) is escaped.
    """
    if text.isprintable():  # the common case: no Cc or Cf character, nothing to escape
        return text
    return text.translate(_escapes())
