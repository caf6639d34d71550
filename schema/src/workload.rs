//! The workloads of LANGUAGE.md section 4: the registry's `workload` names as a type, so the
//! engine, the trainer's candidate checks and the registry's consistency test agree on one list.

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
