//! The validation protocol a run's quality was measured by, as the trainer records it in the
//! store (`RunValidation::protocol`): one type that the trainer writes ([`Protocol`]'s `Display`)
//! and that the store (the fold count of a mean's standard error), the engine (a raced run's cost)
//! and the client (the status words) read back ([`Protocol::parse`]), so that the recorded string
//! has one grammar and no reader can disagree with the writer:
//!
//! ```text
//! split P%                                            a held-out P% of the examples
//! K-fold[ stratified][ xR][, T fold(s) trained[, raced]]
//! ```
//!
//! `xR`: the k-fold ran `R > 1` times over other partitions (a classic model's repeats);
//! `T fold(s) trained`: only `T` of the `K` folds were trained, in the time limit or, followed by
//! `, raced`, because the race stopped them below the app's best run (`easeml_trainer::race`).
//! The invariant `Protocol::parse(&p.to_string()) == Some(p)` is tested over every shape.

use std::fmt;

/// A k-fold cross-validation as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KFold {
    /// The folds of one partition (at least 2).
    pub folds: u32,
    /// Whether each fold keeps the classes' shares.
    pub stratified: bool,
    /// How many partitions ran (1: not repeated).
    pub repeats: u32,
    /// The folds trained when fewer than all (at least 1), `None` when every fold was.
    pub trained: Option<u32>,
    /// Whether the race stopped the folds (only with `trained`).
    pub raced: bool,
}

/// A validation protocol as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A held-out share of the examples, in percent.
    Split {
        /// The share held out, in percent of the examples.
        percent: u32,
    },
    /// Cross-validation.
    KFold(KFold),
}

impl Protocol {
    /// Reads a recorded protocol; `None` for a string of another grammar (an older store's, or
    /// a hand-edited one), which readers show as it is and count as no k-fold.
    pub fn parse(text: &str) -> Option<Protocol> {
        if let Some(share) = text.strip_prefix("split ") {
            let percent = share.strip_suffix('%')?.parse().ok()?;
            return Some(Protocol::Split { percent });
        }
        let (head, tail) = match text.split_once(", ") {
            Some((head, tail)) => (head, Some(tail)),
            None => (text, None),
        };
        let (folds, rest) = head.split_once("-fold")?;
        let folds: u32 = folds.parse().ok().filter(|&folds| folds >= 2)?;
        let (stratified, rest) = match rest.strip_prefix(" stratified") {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        let repeats = match rest {
            "" => 1,
            rest => rest
                .strip_prefix(" x")?
                .parse()
                .ok()
                .filter(|&repeats| repeats >= 2)?,
        };
        let (trained, raced) = match tail {
            None => (None, false),
            Some(tail) => {
                let (trained, raced) = match tail.strip_suffix(", raced") {
                    Some(trained) => (trained, true),
                    None => (tail, false),
                };
                let (count, noun) = trained.split_once(' ')?;
                let count: u32 = count.parse().ok().filter(|&count| count >= 1)?;
                let expected = if count == 1 {
                    "fold trained"
                } else {
                    "folds trained"
                };
                if noun != expected {
                    return None;
                }
                (Some(count), raced)
            }
        };
        Some(Protocol::KFold(KFold {
            folds,
            stratified,
            repeats,
            trained,
            raced,
        }))
    }

    /// The folds a k-fold run's mean quality is over, counted once per partition (a repeated
    /// k-fold's repeats reuse the same examples, so `std / sqrt(folds)` stays the cautious
    /// standard error): the folds trained when fewer than all; `None` under the split.
    pub fn measured_folds(&self) -> Option<u32> {
        match self {
            Protocol::Split { .. } => None,
            Protocol::KFold(k_fold) => Some(k_fold.trained.unwrap_or(k_fold.folds)),
        }
    }

    /// Whether the race stopped the run's folds below the app's best run.
    pub fn is_raced(&self) -> bool {
        matches!(self, Protocol::KFold(KFold { raced: true, .. }))
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protocol::Split { percent } => write!(f, "split {percent}%"),
            Protocol::KFold(k_fold) => {
                write!(f, "{}-fold", k_fold.folds)?;
                if k_fold.stratified {
                    f.write_str(" stratified")?;
                }
                if k_fold.repeats > 1 {
                    write!(f, " x{}", k_fold.repeats)?;
                }
                if let Some(trained) = k_fold.trained {
                    let noun = if trained == 1 { "fold" } else { "folds" };
                    write!(f, ", {trained} {noun} trained")?;
                    if k_fold.raced {
                        f.write_str(", raced")?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k_fold(folds: u32, stratified: bool, repeats: u32, trained: Option<u32>) -> KFold {
        KFold {
            folds,
            stratified,
            repeats,
            trained,
            raced: false,
        }
    }

    #[test]
    fn every_shape_reads_back_as_written() {
        let mut shapes = vec![Protocol::Split { percent: 20 }];
        for stratified in [false, true] {
            for repeats in [1, 3] {
                for trained in [None, Some(1), Some(2)] {
                    for raced in [false, true] {
                        if raced && trained.is_none() {
                            continue;
                        }
                        shapes.push(Protocol::KFold(KFold {
                            raced,
                            ..k_fold(5, stratified, repeats, trained)
                        }));
                    }
                }
            }
        }
        for shape in shapes {
            let text = shape.to_string();
            assert_eq!(Protocol::parse(&text), Some(shape), "{text}");
        }
    }

    #[test]
    fn the_recorded_strings_read_as_they_always_have() {
        assert_eq!(
            Protocol::parse("split 20%"),
            Some(Protocol::Split { percent: 20 })
        );
        assert_eq!(
            Protocol::parse("5-fold stratified x3"),
            Some(Protocol::KFold(k_fold(5, true, 3, None)))
        );
        let raced = Protocol::parse("5-fold stratified, 1 fold trained, raced").unwrap();
        assert!(raced.is_raced());
        assert_eq!(raced.measured_folds(), Some(1));
        assert!(
            !Protocol::parse("5-fold stratified, 1 fold trained")
                .unwrap()
                .is_raced()
        );
        assert!(!Protocol::parse("5-fold stratified x3").unwrap().is_raced());
    }

    #[test]
    fn the_measured_folds_are_the_trained_ones_counted_once_per_partition() {
        let folds = |text| Protocol::parse(text).and_then(|p| p.measured_folds());
        assert_eq!(folds("5-fold stratified"), Some(5));
        assert_eq!(folds("5-fold stratified x3"), Some(5));
        assert_eq!(folds("4-fold x2"), Some(4));
        assert_eq!(folds("10-fold"), Some(10));
        assert_eq!(folds("split 20%"), None);
        assert_eq!(folds("5-fold stratified, 2 folds trained"), Some(2));
        assert_eq!(folds("5-fold, 1 fold trained"), Some(1));
        assert_eq!(folds("5-fold stratified, 2 folds trained, raced"), Some(2));
    }

    #[test]
    fn other_grammars_read_as_nothing() {
        for text in [
            "",
            "1-fold",
            "x-fold",
            "5-fold, some folds trained",
            "5-fold, 0 folds trained",
            "5-fold, 2 fold trained",
            "5-fold x1",
            "5-fold xx",
            "5-fold shuffled",
            "split twenty",
            "split 20",
            "5-fold, 2 folds trained, raced, again",
            "something else",
        ] {
            assert_eq!(Protocol::parse(text), None, "{text:?}");
        }
    }
}
