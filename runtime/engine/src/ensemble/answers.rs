//! A run's validation answers as one store blob (`runs.oof_sha256`): what ensembles are selected
//! over. The trainer's [`OutOfFold`] (answers by example row) becomes answers by example id,
//! with the truth they are scored against, rows sorted by id so that two runs' blobs line up.
//!
//! **The bound**: at most [`MAX_ANSWER_VALUES`] answer values a run (4 MiB of `f32`; the truth of
//! value outputs as many again). A run with more (a large app, or many classes) keeps the rows
//! whose ids hash lowest, the same rows for every run of the data version, so its ensembles are
//! selected on a deterministic sample of the validation rows.
//!
//! Layout: the 7 bytes `EMOOF1\n`, a JSON header's length as a little-endian `u32`, the header
//! (`{"classes": bool, "width": w, "rows": n}`), then `n` ids (`u64`), the truth (`n` class
//! indices as `i64`, or `n * w` values as `f32`) and the answers (`n * w` `f32`), little-endian.

use easeml_trainer::{Examples, OutOfFold, Targets};
use serde::{Deserialize, Serialize};

use super::select::Truth;
use crate::error::{Error, Result};
use crate::framed::{Unframed, frame, unframe};

const MAGIC: &[u8; 7] = b"EMOOF1\n";

/// The most answer values a run keeps (see the module documentation).
pub const MAX_ANSWER_VALUES: usize = 1 << 20;

/// A run's validation answers by example id.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// The example ids, ascending.
    pub ids: Vec<u64>,
    /// Values per row.
    pub width: usize,
    /// The truth.
    pub truth: Truth,
    /// `ids.len() * width` answers: class probabilities or values.
    pub values: Vec<f32>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    classes: bool,
    width: usize,
    rows: usize,
}

/// The order rows are kept in past the bound: a fixed mix of the id.
fn id_hash(id: u64) -> u64 {
    let mut z = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Answers {
    /// The answers of `oof` over `examples` (the run's), bounded; `None` for targets that are not
    /// classes or values, or answers that do not fit them.
    pub fn of(oof: &OutOfFold, examples: &Examples) -> Option<Answers> {
        let width = oof.width;
        if width == 0 || oof.values.len() != oof.rows.len() * width {
            return None;
        }
        let mut order: Vec<usize> = (0..oof.rows.len()).collect();
        let keep = (MAX_ANSWER_VALUES / width).max(1);
        if order.len() > keep {
            order.sort_by_key(|&index| id_hash(examples.ids[oof.rows[index]]));
            order.truncate(keep);
        }
        order.sort_by_key(|&index| examples.ids[oof.rows[index]]);
        let ids = order.iter().map(|&i| examples.ids[oof.rows[i]]).collect();
        let values = order.iter().flat_map(|&i| oof.row(i).to_vec()).collect();
        let truth = match &examples.targets {
            Targets::Classes { labels, .. } => {
                Truth::Classes(order.iter().map(|&i| labels[oof.rows[i]]).collect())
            }
            Targets::Dense { values: truth, .. } => {
                if truth.len() != examples.len() * width {
                    return None;
                }
                Truth::Values(
                    order
                        .iter()
                        .flat_map(|&i| {
                            let row = oof.rows[i];
                            truth[row * width..(row + 1) * width].to_vec()
                        })
                        .collect(),
                )
            }
            _ => return None,
        };
        Some(Answers {
            ids,
            width,
            truth,
            values,
        })
    }

    /// The blob.
    pub fn encode(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&Header {
            classes: matches!(self.truth, Truth::Classes(_)),
            width: self.width,
            rows: self.ids.len(),
        })
        .unwrap_or_default();
        let mut bytes = frame(MAGIC, &header, self.values.len() * 8).unwrap_or_default();
        for id in &self.ids {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        match &self.truth {
            Truth::Classes(labels) => labels
                .iter()
                .for_each(|label| bytes.extend_from_slice(&label.to_le_bytes())),
            Truth::Values(values) => values
                .iter()
                .for_each(|value| bytes.extend_from_slice(&value.to_le_bytes())),
        }
        for value in &self.values {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes
    }

    /// Reads a blob written by [`Answers::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Answers> {
        let bad = |what: &str| Error::Checkpoint(format!("not a run's validation answers: {what}"));
        let (header, mut rest) = unframe(bytes, MAGIC).map_err(|why| {
            bad(match why {
                Unframed::WrongMagic => "wrong magic bytes",
                Unframed::NoLength | Unframed::ShortHeader => "truncated header",
            })
        })?;
        let header: Header =
            serde_json::from_slice(header).map_err(|error| bad(&error.to_string()))?;
        let (rows, width) = (header.rows, header.width);
        let answer_values = rows
            .checked_mul(width)
            .filter(|&count| count <= MAX_ANSWER_VALUES && width > 0)
            .ok_or_else(|| bad("more answers than the bound"))?;
        let truth_bytes = if header.classes {
            rows * 8
        } else {
            answer_values * 4
        };
        if rest.len() != rows * 8 + truth_bytes + answer_values * 4 {
            return Err(bad("its length does not match its header"));
        }
        let mut take = |count: usize| {
            let (head, tail) = rest.split_at(count);
            rest = tail;
            head
        };
        let ids = take(rows * 8)
            .chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap_or_default()))
            .collect();
        let floats = |bytes: &[u8]| -> Vec<f32> {
            bytes
                .chunks_exact(4)
                .map(|chunk| f32::from_le_bytes(chunk.try_into().unwrap_or_default()))
                .collect()
        };
        let truth = if header.classes {
            Truth::Classes(
                take(rows * 8)
                    .chunks_exact(8)
                    .map(|chunk| i64::from_le_bytes(chunk.try_into().unwrap_or_default()))
                    .collect(),
            )
        } else {
            Truth::Values(floats(take(answer_values * 4)))
        };
        let values = floats(take(answer_values * 4));
        Ok(Answers {
            ids,
            width,
            truth,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_trainer::Inputs;

    fn examples(n: usize, classes: i64) -> Examples {
        Examples {
            ids: (0..n as u64).map(|i| 100 + i).collect(),
            inputs: Inputs::Dense {
                shape: vec![1],
                values: vec![0.0; n],
            },
            targets: Targets::Classes {
                n_classes: classes,
                labels: (0..n as i64).map(|i| i % classes).collect(),
            },
        }
    }

    #[test]
    fn answers_round_trip_sorted_by_id() {
        let examples = examples(3, 2);
        let oof = OutOfFold {
            rows: vec![2, 0, 1],
            width: 2,
            values: vec![0.1, 0.9, 0.8, 0.2, 0.3, 0.7],
        };
        let answers = Answers::of(&oof, &examples).unwrap();
        assert_eq!(answers.ids, vec![100, 101, 102]);
        assert_eq!(answers.values, vec![0.8, 0.2, 0.3, 0.7, 0.1, 0.9]);
        assert_eq!(answers.truth, Truth::Classes(vec![0, 1, 0]));
        assert_eq!(Answers::decode(&answers.encode()).unwrap(), answers);
        assert!(Answers::decode(b"EMOOF1\n").is_err());
    }

    #[test]
    fn past_the_bound_the_same_rows_are_kept_for_every_run() {
        // 1000 classes: the bound keeps 1048 rows of 1500.
        let n = 1500;
        let examples = examples(n, 1000);
        let oof = |shift: f32| OutOfFold {
            rows: (0..n).rev().collect(),
            width: 1000,
            values: vec![shift; n * 1000],
        };
        let first = Answers::of(&oof(0.1), &examples).unwrap();
        let second = Answers::of(&oof(0.2), &examples).unwrap();
        assert_eq!(first.ids.len(), MAX_ANSWER_VALUES / 1000);
        assert!(first.values.len() <= MAX_ANSWER_VALUES);
        assert_eq!(first.ids, second.ids);
        assert!(first.ids.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
