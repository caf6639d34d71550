//! A trainer [`Checkpoint`] as one store blob, so that a run's `checkpoint_sha256` names all of it.
//!
//! Layout: the 6 bytes `EMCK1\n`, the metadata's length as a little-endian `u32`, the metadata
//! (`CheckpointMeta` as JSON), then the weights (safetensors bytes, to the end).

use easeml_trainer::Checkpoint;
use easeml_trainer::checkpoint::CheckpointMeta;

use crate::error::{Error, Result};

const MAGIC: &[u8; 6] = b"EMCK1\n";

/// Encodes a checkpoint as one blob.
pub fn encode(checkpoint: &Checkpoint) -> Result<Vec<u8>> {
    let meta = serde_json::to_vec(&checkpoint.meta)
        .map_err(|error| Error::Checkpoint(format!("cannot encode the metadata: {error}")))?;
    let length = u32::try_from(meta.len())
        .map_err(|_| Error::Checkpoint("the metadata is larger than 4 GiB".to_owned()))?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + 4 + meta.len() + checkpoint.weights.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.extend_from_slice(&meta);
    bytes.extend_from_slice(&checkpoint.weights);
    Ok(bytes)
}

/// Decodes a blob written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Checkpoint> {
    let bad = |what: &str| Error::Checkpoint(format!("not an easeml checkpoint: {what}"));
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| bad("wrong magic bytes"))?;
    let (length, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| bad("truncated header"))?;
    let length = u32::from_le_bytes(*length) as usize;
    if rest.len() < length {
        return Err(bad("truncated metadata"));
    }
    let (meta, weights) = rest.split_at(length);
    let meta: CheckpointMeta = serde_json::from_slice(meta)
        .map_err(|error| Error::Checkpoint(format!("bad metadata: {error}")))?;
    Ok(Checkpoint {
        meta,
        weights: weights.to_vec(),
    })
}
