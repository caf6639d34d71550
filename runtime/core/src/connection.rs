//! How a client reaches the store: embedded (the local store) or remote (a server, not yet built).

use std::path::PathBuf;

use crate::Result;

/// Where an app's data lives. New ways to connect are new variants; [`Connection::from_env`] is what
/// the generated binaries call, so they need no change when server mode arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Connection {
    /// The local store under `home` (one SQLite file + blobs; no daemon).
    Embedded {
        /// The store's directory.
        home: PathBuf,
    },
    /// An `easeml serve` server (not available yet: opening it is an error that says so).
    Remote {
        /// The server's base URL.
        url: String,
    },
}

impl Connection {
    /// `EASEML_SERVER` when set and not empty (remote), else the embedded store at `$EASEML_HOME` or
    /// the platform data directory (DESIGN.md section 2).
    pub fn from_env() -> Result<Connection> {
        match std::env::var("EASEML_SERVER") {
            Ok(url) if !url.trim().is_empty() => Ok(Connection::Remote {
                url: url.trim().to_owned(),
            }),
            _ => Ok(Connection::Embedded {
                home: easeml_store::default_home()?,
            }),
        }
    }

    /// The embedded store under `home`.
    pub fn embedded(home: impl Into<PathBuf>) -> Connection {
        Connection::Embedded { home: home.into() }
    }
}
