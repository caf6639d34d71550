//! The model catalogue: every model id the trainer builds and the workloads it serves, and the
//! grammar of candidate ids (`model` or `model+norm_kK`, LANGUAGE.md sections 4-5). The runtime
//! checks a registered manifest's candidates with [`candidate_problem`], so an app can never list a
//! candidate the engine would have to leave out. `tests/tests/registry_consistency.rs` checks that
//! this catalogue is exactly what the trainer's `ModelKind::fits` accepts, and that every model
//! of the built-in registry is in it for its template's workload.

use crate::workload::Workload;

use Workload::*;

/// Every model id with the workloads it serves, in the registry's order.
pub const MODELS: [(&str, &[Workload]); 35] = [
    ("alexnet", &[ImageClassification]),
    ("bn_alexnet", &[ImageClassification]),
    ("resnet18", &[ImageClassification]),
    ("resnet50", &[ImageClassification]),
    ("googlenet", &[ImageClassification]),
    ("squeezenet", &[ImageClassification]),
    ("vgg16", &[ImageClassification]),
    ("nin", &[ImageClassification]),
    ("small_cnn", &[ImageClassification]),
    ("autoencoder", &[ImageRecovery]),
    ("gan", &[ImageRecovery]),
    ("pix2pix", &[ImageRecovery]),
    ("rnn", &[TimeseriesClassification]),
    ("lstm", &[TimeseriesClassification]),
    ("bilstm", &[TimeseriesClassification]),
    ("gru", &[TimeseriesClassification]),
    ("fcn", &[TimeseriesClassification]),
    ("resnet1d", &[TimeseriesClassification]),
    ("inception_time", &[TimeseriesClassification]),
    ("seq2seq", &[TimeseriesTranslation]),
    ("tree_rnn", &[TreeClassification]),
    ("tree_kernel_svm", &[TreeClassification]),
    ("minirocket", &[TimeseriesClassification]),
    ("multirocket", &[TimeseriesClassification]),
    ("dtw_knn", &[TimeseriesClassification]),
    ("mlp_small", &[TabularClassification, TabularRegression]),
    ("mlp_large", &[TabularClassification, TabularRegression]),
    ("logistic", &[TabularClassification]),
    ("linear", &[TabularRegression]),
    ("bit_rnn", &[GeneralClassification]),
    ("bit_autoencoder", &[GeneralAutoencoder]),
    ("gbdt", &[TabularClassification, TabularRegression]),
    ("random_forest", &[TabularClassification, TabularRegression]),
    (
        "knn",
        &[
            TabularClassification,
            TabularRegression,
            ImageClassification,
        ],
    ),
    (
        "kernel_ridge",
        &[
            TabularClassification,
            TabularRegression,
            ImageClassification,
        ],
    ),
];

/// The classic models (no network: fitted, not trained by gradient steps), whose cost depends on
/// the training data. `tests/tests/registry_consistency.rs` checks this is exactly the trainer's
/// `classic::is_classic`.
pub const CLASSIC_MODELS: [&str; 8] = [
    "tree_kernel_svm",
    "minirocket",
    "multirocket",
    "dtw_knn",
    "gbdt",
    "random_forest",
    "knn",
    "kernel_ridge",
];

/// Whether `model` is one of [`CLASSIC_MODELS`].
pub fn is_classic(model: &str) -> bool {
    CLASSIC_MODELS.contains(&model)
}

/// A candidate id split into its model id and normalization exponent: `resnet18+norm_k2` is
/// `("resnet18", Some(2))`; `None` when it is not of the form `model` or `model+norm_kK` with
/// K >= 1 (the model id is not looked up).
pub fn split_candidate_id(id: &str) -> Option<(&str, Option<u32>)> {
    match id.split_once('+') {
        None => Some((id, None)),
        Some((model, norm)) => {
            let digits = norm.strip_prefix("norm_k")?;
            if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
                return None;
            }
            let k: u32 = digits.parse().ok()?;
            (k >= 1).then_some((model, Some(k)))
        }
    }
}

/// The workloads a model id serves; `None` for an id the trainer does not know.
pub fn workloads_of(model: &str) -> Option<&'static [Workload]> {
    MODELS
        .iter()
        .find(|(id, _)| *id == model)
        .map(|(_, workloads)| *workloads)
}

/// What keeps candidate `id` from being trained for `workload`, in words, or `None` when it can
/// be: a known model that serves the workload, normalized only where the input is dense.
pub fn candidate_problem(workload: Workload, id: &str) -> Option<String> {
    let known = || {
        MODELS
            .iter()
            .filter(|(_, workloads)| workloads.contains(&workload))
            .map(|(id, _)| *id)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let shown: String = id.chars().take(80).collect();
    let Some((model, norm_k)) = split_candidate_id(id) else {
        return Some(format!(
            "candidate `{shown}` is not a model id or `MODEL+norm_kK` (K >= 1)"
        ));
    };
    let Some(workloads) = workloads_of(model) else {
        return Some(format!(
            "candidate `{shown}`: no model `{}` (the models for {}: {})",
            model.chars().take(80).collect::<String>(),
            workload.name(),
            known()
        ));
    };
    if !workloads.contains(&workload) {
        return Some(format!(
            "candidate `{shown}` is a model for {}, not for {} (its models: {})",
            workloads
                .iter()
                .map(|workload| workload.name())
                .collect::<Vec<_>>()
                .join(" and "),
            workload.name(),
            known()
        ));
    }
    if norm_k.is_some() && !workload.has_dense_input() {
        return Some(format!(
            "candidate `{shown}`: input normalization needs one dense input tensor, which {} has not",
            workload.name()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_ids_are_checked_against_the_workload() {
        assert_eq!(candidate_problem(ImageClassification, "resnet50"), None);
        assert_eq!(
            candidate_problem(ImageClassification, "resnet50+norm_k2"),
            None
        );
        assert_eq!(candidate_problem(TabularRegression, "mlp_small"), None);
        let problem = |workload, id| candidate_problem(workload, id).unwrap();
        assert!(
            problem(TabularClassification, "resnet50")
                .starts_with("candidate `resnet50` is a model for image_classification, not for tabular_classification"),
        );
        assert!(
            problem(TabularClassification, "../../etc/passwd")
                .starts_with("candidate `../../etc/passwd`: no model `../../etc/passwd`")
        );
        for bad in [
            "lstm+norm_k0",
            "lstm+norm_k",
            "lstm+norm_k-1",
            "lstm+nope",
            "lstm+norm_k+1",
        ] {
            assert!(
                problem(TimeseriesClassification, bad).contains("is not a model id"),
                "{bad}"
            );
        }
        assert!(problem(TimeseriesClassification, "lstm+norm_k1").contains("normalization"));
        let long = "x".repeat(10_000);
        assert!(problem(GeneralAutoencoder, &long).len() < 400);
    }

    #[test]
    fn every_workload_has_a_model() {
        for workload in Workload::ALL {
            assert!(
                MODELS
                    .iter()
                    .any(|(_, workloads)| workloads.contains(&workload)),
                "{workload:?}"
            );
        }
    }
}
