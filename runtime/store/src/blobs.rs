//! Content-addressed blobs: the sha256 of the bytes names the blob, sharded by its first two hex
//! digits, in a folder ([`FolderBlobs`], the default) or, with the `s3` feature, under a prefix of
//! an S3-compatible bucket (`s3.rs`). Either way a blob is complete or absent (a folder writes to
//! `blobs/tmp/` and renames into place; an S3 PUT is atomic), writing a blob that exists stores the
//! same bytes again (and refreshes its age, which [`Blobs::collect_garbage`] reads), and reading one
//! checks that its bytes still hash to its name.

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

#[cfg(feature = "s3")]
mod s3;

/// The file in a store's home that names the S3 location of its blobs (`s3://bucket/prefix`);
/// without it the blobs are in the home's `blobs/` folder. Written by [`crate::store_home`].
pub const BLOBS_URL_FILE: &str = "blobs.url";

/// Whether a blob location is an S3 URL (`s3://bucket/prefix`).
pub fn is_s3_url(location: &str) -> bool {
    location.starts_with("s3://")
}

/// The blobs of one store.
#[derive(Debug)]
pub(crate) enum Blobs {
    /// Files under the home's `blobs/` folder.
    Folder(FolderBlobs),
    /// Objects under a prefix of an S3-compatible bucket.
    #[cfg(feature = "s3")]
    S3(s3::S3Blobs),
}

impl Blobs {
    /// The blobs of the store at `home`: at the S3 location its [`BLOBS_URL_FILE`] names, else in
    /// its `blobs/` folder; `sync` fsyncs every blob file before it counts as written.
    pub(crate) fn open_in(home: &Path, sync: bool) -> Result<Blobs> {
        match crate::Pointer::BLOBS.read(home)? {
            Some(url) => Blobs::open_s3(&url),
            None => FolderBlobs::open(home.join("blobs"), sync).map(Blobs::Folder),
        }
    }

    /// The blobs at an S3 location, checked to answer (a missing bucket or bad credentials fail
    /// here, not at the first feed).
    #[cfg(feature = "s3")]
    pub(crate) fn open_s3(url: &str) -> Result<Blobs> {
        s3::S3Blobs::open(url).map(Blobs::S3)
    }

    /// Without the `s3` feature an S3 location is an error that says how to get it.
    #[cfg(not(feature = "s3"))]
    pub(crate) fn open_s3(url: &str) -> Result<Blobs> {
        Err(Error::Location(format!(
            "the store's blobs are in S3 ({url}), and this easeml was built without S3 support: build it with `--features s3` (cargo install easeml-cli --features s3)"
        )))
    }

    /// Where a blob's file is; `None` for blobs that are not files (S3).
    pub(crate) fn path(&self, hash: &BlobHash) -> Option<PathBuf> {
        match self {
            Blobs::Folder(folder) => Some(folder.path(hash)),
            #[cfg(feature = "s3")]
            Blobs::S3(_) => None,
        }
    }

    /// Writes `bytes` (a blob with the same hash is written again, refreshing its age); returns
    /// the hash.
    pub(crate) fn put(&self, bytes: &[u8]) -> Result<BlobHash> {
        match self {
            Blobs::Folder(folder) => folder.put(bytes),
            #[cfg(feature = "s3")]
            Blobs::S3(bucket) => bucket.put(bytes),
        }
    }

    /// Writes in-memory bytes, or checks that an already written blob exists.
    pub(crate) fn put_or_check(&self, blob: &crate::Blob) -> Result<BlobHash> {
        match blob {
            crate::Blob::Bytes(bytes) => self.put(bytes),
            crate::Blob::Stored(hash) => {
                let exists = match self {
                    Blobs::Folder(folder) => folder.path(hash).is_file(),
                    #[cfg(feature = "s3")]
                    Blobs::S3(bucket) => bucket.exists(hash)?,
                };
                if exists {
                    Ok(hash.clone())
                } else {
                    Err(Error::MissingBlob(hash.clone()))
                }
            }
        }
    }

    /// Reads a blob and checks that its bytes still hash to its name.
    pub(crate) fn get(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        let bytes = match self {
            Blobs::Folder(folder) => folder.read(hash)?,
            #[cfg(feature = "s3")]
            Blobs::S3(bucket) => bucket.read(hash)?,
        };
        verified(hash, bytes)
    }

    /// Removes blobs whose hash is not in `referenced` (and a folder's temp files), when older
    /// than `min_age`; returns (blobs removed, bytes freed).
    pub(crate) fn collect_garbage(
        &self,
        referenced: &std::collections::HashSet<String>,
        min_age: std::time::Duration,
    ) -> Result<(usize, u64)> {
        match self {
            Blobs::Folder(folder) => folder.collect_garbage(referenced, min_age),
            #[cfg(feature = "s3")]
            Blobs::S3(bucket) => bucket.collect_garbage(referenced, min_age),
        }
    }
}

/// `bytes` when they still hash to `hash`, else [`Error::CorruptBlob`]: the one check of every
/// blob read, from a file, a bucket or the database.
pub(crate) fn verified(hash: &BlobHash, bytes: Vec<u8>) -> Result<Vec<u8>> {
    let actual = BlobHash::of(&bytes);
    if &actual != hash {
        return Err(Error::CorruptBlob {
            hash: hash.clone(),
            actual,
        });
    }
    Ok(bytes)
}

/// The path of a blob under a sharded root: `ab/abcdef...`.
pub(crate) fn sharded_name(hash: &BlobHash) -> (&str, &str) {
    (hash.0.get(..2).unwrap_or("__"), &hash.0)
}

/// The blob folder of one store.
#[derive(Debug)]
pub(crate) struct FolderBlobs {
    root: PathBuf,
    sync: bool,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl FolderBlobs {
    pub(crate) fn open(root: PathBuf, sync: bool) -> Result<FolderBlobs> {
        let tmp = root.join("tmp");
        fs::create_dir_all(&tmp).map_err(io(&tmp, "creating the blob directory"))?;
        Ok(FolderBlobs { root, sync })
    }

    pub(crate) fn path(&self, hash: &BlobHash) -> PathBuf {
        let (shard, name) = sharded_name(hash);
        self.root.join(shard).join(name)
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

    /// The bytes of a blob's file.
    fn read(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        let path = self.path(hash);
        fs::read(&path).map_err(io(&path, "reading a blob"))
    }
}

impl FolderBlobs {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_without_a_blob_location_keeps_its_blobs_in_its_folder() {
        let home = tempfile::tempdir().unwrap();
        let blobs = Blobs::open_in(home.path(), false).unwrap();
        let hash = blobs.put(b"bytes").unwrap();
        assert_eq!(
            blobs.path(&hash),
            Some(
                home.path()
                    .join("blobs")
                    .join(&hash.as_str()[..2])
                    .join(hash.as_str())
            )
        );
        assert_eq!(blobs.get(&hash).unwrap(), b"bytes");
    }

    /// Built without the `s3` feature (`cargo xtask test` checks this build too), a store whose
    /// blobs are in S3 says how to get the feature instead of opening an empty folder.
    #[cfg(not(feature = "s3"))]
    #[test]
    fn without_the_s3_feature_an_s3_home_says_how_to_build_it() {
        let home = tempfile::tempdir().unwrap();
        fs::write(home.path().join(BLOBS_URL_FILE), "s3://bucket/prefix").unwrap();
        let error = Blobs::open_in(home.path(), false).unwrap_err().to_string();
        assert!(
            error.contains("built without S3 support: build it with `--features s3`"),
            "{error}"
        );
        assert!(!home.path().join("blobs").exists());
    }
}
