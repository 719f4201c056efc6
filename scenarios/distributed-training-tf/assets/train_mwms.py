"""Multi-worker Keras training on scikit-learn's bundled digits (8x8 images, offline).

Unchanged between a laptop, `kflab apply` and a cluster: with TF_CONFIG in the environment
(the Training Operator sets it for every replica of a distributed TFJob) it trains with
tf.distribute.MultiWorkerMirroredStrategy, each worker on its own shard of the data, the
gradients averaged across workers after every step; without TF_CONFIG it trains alone.
Every worker prints one `RESULT {...}` line (and, in a multi-worker run, writes
results/<task>.json); the chief writes --out (JSON).
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up notes out

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32, help="per worker")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--out", default="result.json")
    args = ap.parse_args()

    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {"type": "chief", "index": 0})
    if tf_config:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        strategy = tf.distribute.get_strategy()  # the default: one process
    workers = strategy.num_replicas_in_sync
    resolver = getattr(strategy, "cluster_resolver", None)
    rank = resolver.task_id if resolver is not None else 0
    if resolver is not None and resolver.task_type == "worker":
        # MultiWorkerMirroredStrategy numbers the chief 0 and the workers after it.
        rank += len(tf_config["cluster"].get("chief", []))
    tf.keras.utils.set_random_seed(0)

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(
        (x / 16.0).astype("float32").reshape(-1, 8, 8, 1), y, test_size=0.25, random_state=0,
        stratify=y)
    # Each worker trains on its own third of the data (sharded by rank), as the input
    # pipelines of real multi-worker jobs do; every step, the gradients are averaged.
    shard_x, shard_y = x_tr[rank::workers], y_tr[rank::workers]
    steps = max(1, len(shard_x) // args.batch_size)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    data = (tf.data.Dataset.from_tensor_slices((shard_x, shard_y)).shuffle(len(shard_x), seed=0)
            .repeat().batch(args.batch_size, drop_remainder=True).with_options(options))
    batches = iter(strategy.experimental_distribute_dataset(data))

    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input((8, 8, 1)),
            tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ])
        optimizer = tf.keras.optimizers.SGD(args.lr, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum_over_batch_size")

    @tf.function
    def train_step(batch):
        def step(x, y):
            with tf.GradientTape() as tape:
                # each replica's mean loss, scaled so the all-reduced sum is the global mean
                loss = loss_fn(y, model(x, training=True)) / workers
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss
        per_replica = strategy.run(step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        loss = sum(float(train_step(next(batches))) for _ in range(steps)) / steps
        if rank == 0 and (epoch + 1) % 5 == 0:
            print(f"epoch {epoch + 1}: loss {loss:.4f}", flush=True)
    seconds = time.perf_counter() - start
    logits = model(x_te, training=False)
    accuracy = float(np.mean(np.argmax(logits, axis=1) == y_te))

    result = {"task": f"{task['type']}-{task['index']}", "rank": rank, "workers": workers,
              "samples": len(shard_x), "accuracy": round(accuracy, 4),
              "seconds": round(seconds, 2)}
    print("RESULT " + json.dumps(result), flush=True)
    if tf_config:  # every worker keeps its own result, for compare.py
        os.makedirs("results", exist_ok=True)
        with open(os.path.join("results", f"{result['task']}.json"), "w") as fh:
            json.dump(result, fh, indent=2)
    if task["type"] == "chief":  # the one that would save the model
        with open(args.out, "w") as fh:
            json.dump({**result, "tf_version": tf.__version__}, fh, indent=2)

if __name__ == "__main__":
    main()
