//! A training state that can hop between workers (Cerebro's model hopper parallelism): everything a
//! run needs to continue elsewhere after a sub-epoch, as bytes.
//!
//! A [`TrainingState`] holds
//! - every variable of the model's `VarStore`, trainable or not (batch-norm running means,
//!   variances and warm-up counts, the fitted normalizer ranges are non-trainable variables there);
//! - the [`Adam`] state: hyper-parameters, learning rate, each variable's step count and moments;
//! - the run's seed and the last sub-epoch done ([`SubEpoch`]).
//!
//! No generator state travels: every random draw of a sub-epoch (batch order, dropout masks) comes
//! from [`begin_sub_epoch`], whose generator is seeded with [`sub_epoch_seed`]`(seed, epoch,
//! partition)`. A hop then equals sequential
//! training: restoring the bytes into a freshly built model and optimizer and running the next
//! sub-epoch gives bit-identical weights on the CPU with one thread (`tests/hop.rs`).
//!
//! A model must keep all its training state in the `VarStore` for this to hold: the warm-momentum
//! batch norms of `small_cnn` and the temporal models keep their batch count there too
//! (`warm_batches`, `models::WarmBatches`).
//!
//! The bytes: `EMHOP1\n`, the header's length (u64, little-endian), the JSON header
//! ([`StateHeader`]), then safetensors with the tensors named `var/<name>`, `exp_avg/<name>` and
//! `exp_avg_sq/<name>`. Malformed bytes are an [`Error::BadCheckpoint`], never a panic.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use crate::checkpoint::{safetensors_bytes, tensors_from_safetensors};
use crate::data::mix64;
use crate::error::{Error, Result};
use crate::native::RunRandomness;
use crate::optim::{Adam, AdamHeader};

/// The first bytes of a serialized [`TrainingState`].
pub const MAGIC: &[u8] = b"EMHOP1\n";

/// The seed of every random draw of one sub-epoch (one partition in one epoch): SplitMix64's
/// finalizer (`mix64`) chained over the three numbers, `mix64(mix64(mix64(seed) ^ epoch) ^
/// partition)`, so that nearby triples give unrelated seeds and no two of the three commute.
pub fn sub_epoch_seed(seed: u64, epoch: u64, partition: u64) -> u64 {
    mix64(mix64(mix64(seed) ^ epoch) ^ partition)
}

/// The sub-epoch's seed ([`sub_epoch_seed`]) and, while the guard lives, this thread's dropout
/// generator on `device` seeded with it ([`RunRandomness`]). Call it before the sub-epoch's first
/// random draw; other training in the process meanwhile draws from generators of its own.
pub fn begin_sub_epoch(
    seed: u64,
    epoch: u64,
    partition: u64,
    device: Device,
) -> Result<(u64, RunRandomness)> {
    let sub_seed = sub_epoch_seed(seed, epoch, partition);
    Ok((sub_seed, RunRandomness::enter(device, sub_seed)?))
}

/// One partition visited in one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubEpoch {
    /// The epoch (from 0).
    pub epoch: u64,
    /// The partition.
    pub partition: u64,
}

/// The JSON part of a serialized state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateHeader {
    /// The run's seed ([`sub_epoch_seed`]'s first argument).
    pub seed: u64,
    /// The last sub-epoch trained, `None` before the first.
    pub done: Option<SubEpoch>,
    /// The optimizer's hyper-parameters, learning rate and step counts.
    pub adam: AdamHeader,
}

/// A run's whole training state (see the module docs), its tensors on the CPU.
#[derive(Debug)]
pub struct TrainingState {
    /// Seed, progress, Adam's scalars.
    pub header: StateHeader,
    /// Every `VarStore` variable, by name.
    pub variables: BTreeMap<String, Tensor>,
    /// Adam's `(exp_avg, exp_avg_sq)` per trainable variable, by name.
    pub moments: BTreeMap<String, (Tensor, Tensor)>,
}

/// A detached, contiguous copy on the CPU.
fn cpu_copy(tensor: &Tensor) -> Result<Tensor> {
    let detached = tensor.f_detach()?;
    let on_cpu = detached.f_to_device(Device::Cpu)?;
    // `to_device` does not copy a tensor already on the CPU.
    let mut copy = on_cpu.f_zeros_like()?;
    copy.f_copy_(&on_cpu)?;
    Ok(copy.f_contiguous()?)
}

fn bad(message: impl std::fmt::Display) -> Error {
    Error::BadCheckpoint(format!("training state: {message}"))
}

impl TrainingState {
    /// Copies the state of a run: `store`'s variables and `adam`'s state, with the run's `seed`
    /// and the last sub-epoch `done`.
    pub fn capture(
        store: &nn::VarStore,
        adam: &Adam,
        seed: u64,
        done: Option<SubEpoch>,
    ) -> Result<Self> {
        let variables = store
            .variables()
            .into_iter()
            .map(|(name, tensor)| Ok((name, cpu_copy(&tensor)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        let moments = adam
            .moments()
            .into_iter()
            .map(|(name, exp_avg, exp_avg_sq)| {
                Ok((name, (cpu_copy(&exp_avg)?, cpu_copy(&exp_avg_sq)?)))
            })
            .collect::<Result<BTreeMap<_, _>>>()?;
        Ok(Self {
            header: StateHeader {
                seed,
                done,
                adam: adam.header(),
            },
            variables,
            moments,
        })
    }

    /// Writes the state into a model and optimizer built for it (the same candidate, task and
    /// config): every variable of `store` and the whole of `adam`. The names, shapes and kinds
    /// must match exactly; on a mismatch nothing of `store` is changed.
    pub fn restore(&self, store: &mut nn::VarStore, adam: &mut Adam) -> Result<()> {
        let mut targets = store.variables();
        let expected: BTreeSet<&String> = targets.keys().collect();
        let given: BTreeSet<&String> = self.variables.keys().collect();
        if expected != given {
            let missing: Vec<_> = expected.difference(&given).collect();
            let extra: Vec<_> = given.difference(&expected).collect();
            return Err(bad(format!(
                "the variables do not match the model: missing {missing:?}, unknown {extra:?}"
            )));
        }
        for (name, source) in &self.variables {
            let target = &targets[name];
            if source.size() != target.size() || source.kind() != target.kind() {
                return Err(bad(format!(
                    "`{name}` is {:?} {:?} in the state, {:?} {:?} in the model",
                    source.kind(),
                    source.size(),
                    target.kind(),
                    target.size()
                )));
            }
        }
        adam.load_state(&self.header.adam, &self.moments)?;
        tch::no_grad(|| -> Result<()> {
            for (name, target) in targets.iter_mut() {
                target.f_copy_(&self.variables[name])?;
            }
            Ok(())
        })
    }

    /// The bytes (see the module docs).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header)?;
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (name, tensor) in &self.variables {
            named.push((format!("var/{name}"), tensor.shallow_clone()));
        }
        for (name, (exp_avg, exp_avg_sq)) in &self.moments {
            named.push((format!("exp_avg/{name}"), exp_avg.shallow_clone()));
            named.push((format!("exp_avg_sq/{name}"), exp_avg_sq.shallow_clone()));
        }
        let tensors = safetensors_bytes(&named)?;
        let mut bytes = Vec::with_capacity(MAGIC.len() + 8 + header.len() + tensors.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&tensors);
        Ok(bytes)
    }

    /// Reads bytes written by [`TrainingState::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("the bytes do not start with `EMHOP1`"))?;
        let (length, rest) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| bad("the bytes end before the header's length"))?;
        let length = usize::try_from(u64::from_le_bytes(*length))
            .ok()
            .filter(|&length| length <= rest.len())
            .ok_or_else(|| bad("the header is longer than the bytes"))?;
        let (header, tensors) = rest.split_at(length);
        let header: StateHeader =
            serde_json::from_slice(header).map_err(|error| bad(format!("the header: {error}")))?;
        let named = tensors_from_safetensors(tensors)
            .map_err(|error| bad(format!("the tensors: {error}")))?;
        let mut variables = BTreeMap::new();
        let mut exp_avgs = BTreeMap::new();
        let mut exp_avg_sqs = BTreeMap::new();
        for (name, tensor) in named {
            let (map, short) = if let Some(short) = name.strip_prefix("var/") {
                (&mut variables, short)
            } else if let Some(short) = name.strip_prefix("exp_avg/") {
                (&mut exp_avgs, short)
            } else if let Some(short) = name.strip_prefix("exp_avg_sq/") {
                (&mut exp_avg_sqs, short)
            } else {
                return Err(bad(format!("an unknown tensor `{name}`")));
            };
            map.insert(short.to_string(), tensor);
        }
        let mut moments = BTreeMap::new();
        for (name, exp_avg) in exp_avgs {
            let exp_avg_sq = exp_avg_sqs
                .remove(&name)
                .ok_or_else(|| bad(format!("`{name}` has exp_avg but no exp_avg_sq")))?;
            moments.insert(name, (exp_avg, exp_avg_sq));
        }
        if let Some(name) = exp_avg_sqs.keys().next() {
            return Err(bad(format!("`{name}` has exp_avg_sq but no exp_avg")));
        }
        Ok(Self {
            header,
            variables,
            moments,
        })
    }
}
