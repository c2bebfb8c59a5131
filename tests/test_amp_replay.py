"""The amp finding's replay (``perfkit advise --measure``): the recorded GEMM shapes timed in
fp32 and in the proposed precision, on the GPU the run recorded. The figures are recomputed
from the finding's evidence and the replay's own timings; the GEMMs run for real (on the CPU
here, where there is no GPU)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("torch")

import perfkit_core
from perfkit_core.advice import replayed_amp_saving
from perfkit_core.advice.amp import AMP_CAST_HOST_NS

H200 = Path(__file__).parent / "data" / "torch_gpu_h200"


@pytest.fixture(scope="module")
def amp_finding():
    run = perfkit_core.load(H200 / "amp4096_fp32")
    return next(f for f in run.advise() if f.id == "amp")


def test_the_recorded_gemm_shapes_are_kept_for_a_replay(amp_finding):
    """Batch 4096: 4096 x 4096 x 4096 products took 99% of the matrix ops' costed time."""
    ev = amp_finding.evidence
    shapes = ev["gemm_shapes"]
    assert shapes[0][:3] == [4096.0, 4096.0, 4096.0]
    assert sum(s[4] for s in shapes) == pytest.approx(ev["gemm_costed_per_step_ns"], rel=1e-9)
    assert shapes[0][4] > 0.99 * ev["gemm_costed_per_step_ns"]
    assert ev["devices"] == ["NVIDIA H200"]


def test_the_model_speedup_gives_the_models_saving_and_none_gives_nothing(amp_finding):
    ev = amp_finding.evidence
    # the model's speed-up of the GEMMs, from its speed-up of all the costed matrix ops
    costed = ev["gemm_costed_per_step_ns"] + ev["other_costed_per_step_ns"]
    gemm_after = costed / ev["speedup"] - ev["other_after_per_step_ns"]
    model = replayed_amp_saving(ev, ev["gemm_costed_per_step_ns"] / gemm_after)
    assert model["saving_ns"] == pytest.approx(amp_finding.saving_ns, rel=1e-9)
    # the model's cast cost given as a replay's gives the model's figures
    same = replayed_amp_saving(ev, ev["gemm_costed_per_step_ns"] / gemm_after, AMP_CAST_HOST_NS)
    assert same["host_bound_step_ns"] == pytest.approx(ev["host_bound_step_ns"], rel=1e-9)
    # free casts lower the host's floor by their host time
    free = replayed_amp_saving(ev, ev["gemm_costed_per_step_ns"] / gemm_after, 0.0)
    assert free["host_bound_step_ns"] == pytest.approx(ev["host_per_step_ns"], rel=1e-9)
    # products no faster: the casts cost the device more than nothing, so nothing is saved
    assert replayed_amp_saving(ev, 1.0)["saving_ns"] == 0.0
    # twice as fast as the model says: the host's floor holds the step, as the model's did
    faster = replayed_amp_saving(ev, 2 * ev["gemm_costed_per_step_ns"] / gemm_after)
    assert faster["saving_ns"] == pytest.approx(amp_finding.saving_ns, rel=1e-9)
    assert ev["host_bound_step_ns"] > faster["gpu_bound_step_ns"]


def test_a_replay_times_real_products_and_states_the_saving_they_give(amp_finding):
    from perfkit_torch.replay_amp import measure_amp

    finding = copy.deepcopy(amp_finding)
    # shapes this CPU replays in a moment, each with its recorded time per step
    finding.evidence["gemm_shapes"] = [
        [96.0, 64.0, 128.0, 3.0, 2.0e7],
        [32.0, 32.0, 32.0, 1.0, 1.0e6],
    ]
    result = measure_amp(finding, device="cpu")
    assert result is not None
    ev = result["evidence"]
    assert ev["measured"] == "replay" and ev["speedup_from"] == "replay"
    timed = ev["replay_gemms"]
    assert [t[:3] for t in timed] == [[96.0, 64.0, 128.0], [32.0, 32.0, 32.0]]
    assert all(t[3] > 0 and t[4] > 0 for t in timed)
    # the speed-up: each shape's replayed ratio, weighted by its recorded time
    after = 2.0e7 * timed[0][4] / timed[0][3] + 1.0e6 * timed[1][4] / timed[1][3]
    assert ev["replay_gemm_speedup"] == pytest.approx(2.1e7 / after, rel=1e-9)
    cast_ns = ev["replay_cast_host_ns"]
    expected = replayed_amp_saving(finding.evidence, ev["replay_gemm_speedup"], cast_ns)
    assert result["saving_ns"] == pytest.approx(expected["saving_ns"], rel=1e-9)
    assert ev["cast_host_per_step_ns"] == pytest.approx(
        finding.evidence["casts_per_step"] * cast_ns, rel=1e-9
    )
    assert ev["host_bound_step_ns"] == pytest.approx(
        finding.evidence["host_per_step_ns"] + ev["cast_host_per_step_ns"], rel=1e-9
    )
    assert result["estimate"].startswith("Replayed on cpu: the 2 recorded GEMM shapes")


def test_the_cast_replay_measures_what_autocast_adds_to_a_host_paced_step(monkeypatch):
    """A small MLP whose host paces its step, trained in fp32 and under CPU autocast in turn:
    the figure per counted cast is the replay's own two timed steps' difference over the casts
    the amp model counts (two per floating input of each layer's matrix op: input, weight and
    bias), recomputed here from the timings the replay took, and 0 where autocast made the
    step no slower. (Two timings of the same loops on a shared machine differ by several times
    from one minute to the next, so the figure is not checked against a second timing.)"""
    import perfkit_core.advice
    from perfkit_torch import replay_amp

    taken: list[dict] = []
    real = perfkit_core.advice.steps_in_turn

    def spy(*args, **kwargs):
        timed = real(*args, **kwargs)
        taken.append(dict(timed))
        return timed

    monkeypatch.setattr(perfkit_core.advice, "steps_in_turn", spy)
    measured = replay_amp.cast_host_ns("cpu", "bfloat16", rounds=3, steps=4)
    assert len(taken) == 1 and set(taken[0]) == {"fp32", "autocast"}
    assert min(taken[0].values()) > 0
    counted = 2 * 3 * replay_amp.CAST_REPLAY_LAYERS
    added = taken[0]["autocast"] - taken[0]["fp32"]
    assert measured == pytest.approx(max(added, 0.0) / counted, rel=1e-12)
    assert measured >= 0.0


def test_without_the_runs_gpu_the_model_stands(amp_finding):
    import torch

    from perfkit_torch.replay_amp import measure_amp

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    assert measure_amp(amp_finding) is None
    run = perfkit_core.load(H200 / "amp4096_fp32")
    measured = next(f for f in run.advise(measure=True) if f.id == "amp")
    assert measured.saving_ns == amp_finding.saving_ns
    assert measured.evidence.get("measured") != "replay"
