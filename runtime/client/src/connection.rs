//! How a client reaches the store: embedded (the local store) or remote (an `easeml serve` server),
//! and where a remote client finds the app's token.

use std::path::PathBuf;

use crate::Result;

/// Where an app's data lives. New ways to connect are new variants; [`Connection::from_env`] is what
/// the generated binaries call.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Connection {
    /// The local store under `home` (one SQLite file + blobs; no daemon).
    Embedded {
        /// The store's directory.
        home: PathBuf,
    },
    /// An `easeml serve` server. The app's token is `token` when given; else the token file under
    /// `token_dir` for this server and app; else the app is registered on the server (with
    /// `admin_token` when the server needs one) and the new token is saved in that file.
    Remote {
        /// The server's base URL, e.g. `http://127.0.0.1:9000` (`http://` is assumed when no scheme
        /// is given).
        url: String,
        /// The app's token (`EASEML_TOKEN`).
        token: Option<String>,
        /// The server's admin token, sent when registering the app (`EASEML_ADMIN_TOKEN`).
        admin_token: Option<String>,
        /// Where token files are read and written (`$EASEML_CONFIG_DIR/tokens`, default
        /// `<platform config dir>/easeml/tokens`); `None`: no token files.
        token_dir: Option<PathBuf>,
    },
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |token: &Option<String>| token.as_ref().map(|_| "(hidden)");
        match self {
            Connection::Embedded { home } => {
                f.debug_struct("Embedded").field("home", home).finish()
            }
            Connection::Remote {
                url,
                token,
                admin_token,
                token_dir,
            } => f
                .debug_struct("Remote")
                .field("url", url)
                .field("token", &hidden(token))
                .field("admin_token", &hidden(admin_token))
                .field("token_dir", token_dir)
                .finish(),
        }
    }
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

    /// [`Connection::from_env`] with the settings given: a non-blank `server` URL wins (see
    /// [`Connection::remote`]); else the embedded store at `home`, or at
    /// [`easeml_store::default_home`] when `home` is `None`.
    pub fn from_settings(server: Option<&str>, home: Option<PathBuf>) -> Result<Connection> {
        match server.map(str::trim) {
            Some(url) if !url.is_empty() => Ok(Connection::remote(url)),
            _ => Ok(Connection::Embedded {
                home: match home {
                    Some(home) => home,
                    None => easeml_store::default_home()?,
                },
            }),
        }
    }

    /// The server at `url`, with the token settings of the environment: `EASEML_TOKEN` (the app's
    /// token), `EASEML_ADMIN_TOKEN` (for registering) and the token files under
    /// [`Connection::default_token_dir`]. Blank variables count as unset.
    pub fn remote(url: impl Into<String>) -> Connection {
        Connection::Remote {
            url: url.into().trim().to_owned(),
            token: non_blank_var("EASEML_TOKEN"),
            admin_token: non_blank_var("EASEML_ADMIN_TOKEN"),
            token_dir: Connection::default_token_dir(),
        }
    }

    /// Where token files live: `$EASEML_CONFIG_DIR/tokens`, else `<platform config dir>/easeml/tokens`
    /// (e.g. `~/.config/easeml/tokens`); `None` when neither is known.
    pub fn default_token_dir() -> Option<PathBuf> {
        match non_blank_var("EASEML_CONFIG_DIR") {
            Some(dir) => Some(PathBuf::from(dir).join("tokens")),
            None => dirs::config_dir().map(|dir| dir.join("easeml").join("tokens")),
        }
    }

    /// The embedded store under `home`.
    pub fn embedded(home: impl Into<PathBuf>) -> Connection {
        Connection::Embedded { home: home.into() }
    }
}

/// An environment variable that is set and not blank, trimmed.
fn non_blank_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_wins_over_the_local_store() {
        assert!(matches!(
            Connection::from_settings(Some(" http://h:9000 "), Some("/x".into())).unwrap(),
            Connection::Remote { url, .. } if url == "http://h:9000"
        ));
        assert_eq!(
            Connection::from_settings(Some("  "), Some("/x".into())).unwrap(),
            Connection::embedded("/x")
        );
        assert!(matches!(
            Connection::from_settings(None, None),
            Ok(Connection::Embedded { .. }) | Err(_)
        ));
    }

    #[test]
    fn debug_output_hides_tokens() {
        let connection = Connection::Remote {
            url: "http://h:9000".to_owned(),
            token: Some("secret-app-token".to_owned()),
            admin_token: Some("secret-admin-token".to_owned()),
            token_dir: None,
        };
        let text = format!("{connection:?}");
        assert!(
            text.contains("http://h:9000") && text.contains("(hidden)"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }
}
