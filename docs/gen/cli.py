"""The options of a ``perfkit`` command, read from its click definition."""

from __future__ import annotations

import click

from gen import generator
from gen.markdown import DocsError, code, table
from perfkit_core import cli

#: What an option does, for options whose click definition has no ``help`` text.
OPTION_HELP: dict[str, str] = {
    "time_unit": "Unit of the time columns in text and HTML output.",
    "fmt": "Output format (`json`: raw values, times in ns; `html`: one self-contained page).",
    "per": "Compare times per step, or per sample (needs `--batch-sizes`).",
    "views": "Comma-separated comparison views to show.",
    "metric": "What the regression gate compares (`--fail-on-regression`).",
    "to": "Export format.",
    "out_dir": "Folder for the runs and reports.",
    "steps": "Profiled training steps per framework.",
}


def _commands() -> list[str]:
    return sorted(cli.cli.commands)


def _default(param: click.Option) -> str:
    if param.required:
        return "required"
    if param.is_flag and param.secondary_opts:
        return code(param.opts[0] if param.default else param.secondary_opts[0])
    if param.is_flag:
        return "off"
    default = param.default
    if default is None or default == () or "UNSET" in repr(default):
        return ""
    return code(default)


def _option_text(param: click.Option) -> str:
    if param.is_flag:
        return code(" / ".join(param.opts + param.secondary_opts))
    choices = getattr(param.type, "choices", None)
    value = "[" + "|".join(choices) + "]" if choices else param.type.name.upper()
    return code(f"{', '.join(param.opts)} {value}")


@generator("cli.options", covers=_commands)
def options(command: str) -> str:
    """``perfkit <command>``'s arguments and a table of its options."""
    if command not in cli.cli.commands:
        raise DocsError(f"no command `perfkit {command}`; the commands are {_commands()}")
    cmd = cli.cli.commands[command]
    rows = []
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        text = param.help or OPTION_HELP.get(param.name or "")
        if not text:
            raise DocsError(f"option {param.opts[0]} of perfkit {command} has no help text")
        rows.append([_option_text(param), _default(param), text])
    usage = " ".join(
        [
            "perfkit",
            command,
            *(
                p.make_metavar(click.Context(cmd))
                for p in cmd.params
                if isinstance(p, click.Argument)
            ),
        ]
    )
    head = f"`{usage}`: {' '.join((cmd.help or '').split())}"
    if not rows:
        return head
    return head + "\n\n" + table(["option", "default", "what it does"], rows)
