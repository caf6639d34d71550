//! Tokens, in one place: how they are issued (32 random bytes as hex), hashed (sha256; the store
//! keeps only hashes), compared (in time that depends on neither contents nor lengths), and kept in
//! files (a client's token per server and app, a server's admin token).
//!
//! Who uses what: the store issues and hashes app tokens ([`crate::Store::register_app`],
//! [`crate::Store::verify_token`]); the server compares bearer tokens with [`same_secret`] and issues
//! the refine page's per-process token with [`issue`]; the remote client reads and saves its token
//! files; `easeml serve` reads its admin token with [`read_admin_token_file`].

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::blobs::hex;

/// The shortest admin token a server accepts.
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// A fresh random token: 32 bytes from the operating system, as 64 hex digits.
pub fn issue() -> crate::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| crate::Error::Random(error.to_string()))?;
    Ok(hex(&bytes))
}

/// The hash the store keeps of a token: sha256, as hex.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Equal strings, compared in time that depends on neither their contents nor their lengths (their
/// sha256 digests are compared byte by byte, all of them).
pub fn same_secret(given: &str, expected: &str) -> bool {
    let given = Sha256::digest(given.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    given
        .iter()
        .zip(expected.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Whether `token` hashes to `stored_hash` ([`hash`]), compared in constant time.
pub fn matches_hash(token: &str, stored_hash: &str) -> bool {
    let given = hash(token);
    let difference = stored_hash
        .bytes()
        .zip(given.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    difference == 0 && stored_hash.len() == given.len()
}

/// The admin token in `path` (surrounding whitespace trimmed); an error that says what is wrong when
/// the file cannot be read or the token is shorter than [`MIN_ADMIN_TOKEN_LEN`].
pub fn read_admin_token_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("reading the admin token file {}: {error}", path.display()))?;
    let token = text.trim();
    if token.len() < MIN_ADMIN_TOKEN_LEN {
        return Err(format!(
            "the admin token in {} is shorter than {MIN_ADMIN_TOKEN_LEN} characters; use a long random one",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

/// The token file of `app` on the server at `url`: `<dir>/<server>/<app>.token`, the server written
/// with every character other than letters, digits, `.` and `-` as `_` (`http_127.0.0.1_9000`).
pub fn token_file(dir: &Path, url: &str, app: &str) -> PathBuf {
    let server: String = url
        .replacen("://", "_", 1)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(server).join(format!("{app}.token"))
}

/// The token saved in `path`; `None` when there is no such file (or it is blank); an error when it
/// cannot be read (permissions, a folder in its place).
pub fn read_token_file(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|token| !token.is_empty())),
        // No such file, or a folder on its path that is a file: no token there.
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Saves a token: the folders made private (0700), the file written whole (0600) and renamed into
/// place, so that it is complete or absent.
pub fn save_token_file(path: &Path, token: &str) -> std::io::Result<()> {
    let folder = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a token file needs a folder"))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(folder)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&temporary, path)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_are_random_hex_and_compare_by_hash() {
        let one = issue().unwrap();
        let two = issue().unwrap();
        assert_eq!(one.len(), 64);
        assert!(one.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(one, two);
        assert!(matches_hash(&one, &hash(&one)));
        assert!(!matches_hash(&two, &hash(&one)));
        assert!(!matches_hash(&one, &hash(&one)[..10]));
        assert!(same_secret(&one, &one.clone()));
        assert!(!same_secret(&one, &two));
        assert!(!same_secret("", &one));
    }

    #[test]
    fn admin_token_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin");
        std::fs::write(&path, "  0123456789abcdef\n").unwrap();
        assert_eq!(read_admin_token_file(&path).unwrap(), "0123456789abcdef");
        std::fs::write(&path, "short\n").unwrap();
        assert!(
            read_admin_token_file(&path)
                .unwrap_err()
                .contains("shorter than 16 characters")
        );
        let missing = read_admin_token_file(&dir.path().join("none")).unwrap_err();
        assert!(
            missing.starts_with("reading the admin token file"),
            "{missing}"
        );
    }

    #[test]
    fn token_files_are_named_by_server_and_app() {
        let dir = Path::new("/t");
        assert_eq!(
            token_file(dir, "http://127.0.0.1:9000", "pics"),
            Path::new("/t/http_127.0.0.1_9000/pics.token")
        );
        assert_eq!(
            token_file(dir, "https://example.org/easeml", "pics"),
            Path::new("/t/https_example.org_easeml/pics.token")
        );
    }

    #[test]
    fn a_saved_token_reads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = token_file(dir.path(), "http://h:1", "app");
        assert_eq!(read_token_file(&path).unwrap(), None);
        save_token_file(&path, "abc123").unwrap();
        assert_eq!(read_token_file(&path).unwrap().as_deref(), Some("abc123"));
        save_token_file(&path, "def456").unwrap();
        assert_eq!(read_token_file(&path).unwrap().as_deref(), Some("def456"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
        }
        // Nothing else is left in the folder.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("app.token")]);
        // An unreadable token file is an error that names it.
        let folder = dir.path().join("folder.token");
        std::fs::create_dir(&folder).unwrap();
        assert!(read_token_file(&folder).is_err());
    }
}
