"""Readable event names: device kernels and templated ops carry C++ signatures of hundreds of
characters (``void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, ...)``);
tables and advice show them shortened, the full name kept for hover and JSON."""

from __future__ import annotations

import re
from collections.abc import Sequence

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


def short_names(names: Sequence[str], max_len: int = SHORT_NAME_MAX) -> list[str]:
    """``short_name`` of each of ``names``, except that names which differ stay different:
    where several names shorten to one text, their shortened forms keep what tells them apart,
    in this order until it does: the whole name without its template arguments and parameters
    (``…_cta_per_row_1<…>(…)`` and ``…_warp_per_row_1<…>(…)``, no cut); the template
    arguments in which they differ (``implicit_convolve_sgemm<…, 1024, 6, 7, …>(…)``, the
    equal ones elided and namespaces dropped); the parameter lists too; else the whole name."""
    full = [" ".join(str(n).split()) for n in names]
    out = [short_name(n, max_len) for n in full]
    groups: dict[str, list[int]] = {}
    for i, shown in enumerate(out):
        groups.setdefault(shown, []).append(i)
    for members in groups.values():
        distinct = sorted({full[i] for i in members})
        if len(distinct) < 2:
            continue
        shown_as = _distinguish(distinct)
        for i in members:
            out[i] = shown_as[full[i]]
    return out


def _distinguish(names: list[str]) -> dict[str, str]:
    """Shortened forms of ``names`` (all different) that are all different (see
    ``short_names``)."""
    parts = {
        n: _split(n.removeprefix("void ").replace("(anonymous namespace)::", "")) for n in names
    }
    shown = {n: _elided(*parts[n]) for n in names}
    if len(set(shown.values())) == len(names):
        return shown
    for params in (False, True):
        shown = _with_args(parts, params=params)
        if len(set(shown.values())) == len(names):
            return shown
    return {n: n for n in names}


def _split(text: str) -> tuple[str, list[str] | None, str]:
    """``ret name<a, b>(params)`` as (``ret name`` with the return type's template arguments
    elided, the function's top-level template arguments or None, the parameter list)."""
    params = ""
    if text.endswith(")"):
        depth = 0
        for k in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[k], 0)
            if depth == 0:
                text, params = text[:k], text[k:]
                break
    depth, space = 0, -1
    for k, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == " " and depth == 0:
            space = k
    prefix, name = _elide_groups(text[: space + 1], "<", ">"), text[space + 1 :]
    if not name.endswith(">"):
        return prefix + name, None, params
    depth = 0
    for k in range(len(name) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(name[k], 0)
        if depth == 0:
            return prefix + name[:k], _top_level_args(name[k + 1 : -1]), params
    return prefix + name, None, params


def _top_level_args(text: str) -> list[str]:
    """``a, b<c, d>, e`` -> ``["a", "b<c, d>", "e"]``: split at commas outside brackets."""
    args: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
        elif char == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    args.append("".join(current).strip())
    return args


def _elided(name: str, args: list[str] | None, rest: str) -> str:
    """``name<…>(…)``: the template arguments and parameter list elided, nothing cut."""
    text = name + ("<…>" if args is not None else "") + rest
    if text.endswith(")") and "(" in text:
        text = _elide_groups(text, "(", ")")
    return text


#: A namespace or class qualifier: ``at::native::`` in ``at::native::AddFunctor<float>``.
_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")
#: A lambda's call operator in a chain: ``::operator()() const`` (parameters elided).
_CALL_OPERATOR = re.compile(r"::operator\(…\)\(…\)(?: const)?")
#: A lambda, its parameters elided: ``{lambda(…)#2}``.
_LAMBDA = re.compile(r"\{lambda\(…\)(#\d+)\}")
#: A chain of numbered lambdas: ``::{lambda#2}::{lambda#4}``.
_LAMBDA_CHAIN = re.compile(r"(?:::\{lambda#\d+\})+")


def _arg_forms(arg: str) -> list[str]:
    """Forms of a template argument, shortest first: qualifiers dropped, parameter lists
    elided, a chain of lambdas cut (``sigmoid_kernel_cuda(…)::{lambda…}``) and nested template
    arguments elided (``BinaryFunctor<…>``); the same with the nested arguments; the lambdas
    numbered (``::{lambda#2}::{lambda#4}``); their call operators kept; as written."""
    text = _QUALIFIER.sub("", arg)
    text = _elide_groups(text, "(", ")") if "(" in text else text
    numbered = _LAMBDA.sub(r"{lambda\1}", _CALL_OPERATOR.sub("", text))
    cut = _LAMBDA_CHAIN.sub("::{lambda…}", numbered)
    return [_elide_groups(cut, "<", ">"), cut, numbered, text, arg]


def _with_args(
    parts: dict[str, tuple[str, list[str] | None, str]], *, params: bool
) -> dict[str, str]:
    """``name<…, 1024, 6, …>(…)`` for each name: template arguments shown where the names
    differ, each position in a form of ``_arg_forms``, the others elided; the parameter list
    too with ``params``. Positions are revealed one step at a time (hidden, then each form
    in turn), always the step that leaves the fewest names alike, until none are or no step
    is left."""
    width = max(len(args or ()) for _, args, _ in parts.values())
    forms = {
        n: [_arg_forms(args[k]) if args and k < len(args) else [""] * 5 for k in range(width)]
        for n, (_, args, _) in parts.items()
    }
    level = [-1] * width  # -1: hidden

    def render(n: str) -> str:
        name, args, rest = parts[n]
        if args is not None:
            shown: list[str] = []
            for k in range(width):
                if level[k] < 0:
                    if not shown or shown[-1] != "…":
                        shown.append("…")
                else:
                    shown.append(forms[n][k][level[k]])
            name += "<" + ", ".join(shown) + ">"
        return name + _QUALIFIER.sub("", rest) if params else _elided(name, None, rest)

    def alike() -> int:
        texts = [render(n) for n in parts]
        return len(texts) - len(set(texts))

    current = alike()
    while current:
        best: tuple[int, int] | None = None
        for k in range(width):
            if level[k] >= 4 or len({forms[n][k][4] for n in parts}) < 2:
                continue
            level[k] += 1
            score = alike()
            level[k] -= 1
            if best is None or score < best[0]:
                best = (score, k)
        if best is None:
            break
        level[best[1]] += 1
        current = best[0]
    return {n: render(n) for n in parts}
