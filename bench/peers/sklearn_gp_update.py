#!/usr/bin/env python3
"""easeml's incremental GP against scikit-learn's GaussianProcessRegressor, same data, same run.

Runs `cargo run --release -p easeml-scheduler --example gp_timing` (delgado179: 110 history data
sets build the Matern-5/2 kernel, data set 115's candidates are observed one by one) and replays the
same sequence with GaussianProcessRegressor (the same kernel and fitted hyperparameters, optimizer
off, the prior mean subtracted): refit + predict mean and std of all candidates after each
observation. Prints per-step times, the ratio, and the largest difference of posterior means.

usage: sklearn_gp_update.py [DATA_DIR]   (default ../shared/data next to the repository)
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    data_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPOSITORY, "..", "shared", "data")
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "gp.json")
        subprocess.run(
            ["cargo", "run", "--quiet", "--release", "-p", "easeml-scheduler", "--example",
             "gp_timing", "--", data_dir, out],
            cwd=REPOSITORY, check=True,
        )
        with open(out) as handle:
            report = json.load(handle)
    features = np.array(report["features"])
    prior_mean = np.array(report["prior_mean"])
    y = np.array(report["observations"])
    hyper = report["hyperparameters"]
    kernel = (
        ConstantKernel(hyper["offset_variance"], "fixed")
        + ConstantKernel(hyper["signal_variance"], "fixed")
        * Matern(length_scale=hyper["length_scale"], length_scale_bounds="fixed", nu=2.5)
        + WhiteKernel(hyper["noise_variance"], "fixed")
    )
    steps = len(y)
    sklearn_seconds = np.zeros(steps)
    repeats = 3
    mean_after_50 = None
    for _ in range(repeats):
        for t in range(1, steps + 1):
            started = time.perf_counter()
            gp = GaussianProcessRegressor(kernel=kernel, optimizer=None, normalize_y=False)
            gp.fit(features[:t], y[:t] - prior_mean[:t])
            mean, std = gp.predict(features, return_std=True)
            best = np.max(mean + prior_mean + 3.0 * std)
            sklearn_seconds[t - 1] += (time.perf_counter() - started) / repeats
            if t == 50:
                mean_after_50 = mean + prior_mean
    rust_seconds = np.array(report["rust_step_seconds"])
    # sklearn's predict includes the white noise in the latent variance it returns for training
    # points; means are comparable (up to the noise term on the diagonal, identical here).
    difference = float(np.max(np.abs(mean_after_50 - np.array(report["rust_mean_after_50"]))))
    print(f"K = {steps} candidates, {features.shape[1]} history users, t = 1..{steps}")
    print(f"easeml (rank-one update + UCB over all): {rust_seconds.mean() * 1e6:10.1f} us per step")
    print(f"sklearn GaussianProcessRegressor refit+predict: {sklearn_seconds.mean() * 1e6:10.1f} us per step")
    print(f"ratio sklearn / easeml: {sklearn_seconds.mean() / rust_seconds.mean():.0f}x")
    print(f"largest difference of posterior means after 50 observations: {difference:.2e}")


if __name__ == "__main__":
    main()
