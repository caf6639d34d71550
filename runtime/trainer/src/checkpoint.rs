//! Checkpoints: the trained weights (safetensors, written by the `VarStore`) and the metadata needed
//! to rebuild the model (candidate, task, model config), as `model.safetensors` + `model.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::{Error, Result};
use crate::models::ModelConfig;
use crate::task::Task;

/// What rebuilds a trained model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// The candidate id (`resnet18+norm_k2`).
    pub candidate: String,
    /// The task with its shapes.
    pub task: Task,
    /// Width and other model settings.
    pub config: ModelConfig,
    /// The learning rate the kept weights were trained with.
    pub learning_rate: f64,
    /// The seed of that training trial.
    pub seed: u64,
    /// Models that are not tch modules (the tree-kernel SVM) keep their state here.
    pub extra: Option<serde_json::Value>,
}

/// A trained model: metadata and the weights as safetensors bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// What rebuilds the model.
    pub meta: CheckpointMeta,
    /// The `VarStore` variables in safetensors format.
    pub weights: Vec<u8>,
}

/// A file in the temp dir that is removed when dropped.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl TempFile {
    pub(crate) fn new(suffix: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        Self(std::env::temp_dir().join(format!(
            "easeml-trainer-{}-{unique}-{nanos}{suffix}",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Serializes named tensors to safetensors bytes (contiguous: the channels-last weights of the
/// convolutions, `crate::models::channels_last`, are written in their logical order).
pub(crate) fn safetensors_bytes(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let file = TempFile::new(".safetensors");
    let contiguous: Vec<(&str, Tensor)> = named
        .iter()
        .map(|(name, tensor)| (name.as_str(), tensor.contiguous()))
        .collect();
    Tensor::write_safetensors(&contiguous, &file.0)?;
    Ok(std::fs::read(&file.0)?)
}

/// Reads named tensors (on the CPU) from safetensors bytes; malformed bytes are an error.
pub(crate) fn tensors_from_safetensors(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let file = TempFile::new(".safetensors");
    std::fs::write(&file.0, bytes)?;
    Ok(Tensor::read_safetensors(&file.0)?)
}

impl Checkpoint {
    /// The file names inside a checkpoint directory.
    pub const WEIGHTS_FILE: &'static str = "model.safetensors";
    /// See [`Checkpoint::WEIGHTS_FILE`].
    pub const META_FILE: &'static str = "model.json";

    /// Writes `model.safetensors` and `model.json` into `dir` (created when missing).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(Self::WEIGHTS_FILE), &self.weights)?;
        std::fs::write(
            dir.join(Self::META_FILE),
            serde_json::to_vec_pretty(&self.meta)?,
        )?;
        Ok(())
    }

    /// Reads a checkpoint written by [`Checkpoint::save`].
    pub fn load(dir: &Path) -> Result<Self> {
        let meta_path = dir.join(Self::META_FILE);
        let meta = std::fs::read(&meta_path).map_err(|error| {
            Error::BadCheckpoint(format!("cannot read {}: {error}", meta_path.display()))
        })?;
        Ok(Self {
            meta: serde_json::from_slice(&meta)?,
            weights: std::fs::read(dir.join(Self::WEIGHTS_FILE))?,
        })
    }

    /// The weights as named tensors (on the CPU).
    pub fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        tensors_from_safetensors(&self.weights)
    }
}
