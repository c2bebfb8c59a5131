"""Regenerate the TensorFlow profile in this folder (needs tensorflow; run from the repository
root):

    python tests/data/xla/generate_tf.py

Trains the MLP of ``perfkit_xla.demo`` in Keras on the CPU (four blocks of Dense + LayerNorm +
ReLU, 64 features, a Dense head to 10 classes, Adam, batches of 32) with the TensorBoard
callback profiling batches 3 to 5 (``profile_batch=(3, 5)``), as Keras users profile. TensorFlow
writes ``plugins/profile/<time>/<host>.xplane.pb``; it is moved to
``tf_mlp/plugins/profile/run/mlp.xplane.pb``, so the fixture does not depend on the machine.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    import numpy as np
    import tensorflow as tf

    tf.random.set_seed(0)
    width, batch = 64, 32
    layers: list[tf.keras.layers.Layer] = [tf.keras.Input((width,))]
    for _ in range(4):
        layers += [
            tf.keras.layers.Dense(width),
            tf.keras.layers.LayerNormalization(),
            tf.keras.layers.ReLU(),
        ]
    model = tf.keras.Sequential([*layers, tf.keras.layers.Dense(10)])
    model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8 * batch, width)).astype("float32")
    y = rng.integers(0, 10, 8 * batch)
    with tempfile.TemporaryDirectory() as tmp:
        board = tf.keras.callbacks.TensorBoard(log_dir=tmp, profile_batch=(3, 5))
        model.fit(x, y, batch_size=batch, epochs=1, callbacks=[board], verbose=0)
        (xplane,) = Path(tmp).rglob("*.xplane.pb")
        target = HERE / "tf_mlp" / "plugins" / "profile" / "run"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copyfile(xplane, target / "mlp.xplane.pb")
        print(target / "mlp.xplane.pb", xplane.stat().st_size, "bytes")
    (HERE / "tf_mlp" / "VERSION").write_text(f"tensorflow {tf.__version__}\n")


if __name__ == "__main__":
    main()
