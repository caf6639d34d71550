#!/usr/bin/env python3
"""delgado179's qualities with modelled runtimes: a stand-in for a large cost-aware table.

The shared tables hold one large matrix (delgado179: 121 data sets x 179 classifiers) without
runtimes and one small one (easeml-dl: 8 x 9) with them. This script gives the large matrix
runtimes that are structured the way measured ones are: each run's cost grows with its data set's
size (nTrain, nVars, classes from problemDescr.csv) by an exponent of its model family (kernel
methods quadratically in the rows, lazy learners by 1.5, the rest about linearly), ensembles and
forests cost tens of times a single learner, each classifier has its own implementation factor
(log-normal, sigma 0.5) and each run its own noise (log-normal, sigma 0.3). The costs are
modelled, not measured: the family constants are round numbers, chosen before any policy was run.

    python3 make_table.py DATA_DIR OUT_DIR [SEED]

writes OUT_DIR/delgado179_modelled_quality.csv (percent, as results.txt; empty cell = missing) and OUT_DIR/delgado179_modelled_cost.csv
(seconds on an imagined machine), both with the classifier names as header and the data sets as
the first column, for `easeml bench scheduler --dataset matrix:Q,C --cost-aware`.
"""
import csv
import math
import os
import random
import re
import sys

# (pattern on the classifier's name, constant, exponent of nTrain / 1000): first match wins.
FAMILIES = [
    (r"Bagging|MultiBoost|AdaBoost|adaboost|ogitBoost|Bag_R|bagging|treebag|Stacking|Grading|"
     r"Decorate|Dagging|RotationForest|RandomCommittee|RandomSubSpace|END_|MetaCost|Vote|"
     r"MultiScheme|CVParameterSelection|MultiClassClassifier|OrdinalClass", 30.0, 1.2),
    (r"^rf_|RandomForest|rforest|RRF|cforest|parRF", 20.0, 1.2),
    (r"svm|SVM|SMO|lssvm|gausspr|elm_kernel|vbmp", 2.0, 2.0),
    (r"mlp|Multilayer|nnet|NNet|cascor|rbf|RBF|pnn|elm_|lvq|dkp|bdk", 10.0, 1.0),
    (r"knn|IBk|IB1|KStar|LWL|NNge", 0.5, 1.5),
    (r"ZeroR|OneR|DecisionStump|HyperPipes|VFI|ConjunctiveRule|NaiveBayes|naiveBayes", 0.05, 1.0),
    (r".", 1.0, 1.1),
]


def family(model):
    for pattern, constant, exponent in FAMILIES:
        if re.search(pattern, model):
            return constant, exponent
    raise AssertionError(model)


def main():
    data_dir, out_dir = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = random.Random(seed)
    lines = [line.split() for line in open(os.path.join(data_dir, "delgado179", "results.txt"))]
    header = lines[0]
    models = header[1:header.index("min")]
    rows = []
    for fields in lines[1:]:
        if not fields or fields[0].startswith("-"):
            break
        rows.append((fields[0], fields[1:1 + len(models)]))
    sizes = {}
    with open(os.path.join(data_dir, "delgado179", "problemDescr.csv")) as handle:
        for record in csv.DictReader(handle):
            size = (int(record["nTrain"]), int(record["nVars"]), int(record["nTargets"]))
            sizes[record["Relation Name"]] = size
            sizes[record["Problem File Name"].split("/")[0]] = size
    smallest = min(sizes.values())
    implementation = {model: math.exp(rng.gauss(0.0, 0.5)) for model in models}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "delgado179_modelled_quality.csv"), "w", newline="") as quality_file, \
            open(os.path.join(out_dir, "delgado179_modelled_cost.csv"), "w", newline="") as cost_file:
        quality_out, cost_out = csv.writer(quality_file), csv.writer(cost_file)
        quality_out.writerow(["dataset"] + models)
        cost_out.writerow(["dataset"] + models)
        for name, values in rows:
            n_train, n_vars, n_classes = sizes.get(name, smallest)
            quality_out.writerow([name] + ["" if v == "--" else v for v in values])
            costs = []
            for model in models:
                constant, exponent = family(model)
                cost = (constant * implementation[model]
                        * (n_train / 1000.0) ** exponent
                        * (n_vars / 10.0) ** 0.8
                        * (max(n_classes, 2) / 2.0) ** 0.5
                        * math.exp(rng.gauss(0.0, 0.3)))
                costs.append(f"{cost:.6g}")
            cost_out.writerow([name] + costs)


if __name__ == "__main__":
    main()
