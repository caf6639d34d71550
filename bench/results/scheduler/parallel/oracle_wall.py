"""The wall-clock no policy can beat on easeml-dl's test users (issue 17, item 2's target).

An oracle that knows every (user, model) quality and runtime picks, per user, one model to train
or none, so that the mean loss (best quality - quality reached, over the 8 test users) is at most
the level, and packs those runs on K workers with the least makespan (exact, by branch and bound).
Its sequential cost is the least summed runtime of such a choice. Any policy's K-worker wall-clock
to the level is at least the oracle's: a user's loss falls only when a run that reaches it ends.

    python3 bench/results/scheduler/parallel/oracle_wall.py [DATA_DIR]
(DATA_DIR: ../shared/data/easeml-deeplearning by default; reads test.txt and test_time.txt.)
"""

import itertools
import os
import sys


def read(path):
    with open(path) as f:
        return [list(map(float, line.split())) for line in f if line.strip()]


def makespan(jobs, workers):
    jobs = sorted((j for j in jobs if j > 0), reverse=True)
    loads = [0.0] * workers
    best = [float("inf")]

    def place(i):
        if max(loads) >= best[0]:
            return
        if i == len(jobs):
            best[0] = max(loads)
            return
        tried = set()
        for k in range(workers):
            if loads[k] in tried:
                continue
            tried.add(loads[k])
            loads[k] += jobs[i]
            place(i + 1)
            loads[k] -= jobs[i]

    place(0)
    return best[0] if jobs else 0.0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "..", "..", "shared", "data", "easeml-deeplearning")
    data = sys.argv[1] if len(sys.argv) > 1 else default
    quality = read(os.path.join(data, "test.txt"))
    runtime = read(os.path.join(data, "test_time.txt"))
    users = len(quality)
    best = [max(row) for row in quality]
    options = [
        [(best[u] - quality[u][m], runtime[u][m]) for m in range(len(quality[u]))] + [(best[u], 0.0)]
        for u in range(users)
    ]
    print(f"{users} test users x {len(quality[0])} models")
    for level in (0.02, 0.01):
        choices = [
            [cost for _, cost in combo]
            for combo in itertools.product(*options)
            if sum(loss for loss, _ in combo) / users <= level + 1e-12
        ]
        sequential = min(sum(costs) for costs in choices)
        line = f"mean loss {level}: oracle sequential cost {sequential:g}"
        for workers in (4, 8):
            bound = lambda costs: max(max(costs), sum(costs) / workers)
            choices.sort(key=bound)
            wall = float("inf")
            for costs in choices:
                if bound(costs) >= wall:
                    break
                wall = min(wall, makespan(costs, workers))
            line += f"; K = {workers}: oracle wall-clock {wall:g}"
        print(line)


if __name__ == "__main__":
    main()
