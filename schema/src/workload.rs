//! The workloads of LANGUAGE.md section 4: the registry's `workload` names as a type, so the
//! engine, the trainer's candidate checks and the registry's consistency test agree on one list,
//! and the structure each workload takes ([`Workload::schema_problem`]).

use crate::types::{DataType, Schema};

/// A workload: what kind of task an app is, chosen by the first matching template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// `image_classification`: `[A,B,C]` or `[A,B]` in, a class out.
    ImageClassification,
    /// `image_recovery`: an image in, an image out.
    ImageRecovery,
    /// `timeseries_classification`: a chain of records in, a class out.
    TimeseriesClassification,
    /// `timeseries_translation`: a chain in, a chain out.
    TimeseriesTranslation,
    /// `tree_classification`: a binary tree of records in, a class out.
    TreeClassification,
    /// `tabular_regression`: `[A]` in, `[1]` out.
    TabularRegression,
    /// `tabular_classification`: `[A]` in, a class out.
    TabularClassification,
    /// `general_classification`: anything in, a class out.
    GeneralClassification,
    /// `general_autoencoder`: anything in, reconstructed.
    GeneralAutoencoder,
}

impl Workload {
    /// Every workload, in LANGUAGE.md's order.
    pub const ALL: [Workload; 9] = [
        Workload::ImageClassification,
        Workload::ImageRecovery,
        Workload::TimeseriesClassification,
        Workload::TimeseriesTranslation,
        Workload::TreeClassification,
        Workload::TabularRegression,
        Workload::TabularClassification,
        Workload::GeneralClassification,
        Workload::GeneralAutoencoder,
    ];

    /// The registry's name of the workload.
    pub fn name(self) -> &'static str {
        match self {
            Workload::ImageClassification => "image_classification",
            Workload::ImageRecovery => "image_recovery",
            Workload::TimeseriesClassification => "timeseries_classification",
            Workload::TimeseriesTranslation => "timeseries_translation",
            Workload::TreeClassification => "tree_classification",
            Workload::TabularRegression => "tabular_regression",
            Workload::TabularClassification => "tabular_classification",
            Workload::GeneralClassification => "general_classification",
            Workload::GeneralAutoencoder => "general_autoencoder",
        }
    }

    /// Parses a registry workload name.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL
            .into_iter()
            .find(|workload| workload.name() == name)
    }

    /// True when the output is a class (quality is accuracy).
    pub fn is_classification(self) -> bool {
        matches!(
            self,
            Workload::ImageClassification
                | Workload::TimeseriesClassification
                | Workload::TreeClassification
                | Workload::TabularClassification
                | Workload::GeneralClassification
        )
    }
}

/// The shape of one side of a schema, as the registry's patterns see it (the canonical form
/// `{[tensors], [recursive names]}`).
struct Side<'a> {
    tensors: Vec<&'a [u64]>,
    recursive: usize,
}

impl<'a> Side<'a> {
    fn of(data_type: &'a DataType) -> Side<'a> {
        Side {
            tensors: data_type
                .tensors()
                .map(|tensor| tensor.dims.as_slice())
                .collect(),
            recursive: data_type.recursive_names().count(),
        }
    }

    /// `{[Tensor[..rank in ranks..]], []}`: one tensor of one of `ranks`, nothing recursive.
    fn single(&self, ranks: &[usize]) -> Option<&'a [u64]> {
        match self.tensors.as_slice() {
            [dims] if self.recursive == 0 && ranks.contains(&dims.len()) => Some(dims),
            _ => None,
        }
    }

    /// `{[Tensor[A], *], [..recursive..]}`: a first tensor of rank 1 and `recursive` recursive
    /// fields (a chain has one, a binary tree two).
    fn linked(&self, recursive: usize) -> bool {
        self.recursive == recursive && self.tensors.first().is_some_and(|dims| dims.len() == 1)
    }
}

impl Workload {
    /// What keeps a schema from being this workload, in words, or `None` when it is one: the
    /// structure the built-in registry's templates of this workload accept (LANGUAGE.md section 4).
    /// The runtime checks a registered manifest with it, so an app can never name a workload its
    /// data cannot be trained as; `tests/tests/registry_consistency.rs` checks that it agrees with
    /// the registry's patterns on every example and fixture.
    pub fn schema_problem(self, schema: &Schema) -> Option<String> {
        let input = Side::of(&schema.input);
        let output = Side::of(&schema.output);
        let class_output = output.single(&[1]).is_some();
        let (fits, needs) = match self {
            Workload::ImageClassification => (
                input.single(&[2, 3]).is_some() && class_output,
                "one [A,B] or [A,B,C] input tensor and one [D] output tensor",
            ),
            Workload::ImageRecovery => (
                input.single(&[3]).is_some() && output.single(&[3]).is_some(),
                "one [A,B,C] input tensor and one [D,E,F] output tensor",
            ),
            Workload::TimeseriesClassification => (
                input.linked(1) && class_output,
                "a chain input (a first tensor [A] and one recursive field) and one [D] output tensor",
            ),
            Workload::TimeseriesTranslation => (
                input.linked(1) && output.linked(1),
                "a chain input and a chain output (each a first tensor [A] and one recursive field)",
            ),
            Workload::TreeClassification => (
                input.linked(2) && class_output,
                "a tree input (a first tensor [A] and two recursive fields) and one [D] output tensor",
            ),
            Workload::TabularRegression => (
                input.single(&[1]).is_some() && output.single(&[1]) == Some(&[1][..]),
                "one [A] input tensor and one [1] output tensor",
            ),
            Workload::TabularClassification => (
                input.single(&[1]).is_some()
                    && output.single(&[1]).is_some_and(|dims| dims[0] >= 2),
                "one [A] input tensor and one [D] output tensor with D >= 2",
            ),
            Workload::GeneralClassification => (class_output, "one [D] output tensor"),
            Workload::GeneralAutoencoder => (true, "anything"),
        };
        (!fits).then(|| {
            format!(
                "workload `{}` takes {needs}; this app is {} -> {}",
                self.name(),
                schema.input,
                schema.output
            )
        })
    }

    /// True when the input is one dense tensor, so that candidates may normalize it (`+norm_kK`).
    pub fn has_dense_input(self) -> bool {
        matches!(
            self,
            Workload::ImageClassification
                | Workload::ImageRecovery
                | Workload::TabularClassification
                | Workload::TabularRegression
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Workload;

    #[test]
    fn names_round_trip() {
        for workload in Workload::ALL {
            assert_eq!(Workload::from_name(workload.name()), Some(workload));
        }
        assert_eq!(Workload::from_name("astrology"), None);
    }
}
