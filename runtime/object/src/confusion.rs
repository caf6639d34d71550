//! A classifier's validation confusion counts in the form the store keeps: how many validation
//! examples of each true class were answered as each class, by the class indices of the app's label
//! map. The engine writes it with a finished run (from the trainer's counts, whose rules say which
//! answers count: the best epoch's, under k-fold every fold's); the store keeps the JSON text and
//! never reads it; the status report reads it for the per-class view. One format, in one place.
//!
//! JSON: `{"cells": [[true, predicted, count], ...]}`, cells sorted, counts > 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The confusion counts of one run's validation answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confusion {
    /// `[true class, predicted class, count]`, sorted by classes, counts > 0.
    pub cells: Vec<[u64; 3]>,
}

/// One class's validation answers: how many examples of it, and how many were answered right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassTally {
    /// Validation examples of the class.
    pub examples: u64,
    /// Of them, answered with the class.
    pub correct: u64,
}

impl ClassTally {
    /// The share answered right (the class's accuracy, or recall), 0 for no examples.
    pub fn accuracy(&self) -> f64 {
        if self.examples == 0 {
            0.0
        } else {
            self.correct as f64 / self.examples as f64
        }
    }
}

impl Confusion {
    /// The counts of `(true class, predicted class, count)` triples, merged and sorted; negative
    /// class indices (which no label has) and zero counts are left out.
    pub fn from_cells(cells: impl IntoIterator<Item = (i64, i64, u64)>) -> Confusion {
        let mut counts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for (actual, predicted, count) in cells {
            if let (Ok(actual), Ok(predicted)) = (u64::try_from(actual), u64::try_from(predicted))
                && count > 0
            {
                *counts.entry((actual, predicted)).or_default() += count;
            }
        }
        Confusion {
            cells: counts
                .into_iter()
                .map(|((actual, predicted), count)| [actual, predicted, count])
                .collect(),
        }
    }

    /// The JSON text the store keeps.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"cells\":[]}".to_owned())
    }

    /// Reads the store's JSON text; `None` when it is not this form.
    pub fn from_json(text: &str) -> Option<Confusion> {
        serde_json::from_str(text).ok()
    }

    /// Each true class's tally, by class index.
    pub fn per_class(&self) -> BTreeMap<u64, ClassTally> {
        let mut tallies: BTreeMap<u64, ClassTally> = BTreeMap::new();
        for &[actual, predicted, count] in &self.cells {
            let tally = tallies.entry(actual).or_insert(ClassTally {
                examples: 0,
                correct: 0,
            });
            tally.examples = tally.examples.saturating_add(count);
            if actual == predicted {
                tally.correct = tally.correct.saturating_add(count);
            }
        }
        tallies
    }

    /// The full matrix over classes `0..classes` (rows: true class, columns: predicted); cells of
    /// classes at or beyond `classes` are left out.
    pub fn matrix(&self, classes: usize) -> Vec<Vec<u64>> {
        let mut matrix = vec![vec![0; classes]; classes];
        for &[actual, predicted, count] in &self.cells {
            if let (Ok(actual), Ok(predicted)) =
                (usize::try_from(actual), usize::try_from(predicted))
                && actual < classes
                && predicted < classes
            {
                matrix[actual][predicted] += count;
            }
        }
        matrix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_merge_sort_and_read_back_with_per_class_tallies() {
        let confusion = Confusion::from_cells([
            (1, 1, 3),
            (0, 0, 4),
            (1, 0, 1),
            (0, 0, 1),
            (-1, 0, 9),
            (2, 2, 0),
        ]);
        assert_eq!(confusion.cells, vec![[0, 0, 5], [1, 0, 1], [1, 1, 3]]);
        let json = confusion.to_json();
        assert_eq!(json, r#"{"cells":[[0,0,5],[1,0,1],[1,1,3]]}"#);
        assert_eq!(Confusion::from_json(&json), Some(confusion.clone()));
        assert_eq!(Confusion::from_json("[1, 2]"), None);
        let tallies = confusion.per_class();
        assert_eq!(
            tallies[&0],
            ClassTally {
                examples: 5,
                correct: 5
            }
        );
        assert_eq!(tallies[&1].accuracy(), 0.75);
        assert_eq!(confusion.matrix(2), vec![vec![5, 0], vec![1, 3]]);
        // A class the matrix does not cover is left out, not an index out of bounds.
        assert_eq!(confusion.matrix(1), vec![vec![5]]);
        assert_eq!(
            ClassTally {
                examples: 0,
                correct: 0
            }
            .accuracy(),
            0.0
        );
    }
}
