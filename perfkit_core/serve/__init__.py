"""``perfkit serve``: a training list and clickable profile pages over a log folder.

``catalog`` lists the runs under the folder (cheaply: file stats and metadata), ``analysis``
analyses each once (the same report and comparison the command line makes) and keeps the
results in bounded LRUs, and ``app`` is the Flask (WSGI) app whose pages and JSON API show them.
"""

from __future__ import annotations

from perfkit_core.serve.app import create_app

__all__ = ["create_app"]
