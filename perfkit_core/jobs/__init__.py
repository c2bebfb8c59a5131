"""Whole distributed jobs on Dask: each rank loaded and summarised on a worker, the client
receiving only small per-rank tables, which it combines into the job's views and advice.

- ``cluster``: the Dask cluster (an existing scheduler, or a ``LocalCluster`` perfkit starts).
- ``tasks``: what a worker does for one rank (``summarise_rank``).
- ``job``: ``analyse_job`` (plan, run, fold) and the ``Job`` it returns.

Dask is imported only when a job of several ranks is analysed.
"""

from __future__ import annotations

from perfkit_core.jobs.job import DEFAULT_JOB_VIEWS, Job, analyse_job, is_job

__all__ = ["DEFAULT_JOB_VIEWS", "Job", "analyse_job", "is_job"]
