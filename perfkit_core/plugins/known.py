"""The adapters perfkit's authors publish, so that perfkit can say which one to install.

This table is only for messages: ``perfkit info`` lists the adapters that are missing, and
``perfkit_core.load`` names the adapter a file seems to need when no installed one reads it.
Installed adapters (these or anyone's) are found through entry points, never through this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
