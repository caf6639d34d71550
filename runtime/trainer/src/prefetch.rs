//! Batches assembled ahead of the step that uses them (issue 47, item 4): a scoped thread gathers
//! the next batches' inputs and targets from the examples while the step's thread trains on the
//! current one, so gathering (a copy of every value of the batch, 77 MB for 128 images of
//! 224x224x3) is off the training step's path.
//!
//! On the CPU the thread builds each batch where the step uses it. On CUDA it builds it in host
//! memory, page-locked ("pinned"), and the step's thread moves it with a non-blocking copy, which
//! the GPU runs in order with the step's kernels while the host goes on (the host allocator keeps
//! a pinned buffer until the copies from it are done, so dropping the host batch early is safe).
//!
//! Invariants: the batches come in the order of `chunks`, each exactly what
//! [`crate::batch::example_batch`] builds for its rows (the producer draws nothing at random, so a
//! run is the same with or without it: `tests/run.rs` checks runs bit for bit against a fixed
//! seed); at most [`AHEAD`] batches wait at once (bounded memory); a consumer that stops early
//! (deadline, failure) ends the producer at its next batch, and the scope joins it before
//! returning.

use std::sync::mpsc;

use tch::{Device, Tensor};

use crate::batch::{TargetBatch, example_batch};
use crate::data::Examples;
use crate::models::tree::FlatTrees;
use crate::models::{BatchInput, ModelConfig};
use crate::task::Task;

/// Batches gathered ahead of the one being trained on (besides the one the producer is building).
pub(crate) const AHEAD: usize = 2;

/// What the producer needs to build the batches of one pass.
#[derive(Clone, Copy)]
pub(crate) struct BatchMaker<'a> {
    pub(crate) examples: &'a Examples,
    pub(crate) task: &'a Task,
    pub(crate) config: &'a ModelConfig,
    pub(crate) device: Device,
}

impl BatchMaker<'_> {
    /// Runs `body` with an iterator over the batches of `chunks` (each chunk a batch's rows, in
    /// order), built `AHEAD` of its use by a thread of their own.
    pub(crate) fn prefetched<'c, R>(
        self,
        chunks: impl Iterator<Item = &'c [usize]> + Send,
        body: impl FnOnce(&mut dyn Iterator<Item = (&'c [usize], BatchInput, TargetBatch)>) -> R,
    ) -> R {
        let staging = staging_device(self.device);
        std::thread::scope(|scope| {
            let (sender, receiver) = mpsc::sync_channel(AHEAD);
            scope.spawn(move || {
                for rows in chunks {
                    let (input, targets) =
                        example_batch(self.examples, self.task, self.config, rows, staging);
                    let staged = (
                        rows,
                        pinned_input(input, self.device),
                        pinned_targets(targets, self.device),
                    );
                    if sender.send(staged).is_err() {
                        // The consumer stopped early.
                        return;
                    }
                }
            });
            let device = self.device;
            let mut batches = receiver.into_iter().map(move |(rows, input, targets)| {
                (rows, input_to(input, device), targets_to(targets, device))
            });
            body(&mut batches)
        })
    }
}

/// Where the producer builds a batch: in host memory for a CUDA step (pinned, then copied without
/// blocking), else on the step's device.
fn staging_device(device: Device) -> Device {
    if device.is_cuda() {
        Device::Cpu
    } else {
        device
    }
}

/// A host tensor in pinned memory when it is bound for `device` (CUDA); as it is otherwise.
fn pinned(tensor: Tensor, device: Device) -> Tensor {
    if device.is_cuda() && tensor.device() == Device::Cpu {
        tensor.pin_memory(device)
    } else {
        tensor
    }
}

/// `tensor` on `device`, copied without blocking the host (from pinned memory) when it is not there.
fn moved(tensor: Tensor, device: Device) -> Tensor {
    if tensor.device() == device {
        tensor
    } else {
        tensor.to_device_(device, tensor.kind(), true, false)
    }
}

/// Applies `each` to every tensor of a batch's input.
fn map_input(input: BatchInput, each: &dyn Fn(Tensor) -> Tensor) -> BatchInput {
    match input {
        BatchInput::Dense(values) => BatchInput::Dense(each(values)),
        BatchInput::Sequences {
            values,
            lengths,
            output_steps,
        } => BatchInput::Sequences {
            values: each(values),
            lengths,
            output_steps,
        },
        BatchInput::Trees(trees) => BatchInput::Trees(FlatTrees {
            values: each(trees.values),
            levels: trees
                .levels
                .into_iter()
                .map(|(nodes, parents)| (each(nodes), each(parents)))
                .collect(),
            roots: each(trees.roots),
            n_nodes: trees.n_nodes,
        }),
        BatchInput::PaddedSequences { values, lengths } => BatchInput::PaddedSequences {
            values: each(values),
            lengths: each(lengths),
        },
    }
}

/// Applies `each` to every tensor of a batch's targets.
fn map_targets(targets: TargetBatch, each: &dyn Fn(Tensor) -> Tensor) -> TargetBatch {
    match targets {
        TargetBatch::Classes(classes) => TargetBatch::Classes(each(classes)),
        TargetBatch::Dense(values) => TargetBatch::Dense(each(values)),
        TargetBatch::Bits(bits) => TargetBatch::Bits(each(bits)),
        TargetBatch::Sequences {
            values,
            mask,
            continues,
        } => TargetBatch::Sequences {
            values: each(values),
            mask: each(mask),
            continues: each(continues),
        },
    }
}

fn pinned_input(input: BatchInput, device: Device) -> BatchInput {
    map_input(input, &|tensor| pinned(tensor, device))
}

fn pinned_targets(targets: TargetBatch, device: Device) -> TargetBatch {
    map_targets(targets, &|tensor| pinned(tensor, device))
}

fn input_to(input: BatchInput, device: Device) -> BatchInput {
    map_input(input, &|tensor| moved(tensor, device))
}

fn targets_to(targets: TargetBatch, device: Device) -> TargetBatch {
    map_targets(targets, &|tensor| moved(tensor, device))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Inputs, Targets};

    fn examples(rows: usize) -> Examples {
        Examples {
            ids: (0..rows as u64).collect(),
            inputs: Inputs::Dense {
                shape: vec![2],
                values: (0..rows * 2).map(|value| value as f32).collect(),
            },
            targets: Targets::Classes {
                labels: (0..rows as i64).map(|row| row % 3).collect(),
                n_classes: 3,
            },
        }
    }

    #[test]
    fn batches_come_in_order_and_equal_the_direct_ones() {
        let examples = examples(10);
        let task = Task::of(&examples).unwrap();
        let config = ModelConfig::for_device(Device::Cpu);
        let maker = BatchMaker {
            examples: &examples,
            task: &task,
            config: &config,
            device: Device::Cpu,
        };
        let order: Vec<usize> = vec![9, 3, 4, 0, 1, 8, 2, 7, 6, 5];
        let seen = maker.prefetched(order.chunks(3), |batches| {
            batches
                .map(|(rows, input, targets)| {
                    let (direct_input, direct_targets) =
                        example_batch(&examples, &task, &config, rows, Device::Cpu);
                    let (BatchInput::Dense(a), BatchInput::Dense(b)) = (&input, &direct_input)
                    else {
                        panic!("dense examples give dense batches");
                    };
                    assert!(a.equal(b));
                    let (TargetBatch::Classes(a), TargetBatch::Classes(b)) =
                        (&targets, &direct_targets)
                    else {
                        panic!("labels give classes");
                    };
                    assert!(a.equal(b));
                    rows.to_vec()
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(seen.concat(), order);
    }

    #[test]
    fn a_consumer_that_stops_early_ends_the_producer() {
        let examples = examples(1000);
        let task = Task::of(&examples).unwrap();
        let config = ModelConfig::for_device(Device::Cpu);
        let maker = BatchMaker {
            examples: &examples,
            task: &task,
            config: &config,
            device: Device::Cpu,
        };
        let order: Vec<usize> = (0..1000).collect();
        // Returns (the scope joined the producer) after two of 1000 batches.
        let taken = maker.prefetched(order.chunks(1), |batches| batches.take(2).count());
        assert_eq!(taken, 2);
    }
}
