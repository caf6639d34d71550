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
}
