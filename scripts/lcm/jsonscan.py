"""Reading a JSON text in place, without decoding it: where the strings of an array start.

lcm.mask masks a transcript line where its strings stand (so every other byte stays as it was)
and needs to know which strings are the elements of an array under a secret's name. Stdlib only.
"""
from __future__ import annotations


def array_strings(text: str, at: int) -> set:
    """The starts of the strings that are elements of the JSON array opening at text[at] or of
    the arrays nested in it, not those inside an object in it (their own key names them)."""
    from json.decoder import scanstring
    stack, found, pos = [], set(), at
    while pos < len(text):
        ch = text[pos]
        if ch == '"':
            if "{" not in stack:
                found.add(pos)
            try:
                pos = scanstring(text, pos + 1, False)[1]
            except ValueError:
                return found  # not JSON from here on
            continue
        if ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            stack.pop()
            if not stack:
                return found
        pos += 1
    return found
