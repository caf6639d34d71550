//! Content-addressed blob files: the sha256 of the bytes names the file, sharded by its first two
//! hex digits. Writes go to `blobs/tmp/` and are renamed into place, so a blob file is either
//! complete or absent; writing a blob that exists is a no-op.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::{Error, Result, io};

/// The name of a blob: the lower-case hex sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobHash(String);

impl BlobHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> BlobHash {
        BlobHash(hex(&Sha256::digest(bytes)))
    }

    /// Parses a hash written as 64 lower-case hex digits.
    pub fn parse(text: &str) -> Result<BlobHash> {
        let valid = text.len() == 64
            && text
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
        if valid {
            Ok(BlobHash(text.to_owned()))
        } else {
            Err(Error::BadHash(text.to_owned()))
        }
    }

    pub(crate) fn from_database(text: String) -> BlobHash {
        BlobHash(text)
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BlobHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 15)] as char);
    }
    text
}

/// The blob directory of one store.
#[derive(Debug)]
pub(crate) struct Blobs {
    root: PathBuf,
    sync: bool,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Blobs {
    pub(crate) fn open(root: PathBuf, sync: bool) -> Result<Blobs> {
        let tmp = root.join("tmp");
        fs::create_dir_all(&tmp).map_err(io(&tmp, "creating the blob directory"))?;
        Ok(Blobs { root, sync })
    }

    pub(crate) fn path(&self, hash: &BlobHash) -> PathBuf {
        let shard = hash.0.get(..2).unwrap_or("__");
        self.root.join(shard).join(&hash.0)
    }

    /// Writes `bytes` unless a blob with the same hash exists; returns the hash.
    pub(crate) fn put(&self, bytes: &[u8]) -> Result<BlobHash> {
        let hash = BlobHash::of(bytes);
        let path = self.path(&hash);
        if path.exists() {
            // Refresh its age so that a concurrent `collect_garbage` keeps a blob being reused.
            let touched = fs::File::options()
                .append(true)
                .open(&path)
                .and_then(|file| file.set_modified(std::time::SystemTime::now()));
            if touched.is_ok() {
                return Ok(hash);
            }
        }
        let shard = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(shard).map_err(io(shard, "creating a blob shard directory"))?;
        let temp = self.root.join("tmp").join(format!(
            "{}-{}-{}",
            &hash.0[..16],
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        write_file(&temp, bytes, self.sync)?;
        fs::rename(&temp, &path).map_err(io(&path, "moving a written blob into place"))?;
        Ok(hash)
    }

    /// Writes in-memory bytes, or checks that an already written blob exists.
    pub(crate) fn put_or_check(&self, blob: &crate::Blob) -> Result<BlobHash> {
        match blob {
            crate::Blob::Bytes(bytes) => self.put(bytes),
            crate::Blob::Stored(hash) => {
                if self.path(hash).is_file() {
                    Ok(hash.clone())
                } else {
                    Err(Error::MissingBlob(hash.clone()))
                }
            }
        }
    }

    /// Reads a blob and checks that its bytes still hash to its name.
    pub(crate) fn get(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        let path = self.path(hash);
        let bytes = fs::read(&path).map_err(io(&path, "reading a blob"))?;
        let actual = BlobHash::of(&bytes);
        if &actual != hash {
            return Err(Error::CorruptBlob {
                hash: hash.clone(),
                actual,
            });
        }
        Ok(bytes)
    }
}

impl Blobs {
    /// Removes blob files whose hash is not in `referenced` and temp files, when older than
    /// `min_age`; returns (files removed, bytes freed).
    pub(crate) fn collect_garbage(
        &self,
        referenced: &std::collections::HashSet<String>,
        min_age: std::time::Duration,
    ) -> Result<(usize, u64)> {
        let now = std::time::SystemTime::now();
        let old_enough = |metadata: &fs::Metadata| {
            min_age.is_zero()
                || metadata
                    .modified()
                    .ok()
                    .and_then(|modified| now.duration_since(modified).ok())
                    .is_some_and(|age| age >= min_age)
        };
        let mut removed = (0, 0);
        let shards = fs::read_dir(&self.root).map_err(io(&self.root, "listing blob shards"))?;
        for shard in shards {
            let shard = shard.map_err(io(&self.root, "listing blob shards"))?.path();
            if !shard.is_dir() {
                continue;
            }
            let is_tmp = shard.file_name().is_some_and(|name| name == "tmp");
            for entry in fs::read_dir(&shard).map_err(io(&shard, "listing blobs"))? {
                let entry = entry.map_err(io(&shard, "listing blobs"))?;
                let path = entry.path();
                let metadata = entry
                    .metadata()
                    .map_err(io(&path, "reading a blob's metadata"))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !metadata.is_file() || !old_enough(&metadata) {
                    continue;
                }
                if is_tmp || !referenced.contains(&name) {
                    fs::remove_file(&path).map_err(io(&path, "removing an unreferenced blob"))?;
                    removed.0 += 1;
                    removed.1 += metadata.len();
                }
            }
        }
        Ok(removed)
    }
}

fn write_file(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let mut file = fs::File::create(path).map_err(io(path, "creating a blob file"))?;
    file.write_all(bytes)
        .map_err(io(path, "writing a blob file"))?;
    if sync {
        file.sync_all().map_err(io(path, "syncing a blob file"))?;
    }
    Ok(())
}
