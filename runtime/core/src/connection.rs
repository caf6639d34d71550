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
            Ok(url) => Connection::from_settings(Some(&url), None),
            Err(_) => Connection::from_settings(None, None),
        }
    }

    /// [`Connection::from_env`] with the settings given: a non-blank `server` URL wins; else the
    /// embedded store at `home`, or at [`easeml_store::default_home`] when `home` is `None`.
    pub fn from_settings(server: Option<&str>, home: Option<PathBuf>) -> Result<Connection> {
        match server.map(str::trim) {
            Some(url) if !url.is_empty() => Ok(Connection::Remote {
                url: url.to_owned(),
            }),
            _ => Ok(Connection::Embedded {
                home: match home {
                    Some(home) => home,
                    None => easeml_store::default_home()?,
                },
            }),
        }
    }

    /// The embedded store under `home`.
    pub fn embedded(home: impl Into<PathBuf>) -> Connection {
        Connection::Embedded { home: home.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_wins_over_the_local_store() {
        assert_eq!(
            Connection::from_settings(Some(" http://h:9000 "), Some("/x".into())).unwrap(),
            Connection::Remote {
                url: "http://h:9000".to_owned()
            }
        );
        assert_eq!(
            Connection::from_settings(Some("  "), Some("/x".into())).unwrap(),
            Connection::embedded("/x")
        );
        assert!(matches!(
            Connection::from_settings(None, None),
            Ok(Connection::Embedded { .. }) | Err(_)
        ));
    }
}
