"""``--op-map FILE``: a user's additions to the canonical-op mapping, in TOML (or YAML when
PyYAML is installed)::

    # ops: native name (exact, or without decorations) -> canonical op, per framework or "*"
    [ops.torch]
    "aten::my_fused_linear" = "linear"
    [ops.paddle]
    "fused_gemm_epilogue" = "linear"
    [ops."*"]
    "my_custom_op" = "attention"

    # layers: layer type (lower case) -> the canonical op of every forward op inside it
    [layers]
    convbnrelu = "conv"

    # families: canonical op -> family
    [families]
    my_custom_op = "attention"
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from perfkit_core.errors import TraceError
from perfkit_core.views.costmodel.canonical import OpMap
from perfkit_core.views.costmodel.family_rules import FAMILIES

_SECTIONS = ("ops", "layers", "families")


def _read(path: Path) -> Any:
    text = path.read_bytes()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise TraceError(
                path, "a YAML op map needs PyYAML (pip install pyyaml); or write it as TOML"
            ) from None
        try:
            return yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise TraceError(path, f"not valid YAML: {exc}".splitlines()[0]) from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(path, f"not valid TOML: {exc}") from None


def _strings(path: Path, where: str, table: Any) -> dict[str, str]:
    if not isinstance(table, dict):
        raise TraceError(path, f"[{where}] must be a table of name = value strings")
    out = {}
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise TraceError(path, f"[{where}] {key!r} must map to a non-empty string")
        out[str(key)] = value.strip()
    return out


def load_op_map(path: str | os.PathLike[str]) -> OpMap:
    """Read an op map file; ``TraceError`` naming the file and the problem for bad input."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(path, "op map file not found")
    data = _read(path)
    if not isinstance(data, dict):
        raise TraceError(path, "an op map must be a table with ops, layers or families")
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise TraceError(
            path, f"unknown section {unknown[0]!r}; an op map has {', '.join(_SECTIONS)}"
        )
    ops_table = data.get("ops", {})
    if not isinstance(ops_table, dict):
        raise TraceError(path, '[ops] must hold one table per framework (torch, paddle, "*")')
    ops = {fw: _strings(path, f"ops.{fw}", table) for fw, table in ops_table.items()}
    layers = {k.lower(): v for k, v in _strings(path, "layers", data.get("layers", {})).items()}
    families = _strings(path, "families", data.get("families", {}))
    for op, family in families.items():
        if family not in FAMILIES:
            raise TraceError(
                path,
                f"[families] {op!r} = {family!r} is not a family; one of {', '.join(FAMILIES)}",
            )
    return OpMap(ops=ops, layers=layers, families=families, source=str(path))
