//! The store's conformance suite: the same tests (`conformance/*.rs`) against every backend:
//! SQLite (a temporary home), PostgreSQL (a fresh database on a real server that the tests start:
//! `support/postgres_server.rs`; the blobs in a temporary folder) and, with the `s3` feature,
//! PostgreSQL with its blobs in a bucket of a real S3-compatible server the tests start
//! (`support/s3_server.rs`). A PostgreSQL or S3 test skips, after a loud banner, only when no
//! server can run here.

#[path = "support/postgres_server.rs"]
mod postgres_server;
#[cfg(feature = "s3")]
#[path = "support/s3_server.rs"]
mod s3_server;
#[path = "support/watchdog.rs"]
mod watchdog;

use std::path::PathBuf;

use easeml_store::Store;

/// One store under test: where it is, so that a second connection (another process's) can open it.
pub struct Fixture {
    dir: tempfile::TempDir,
    url: Option<String>,
    /// The S3 location of the blobs (`s3://...`), recorded in the home's `blobs.url`.
    blobs: Option<String>,
}

impl Fixture {
    /// The home folder (the SQLite file and the blobs, or the blobs only, or the blob location).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// A new connection to the store.
    pub fn open(&self) -> Store {
        if let Some(blobs) = &self.blobs {
            std::fs::create_dir_all(self.home()).unwrap();
            std::fs::write(self.home().join(easeml_store::BLOBS_URL_FILE), blobs).unwrap();
        }
        match &self.url {
            None => Store::open(self.home()).unwrap(),
            Some(url) => Store::open_postgres(url, self.home()).unwrap(),
        }
    }

    /// Replaces a stored blob's bytes behind the store's back.
    #[allow(dead_code)]
    pub fn overwrite_blob(&self, store: &Store, hash: &easeml_store::BlobHash, bytes: &[u8]) {
        match store.blob_path(hash) {
            Some(path) => std::fs::write(path, bytes).unwrap(),
            #[cfg(feature = "s3")]
            None => {
                let location = self.blobs.as_deref().unwrap();
                let hash = hash.as_str();
                let key = format!("blobs/{}/{hash}", &hash[..2]);
                s3_server::overwrite(location, &key, bytes);
            }
            #[cfg(not(feature = "s3"))]
            None => unreachable!("blobs are files without the s3 feature"),
        }
    }
}

/// The imports every included suite file uses.
macro_rules! suite {
    () => {
        #[allow(unused_imports)]
        use std::time::Duration;

        #[allow(unused_imports)]
        use easeml_store::{
            AppId, Blob, BlobHash, ConstraintLimits, Error, ExampleId, Lease, MAX_LOSSES, NewApp,
            NewExample, NewOutput, NewSubEpoch, NewWorker, PageRequest, RunId, RunState,
            RunValidation, Store, StoredOutput, UnitId, UnitKind, UnitResult, UnitState,
            WorkerState, best_run, broken_constraints, worker_id,
        };

        include!("conformance/helpers.rs");
        include!("conformance/store.rs");
        include!("conformance/units.rs");
        include!("conformance/sub_epochs.rs");
        include!("conformance/ensembles.rs");
    };
}

mod sqlite {
    use super::Fixture;

    fn open() -> Option<(Fixture, easeml_store::Store)> {
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
            url: None,
            blobs: None,
        };
        let store = fixture.open();
        Some((fixture, store))
    }

    suite!();
}

mod postgres {
    use super::Fixture;

    fn open() -> Option<(Fixture, easeml_store::Store)> {
        let url = super::postgres_server::database()?;
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
            url: Some(url),
            blobs: None,
        };
        let store = fixture.open();
        Some((fixture, store))
    }

    suite!();

    #[test]
    fn a_postgres_store_is_migrated_once_and_names_no_password() {
        let Some((fixture, store)) = open() else {
            return;
        };
        assert_eq!(
            store.schema_version().unwrap(),
            easeml_store::MIGRATIONS.len() as u32
        );
        assert_eq!(store.dialect(), easeml_store::db::Dialect::Postgres);
        assert_eq!(store.integrity_check().unwrap(), Ok(()));
        // A second connection finds the schema in place.
        let again = fixture.open();
        assert_eq!(
            again.schema_version().unwrap(),
            easeml_store::MIGRATIONS.len() as u32
        );
        // A wrong password or port is an error that names the server, never the password.
        let url = fixture.url.clone().unwrap();
        let wrong = url
            .replace("postgres@", "postgres:hunter2@")
            .replace("127.0.0.1:", "127.0.0.1:1");
        let error = Store::open_postgres(&wrong, fixture.home())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("connecting to postgres://postgres:***@127.0.0.1:1"),
            "{error}"
        );
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn one_coordinator_holds_the_advisory_lock_while_its_connection_lives() {
        let Some((fixture, first)) = open() else {
            return;
        };
        assert!(first.try_lock_coordinator().unwrap());
        let second = fixture.open();
        assert!(!second.try_lock_coordinator().unwrap());
        drop(first);
        // The server releases a session's advisory locks when the session ends.
        let started = std::time::Instant::now();
        while !second.try_lock_coordinator().unwrap() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_postgres_location_binds_its_blob_folder_to_its_database() {
        let Some(url) = super::postgres_server::database() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let blobs = dir.path().join("shared");
        let home = easeml_store::store_home(&url, Some(&blobs)).unwrap();
        assert_eq!(home, blobs);
        assert!(Store::exists(&home));
        // The folder now opens the PostgreSQL store: its rows in the database, its blobs here.
        let mut store = Store::open(&home).unwrap();
        assert_eq!(store.dialect(), easeml_store::db::Dialect::Postgres);
        let (app, _) = store
            .register_app(&easeml_store::NewApp {
                name: "bound".to_owned(),
                manifest: "{}".to_owned(),
                system_type: "{input: {[Tensor[1]], []}, output: {[Tensor[1]], []}}".to_owned(),
                label_capacity: None,
                declared_labels: None,
            })
            .unwrap();
        let again = easeml_store::store_home(&url, Some(&blobs)).unwrap();
        assert_eq!(
            Store::open(&again).unwrap().app(app.id).unwrap().name,
            "bound"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(home.join(easeml_store::POSTGRES_URL_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(
                mode & 0o077,
                0,
                "the URL file is readable by others: {mode:o}"
            );
        }
        // Another database may not take the folder; an SQLite store's folder is not a blob folder;
        // --blobs goes with a URL only.
        let other = url.replace("easeml_test", "other_db");
        let error = easeml_store::store_home(&other, Some(&blobs))
            .unwrap_err()
            .to_string();
        assert!(error.contains("belongs to the store at"), "{error}");
        // A database that does not answer binds nothing: the folder stays free for the right URL.
        let free = dir.path().join("free");
        let bad = format!("{url}_missing");
        let error = easeml_store::store_home(&bad, Some(&free))
            .unwrap_err()
            .to_string();
        assert!(error.contains("does the database exist"), "{error}");
        assert!(!free.join(easeml_store::POSTGRES_URL_FILE).exists());
        assert_eq!(easeml_store::store_home(&url, Some(&free)).unwrap(), free);
        let sqlite = dir.path().join("sqlite");
        Store::open(&sqlite).unwrap();
        let error = easeml_store::store_home(&url, Some(&sqlite))
            .unwrap_err()
            .to_string();
        assert!(error.contains("holds an SQLite store"), "{error}");
        let error = easeml_store::store_home("/some/folder", Some(&blobs))
            .unwrap_err()
            .to_string();
        assert!(error.contains("goes with a postgres:// store"), "{error}");
    }

    #[test]
    fn the_store_works_from_inside_a_tokio_runtime_as_the_server_calls_it() {
        let Some((fixture, store)) = open() else {
            return;
        };
        drop(store);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        // Opened, used and dropped on a runtime thread (the server's start-up) and in a blocking
        // task (its handlers): the client's own runtime is kept off tokio's threads.
        let names = runtime.block_on(async {
            let mut store = fixture.open();
            store
                .register_app(&easeml_store::NewApp {
                    name: "async".to_owned(),
                    manifest: "{}".to_owned(),
                    system_type: "{input: {[Tensor[1]], []}, output: {[Tensor[1]], []}}".to_owned(),
                    label_capacity: None,
                    declared_labels: None,
                })
                .unwrap();
            drop(store);
            let home = fixture.home();
            let url = fixture.url.clone().unwrap();
            tokio::task::spawn_blocking(move || {
                let store = Store::open_postgres(&url, home).unwrap();
                store
                    .apps()
                    .unwrap()
                    .into_iter()
                    .map(|app| app.name)
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap()
        });
        assert_eq!(names, ["async"]);
    }
}

/// PostgreSQL rows with the blobs in a bucket: the same suite, and what only S3 blobs do.
#[cfg(feature = "s3")]
mod postgres_s3 {
    use super::Fixture;

    fn open() -> Option<(Fixture, easeml_store::Store)> {
        let url = super::postgres_server::database()?;
        let blobs = super::s3_server::bucket("blobs")?;
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
            url: Some(url),
            blobs: Some(blobs),
        };
        let store = fixture.open();
        Some((fixture, store))
    }

    suite!();

    #[test]
    fn blobs_live_in_the_bucket_not_in_the_home() {
        let Some((fixture, store)) = open() else {
            return;
        };
        let hash = store.put_blob(b"bytes in a bucket").unwrap();
        assert_eq!(store.blob_path(&hash), None);
        assert!(!fixture.home().join("blobs").exists());
        // A second connection (another worker's) reads them.
        assert_eq!(fixture.open().blob(&hash).unwrap(), b"bytes in a bucket");
        // Garbage collection removes unreferenced objects only.
        store.put_blob(b"also").unwrap();
        let (removed, bytes) = store.collect_garbage(std::time::Duration::ZERO).unwrap();
        assert_eq!((removed, bytes), (2, 21));
        assert!(store.blob(&hash).is_err());
    }

    #[test]
    fn a_bucket_that_does_not_answer_is_an_error_that_names_it() {
        let Some((fixture, _store)) = open() else {
            return;
        };
        let location = fixture.blobs.clone().unwrap();
        let missing = location.replacen("s3://easeml-test-", "s3://no-such-bucket-", 1);
        std::fs::write(fixture.home().join(easeml_store::BLOBS_URL_FILE), &missing).unwrap();
        let error =
            easeml_store::Store::open_postgres(fixture.url.as_deref().unwrap(), fixture.home())
                .unwrap_err()
                .to_string();
        assert!(
            error.starts_with("blob storage s3://no-such-bucket-"),
            "{error}"
        );
        assert!(error.contains("does the bucket exist"), "{error}");
        std::fs::write(fixture.home().join(easeml_store::BLOBS_URL_FILE), "s3://x").unwrap();
        let error =
            easeml_store::Store::open_postgres(fixture.url.as_deref().unwrap(), fixture.home())
                .unwrap_err()
                .to_string();
        assert!(error.contains("is not an S3 blob location"), "{error}");
    }
}
