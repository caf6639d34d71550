//! Training data: examples with stable ids, inputs and targets.
//!
//! Every kind of data lives in one contiguous buffer (dense values, sequence values with offsets,
//! trees, byte strings); batches are assembled on the fly from example indices, so a run never holds
//! each example as a separate tensor.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::error::{Error, Result};

/// A tree: a value vector at each node and ordered children (the recursive part of a schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// The node's value (its declared tensor shape flattened; the same length at every node).
    pub value: Vec<f32>,
    /// The children, in order.
    pub children: Vec<Tree>,
}

impl Tree {
    /// A node without children.
    pub fn leaf(value: Vec<f32>) -> Self {
        Self {
            value,
            children: Vec::new(),
        }
    }

    /// A node with children.
    pub fn node(value: Vec<f32>, children: Vec<Tree>) -> Self {
        Self { value, children }
    }

    /// The number of nodes.
    pub fn n_nodes(&self) -> usize {
        1 + self.children.iter().map(Tree::n_nodes).sum::<usize>()
    }

    /// The height (a leaf has height 0).
    pub fn height(&self) -> usize {
        self.children
            .iter()
            .map(|child| child.height() + 1)
            .max()
            .unwrap_or(0)
    }
}

/// Variable-length sequences of equal-size steps, stored back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequences {
    /// The size of one step (`A` in `Tensor[A]`).
    pub step: i64,
    /// All steps of all sequences, back to back (`sum(lengths) * step` values).
    pub values: Vec<f32>,
    /// `offsets[i]..offsets[i + 1]` are the steps of sequence `i` (so `n + 1` entries, starting at 0).
    pub offsets: Vec<usize>,
}

impl Sequences {
    /// Builds the buffer from one `Vec` of steps per sequence.
    pub fn from_nested(step: i64, sequences: &[Vec<Vec<f32>>]) -> Result<Self> {
        let mut values = Vec::new();
        let mut offsets = vec![0];
        for sequence in sequences {
            for item in sequence {
                if item.len() as i64 != step {
                    return Err(Error::BadExamples(format!(
                        "a sequence step has {} values, expected {step}",
                        item.len()
                    )));
                }
                values.extend_from_slice(item);
            }
            offsets.push(offsets.last().copied().unwrap_or(0) + sequence.len());
        }
        Ok(Self {
            step,
            values,
            offsets,
        })
    }

    /// The number of sequences, after checking that the offsets match the values.
    pub fn checked_len(&self) -> Result<usize> {
        if self.step < 1 {
            return Err(Error::BadExamples(
                "sequence steps must have at least one value".into(),
            ));
        }
        let offsets_ok = self.offsets.first() == Some(&0)
            && self.offsets.windows(2).all(|pair| pair[0] <= pair[1])
            && self.offsets.last().copied().unwrap_or(0) * self.step as usize == self.values.len();
        if !offsets_ok {
            return Err(Error::BadExamples(
                "sequence offsets do not match the values".into(),
            ));
        }
        Ok(self.len())
    }

    /// The number of sequences.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True when there is no sequence.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of steps of sequence `index`.
    pub fn length(&self, index: usize) -> usize {
        self.offsets[index + 1] - self.offsets[index]
    }

    /// The steps of sequence `index`, flattened.
    pub fn steps(&self, index: usize) -> &[f32] {
        let step = self.step as usize;
        &self.values[self.offsets[index] * step..self.offsets[index + 1] * step]
    }

    /// Zero-padded batch `[B, T, step]` (T = the longest, at least 1) and the lengths `[B]`.
    pub fn padded_batch(&self, indices: &[usize], device: Device) -> (Tensor, Vec<i64>) {
        let step = self.step as usize;
        let max_len = indices
            .iter()
            .map(|&index| self.length(index))
            .max()
            .unwrap_or(0)
            .max(1);
        let mut buffer = vec![0f32; indices.len() * max_len * step];
        let mut lengths = Vec::with_capacity(indices.len());
        for (row, &index) in indices.iter().enumerate() {
            let steps = self.steps(index);
            let start = row * max_len * step;
            buffer[start..start + steps.len()].copy_from_slice(steps);
            lengths.push(self.length(index) as i64);
        }
        let tensor = Tensor::from_slice(&buffer)
            .view([indices.len() as i64, max_len as i64, self.step])
            .to_device(device);
        (tensor, lengths)
    }
}

/// The inputs of all examples.
#[derive(Debug, Clone, PartialEq)]
pub enum Inputs {
    /// Fixed-shape tensors (`Tensor[A,B,C]` images, `Tensor[A]` rows), values in row-major order.
    Dense {
        /// The declared shape of one input.
        shape: Vec<i64>,
        /// `n * prod(shape)` values.
        values: Vec<f32>,
    },
    /// Time series: one sequence of `Tensor[A]` per example.
    Sequences(Sequences),
    /// Trees with a `Tensor[A]` value per node.
    Trees {
        /// The size of a node's value.
        node: i64,
        /// One tree per example.
        trees: Vec<Tree>,
    },
    /// Anything else, serialized to bytes (the general templates' bit-level models).
    Bytes(Vec<Vec<u8>>),
}

impl Inputs {
    /// Whether these inputs are a table: one `Tensor[A]` row of features per example (the
    /// tabular tasks' inputs: [`crate::task::Task::is_tabular`] of `Task::of` agrees, checked by
    /// the test `a_table_is_what_the_tabular_tasks_take` in `tests/run.rs`).
    pub fn is_table(&self) -> bool {
        matches!(self, Inputs::Dense { shape, .. } if shape.len() == 1)
    }

    /// The number of inputs, after checking that shapes and buffers agree (every tree node has the
    /// declared size, dense buffers hold whole inputs, sequence offsets are in range).
    pub fn checked_len(&self) -> Result<usize> {
        let bad = |message: String| Err(Error::BadExamples(message));
        Ok(match self {
            Inputs::Dense { shape, values } => {
                if shape.is_empty() || shape.iter().any(|&dim| dim < 1) {
                    return bad(format!("input shape {shape:?} has a dimension below 1"));
                }
                if values.len() % numel(shape) != 0 {
                    return bad("the dense input values are not a whole number of inputs".into());
                }
                values.len() / numel(shape)
            }
            Inputs::Sequences(sequences) => sequences.checked_len()?,
            Inputs::Trees { node, trees } => {
                if *node < 1 {
                    return bad("tree nodes must have at least one value".into());
                }
                if let Some(tree) = trees.iter().find(|tree| !tree_values_have(tree, *node)) {
                    return bad(format!(
                        "a tree node does not have {node} values (in the tree rooted at {:?})",
                        tree.value
                    ));
                }
                trees.len()
            }
            Inputs::Bytes(bytes) => bytes.len(),
        })
    }
}

/// The targets of all examples.
#[derive(Debug, Clone, PartialEq)]
pub enum Targets {
    /// Class indices in `0..n_classes`.
    Classes {
        /// The number of classes (`D` in `Tensor[D]`).
        n_classes: i64,
        /// One label per example.
        labels: Vec<i64>,
    },
    /// Fixed-shape real-valued outputs (regression, image recovery).
    Dense {
        /// The declared shape of one output.
        shape: Vec<i64>,
        /// `n * prod(shape)` values.
        values: Vec<f32>,
    },
    /// One output sequence per example (translation).
    Sequences(Sequences),
    /// One byte string per example, the encoded output (the general auto-encoder maps the input's
    /// bytes to these; an app whose output is its input reconstructs it).
    Bytes(Vec<Vec<u8>>),
}

/// A set of examples, each with a stable id (the split into training and validation is by id).
#[derive(Debug, Clone, PartialEq)]
pub struct Examples {
    /// One id per example.
    pub ids: Vec<u64>,
    /// The inputs.
    pub inputs: Inputs,
    /// The targets.
    pub targets: Targets,
}

/// The number of values of one tensor of `shape`.
pub(crate) fn numel(shape: &[i64]) -> usize {
    shape.iter().map(|&dim| dim.max(0) as usize).product()
}

impl Examples {
    /// The number of examples.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there is no example.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The bytes the examples take in memory (their values, labels and ids; not the allocators'
    /// overhead): what a worker holds when it keeps the app's data, for the choice between
    /// model hopper and task parallelism.
    pub fn bytes(&self) -> usize {
        const F32: usize = std::mem::size_of::<f32>();
        fn sequences(sequences: &Sequences) -> usize {
            sequences.values.len() * F32 + sequences.offsets.len() * std::mem::size_of::<usize>()
        }
        let inputs = match &self.inputs {
            Inputs::Dense { values, .. } => values.len() * F32,
            Inputs::Sequences(values) => sequences(values),
            Inputs::Trees { node, trees } => {
                let nodes: usize = trees.iter().map(Tree::n_nodes).sum();
                nodes * (*node).max(0) as usize * F32
            }
            Inputs::Bytes(bytes) => bytes.iter().map(Vec::len).sum(),
        };
        let targets = match &self.targets {
            Targets::Classes { labels, .. } => labels.len() * std::mem::size_of::<i64>(),
            Targets::Dense { values, .. } => values.len() * F32,
            Targets::Sequences(values) => sequences(values),
            Targets::Bytes(bytes) => bytes.iter().map(Vec::len).sum(),
        };
        inputs + targets + self.ids.len() * std::mem::size_of::<u64>()
    }

    /// Ids `0..n`, for data made in tests and examples.
    pub fn sequential_ids(n: usize) -> Vec<u64> {
        (0..n as u64).collect()
    }

    /// Checks that every part has one entry per example and that labels and shapes are in range.
    pub fn validate(&self) -> Result<()> {
        let n = self.len();
        let bad = |message: String| Err(Error::BadExamples(message));
        if n == 0 {
            return bad("no examples".into());
        }
        let n_inputs = self.inputs.checked_len()?;
        if n_inputs != n {
            return bad(format!("{n} ids but {n_inputs} inputs"));
        }
        let n_targets = match &self.targets {
            Targets::Classes { n_classes, labels } => {
                if *n_classes < 1 {
                    return bad("at least one class is needed".into());
                }
                if let Some(label) = labels
                    .iter()
                    .find(|&&label| label < 0 || label >= *n_classes)
                {
                    return bad(format!("label {label} is outside 0..{n_classes}"));
                }
                labels.len()
            }
            Targets::Dense { shape, values } => {
                if shape.is_empty() || shape.iter().any(|&dim| dim < 1) {
                    return bad(format!("output shape {shape:?} has a dimension below 1"));
                }
                if values.len() % numel(shape) != 0 {
                    return bad("the dense target values are not a whole number of outputs".into());
                }
                values.len() / numel(shape)
            }
            Targets::Sequences(sequences) => Inputs::Sequences(sequences.clone()).checked_len()?,
            Targets::Bytes(bytes) => {
                if !matches!(self.inputs, Inputs::Bytes(_)) {
                    return bad("byte targets need byte inputs".into());
                }
                bytes.len()
            }
        };
        if n_targets != n {
            return bad(format!("{n} ids but {n_targets} targets"));
        }
        Ok(())
    }
}

fn tree_values_have(tree: &Tree, node: i64) -> bool {
    tree.value.len() as i64 == node
        && tree
            .children
            .iter()
            .all(|child| tree_values_have(child, node))
}

/// Gathers rows of a dense buffer (`row_len` values each) into one tensor `[B, shape...]` on
/// `device`, in one copy (`native::gather_rows`); for a GPU into page-locked host memory, copied
/// without blocking the host (the copy runs in stream order before any kernel that reads it).
/// Panics, as tch's own operators do, if libtorch fails or an index lies outside `values`.
pub(crate) fn dense_batch(
    values: &[f32],
    shape: &[i64],
    indices: &[usize],
    device: Device,
) -> Tensor {
    let row_len = numel(shape);
    let mut dims = vec![indices.len() as i64];
    dims.extend_from_slice(shape);
    let batch = crate::native::gather_rows(values, row_len, indices, device.is_cuda())
        .unwrap_or_else(|error| panic!("{error}"))
        .view(dims.as_slice());
    if device.is_cuda() {
        batch.to_device_(device, Kind::Float, true, false)
    } else {
        batch.to_device(device)
    }
}

/// Class labels of a batch as an int64 tensor.
pub(crate) fn label_batch(labels: &[i64], indices: &[usize], device: Device) -> Tensor {
    let batch: Vec<i64> = indices.iter().map(|&index| labels[index]).collect();
    Tensor::from_slice(&batch)
        .to_kind(Kind::Int64)
        .to_device(device)
}

/// A 64-bit mix of an id (splitmix64), for the deterministic split and shuffles.
pub(crate) fn mix64(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    value ^ (value >> 31)
}

/// Whether [`split_by_id`]'s hash rule puts the example with id `id` in validation (the split
/// itself also moves one example when a part would be empty).
pub fn hashed_to_validation(id: u64, validation_fraction: f64) -> bool {
    let threshold = (validation_fraction.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
    mix64(id) < threshold
}

/// The deterministic train/validation split: an example is in validation when the hash of its id
/// falls in the lowest `validation_fraction` of the range. Both parts are non-empty when there are at
/// least two examples.
pub fn split_by_id(ids: &[u64], validation_fraction: f64) -> (Vec<usize>, Vec<usize>) {
    let (mut validation, mut train): (Vec<usize>, Vec<usize>) =
        (0..ids.len()).partition(|&index| hashed_to_validation(ids[index], validation_fraction));
    if ids.len() >= 2 {
        if validation.is_empty() {
            if let Some(moved) = take_lowest_hash(&mut train, ids) {
                validation.push(moved);
            }
        } else if train.is_empty()
            && let Some(moved) = take_lowest_hash(&mut validation, ids)
        {
            train.push(moved);
        }
    }
    (train, validation)
}

/// The deterministic k-fold partition: `folds` disjoint validation sets covering every example
/// once (fold `f` trains on the others). Examples are ordered by the hash of their id (as in
/// [`split_by_id`]) and dealt to the folds in turn; with `class_of` (classification) they are
/// dealt class by class, the dealing carrying on from one class to the next, so every fold holds
/// each class in proportion (within one example) and the folds' sizes differ by at most one. The
/// fold count is at most the number of examples; each returned fold is non-empty.
///
/// `repeat` picks the partition of a repeated k-fold: 0 hashes the ids themselves (the partition
/// of a k-fold run that is not repeated), each other value the ids salted by it, another
/// partition with the same properties.
pub fn k_folds(
    ids: &[u64],
    folds: usize,
    class_of: Option<&[i64]>,
    repeat: u64,
) -> Vec<Vec<usize>> {
    let folds = folds.min(ids.len()).max(1);
    let salt = if repeat == 0 { 0 } else { mix64(repeat) };
    let mut order: Vec<usize> = (0..ids.len()).collect();
    // By class first (when stratified), then by the hash of the (salted) id; the id breaks ties.
    order.sort_by_key(|&index| {
        (
            class_of.map_or(0, |classes| classes[index]),
            mix64(ids[index] ^ salt),
            ids[index],
        )
    });
    let mut partition = vec![Vec::new(); folds];
    for (position, &index) in order.iter().enumerate() {
        partition[position % folds].push(index);
    }
    for fold in &mut partition {
        fold.sort_unstable();
    }
    partition
}

fn take_lowest_hash(indices: &mut Vec<usize>, ids: &[u64]) -> Option<usize> {
    let position = (0..indices.len()).min_by_key(|&position| mix64(ids[indices[position]]))?;
    Some(indices.remove(position))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_count_their_bytes_by_what_they_hold() {
        // 3 examples of 4 floats and a label each: 3 x (16 + 8 + 8) bytes.
        let dense = Examples {
            ids: Examples::sequential_ids(3),
            inputs: Inputs::Dense {
                shape: vec![4],
                values: vec![0.0; 12],
            },
            targets: Targets::Classes {
                n_classes: 2,
                labels: vec![0, 1, 0],
            },
        };
        assert_eq!(dense.bytes(), 3 * (16 + 8 + 8));
        // Two byte strings of 5 and 7 bytes to themselves.
        let bytes = Examples {
            ids: Examples::sequential_ids(2),
            inputs: Inputs::Bytes(vec![vec![1; 5], vec![2; 7]]),
            targets: Targets::Bytes(vec![vec![1; 5], vec![2; 7]]),
        };
        assert_eq!(bytes.bytes(), 2 * 12 + 2 * 8);
        // A tree of three nodes of 2 floats: 24 bytes of values.
        let tree = Tree::node(
            vec![0.0; 2],
            vec![Tree::leaf(vec![0.0; 2]), Tree::leaf(vec![0.0; 2])],
        );
        let trees = Examples {
            ids: Examples::sequential_ids(1),
            inputs: Inputs::Trees {
                node: 2,
                trees: vec![tree],
            },
            targets: Targets::Classes {
                n_classes: 2,
                labels: vec![1],
            },
        };
        assert_eq!(trees.bytes(), 24 + 8 + 8);
    }

    #[test]
    fn split_is_deterministic_and_by_id() {
        let ids: Vec<u64> = (0..1000).collect();
        let (train, validation) = split_by_id(&ids, 0.2);
        assert_eq!(train.len() + validation.len(), 1000);
        assert!(
            (150..250).contains(&validation.len()),
            "{}",
            validation.len()
        );
        // The same id lands on the same side whatever the order and the other ids.
        let reversed: Vec<u64> = ids.iter().rev().copied().collect();
        let (_, validation_reversed) = split_by_id(&reversed, 0.2);
        let mut a: Vec<u64> = validation.iter().map(|&i| ids[i]).collect();
        let mut b: Vec<u64> = validation_reversed.iter().map(|&i| reversed[i]).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        let (train, validation) = split_by_id(&[7, 8], 0.0);
        assert_eq!((train.len(), validation.len()), (1, 1));
    }

    #[test]
    fn folds_are_stratified_deterministic_and_cover_every_example_once() {
        let ids: Vec<u64> = (100..150).collect();
        // 30 of class 0, 15 of class 1, 5 of class 2.
        let classes: Vec<i64> = (0..50)
            .map(|i| {
                if i < 30 {
                    0
                } else if i < 45 {
                    1
                } else {
                    2
                }
            })
            .collect();
        let folds = k_folds(&ids, 5, Some(&classes), 0);
        assert_eq!(folds.len(), 5);
        let mut seen: Vec<usize> = folds.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        for fold in &folds {
            assert_eq!(fold.len(), 10);
            let count = |class: i64| fold.iter().filter(|&&row| classes[row] == class).count();
            assert_eq!((count(0), count(1), count(2)), (6, 3, 1));
        }
        // The same ids in another order give the same folds (as sets of ids).
        let reversed_ids: Vec<u64> = ids.iter().rev().copied().collect();
        let reversed_classes: Vec<i64> = classes.iter().rev().copied().collect();
        let again = k_folds(&reversed_ids, 5, Some(&reversed_classes), 0);
        let as_ids = |folds: &[Vec<usize>], ids: &[u64]| -> Vec<Vec<u64>> {
            let mut sets: Vec<Vec<u64>> = folds
                .iter()
                .map(|fold| {
                    let mut set: Vec<u64> = fold.iter().map(|&row| ids[row]).collect();
                    set.sort_unstable();
                    set
                })
                .collect();
            sets.sort();
            sets
        };
        assert_eq!(as_ids(&folds, &ids), as_ids(&again, &reversed_ids));
        // Another repeat: another partition, as stratified, as complete, as deterministic.
        for repeat in [1, 2] {
            let other = k_folds(&ids, 5, Some(&classes), repeat);
            assert_ne!(
                as_ids(&other, &ids),
                as_ids(&folds, &ids),
                "repeat {repeat}"
            );
            assert_eq!(other, k_folds(&ids, 5, Some(&classes), repeat));
            let mut seen: Vec<usize> = other.iter().flatten().copied().collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..50).collect::<Vec<_>>());
            for fold in &other {
                let count = |class: i64| fold.iter().filter(|&&row| classes[row] == class).count();
                assert_eq!((count(0), count(1), count(2)), (6, 3, 1));
            }
        }
        assert_ne!(
            as_ids(&k_folds(&ids, 5, Some(&classes), 1), &ids),
            as_ids(&k_folds(&ids, 5, Some(&classes), 2), &ids)
        );
        // Unstratified: by id alone; never more folds than examples.
        let plain = k_folds(&ids[..3], 5, None, 0);
        assert_eq!(plain.len(), 3);
        assert!(plain.iter().all(|fold| fold.len() == 1));
    }

    #[test]
    fn padded_batches() {
        let sequences = Sequences::from_nested(
            2,
            &[vec![vec![1.0, 2.0]], vec![vec![3.0, 4.0], vec![5.0, 6.0]]],
        )
        .unwrap();
        let (batch, lengths) = sequences.padded_batch(&[1, 0], Device::Cpu);
        assert_eq!(batch.size(), vec![2, 2, 2]);
        assert_eq!(lengths, vec![2, 1]);
        let flat: Vec<f32> = Vec::try_from(batch.flatten(0, -1)).unwrap();
        assert_eq!(flat, vec![3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 0.0, 0.0]);
    }
}
