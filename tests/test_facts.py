"""The facts every layer asks of a run, recomputed another way: the steps of the mean rank from
the ``steps`` view, which a job analysed rank by rank reads too."""

from __future__ import annotations

from conftest import shared_trace
from perfkit_core import load
from perfkit_core.events import combine_runs
from perfkit_core.events.facts import has_device, step_count, steps_per_rank


def _from_steps_view(run) -> int:
    steps = run.summary("steps")
    return round(len(steps) / steps["rank"].nunique()) if len(steps) else 0


class _ViewsOnly:
    """What a job offers: the summary views, no event table."""

    def __init__(self, run) -> None:
        self._run = run

    def summary(self, view: str, **options):
        return self._run.summary(view, **options)


def test_steps_per_rank_of_one_rank_and_of_two(torch_profile):
    one = load(shared_trace("v100_rank1"))
    assert step_count(one) == steps_per_rank(one) == _from_steps_view(one) > 0
    assert steps_per_rank(_ViewsOnly(one)) == steps_per_rank(one)
    two = combine_runs([load(shared_trace("a100_rank3")), one])
    assert step_count(two) == step_count(two, 3) + step_count(two, 1)
    assert steps_per_rank(two) == _from_steps_view(two) == round(step_count(two) / 2)
    assert has_device(two) and has_device(one)
    cpu = load(torch_profile.runs[0])
    assert steps_per_rank(cpu) == _from_steps_view(cpu) == 4
    assert not has_device(cpu)
