//! A classifier's answer typed by the app's `Label`: what a generated client's `infer` returns for
//! an app with declared labels (the generated `Label` enum is the `L`). The class, its probability
//! and every class's probability in class order, from an [`Inference`] of the served model.

use easeml_object::Inference;

use crate::{Error, Result};

/// One answer of a classifier, typed by the app's labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified<L> {
    /// The answered class.
    pub label: L,
    /// The probability the model gives it.
    pub confidence: f32,
    /// Every class's probability, in class order (the order of the program's `labels`, so
    /// `probabilities[label.index()]`); they sum to 1.
    pub probabilities: Vec<f32>,
}

impl<L> Classified<L> {
    /// Types one answer: `label_at` gives the label of a class index (the generated
    /// `Label::from_index`). An answer without a class, or with a class the labels do not have,
    /// is a [`Error::Model`] naming it.
    pub fn from_inference(
        answer: Inference,
        label_at: impl Fn(usize) -> Option<L>,
    ) -> Result<Classified<L>> {
        let class = answer.class.ok_or_else(|| {
            Error::Model(easeml_serving::ModelError::Answer(format!(
                "`{}`, not a class",
                answer.output
            )))
        })? as usize;
        let label = label_at(class).ok_or_else(|| {
            Error::Model(easeml_serving::ModelError::Answer(format!(
                "class {class}, which the app's labels do not have"
            )))
        })?;
        let probabilities = answer.probabilities.unwrap_or_default();
        let confidence = answer
            .confidence
            .or_else(|| probabilities.get(class).copied())
            .unwrap_or(f32::NAN);
        Ok(Classified {
            label,
            confidence,
            probabilities,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label_at(index: usize) -> Option<&'static str> {
        ["cat", "dog"].get(index).copied()
    }

    #[test]
    fn an_answer_becomes_its_label_with_every_probability() {
        let answer = Inference {
            output: "dog".into(),
            class: Some(1),
            confidence: Some(0.75),
            probabilities: Some(vec![0.25, 0.75]),
        };
        let typed = Classified::from_inference(answer, label_at).unwrap();
        assert_eq!(
            typed,
            Classified {
                label: "dog",
                confidence: 0.75,
                probabilities: vec![0.25, 0.75]
            }
        );
    }

    #[test]
    fn an_answer_without_a_known_class_is_an_error_in_words() {
        let values = Inference {
            output: serde_json::json!([0.5]),
            class: None,
            confidence: None,
            probabilities: None,
        };
        let error = Classified::from_inference(values, label_at).unwrap_err();
        assert!(error.to_string().contains("not a class"), "{error}");
        let unknown = Inference {
            output: 7.into(),
            class: Some(7),
            confidence: Some(1.0),
            probabilities: None,
        };
        let error = Classified::from_inference(unknown, label_at).unwrap_err();
        assert!(error.to_string().contains("class 7"), "{error}");
    }
}
