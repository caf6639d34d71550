"""The FLAML peer of `easeml bench quality`: FLAML AutoML on one task's flattened features.

Usage: python flaml_peer.py INPUT.json OUTPUT.json

INPUT.json (written by `easeml bench quality`, bench/src/harness/quality/flaml.rs):
  {"task": "classification" | "regression", "time_budget": SECONDS, "seed": N,
   "train_x": [[f, ...], ...], "train_y": [label or [values], ...], "test_x": [[f, ...], ...]}
For classification `train_y` holds label strings; for regression, lists of output values (one
FLAML model per output value when there are several).

OUTPUT.json: {"predictions": [label or [values], ...] (one per test row, in order),
  "best_estimator": "lgbm", "seconds": SECONDS}. The scoring is done by easeml, the same rule for
every method.
"""

import json
import os
import sys
import time
import warnings

# scikit-learn's warnings (one per tree fitted by some versions: "`sklearn.utils.parallel.delayed`
# should be used with ...", and convergence warnings) flooded the bench's log with 35,000 lines a
# run; they say nothing about the predictions. Off here and in joblib's worker processes.
os.environ["PYTHONWARNINGS"] = "ignore"
warnings.simplefilter("ignore")

try:
    import numpy as np
    from flaml import AutoML
except ImportError as error:
    print(
        f"flaml_peer.py: {error}; install the peer's packages: "
        "bench/peers/.venv/bin/pip install -r bench/peers/requirements-flaml.txt",
        file=sys.stderr,
    )
    sys.exit(3)


def fit_predict(task, x, y, test_x, budget, seed):
    automl = AutoML()
    automl.fit(
        X_train=x,
        y_train=y,
        task=task,
        metric="accuracy" if task == "classification" else "r2",
        time_budget=budget,
        seed=seed,
        verbose=0,
        log_file_name="",
    )
    return automl.predict(test_x), str(automl.best_estimator)


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        spec = json.load(f)
    started = time.time()
    x = np.asarray(spec["train_x"], dtype=np.float64)
    test_x = np.asarray(spec["test_x"], dtype=np.float64)
    budget, seed = float(spec["time_budget"]), int(spec.get("seed", 0))
    if spec["task"] == "classification":
        y = np.asarray(spec["train_y"], dtype=object).astype(str)
        predicted, best = fit_predict("classification", x, y, test_x, budget, seed)
        predictions = [str(p) for p in predicted]
    else:
        y = np.asarray(spec["train_y"], dtype=np.float64)
        columns, best = [], []
        for j in range(y.shape[1]):
            p, b = fit_predict("regression", x, y[:, j], test_x, budget / y.shape[1], seed)
            columns.append(p)
            best.append(b)
        predictions = np.stack(columns, axis=1).tolist()
        best = ",".join(sorted(set(best)))
    with open(target, "w") as f:
        json.dump(
            {"predictions": predictions, "best_estimator": best, "seconds": time.time() - started},
            f,
        )


if __name__ == "__main__":
    main()
