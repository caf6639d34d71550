//! The store's conformance suite: the same tests (`conformance/*.rs`) against both backends,
//! SQLite (a temporary home) and PostgreSQL (a fresh database on a real server that the tests
//! start: `support/postgres_server.rs`; the blobs in a temporary folder). A PostgreSQL test skips,
//! after a loud banner, only when no server can run here.

#[path = "support/postgres_server.rs"]
mod postgres_server;

use std::path::PathBuf;

use easeml_store::Store;

/// One store under test: where it is, so that a second connection (another process's) can open it.
pub struct Fixture {
    dir: tempfile::TempDir,
    url: Option<String>,
}

impl Fixture {
    /// The home folder (the SQLite file and the blobs, or the blobs only).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// A new connection to the store.
    pub fn open(&self) -> Store {
        match &self.url {
            None => Store::open(self.home()).unwrap(),
            Some(url) => Store::open_postgres(url, self.home()).unwrap(),
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
            NewExample, NewOutput, NewWorker, PageRequest, RunId, RunState, RunValidation, Store,
            StoredOutput, UnitResult, UnitState, WorkerState, best_run, broken_constraints,
            worker_id,
        };

        include!("conformance/helpers.rs");
        include!("conformance/store.rs");
        include!("conformance/units.rs");
    };
}

mod sqlite {
    use super::Fixture;

    fn open() -> Option<(Fixture, easeml_store::Store)> {
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
            url: None,
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
