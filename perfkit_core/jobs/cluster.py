"""The Dask cluster a job runs on: an existing scheduler by address, or a ``LocalCluster`` of
worker processes that perfkit starts, sizes to the machine and closes.

Dask is imported here only, and only when a job of several ranks is analysed: reading one rank
never imports it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

#: Environment variable naming an existing scheduler (Dask's own convention).
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: Memory a worker is expected to need for one rank, at least; more for big traces (see
#: ``rank_memory_estimate``).
MIN_RANK_MEMORY = 512 * 2**20
#: Seconds to wait for an existing scheduler to answer.
CONNECT_TIMEOUT_S = 30
#: Environment of the worker processes of a local cluster, on top of Dask's own
#: (``distributed.nanny.pre-spawn-environ``): pandas' strings live in Arrow buffers, and Arrow's
#: default allocator (mimalloc) keeps freed memory for reuse, so a worker that summarised a rank
#: held on to 60-70 MB of it; the system allocator gives it back. A fixed mmap threshold keeps
#: glibc from raising it after the first big free, so big arrays are returned on free too.
WORKER_ENVIRON = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_MMAP_THRESHOLD_": "131072"}
#: Dask settings of a local cluster's workers. Dask's statistical profiler samples the running
#: task every 10 ms and keeps one call tree per second for the last 1,000 seconds
#: (``distributed.admin.low-level-log-length``), twice (per worker and per task): a worker that
#: summarised 16 ranks held about 25 MB more for it than one that summarised a tiny trace, and
#: it grows with the job's length, not with a rank. A user who sets
#: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED`` gets that setting (and the dashboard's
#: Profile page back).
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


@dataclass
class ClusterInfo:
    """Where a job ran: ``kind`` (``local`` or ``external``), the scheduler ``address``, the
    number of ``workers`` and the ``dashboard`` link (None when the dashboard is not served)."""

    kind: str
    address: str
    workers: int
    dashboard: str | None

    def describe(self) -> str:
        """One line for a person: what was started or used, and the dashboard."""
        what = (
            f"started a local Dask cluster of {self.workers} worker process(es)"
            if self.kind == "local"
            else f"using the Dask scheduler at {self.address} ({self.workers} worker(s))"
        )
        board = (
            f"; dashboard: {self.dashboard}"
            if self.dashboard
            else "; no dashboard (install bokeh>=3.1 to get one)"
        )
        return what + board


def scheduler_address(explicit: str | None = None) -> str | None:
    """The scheduler to use: ``explicit``, else ``DASK_SCHEDULER_ADDRESS``, else Dask's
    ``scheduler-address`` setting, else None (start a local cluster)."""
    if explicit:
        return explicit
    if os.environ.get(SCHEDULER_ENV):
        return os.environ[SCHEDULER_ENV]
    try:
        import dask

        configured = dask.config.get("scheduler-address", None)
    except ImportError:  # pragma: no cover - dask is a dependency
        configured = None
    return str(configured) if configured else None


def usable_cpus() -> int:
    """CPU cores this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def rank_memory_estimate(largest_file_bytes: int, compressed: bool) -> int:
    """Bytes a worker is expected to need for the largest rank: twice its decoded trace (a
    gzip trace decompresses to about 10 times its size), at least ``MIN_RANK_MEMORY``."""
    decoded = largest_file_bytes * (10 if compressed else 1)
    return max(MIN_RANK_MEMORY, 2 * decoded)


def default_workers(ranks: int, per_rank_bytes: int = MIN_RANK_MEMORY) -> int:
    """Local workers for a job of ``ranks`` ranks: one per usable core, no more than the
    ranks, and no more than the available memory holds at ``per_rank_bytes`` each."""
    try:
        import psutil

        available = int(psutil.virtual_memory().available)
        by_memory = max(available // max(per_rank_bytes, 1), 1)
    except ImportError:  # pragma: no cover - psutil comes with distributed
        by_memory = ranks
    return int(max(1, min(ranks, usable_cpus(), by_memory)))


@contextlib.contextmanager
def job_client(
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    ranks: int = 1,
    per_rank_bytes: int = MIN_RANK_MEMORY,
    notify: Callable[[str], None] | None = None,
) -> Iterator[tuple[Client, ClusterInfo]]:
    """A Dask client for one job, and where it runs; closed (and a local cluster shut down)
    on exit, also after an error.

    With a scheduler address (``scheduler``, ``DASK_SCHEDULER_ADDRESS``) it connects to that
    cluster and leaves it running; else it starts a ``LocalCluster`` of ``workers`` processes
    (default ``default_workers``) with one thread each, so a worker holds one rank at a time.
    ``notify`` receives one line saying what was started or used, and the dashboard address.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - distributed is a dependency
        raise RuntimeError(
            "analysing a job of several ranks needs Dask: pip install 'dask[distributed]'"
        ) from exc
    address = scheduler_address(scheduler)
    cluster: Any = None
    if address:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        info = ClusterInfo("external", address, len(_worker_addresses(client)), None)
        info.dashboard = _dashboard(client)
    else:
        n = workers or default_workers(ranks, per_rank_bytes)
        cluster = local_cluster(n, LocalCluster)
        client = Client(cluster, set_as_default=False)
        info = ClusterInfo("local", str(cluster.scheduler_address), n, _dashboard(client))
    if notify is not None:
        notify(info.describe())
    try:
        yield client, info
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def local_cluster(n: int, factory: Any) -> Any:
    """A LocalCluster of ``n`` one-thread worker processes, spawned with ``WORKER_ENVIRON`` and
    ``WORKER_CONFIG`` (a user's own setting of those variables, or of Dask's environment
    variable for a setting, wins)."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    for key, value in WORKER_ENVIRON.items():
        environ.setdefault(key, os.environ.get(key, value))
    settings: dict[str, Any] = {"distributed.nanny.pre-spawn-environ": environ}
    for key, setting in WORKER_CONFIG.items():
        if dask_environ_name(key) not in os.environ:
            settings[key] = setting
    with dask.config.set(settings):
        return factory(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            # Dask's own logs of its processes (a heartbeat lost while a loaded machine shuts
            # the cluster down comes as a traceback) would break the one-line errors: perfkit
            # reports each rank that fails itself.
            silence_logs=logging.CRITICAL,
        )


def dask_environ_name(key: str) -> str:
    """The environment variable that sets the Dask setting ``key``
    (``distributed.worker.profile.enabled``: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED``)."""
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


def _worker_addresses(client: Client) -> list[str]:
    return sorted(client.scheduler_info(n_workers=-1).get("workers", {}))


def _dashboard(client: Client) -> str | None:
    """The dashboard link when the scheduler serves one (it needs bokeh)."""
    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # a scheduler that cannot say: no link
        return None
    if "dashboard" not in services:
        return None
    try:
        return str(client.dashboard_link)
    except Exception:  # pragma: no cover - a link Dask cannot build
        return None
