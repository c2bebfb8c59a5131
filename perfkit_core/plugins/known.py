"""The adapters perfkit's authors publish, so that perfkit can say which one to install.

This table is only for messages: ``perfkit info`` lists the adapters that are missing, and
``perfkit_core.load`` names the adapter a file seems to need when no installed one reads it.
Installed adapters (these or anyone's) are found through entry points, never through this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pluggy


@dataclass(frozen=True)
class KnownAdapter:
    """An adapter distribution: its plugin (entry-point) name, what it reads, how to install it."""

    plugin: str
    distribution: str
    folder: str
    framework: str
    framework_install: str
    #: File-name endings of the traces it reads.
    suffixes: tuple[str, ...]
    #: Byte strings found near the start of its traces (any one is enough).
    markers: tuple[bytes, ...]

    @property
    def install(self) -> str:
        """The install command, from an index and from a perfkit checkout."""
        return f"pip install {self.distribution} (from a perfkit checkout: pip install ./{self.folder})"


KNOWN_ADAPTERS: tuple[KnownAdapter, ...] = (
    KnownAdapter(
        plugin="torch",
        distribution="perfkit-torch",
        folder="perfkit_torch",
        framework="PyTorch",
        framework_install="install torch first (your CPU or CUDA build)",
        suffixes=(".pt.trace.json", ".pt.trace.json.gz"),
        markers=(b"ProfilerStep#", b'"schemaVersion"', b'"distributedInfo"'),
    ),
    KnownAdapter(
        plugin="paddle",
        distribution="perfkit-paddle",
        folder="perfkit_paddle",
        framework="PaddlePaddle",
        framework_install="install paddlepaddle (CPU) or paddlepaddle-gpu (CUDA) first",
        suffixes=(".paddle_trace.json", ".paddle_trace.json.gz", ".paddle_trace.pb"),
        markers=(b'"ExtraInfo"', b'(Python)"', b"ProfileStep#"),
    ),
    KnownAdapter(
        plugin="xla",
        distribution="perfkit-xla",
        folder="perfkit_xla",
        framework="TensorFlow/JAX",
        framework_install="install jax or tensorflow to profile (reading profiles needs neither)",
        suffixes=(".xplane.pb", ".xplane.pb.gz"),
        markers=(b'"highres-ticks"',),
    ),
    KnownAdapter(
        plugin="mindspore",
        distribution="perfkit-mindspore",
        folder="perfkit_mindspore",
        framework="MindSpore",
        framework_install='install mindspore with "numpy<2" (or your GPU/Ascend build) to profile (reading profiles needs none)',
        suffixes=(),
        markers=(b'"HostCpuOps"', b'"args": {"name": "CPU OP"}'),
    ),
)


def adapter_for(path: Path, head: bytes) -> KnownAdapter | None:
    """The known adapter whose traces ``path`` (first bytes ``head``) looks like, if any."""
    name = path.name
    for adapter in KNOWN_ADAPTERS:
        if name.endswith(adapter.suffixes):
            return adapter
    for adapter in KNOWN_ADAPTERS:
        if any(marker in head for marker in adapter.markers):
            return adapter
    return None


def adapter_status(pm: pluggy.PluginManager, distributions: dict[str, str]) -> list[str]:
    """One line per adapter for ``perfkit info``: each installed adapter (``distributions``:
    plugin name -> distribution) with its framework's state, then each known adapter that is not
    installed with the command that installs it."""
    from perfkit_core.plugins.manager import framework_infos

    frameworks = {entry["framework"]: entry for entry in framework_infos(pm)}
    lines = []
    for name, dist in sorted(distributions.items()):
        entry = frameworks.get(name)
        known = next((k for k in KNOWN_ADAPTERS if k.plugin == name), None)
        label = known.framework if known else name
        if pm.is_blocked(name):
            state = "disabled by PERFKIT_DISABLE_PLUGINS"
        elif entry is None:
            state = "adapts no framework"
        elif entry.get("installed"):
            version = str(entry.get("version"))
            # An adapter of several frameworks names each one with its version ("jax 0.10.2").
            state = f"{version if ' ' in version else f'{label} {version}'} installed"
        else:
            hint = f": {known.framework_install}" if known else ""
            state = f"{label} is not installed{hint}"
        lines.append(f"{name} ({dist}): {state}")
    for known in KNOWN_ADAPTERS:
        if known.plugin not in distributions:
            lines.append(
                f"{known.plugin}: not installed; to read {known.framework} profiles: {known.install}"
            )
    return lines


def installed_version(*distributions: str) -> str | None:
    """The version of the first of ``distributions`` that is installed (``paddlepaddle`` or
    ``paddlepaddle-gpu``: either ships the framework), read from its metadata without importing
    it; None when none is."""
    import importlib.metadata

    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
