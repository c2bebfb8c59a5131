"""Regenerate the torch CPU trace in this folder (needs torch; run from the repository root):

    python tests/data/torch_cpu/generate.py

Trains the MLP of ``perfkit_torch.demo`` on the CPU (3 blocks of width 32, batch 16, Adam, a
``DataLoader``) under ``torch.profiler`` with ``record_shapes`` and ``profile_memory``: one wait
and one warm-up step, then 5 recorded steps. torch's own chrome trace of those steps is kept,
gzipped, as ``mlp_adam_cpu.pt.trace.json.gz`` (about 5,600 events). The golden reports of
``tests/report_golden.py`` are made from it: regenerate them after replacing it.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
TRACE = HERE / "mlp_adam_cpu.pt.trace.json.gz"


def main() -> None:
    from perfkit_torch.demo import train_mlp

    with tempfile.TemporaryDirectory() as tmp:
        runs, handler = train_mlp(
            Path(tmp),
            steps=5,
            blocks=3,
            width=32,
            batch_size=16,
            keep_trace=True,
            profile_memory=True,
            background=False,
        )
        if handler.failures or not runs:
            raise SystemExit(f"the profile was not recorded: {handler.failures}")
        native = runs[0] / "trace.pt.trace.json"
        with native.open("rb") as src, gzip.GzipFile(TRACE, "wb", 9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print(f"wrote {TRACE}")


if __name__ == "__main__":
    main()
