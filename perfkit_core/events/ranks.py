"""The ranks of a run: which ranks it holds, and one rank's rows as a ``Run`` of its own.

Every per-rank figure perfkit prints is computed on one rank's table, so a run of several ranks
(a folder of per-rank traces, or a saved job) is analysed rank by rank, exactly as a job too
large for one process is analysed on Dask workers (``perfkit_core.jobs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import schema

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Keys of a multi-rank run's ``meta["per_rank"]`` entries that describe one rank.
PER_RANK_KEYS = ("host", "devices", "source", "span_ns", "accounting", "threads", "world_size")


def run_ranks(run: Run) -> list[int]:
    """Return the ranks ``run`` holds, ascending (``[0]`` for a run that never said)."""
    ranks = run.meta.get("ranks")
    if ranks:
        return sorted(int(r) for r in ranks)
    return [int(run.meta.get("rank", 0))]


def is_multi_rank(run: Any) -> bool:
    """True when ``run`` (a ``Run`` or a job) holds more than one rank."""
    return len(run.meta.get("ranks") or [run.meta.get("rank", 0)]) > 1


def take_rows(events: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Return the event table of ``rows`` (ascending row positions) with its row links remapped
    to the new positions (a link to a row left out becomes -1)."""
    import pandas as pd

    n = len(events)
    new_position = np.full(n + 1, -1, dtype=np.int64)
    new_position[rows] = np.arange(len(rows), dtype=np.int64)
    data: dict[str, Any] = {}
    for col in schema.COLUMNS:
        values = events[col.name]
        if col.dtype == "category":
            codes = values.cat.codes.to_numpy()[rows]
            data[col.name] = pd.Categorical.from_codes(codes, dtype=values.dtype)
        elif col.name in schema.ROW_LINK_COLUMNS:
            links = values.to_numpy()[rows]
            data[col.name] = new_position[np.where(links >= 0, links, n)]
        else:
            data[col.name] = values.to_numpy()[rows]
    return pd.DataFrame(data, copy=False)


def require_rank(run: Run, rank: int | None, path: object) -> Run:
    """``run`` (read from ``path``) when ``rank`` is None or a rank it holds; else
    ``OptionError`` naming the ranks it holds."""
    from perfkit_core.errors import OptionError

    ranks = [int(r) for r in run.meta.get("ranks", [])]
    if rank is not None and rank not in ranks:
        raise OptionError(
            f"--rank {rank}: {path} holds rank(s) {', '.join(map(str, ranks)) or 'none'}"
        )
    return run


def rank_run(run: Run, rank: int) -> Run:
    """Return the ``Run`` of one rank of ``run`` (``run`` itself when it holds only that rank).

    The table keeps the rank's rows in order, with row links remapped; the metadata is the
    run's, with the rank's own host, devices, source and span. Cached on ``run``. Raises
    ``ValueError`` for a rank the run does not hold.
    """
    from perfkit_core.events.build import make_run

    ranks = run_ranks(run)
    if rank not in ranks:
        raise ValueError(f"rank {rank} is not in this run (ranks: {_ranks_text(ranks)})")
    if len(ranks) == 1:
        return run
    key = ("rank_run", rank)
    cached = run.cache.get(key)
    if cached is not None:
        return cached
    rows = np.flatnonzero(run.events["rank"].to_numpy() == rank)
    meta = {k: v for k, v in run.meta.items() if k not in ("per_rank", "ranks", "steps")}
    own = (run.meta.get("per_rank") or {}).get(str(rank)) or {}
    meta.update({k: own[k] for k in PER_RANK_KEYS if k in own})
    accounting = run.meta.get("accounting")
    if isinstance(accounting, dict) and str(rank) in accounting:
        meta["accounting"] = accounting[str(rank)]
    meta["rank"] = rank
    one = make_run(take_rows(run.events, rows), meta)
    run.cache.put(key, one)
    return one


def _ranks_text(ranks: list[int]) -> str:
    """``0-15`` for a contiguous list, else the ranks joined by commas (at most 10 shown)."""
    if not ranks:
        return "none"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    shown = ", ".join(map(str, ranks[:10]))
    return shown + (f", ... ({len(ranks)} ranks)" if len(ranks) > 10 else "")


def ranks_text(ranks: list[int]) -> str:
    """Ranks as a person reads them: ``0-15``, or ``1, 3`` (at most 10 listed)."""
    return _ranks_text(sorted(ranks))
