"""Writes the real data of `cargo xtask demo`'s apps as feed files (one example per line).

Usage: python demo_data.py OUT_DIR SKTIME_WHEEL

For each app, OUT_DIR/<app>.train.txt (what is fed) and OUT_DIR/<app>.heldout.txt (what `infer`
answers, with the true outputs so it can print the held-out accuracy):
- breast_cancer, wine_cultivar, handwritten_digits: scikit-learn's bundled data sets, shuffled with a
  fixed seed (they are sorted by class) and cut 80% / 20%. Lines are `JSON_ARRAY LABEL`.
- vowel_speakers: the UCI "Japanese Vowels" data (Kudo, Toyama and Shimbo 1999) as shipped inside
  sktime's wheel (sktime/datasets/data/JapaneseVowels/*.ts; only the wheel is downloaded, sktime
  is not installed), with the data set's own train/test split (270 / 370 utterances). Lines are
  JSON Lines: `{"input": [{"coefficients": [12 numbers]}, ...one record per frame], "output": LABEL}`.
"""

import json
import random
import sys
import zipfile

from sklearn import datasets

out, wheel = sys.argv[1], sys.argv[2]


def write(app, train, heldout, source):
    for suffix, lines in (("train", train), ("heldout", heldout)):
        with open(f"{out}/{app}.{suffix}.txt", "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"{app}: {len(train)} training and {len(heldout)} held-out examples from {source}")


SKLEARN = {
    "breast_cancer": ("load_breast_cancer", None, ["malignant", "benign"]),
    "wine_cultivar": ("load_wine", None, None),
    "handwritten_digits": ("load_digits", (8, 8), [str(d) for d in range(10)]),
}
for app, (loader, shape, names) in SKLEARN.items():
    data = getattr(datasets, loader)()
    lines = []
    for x, y in zip(data.data, data.target):
        x = [float(v) / (16.0 if shape else 1.0) for v in x]
        if shape:
            x = [x[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
        label = names[y] if names else str(data.target_names[y])
        lines.append(json.dumps(x) + " " + label)
    random.Random(0).shuffle(lines)  # the data sets are sorted by class; hold out a fair 20%
    cut = len(lines) * 4 // 5
    write(app, lines[:cut], lines[cut:], f"sklearn.datasets.{loader}")


def read_ts(archive, name):
    """The `.ts` format: after `@data`, one utterance per line, its 12 dimensions separated by `:`,
    each a comma-separated series over the frames, the class label last."""
    text = archive.read(f"sktime/datasets/data/JapaneseVowels/{name}").decode()
    lines, in_data = [], False
    for row in text.splitlines():
        row = row.strip()
        if not row or row.startswith("#"):
            continue
        if row.lower() == "@data":
            in_data = True
            continue
        if not in_data:
            continue
        *dimensions, label = row.split(":")
        series = [[float(v) for v in d.split(",")] for d in dimensions]
        frames = [{"coefficients": [s[t] for s in series]} for t in range(len(series[0]))]
        lines.append(json.dumps({"input": frames, "output": f"speaker{label}"}))
    return lines


with zipfile.ZipFile(wheel) as archive:
    train = read_ts(archive, "JapaneseVowels_TRAIN.ts")
    heldout = read_ts(archive, "JapaneseVowels_TEST.ts")
write("vowel_speakers", train, heldout, "UCI Japanese Vowels (in sktime's wheel)")
