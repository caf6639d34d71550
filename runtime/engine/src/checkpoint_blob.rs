//! A trainer [`Checkpoint`] as one store blob, so that a run's `checkpoint_sha256` names all of it.
//!
//! Layout: the 6 bytes `EMCK1\n`, the metadata's length as a little-endian `u32`, the metadata
//! (`CheckpointMeta` as JSON), then the weights (safetensors bytes, to the end).

use easeml_trainer::Checkpoint;
use easeml_trainer::checkpoint::CheckpointMeta;

use crate::error::{Error, Result};
use crate::framed::{Unframed, frame, unframe};

const MAGIC: &[u8; 6] = b"EMCK1\n";

/// Encodes a checkpoint as one blob.
pub fn encode(checkpoint: &Checkpoint) -> Result<Vec<u8>> {
    let meta = serde_json::to_vec(&checkpoint.meta)
        .map_err(|error| Error::Checkpoint(format!("cannot encode the metadata: {error}")))?;
    let mut bytes = frame(MAGIC, &meta, checkpoint.weights.len())
        .ok_or_else(|| Error::Checkpoint("the metadata is larger than 4 GiB".to_owned()))?;
    bytes.extend_from_slice(&checkpoint.weights);
    Ok(bytes)
}

/// Decodes a blob written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Checkpoint> {
    let bad = |what: &str| Error::Checkpoint(format!("not an easeml checkpoint: {what}"));
    let (meta, weights) = unframe(bytes, MAGIC).map_err(|why| {
        bad(match why {
            Unframed::WrongMagic => "wrong magic bytes",
            Unframed::NoLength => "truncated header",
            Unframed::ShortHeader => "truncated metadata",
        })
    })?;
    let meta: CheckpointMeta = serde_json::from_slice(meta)
        .map_err(|error| Error::Checkpoint(format!("bad metadata: {error}")))?;
    Ok(Checkpoint {
        meta,
        weights: weights.to_vec(),
    })
}
