//! Batches assembled ahead of the step that uses them (issue 47, item 4): a scoped thread gathers
//! the next batches' inputs and targets from the examples while the step's thread trains on the
//! current one, so gathering (a copy of every value of the batch, 77 MB for 128 images of
//! 224x224x3) is off the training step's path.
//!
//! The thread gathers each batch's values once into page-locked ("pinned") host memory and issues
//! its copy to the GPU without blocking (`data::dense_batch`): the GPU runs the copy in stream
//! order before the step that reads it, while the host goes on (the host allocator keeps a pinned
//! buffer until the copies from it are done, so dropping the host tensor early is safe). That is
//! for CUDA ([`ahead_on`]); on the CPU the batches are built one by one on the step's thread
//! (measured: a thread there slows a run).
//!
//! Invariants: the batches come in the order of `chunks`, each exactly what
//! [`crate::batch::example_batch`] builds for its rows (the producer draws nothing at random, so a
//! run is the same with or without it: `tests/run.rs` checks runs bit for bit against a fixed
//! seed); at most [`AHEAD`] batches wait at once (bounded memory); a consumer that stops early
//! (deadline, failure) ends the producer at its next batch, and the scope joins it before
//! returning.

use std::sync::mpsc;

use tch::Device;

use crate::batch::{TargetBatch, example_batch};
use crate::data::Examples;
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
    /// Whether a thread builds the batches ahead ([`ahead_on`]); else each is built when asked.
    pub(crate) ahead: bool,
}

/// Whether batches for `device` are built ahead on a thread: on CUDA, where the step runs on the
/// GPU and the host waits. Not on the CPU, where libtorch's threads already use every core for
/// the step: a producer thread there gets an OpenMP team of its own, whose threads compete with
/// the step's (a whole ResNet-18 run at 32x32 on 2 cores ran at 1,450 images/s with it, 4,700-5,300
/// without).
pub(crate) fn ahead_on(device: Device) -> bool {
    device.is_cuda()
}

impl BatchMaker<'_> {
    /// Runs `body` with an iterator over the batches of `chunks` (each chunk a batch's rows, in
    /// order), built `AHEAD` of their use by a thread of their own when `ahead`, else one by one.
    pub(crate) fn prefetched<'c, R>(
        self,
        chunks: impl Iterator<Item = &'c [usize]> + Send,
        body: impl FnOnce(&mut dyn Iterator<Item = (&'c [usize], BatchInput, TargetBatch)>) -> R,
    ) -> R {
        if !self.ahead {
            let mut batches = chunks.map(|rows| {
                let (input, targets) =
                    example_batch(self.examples, self.task, self.config, rows, self.device);
                (rows, input, targets)
            });
            return body(&mut batches);
        }
        std::thread::scope(|scope| {
            let (sender, receiver) = mpsc::sync_channel(AHEAD);
            scope.spawn(move || {
                for rows in chunks {
                    let (input, targets) =
                        example_batch(self.examples, self.task, self.config, rows, self.device);
                    if sender.send((rows, input, targets)).is_err() {
                        // The consumer stopped early.
                        return;
                    }
                }
            });
            let mut batches = receiver.into_iter();
            body(&mut batches)
        })
    }
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
    fn batches_come_in_order_and_equal_the_direct_ones_with_and_without_the_thread() {
        for ahead in [true, false] {
            batches_in_order(ahead);
        }
    }

    /// Runs `body` with a CPU batch maker over `rows` examples of [`examples`].
    fn with_maker<R>(rows: usize, ahead: bool, body: impl FnOnce(BatchMaker<'_>) -> R) -> R {
        let examples = examples(rows);
        let task = Task::of(&examples).unwrap();
        let config = ModelConfig::for_device(Device::Cpu);
        body(BatchMaker {
            examples: &examples,
            task: &task,
            config: &config,
            device: Device::Cpu,
            ahead,
        })
    }

    fn batches_in_order(ahead: bool) {
        let order: Vec<usize> = vec![9, 3, 4, 0, 1, 8, 2, 7, 6, 5];
        let seen = with_maker(10, ahead, |maker| {
            maker.prefetched(order.chunks(3), |batches| {
                batches
                    .map(|(rows, input, targets)| {
                        let (direct_input, direct_targets) = example_batch(
                            maker.examples,
                            maker.task,
                            maker.config,
                            rows,
                            Device::Cpu,
                        );
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
            })
        });
        assert_eq!(seen.concat(), order);
    }

    #[test]
    fn a_consumer_that_stops_early_ends_the_producer() {
        let order: Vec<usize> = (0..1000).collect();
        // Returns (the scope joined the producer) after two of 1000 batches.
        let taken = with_maker(1000, true, |maker| {
            maker.prefetched(order.chunks(1), |batches| batches.take(2).count())
        });
        assert_eq!(taken, 2);
    }
}
