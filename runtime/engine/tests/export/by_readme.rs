//! The classic models over series (MiniRocket, MultiRocket, 1-NN DTW) and trees (the tree-kernel
//! SVM), exported as JSON: their answers computed here from the README's words alone equal
//! `infer`'s.

use super::*;

/// Series `i` of `length` steps (two channels, values off any lattice): class `up` (odd `i`) rises.
pub(super) fn series_steps(i: usize, length: usize) -> Vec<[f32; 2]> {
    let sign = if i % 2 == 1 { 1.0 } else { -1.0 };
    (0..length)
        .map(|t| {
            let (i, t) = (i as f32, t as f32);
            [
                sign * t / length as f32 + 0.3 * (1.7 * i + 0.9 * t).sin(),
                (0.61 * i + 0.37 * t).cos(),
            ]
        })
        .collect()
}

/// A series as the app's input: the chain of its steps.
pub(super) fn chain_of(steps: &[[f32; 2]]) -> Value {
    json!(steps.iter().map(|x| json!({ "x": x })).collect::<Vec<_>>())
}

/// A series model exported as JSON, its parameters and the folder's metadata, after a run of
/// `family` on 24 series of 12-19 steps.
fn series_export(family: &str) -> (tempfile::TempDir, Value, Value, Client) {
    let examples: Vec<Value> = (0..24)
        .map(|i| {
            json!({"input": chain_of(&series_steps(i, 12 + i % 8)), "output": (["down", "up"][i % 2])})
        })
        .collect();
    let (temp, home, client) = trained(SERIES_APP, |id| id == family, &examples);
    let out = home.parent().unwrap().join("export");
    let report = export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(report.model.format, "easeml-classic-json");
    assert_eq!(report.model.input_shape, vec![-1, 2]);
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.json")).unwrap()).unwrap();
    assert_eq!(model["family"], family);
    let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
    assert!(
        readme.contains("An input is a series of any number of steps, each of 2 values"),
        "{readme}"
    );
    let metadata = metadata(&out);
    assert!(
        metadata["call"]["input"]
            .as_str()
            .unwrap()
            .starts_with("a series"),
        "{metadata}"
    );
    (temp, model["parameters"].clone(), metadata, client)
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn counts(value: &Value) -> Vec<usize> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect()
}

/// Softmax of `values`, as f32.
fn softmax(values: &[f64]) -> Vec<f32> {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = values.iter().map(|v| (v - max).exp()).sum();
    values
        .iter()
        .map(|v| ((v - max).exp() / total) as f32)
        .collect()
}

/// MiniRocket by the README's words: direct dilated convolutions with weights 2 and -1.
fn minirocket_by_readme(p: &Value, steps: &[[f32; 2]]) -> Vec<f32> {
    let mut features = Vec::new();
    random_kernel_features(
        &p["transform"],
        steps,
        &mut |pooled, b, features| {
            let above = pooled.iter().filter(|&&v| f64::from(v) > b).count();
            features.push(if pooled.is_empty() {
                0.0
            } else {
                above as f64 / pooled.len() as f64
            });
        },
        &mut features,
    );
    ridge_by_readme(p, &features)
}

/// MultiRocket by the README's words: four features a bias over the series, then over its first
/// differences.
fn multirocket_by_readme(p: &Value, steps: &[[f32; 2]]) -> Vec<f32> {
    let four = &mut |pooled: &[f32], b: f64, features: &mut Vec<f64>| {
        let n = pooled.len() as f64;
        let positions: Vec<usize> = (0..pooled.len())
            .filter(|&t| f64::from(pooled[t]) > b)
            .collect();
        if positions.is_empty() {
            features.extend([0.0, 0.0, -1.0, 0.0]);
            return;
        }
        let count = positions.len() as f64;
        let mut longest = 0;
        let mut run = 0;
        let mut previous: Option<usize> = None;
        for &t in &positions {
            run = if previous == Some(t.wrapping_sub(1)) {
                run + 1
            } else {
                1
            };
            longest = longest.max(run);
            previous = Some(t);
        }
        features.push(count / n);
        features.push(
            positions
                .iter()
                .map(|&t| f64::from(pooled[t]) - b)
                .sum::<f64>()
                / count,
        );
        features.push(positions.iter().sum::<usize>() as f64 / count / n);
        features.push(longest as f64 / n);
    };
    let differences: Vec<[f32; 2]> = steps
        .windows(2)
        .map(|pair| [pair[1][0] - pair[0][0], pair[1][1] - pair[0][1]])
        .collect();
    let mut features = Vec::new();
    random_kernel_features(&p["transform"], steps, four, &mut features);
    random_kernel_features(&p["difference"], &differences, four, &mut features);
    ridge_by_readme(p, &features)
}

/// What one bias adds to the features, from the pooled values.
type PoolFeatures = dyn FnMut(&[f32], f64, &mut Vec<f64>);

/// A minirocket transform by the README's words: for every (dilation, kernel) its pooled values,
/// and for each of its biases in order, `pool(pooled, bias, features)`.
fn random_kernel_features(
    transform: &Value,
    steps: &[[f32; 2]],
    pool: &mut PoolFeatures,
    features: &mut Vec<f64>,
) {
    let mut kernels = Vec::new();
    for a in 0..9 {
        for b in a + 1..9 {
            for c in b + 1..9 {
                kernels.push([a, b, c]);
            }
        }
    }
    let dilations = counts(&transform["dilations"]);
    let per_dilation = counts(&transform["features_per_dilation"]);
    let biases = floats(&transform["biases"]);
    let combinations = transform["combination_channels"].as_array().unwrap();
    let length = steps.len() as i64;
    let mut bias = 0;
    for (i, (&d, &per_kernel)) in dilations.iter().zip(&per_dilation).enumerate() {
        for (k, kernel) in kernels.iter().enumerate() {
            let channels = counts(&combinations[i * 84 + k]);
            let out: Vec<f32> = (0..length)
                .map(|t| {
                    let mut sum = 0f32;
                    for &c in &channels {
                        for j in 0..9 {
                            let at = t + (j as i64 - 4) * d as i64;
                            if (0..length).contains(&at) {
                                let w = if kernel.contains(&j) { 2.0 } else { -1.0 };
                                sum += w * steps[at as usize][c];
                            }
                        }
                    }
                    sum
                })
                .collect();
            let pad = 4 * d;
            let pooled = if (i + k) % 2 == 1 && steps.len() > 8 * d {
                &out[pad..steps.len() - pad]
            } else {
                &out[..]
            };
            for _ in 0..per_kernel {
                pool(pooled, biases[bias], features);
                bias += 1;
            }
        }
    }
}

/// The standardized features weighed per class, then softmax (minirocket's and multirocket's).
fn ridge_by_readme(p: &Value, features: &[f64]) -> Vec<f32> {
    let (mean, scale) = (floats(&p["mean"]), floats(&p["scale"]));
    let intercepts = floats(&p["intercepts"]);
    let decision: Vec<f64> = p["weights"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&intercepts)
        .map(|(weights, intercept)| {
            intercept
                + floats(weights)
                    .iter()
                    .zip(features)
                    .enumerate()
                    .map(|(f, (w, x))| w * (x - mean[f]) / scale[f])
                    .sum::<f64>()
        })
        .collect();
    softmax(&decision)
}

/// 1-NN DTW by the README's words: the full banded dynamic programme, no pruning.
fn dtw_knn_by_readme(p: &Value, steps: &[[f32; 2]]) -> Vec<f32> {
    let channels = p["channels"].as_u64().unwrap() as usize;
    assert_eq!(channels, 2);
    let (offsets, labels) = (counts(&p["offsets"]), counts(&p["labels"]));
    let values = floats(&p["values"]);
    let window = p["window"].as_f64().unwrap();
    let classes = p["n_classes"].as_u64().unwrap() as usize;
    let query: Vec<f64> = steps.iter().flatten().map(|&v| f64::from(v)).collect();
    let mut nearest = vec![f64::INFINITY; classes];
    for (j, &class) in labels.iter().enumerate() {
        let b = &values[offsets[j] * channels..offsets[j + 1] * channels];
        let (n, m) = (steps.len(), offsets[j + 1] - offsets[j]);
        let w = ((window * n.max(m) as f64).round() as usize).max(n.abs_diff(m));
        let mut table = vec![vec![f64::INFINITY; m]; n];
        for i in 0..n {
            for k in 0..m {
                if i.abs_diff(k) > w {
                    continue;
                }
                let cost: f64 = (0..channels)
                    .map(|c| (query[i * channels + c] - b[k * channels + c]).powi(2))
                    .sum();
                let before = if i == 0 && k == 0 {
                    0.0
                } else {
                    let up = if i > 0 {
                        table[i - 1][k]
                    } else {
                        f64::INFINITY
                    };
                    let left = if k > 0 {
                        table[i][k - 1]
                    } else {
                        f64::INFINITY
                    };
                    let diagonal = if i > 0 && k > 0 {
                        table[i - 1][k - 1]
                    } else {
                        f64::INFINITY
                    };
                    up.min(left).min(diagonal)
                };
                table[i][k] = cost + before;
            }
        }
        nearest[class] = nearest[class].min(table[n - 1][m - 1]);
    }
    let d1 = nearest.iter().copied().fold(f64::INFINITY, f64::min);
    let weights: Vec<f64> = nearest
        .iter()
        .map(|d| (-(d - d1) / d1.max(1e-12)).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| (w / total) as f32).collect()
}

#[test]
fn series_models_export_as_json_that_answers_as_infer_by_the_readme() {
    let queries: Vec<Vec<[f32; 2]>> = (100..108).map(|i| series_steps(i, 9 + i % 11)).collect();
    for family in ["minirocket", "multirocket", "dtw_knn"] {
        let (_temp, p, metadata, mut client) = series_export(family);
        assert_eq!(metadata["labels"], json!(["down", "up"]));
        let by_readme: Vec<Vec<f32>> = queries
            .iter()
            .map(|steps| match family {
                "minirocket" => minirocket_by_readme(&p, steps),
                "multirocket" => multirocket_by_readme(&p, steps),
                _ => dtw_knn_by_readme(&p, steps),
            })
            .collect();
        let answers = client
            .infer(queries.iter().map(|steps| chain_of(steps)))
            .unwrap();
        assert_same_answers(&answers, &by_readme, &format!("{family} by the README"));
    }
}

/// The `.eml` of a tree app: nodes of three values, two recursive fields.
pub(super) const TREE_APP: &str = "type Input\n  v :: Tensor[3]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [2]\nlabels = [even, odd]\n";

/// Tree `i` as the app's input: a left spine of `1 + i % 4` nodes, some with a right leaf.
pub(super) fn tree_input(i: usize) -> Value {
    let node = |level: usize| json!([noise(i, level), 0.5 + noise(i + 7, level), 1.0]);
    let mut current = json!({"v": node(0), "left": null, "right": null});
    for level in 1..=i % 4 {
        let right = if (i + level).is_multiple_of(3) {
            json!({"v": node(level + 10), "left": null, "right": null})
        } else {
            Value::Null
        };
        current = json!({"v": node(level), "left": current, "right": right});
    }
    current
}

/// A tree's nodes in pre-order, each its values and its children's indices (a node of the app's
/// input, `v` / `left` / `right`, or of the exported model, `value` / `children`).
fn tree_nodes(tree: &Value, nodes: &mut Vec<(Vec<f64>, Vec<usize>)>) -> usize {
    let index = nodes.len();
    let (value, children): (&Value, Vec<&Value>) = if tree.get("v").is_some() {
        let present = [&tree["left"], &tree["right"]];
        (
            &tree["v"],
            present
                .into_iter()
                .filter(|child| !child.is_null())
                .collect(),
        )
    } else {
        (
            &tree["value"],
            tree["children"].as_array().unwrap().iter().collect(),
        )
    };
    nodes.push((floats(value), Vec::new()));
    let children = children
        .into_iter()
        .map(|child| tree_nodes(child, nodes))
        .collect();
    nodes[index].1 = children;
    index
}

/// K(a, b) of the README: the sum over node pairs of C, children after parents in pre-order.
fn tree_kernel_by_readme(a: &Value, b: &Value, lambda: f64, gamma: f64) -> f64 {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    tree_nodes(a, &mut x);
    tree_nodes(b, &mut y);
    let mut c = vec![vec![0.0; y.len()]; x.len()];
    for i in (0..x.len()).rev() {
        for j in (0..y.len()).rev() {
            let distance: f64 = x[i]
                .0
                .iter()
                .zip(&y[j].0)
                .map(|(p, q)| (p - q).powi(2))
                .sum();
            let mut value = lambda * (-gamma * distance).exp();
            if x[i].1.len() == y[j].1.len() {
                for (&ci, &cj) in x[i].1.iter().zip(&y[j].1) {
                    value *= 1.0 + c[ci][cj];
                }
            }
            c[i][j] = value;
        }
    }
    c.iter().flatten().sum()
}

#[test]
fn the_tree_kernel_svm_exports_as_json_that_answers_as_infer_by_the_readme() {
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": tree_input(i), "output": (["even", "odd"][i % 2])}))
        .collect();
    let (_temp, home, mut client) = trained(TREE_APP, |id| id == "tree_kernel_svm", &examples);
    let out = home.parent().unwrap().join("export");
    let report = export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(report.model.format, "easeml-classic-json");
    assert_eq!(report.model.input_shape, vec![-2, 3]);
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.json")).unwrap()).unwrap();
    assert_eq!(model["family"], "tree_kernel_svm");
    let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
    assert!(
        readme.contains("An input is a tree of any shape, each node of 3 values"),
        "{readme}"
    );
    assert!(
        metadata(&out)["call"]["input"]
            .as_str()
            .unwrap()
            .starts_with("a tree")
    );

    let p = &model["parameters"];
    let (lambda, gamma) = (
        p["kernel"]["lambda"].as_f64().unwrap(),
        p["kernel"]["gamma"].as_f64().unwrap(),
    );
    let support = p["support"].as_array().unwrap();
    let self_kernels = floats(&p["self_kernels"]);
    let coefficients: Vec<Vec<f64>> = p["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(floats)
        .collect();
    let queries: Vec<Value> = (100..108).map(tree_input).collect();
    let by_readme: Vec<Vec<f32>> = queries
        .iter()
        .map(|x| {
            let own = tree_kernel_by_readme(x, x, lambda, gamma);
            let k: Vec<f64> = support
                .iter()
                .zip(&self_kernels)
                .map(|(tree, &support_self)| {
                    tree_kernel_by_readme(x, tree, lambda, gamma)
                        / (own * support_self).sqrt().max(1e-12)
                        + 1.0
                })
                .collect();
            let decision: Vec<f64> = coefficients
                .iter()
                .map(|class| class.iter().zip(&k).map(|(a, k)| a * k).sum())
                .collect();
            softmax(&decision)
        })
        .collect();
    let answers = client.infer(queries).unwrap();
    assert_same_answers(&answers, &by_readme, "tree_kernel_svm by the README");
}
