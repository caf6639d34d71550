#!/usr/bin/env python3
"""Optuna as a peer of easeml's scheduler, over exactly the same replay splits.

`easeml bench scheduler --policies ...,optuna_gp,optuna_tpe` writes DIR/splits.json (per
repetition: the test users in round-robin order, their candidate models with quality and cost, and
the budget) and runs this script, which drives one Optuna study per test user (the model as a
categorical parameter, maximising quality) round robin until the budget is spent, and writes one
trace of (cumulative cost, mean accuracy loss) per repetition and sampler. easeml aggregates the
traces on its own grid. Optuna gets no history of other users (it has no such notion).

When a sampler proposes a model the user already trained, the known quality is told back at no
cost and the study is asked again (at most 10 times); after that an untried model is drawn at
random (seeded) and added to the study as a completed trial.
"""

import argparse
import json
import random
import sys
import time

import optuna
from optuna.distributions import CategoricalDistribution

MAX_REPEATED_ASKS = 10


def make_sampler(name, seed):
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise SystemExit(f"unknown sampler `{name}` (known: gp, tpe)")


def replay_split(split, sampler_name):
    users = split["users"]
    budget = split["budget"]
    rng = random.Random(split["seed"])
    studies = []
    for index, user in enumerate(users):
        sampler = make_sampler(sampler_name, (split["seed"] + index) % 2**32)
        studies.append(optuna.create_study(direction="maximize", sampler=sampler))
    quality = [{c["model_id"]: c["quality"] for c in u["candidates"]} for u in users]
    cost = [{c["model_id"]: c["cost"] for c in u["candidates"]} for u in users]
    distributions = [
        {"model": CategoricalDistribution([c["model_id"] for c in u["candidates"]])} for u in users
    ]
    trained = [dict() for _ in users]
    best = [0.0 for _ in users]
    best_possible = [u["best_possible"] for u in users]

    def mean_loss():
        return sum(max(p - b, 0.0) for p, b in zip(best_possible, best)) / len(users)

    spent = 0.0
    points = [[0.0, mean_loss()]]
    next_user = 0
    while spent < budget - 1e-12:
        order = [(next_user + k) % len(users) for k in range(len(users))]
        served = None
        for u in order:
            if len(trained[u]) < len(quality[u]):
                served = u
                break
        if served is None:
            break
        next_user = (served + 1) % len(users)
        u = served
        model = None
        for _ in range(MAX_REPEATED_ASKS):
            trial = studies[u].ask(distributions[u])
            proposed = trial.params["model"]
            if proposed in trained[u]:
                studies[u].tell(trial, trained[u][proposed])
                continue
            model = proposed
            studies[u].tell(trial, quality[u][model])
            break
        if model is None:
            model = rng.choice(sorted(m for m in quality[u] if m not in trained[u]))
            studies[u].add_trial(
                optuna.trial.create_trial(
                    params={"model": model},
                    distributions=distributions[u],
                    value=quality[u][model],
                )
            )
        trained[u][model] = quality[u][model]
        best[u] = max(best[u], quality[u][model])
        spent += cost[u][model]
        points.append([spent, mean_loss()])
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", required=True, help="splits.json written by easeml")
    parser.add_argument("--samplers", default="gp,tpe", help="comma-separated: gp, tpe")
    parser.add_argument("--out", required=True, help="where to write the traces (JSON)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with open(args.splits) as handle:
        splits = json.load(handle)
    result = {}
    for name in [s.strip() for s in args.samplers.split(",") if s.strip()]:
        started = time.perf_counter()
        traces = []
        for index, split in enumerate(splits):
            traces.append(replay_split(split, name))
            print(f"optuna_{name}: repetition {index + 1}/{len(splits)}", file=sys.stderr)
        result[f"optuna_{name}"] = {
            "traces": traces,
            "seconds": time.perf_counter() - started,
        }
    with open(args.out, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
