//! Blobs as objects under a prefix of an S3-compatible bucket (`s3://bucket/prefix`), named like
//! the folder's files (`prefix/ab/abcdef...`). The `object_store` client is asynchronous; each call
//! runs to completion on a current-thread tokio runtime of this store's own, outside any caller's
//! runtime (see `db::outside_async`), so the store stays synchronous.
//!
//! Credentials, region and endpoint come from the environment as for every AWS client
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT` for a server that is
//! not AWS, `AWS_ALLOW_HTTP=true` for one without TLS): they never go into the store's files.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::{BlobHash, sharded_name};
use crate::{Error, Result};

/// The blobs of one store in a bucket.
pub(crate) struct S3Blobs {
    /// `s3://bucket/prefix`, as given.
    url: String,
    store: Arc<dyn ObjectStore>,
    /// The prefix inside the bucket (may be empty).
    prefix: String,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for S3Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Blobs")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The settings a location may carry after `?` (`endpoint=http://127.0.0.1:9000&allow_http=true`),
/// with the `object_store` key each sets. Not credentials: those stay in the environment.
const URL_OPTIONS: &[(&str, &str)] = &[
    ("endpoint", "aws_endpoint"),
    ("region", "aws_region"),
    ("allow_http", "aws_allow_http"),
    ("skip_signature", "aws_skip_signature"),
    (
        "virtual_hosted_style_request",
        "aws_virtual_hosted_style_request",
    ),
];

/// An S3 location taken apart.
#[derive(Debug, PartialEq)]
pub(crate) struct Location<'a> {
    pub(crate) bucket: &'a str,
    /// Without slashes at either end; may be empty.
    pub(crate) prefix: &'a str,
    /// `object_store` config keys and their values, from the query.
    pub(crate) options: Vec<(&'static str, &'a str)>,
}

/// Parses `s3://bucket/prefix[?option=value&...]` (the options of [`URL_OPTIONS`]).
pub(crate) fn parse_url(url: &str) -> Result<Location<'_>> {
    let bad = |why: String| {
        Error::Location(format!(
            "`{url}` is not an S3 blob location: {why}; write s3://BUCKET[/PREFIX][?endpoint=URL&region=R&allow_http=true&skip_signature=true] (credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, never from the location)"
        ))
    };
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| bad("it does not start with s3://".into()))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
    let prefix = prefix.trim_matches('/');
    let valid_bucket = (3..=63).contains(&bucket.len())
        && bucket.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b".-".contains(&byte)
        });
    if !valid_bucket {
        return Err(bad(format!(
            "the bucket name `{bucket}` is not 3 to 63 lower-case letters, digits, dots and dashes"
        )));
    }
    let valid_part = |part: &str| {
        !part.is_empty() && part != "." && part != ".." && !part.chars().any(char::is_control)
    };
    if !prefix.is_empty() && !prefix.split('/').all(valid_part) {
        return Err(bad(format!(
            "the prefix `{prefix}` has an empty, `.` or `..` part"
        )));
    }
    let mut options = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let Some((_, key)) = URL_OPTIONS.iter().find(|(known, _)| *known == name) else {
            let known: Vec<&str> = URL_OPTIONS.iter().map(|(known, _)| *known).collect();
            return Err(bad(format!(
                "`{name}` is not a location option (known: {})",
                known.join(", ")
            )));
        };
        options.push((*key, value));
    }
    Ok(Location {
        bucket,
        prefix,
        options,
    })
}

impl S3Blobs {
    /// Connects to the bucket of `url` and checks that it answers.
    pub(crate) fn open(url: &str) -> Result<S3Blobs> {
        let location = parse_url(url)?;
        let failed = |context: &str, message: String| Error::ObjectStorage {
            location: url.to_owned(),
            context: context.to_owned(),
            message,
        };
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(location.bucket);
        for (key, value) in &location.options {
            let key = key.parse().map_err(|error: object_store::Error| {
                failed("reading the location", error.to_string())
            })?;
            builder = builder.with_config(key, *value);
        }
        let store = builder.build().map_err(|error| {
            failed(
                "configuring the S3 client (AWS_REGION, AWS_ENDPOINT, credentials)",
                error.to_string(),
            )
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| failed("starting the S3 client's runtime", error.to_string()))?;
        let blobs = S3Blobs {
            url: url.to_owned(),
            store: Arc::new(store),
            prefix: location.prefix.to_owned(),
            runtime,
        };
        let root = blobs.root();
        blobs
            .block(async {
                blobs
                    .store
                    .list_with_delimiter(root.as_ref())
                    .await
                    .map(drop)
            })
            .map_err(blobs.error("listing the blob prefix (does the bucket exist, and may these credentials read it?)"))?;
        Ok(blobs)
    }

    /// Runs one request to completion.
    fn block<T: Send>(&self, request: impl Future<Output = T> + Send) -> T {
        crate::db::outside_async(|| self.runtime.block_on(request))
    }

    fn error(&self, context: &str) -> impl Fn(object_store::Error) -> Error + '_ {
        let context = context.to_owned();
        move |error| Error::ObjectStorage {
            location: self.url.clone(),
            context: context.clone(),
            message: error.to_string(),
        }
    }

    /// The prefix as an object path (`None` for the whole bucket).
    fn root(&self) -> Option<ObjectPath> {
        (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()))
    }

    fn object(&self, hash: &BlobHash) -> ObjectPath {
        let (shard, name) = sharded_name(hash);
        if self.prefix.is_empty() {
            ObjectPath::from_iter([shard, name])
        } else {
            ObjectPath::from(self.prefix.as_str())
                .child(shard)
                .child(name)
        }
    }

    /// Writes `bytes` under their hash (an S3 PUT is all or nothing; the same bytes again refresh
    /// the object's age).
    pub(crate) fn put(&self, bytes: &[u8]) -> Result<BlobHash> {
        let hash = BlobHash::of(bytes);
        let object = self.object(&hash);
        let payload = PutPayload::from(bytes.to_vec());
        self.block(self.store.put(&object, payload))
            .map_err(self.error(&format!("writing blob {hash}")))?;
        Ok(hash)
    }

    /// Whether the blob exists.
    pub(crate) fn exists(&self, hash: &BlobHash) -> Result<bool> {
        match self.block(self.store.head(&self.object(hash))) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(self.error(&format!("looking up blob {hash}"))(error)),
        }
    }

    /// The bytes of a blob (unchecked: the caller checks the hash).
    pub(crate) fn read(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        let object = self.object(hash);
        let bytes = self.block(async {
            let found = self.store.get(&object).await?;
            found.bytes().await
        });
        match bytes {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(Error::MissingBlob(hash.clone())),
            Err(error) => Err(self.error(&format!("reading blob {hash}"))(error)),
        }
    }

    /// Deletes the objects under the prefix whose name is not in `referenced`, when older than
    /// `min_age`; returns (objects removed, bytes freed).
    pub(crate) fn collect_garbage(
        &self,
        referenced: &HashSet<String>,
        min_age: Duration,
    ) -> Result<(usize, u64)> {
        let now = crate::now_ms();
        let root = self.root();
        let listed: Vec<object_store::ObjectMeta> = self
            .block(self.store.list(root.as_ref()).try_collect())
            .map_err(self.error("listing blobs"))?;
        let mut removed = (0, 0);
        for meta in listed {
            let Some(name) = meta.location.filename() else {
                continue;
            };
            let age_ms = now - meta.last_modified.timestamp_millis();
            let old_enough = min_age.is_zero()
                || age_ms >= i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
            // Only objects named like blobs (64 hex digits): anything else under the prefix is not
            // the store's to remove.
            if !old_enough || BlobHash::parse(name).is_err() || referenced.contains(name) {
                continue;
            }
            match self.block(self.store.delete(&meta.location)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    removed.0 += 1;
                    removed.1 += meta.size;
                }
                Err(error) => {
                    return Err(self.error(&format!("removing unreferenced blob {name}"))(
                        error,
                    ));
                }
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_into_bucket_prefix_and_options() {
        let plain = |bucket, prefix| Location {
            bucket,
            prefix,
            options: Vec::new(),
        };
        assert_eq!(parse_url("s3://my-bucket").unwrap(), plain("my-bucket", ""));
        assert_eq!(
            parse_url("s3://my-bucket/").unwrap(),
            plain("my-bucket", "")
        );
        assert_eq!(
            parse_url("s3://b.c-d/easeml/store1/").unwrap(),
            plain("b.c-d", "easeml/store1")
        );
        assert_eq!(
            parse_url("s3://bucket/p?endpoint=http://127.0.0.1:9000&allow_http=true")
                .unwrap()
                .options,
            vec![
                ("aws_endpoint", "http://127.0.0.1:9000"),
                ("aws_allow_http", "true")
            ]
        );
        for (bad, why) in [
            ("s3://", "bucket name ``"),
            ("s3://ab", "bucket name `ab`"),
            ("s3://Upper", "bucket name `Upper`"),
            ("s3://b_c/x", "bucket name `b_c`"),
            ("s3://bucket/a//b", "prefix `a//b`"),
            ("s3://bucket/../x", "prefix `../x`"),
            ("https://bucket", "does not start with s3://"),
            (
                "s3://bucket?secret_access_key=x",
                "`secret_access_key` is not a location option",
            ),
        ] {
            let error = parse_url(bad).unwrap_err().to_string();
            assert!(error.contains(why), "{bad}: {error}");
            assert!(error.contains("write s3://BUCKET"), "{bad}: {error}");
        }
    }
}
