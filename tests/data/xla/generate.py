"""Regenerate the JAX profile in this folder (needs jax; run from the repository root):

    python tests/data/xla/generate.py

Trains the MLP of ``perfkit_xla.demo`` on the CPU: two unprofiled steps (the first compiles), then
five steps under ``jax.profiler.trace`` (Python tracer on, as by default), each marked with
``jax.profiler.StepTraceAnnotation("train", step_num=N)``. JAX writes
``plugins/profile/<time>/<host>.xplane.pb`` and ``<host>.trace.json.gz`` (the trace viewer's
data, which the tests compare against); both are moved to ``jax_mlp/plugins/profile/run/`` under
the host name ``mlp``, so the fixture does not depend on the machine that made it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))


def main() -> None:
    import jax

    from perfkit_xla.demo import mlp_training, run_steps

    step, _ = mlp_training()
    run_steps(step, 2, annotate=False)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            run_steps(step, 5, first=2)
        (run_dir,) = Path(tmp, "plugins", "profile").iterdir()
        target = HERE / "jax_mlp" / "plugins" / "profile" / "run"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for f in sorted(run_dir.iterdir()):
            suffix = f.name.split(".", 1)[1]
            shutil.copyfile(f, target / f"mlp.{suffix}")
            print(target / f"mlp.{suffix}", f.stat().st_size, "bytes")
    (HERE / "jax_mlp" / "VERSION").write_text(f"jax {jax.__version__}\n")


if __name__ == "__main__":
    main()
