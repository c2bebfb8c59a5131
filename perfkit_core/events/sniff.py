"""What a file or folder that holds no profiler trace looks like, for the message that refuses it.

``describe_file`` names a file's format from its first bytes ("a PNG image", "gzip of a zip
archive", "an SQLite database", "a JSON object (keys: ...)", "an empty file");
``folder_summary`` says what a folder holds instead of a trace. Only messages use these: which
adapter reads a file is for the adapters to say (``perfkit_claim_trace``).
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from perfkit_core.errors import printable

#: Leading bytes of formats a profiler trace is not, and what to call them.
MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"RIFF", "a RIFF file (WebP, WAV, AVI)"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x7fELF", "an ELF executable or library"),
    (b"PAR1", "a Parquet file"),
    (b"ARROW1", "an Arrow file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x93NUMPY", "a NumPy array file"),
    (b"BZh", "a bzip2 file"),
    (b"\xfd7zXZ\x00", "an xz file"),
    (b"(\xb5/\xfd", "a zstd file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Microsoft Office document"),
    (b"\x80\x04\x95", "a Python pickle"),
    (b"\x80\x05\x95", "a Python pickle"),
)
#: Bytes of a file's start that ``describe_file`` reads.
SNIFF_BYTES = 4096
_KEY_RE = re.compile(rb'"((?:[^"\\\n]|\\.){1,40})"\s*:')


def describe_bytes(head: bytes, *, nested: bool = False, whole: bool = False) -> str:
    """What ``head`` (a file's first bytes; ``whole``: all of it) looks like, in words: a known
    format, ``gzip of`` what it inflates to, a JSON object with its first keys (or JSON cut
    short, for a whole file that ends inside it), text with its first line, or binary data."""
    if not head:
        return "an empty file" if not nested else "nothing"
    if head[:2] == b"\x1f\x8b" and not nested:
        try:
            inner = zlib.decompressobj(wbits=31).decompress(head, SNIFF_BYTES)
        except zlib.error:
            return "gzip data (broken)"
        return f"gzip of {describe_bytes(inner, nested=True)}"
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    if head[257:262] == b"ustar":
        return "a tar archive"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not only a character cut at the end of the head
            return f"binary data (starting {head[:8].hex(' ')})"
        text = head[: exc.start].decode("utf-8")
    text = text.lstrip("\ufeff \t\r\n")
    if whole and text[:1] in ("{", "["):
        import json

        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text.rstrip()):
                return f"JSON cut short after {len(head)} byte{'s' if len(head) != 1 else ''}"
            return f"malformed JSON ({exc.msg} at byte {exc.pos})"
    if text.startswith("{"):
        keys = list(dict.fromkeys(m.group(1).decode() for m in _KEY_RE.finditer(head)))[:5]
        shown = f" with keys {', '.join(keys)}" if keys else ""
        return f"a JSON object{shown}"
    if text.startswith("["):
        return "a JSON list"
    if text.lower().startswith(("<!doctype html", "<html")):
        return "an HTML page"
    if text.startswith("<?xml"):
        return "an XML document"
    if not text.strip():
        return "blank text"
    first = text.splitlines()[0].strip()
    shown = first if len(first) <= 40 else first[:37] + "..."
    return f"text starting {printable(shown)!r}"


def describe_file(path: Path) -> str:
    """What the file at ``path`` looks like (``describe_bytes`` of its first bytes), or why it
    cannot be read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            return describe_bytes(head, whole=len(head) < SNIFF_BYTES)
    except IsADirectoryError:
        return "a folder"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


#: Entries of a folder ``folder_summary`` names, at most.
SHOWN_ENTRIES = 5


def folder_summary(path: Path) -> str:
    """What the folder at ``path`` holds, in words: "3 files and 1 folder: a.png, a PNG image;
    notes.txt, text starting 'hello'; runs/; ..."; "nothing" when it is empty."""
    try:
        with os.scandir(path) as entries:
            items = sorted((e.name, e.is_dir()) for e in entries)
    except OSError as exc:
        return f"what it holds cannot be listed ({exc.strerror or exc})"
    if not items:
        return "nothing"
    folders = sum(1 for _, is_dir in items if is_dir)
    files = len(items) - folders
    counts = " and ".join(
        f"{n} {word}{'s' if n != 1 else ''}"
        for n, word in ((files, "file"), (folders, "folder"))
        if n
    )
    shown = [
        f"{printable(name)}/" if is_dir else f"{printable(name)}, {describe_file(path / name)}"
        for name, is_dir in items[:SHOWN_ENTRIES]
    ]
    more = "; ..." if len(items) > SHOWN_ENTRIES else ""
    return f"{counts}: {'; '.join(shown)}{more}"
