"""Readable event names: device kernels and templated ops carry C++ signatures of hundreds of
characters (``void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, ...)``);
tables and advice show them shortened, the full name kept for hover and JSON."""

from __future__ import annotations

#: Names up to this long are shown as they are.
SHORT_NAME_MAX = 60


def _elide_groups(text: str, opening: str, closing: str) -> str:
    """Replace the content of every outermost ``opening``...``closing`` group with ``…``."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            if depth == 0:
                out.append(opening + "…")
            depth += 1
        elif char == closing and depth:
            depth -= 1
            if depth == 0:
                out.append(closing)
        elif depth == 0:
            out.append(char)
    return "".join(out)


def short_name(name: str, max_len: int = SHORT_NAME_MAX) -> str:
    """``name`` for a reader: a leading ``void`` and ``(anonymous namespace)::`` dropped,
    template arguments and the parameter list elided (``dgrad_engine<…>(…)``), and cut at a
    token boundary with ``…`` if still longer than ``max_len``. Short names come back unchanged."""
    text = " ".join(str(name).split())
    if len(text) <= max_len:
        return text
    text = text.removeprefix("void ").replace("(anonymous namespace)::", "")
    text = _elide_groups(text, "<", ">")
    if text.endswith(")") and "(" in text:
        text = _elide_groups(text, "(", ")")
    if len(text) <= max_len:
        return text
    cut = max(text.rfind(sep, 0, max_len - 1) for sep in ("::", "_", ",", " ", "<"))
    return text[: cut if cut > max_len // 2 else max_len - 1] + "…"
