"""Small series tasks like the held-out family of issue 14 (36 to 67 training series): a fixed
random subset of the training series of four development tasks, their whole test sets.

    python3 bench/quality/make_small_tasks.py target/quality-tasks target/small-tasks

The first folder is `make_tasks.py`'s output. Standard library only.
"""

import os
import random
import shutil
import sys

# (task, training series kept)
SMALL = [("osuleaf", 50), ("acsf1", 40), ("japanese_vowels", 60), ("plaid", 67)]


def main():
    tasks, out = sys.argv[1], sys.argv[2]
    for task, n in SMALL:
        source = os.path.join(tasks, task)
        target = os.path.join(out, f"{task}_small")
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(source, "train.txt")) as f:
            lines = f.read().splitlines()
        random.Random(1).shuffle(lines)
        with open(os.path.join(target, "train.txt"), "w") as f:
            f.write("\n".join(lines[:n]) + "\n")
        shutil.copy(os.path.join(source, "test.txt"), os.path.join(target, "test.txt"))
        eml = next(name for name in os.listdir(source) if name.endswith(".eml"))
        shutil.copy(os.path.join(source, eml), os.path.join(target, f"{task}_small.eml"))
        print(f"{task}_small: {n} of {len(lines)} training series", file=sys.stderr)


if __name__ == "__main__":
    main()
