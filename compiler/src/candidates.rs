//! Candidate generation (LANGUAGE.md section 5): the chosen template's models, each augmented with
//! the input normalizations f_k(x) = -x^(2k) + x^k when the workload's input is image-shaped.
//!
//! Candidate ids are stable strings: `resnet18`, `resnet18+norm_k2`. Order: model by model, each
//! first without normalization, then with each k in the registry's order. The registry's
//! `not_normalized` models (k-NN: not a network, so no f_k layer) are never augmented.

use easeml_schema::{Candidate, Normalization};

use crate::templates::Template;

/// The candidates of a template, with normalization exponents `ks` when the template normalizes
/// (except for the models of `not_normalized`).
pub fn candidates(template: &Template, ks: &[u32], not_normalized: &[String]) -> Vec<Candidate> {
    template
        .models
        .iter()
        .flat_map(|model| {
            let ks: &[u32] = if template.normalize && !not_normalized.contains(model) {
                ks
            } else {
                &[]
            };
            let plain = Candidate {
                id: model.clone(),
                model: model.clone(),
                normalization: None,
            };
            std::iter::once(plain).chain(ks.iter().map(move |k| Candidate {
                id: format!("{model}+norm_k{k}"),
                model: model.clone(),
                normalization: Some(Normalization { k: *k }),
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::{Registry, compile};

    fn ids(source: &str, registry: &Registry) -> Vec<String> {
        compile(source, "test", registry)
            .unwrap()
            .candidates
            .into_iter()
            .map(|candidate| candidate.id)
            .collect()
    }

    #[test]
    fn image_inputs_are_augmented_model_by_model() {
        let ids = ids("Input = [32, 32, 3]\nOutput = [10]", &Registry::builtin());
        // knn and kernel_ridge are not networks: they are never augmented.
        assert_eq!(ids.len(), 9 * 4 + 2);
        assert_eq!(ids.iter().filter(|id| id.starts_with("knn")).count(), 1);
        assert_eq!(
            ids.iter()
                .filter(|id| id.starts_with("kernel_ridge"))
                .count(),
            1
        );
        assert_eq!(
            &ids[..6],
            [
                "small_cnn",
                "small_cnn+norm_k1",
                "small_cnn+norm_k2",
                "small_cnn+norm_k4",
                "knn",
                "kernel_ridge"
            ]
        );
        assert!(ids.contains(&"resnet18+norm_k2".to_owned()));
    }

    #[test]
    fn other_inputs_are_not_augmented() {
        assert_eq!(
            ids(
                "type Input\n x :: Tensor[3]\n next :: Nullable{Input}\nend\nOutput = [2]",
                &Registry::builtin()
            ),
            [
                "minirocket",
                "multirocket",
                "fcn",
                "resnet1d",
                "inception_time",
                "rnn",
                "lstm",
                "bilstm",
                "gru",
                "dtw_knn"
            ]
        );
        assert_eq!(
            ids("Input = [3]\nOutput = [1]", &Registry::builtin()),
            [
                "random_forest",
                "gbdt",
                "kernel_ridge",
                "mlp_small",
                "mlp_large",
                "linear",
                "knn"
            ]
        );
    }

    #[test]
    fn the_normalization_set_is_configurable() {
        let mut registry = Registry::builtin();
        registry.normalization_ks = vec![3];
        assert_eq!(
            &ids("Input = [8, 8]\nOutput = [2]", &registry)[..2],
            ["small_cnn", "small_cnn+norm_k3"]
        );
        registry.normalization_ks.clear();
        assert_eq!(ids("Input = [8, 8]\nOutput = [2]", &registry).len(), 11);
    }
}
