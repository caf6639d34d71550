//! What the tests of several easeml crates share (a dev-dependency only).
//!
//! **A test never passes by not running.** Tests that need an outside part (a PostgreSQL server,
//! an S3 server, Chromium, the Slurm daemons, Python from PyPI) call [`missing_part`] when the part
//! is not there. Under `cargo xtask test`, which installs every part first (and so in CI), that is a
//! failure naming the test and how to install the part. On a developer's machine without the part,
//! `EASEML_ALLOW_SKIPS=1` turns it into a loud skip instead, printed so that the run's output says
//! which tests did not run.
//!
//! **One target dir for the tests' nested builds.** The tests that build a crate outside the
//! workspace (trybuild's projects, the golden crates, a user's crate, the Slurm test's apps, the
//! Python package) build it in [`nested_build_target`], so that easeml's runtime and its
//! dependencies are built once for all of them instead of once per folder.
//!
//! **One way to a Python part from PyPI.** A test that needs Python packages (moto's S3 server,
//! the FLAML peer) gets them in a venv of its own under its target dir ([`pypi_venv`]), made once.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A loopback address where nobody listens, on a port outside the ephemeral range, for the tests
/// of "nobody is there" (a remote server, a ring's peer). A port freed by dropping a listener is
/// not one: a test running beside it may bind it again, or a connection's own ephemeral port may
/// equal it and the connection meets itself (a TCP simultaneous open that succeeds). Panics,
/// failing the test, when every port below 1024 answers.
pub fn refusing_address() -> SocketAddr {
    (1..1024)
        .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
        .find(|address| {
            matches!(
                TcpStream::connect_timeout(address, Duration::from_millis(200)),
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused
            )
        })
        .expect("a port below 1024 that refuses connections")
}

/// The target dir of every nested cargo build of the tests, given the test's
/// `CARGO_TARGET_TMPDIR` (`<target>/tmp`): trybuild's own, `<target>/tests/trybuild`, which
/// trybuild does not let a test choose, so the others join it. The crates built there use the
/// generated crates' profile (`templates/crate/profile.toml`) and the workspace's `Cargo.lock`, so
/// the dependencies they share are built once (a cold `cargo xtask test` built them twice, 3-4
/// minutes each on a 2-core machine, when trybuild's dir and the others' were apart).
pub fn nested_build_target(target_tmpdir: &Path) -> PathBuf {
    let target = target_tmpdir.parent().unwrap_or(target_tmpdir);
    target.join("tests").join("trybuild")
}

/// Copies the workspace's `Cargo.lock` into the nested crate at `crate_folder`, so that its build
/// resolves the dependency versions the workspace builds (and offline: no registry query) and
/// shares their artifacts in [`nested_build_target`]. Panics, failing the test, when it cannot.
pub fn use_the_workspace_lock(crate_folder: &Path) {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    let to = crate_folder.join("Cargo.lock");
    if let Err(error) = std::fs::copy(&lock, &to) {
        panic!("{} -> {}: {error}", lock.display(), to.display());
    }
}

/// A venv with `packages` from PyPI, made once as `<target_tmpdir>/<name>` (the test's
/// `CARGO_TARGET_TMPDIR`) and reused while its marker file is there; a lock file keeps concurrent
/// test processes from making it twice. `Err` says why it could not be made (no `python3` with
/// venv, no PyPI): the caller hands that to [`missing_part`].
pub fn pypi_venv(target_tmpdir: &Path, name: &str, packages: &[&str]) -> Result<PathBuf, String> {
    use std::process::{Command, Stdio};
    let venv = target_tmpdir.join(name);
    let ready = venv.join(".easeml-ready");
    if ready.exists() {
        return Ok(venv);
    }
    std::fs::create_dir_all(target_tmpdir).map_err(|error| error.to_string())?;
    let lock = std::fs::File::create(target_tmpdir.join(format!("{name}.lock")))
        .map_err(|error| error.to_string())?;
    lock.lock().map_err(|error| error.to_string())?;
    if ready.exists() {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .stdout(Stdio::null())
        .output()
        .map_err(|error| format!("python3 cannot run: {error}"))?;
    if !made.status.success() {
        return Err(format!(
            "python3 -m venv failed: {}",
            String::from_utf8_lossy(&made.stderr)
        ));
    }
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(packages)
        .stdout(Stdio::null())
        .output()
        .map_err(|error| format!("pip cannot run: {error}"))?;
    if !installed.status.success() {
        return Err(format!(
            "pip install {} failed: {}",
            packages.join(" "),
            String::from_utf8_lossy(&installed.stderr)
        ));
    }
    std::fs::write(&ready, "").map_err(|error| error.to_string())?;
    Ok(venv)
}

/// The variable that lets a test whose outside part is missing skip instead of failing.
pub const ALLOW_SKIPS: &str = "EASEML_ALLOW_SKIPS";

/// Says that `test` cannot run because `part` is missing (`why`), and how to get it (`install`).
/// Panics, failing the test, unless [`ALLOW_SKIPS`] is set to `1`; then prints the skip and
/// returns, and the caller returns early.
pub fn missing_part(test: &str, part: &str, why: &str, install: &str) {
    decide(skips_allowed(), test, part, why, install);
}

/// [`missing_part`] with the variable read.
fn decide(allowed: bool, test: &str, part: &str, why: &str, install: &str) {
    let message = format!("{test} needs {part}: {why}.\n!!! {install}");
    if allowed {
        let line = "!".repeat(100);
        eprintln!("\n{line}\n!!! SKIPPED ({ALLOW_SKIPS}=1): {message}\n{line}\n");
        return;
    }
    panic!(
        "{message}\n(the test command installs it; set {ALLOW_SKIPS}=1 to skip such tests on a machine without it)"
    );
}

/// Whether [`ALLOW_SKIPS`] is `1`.
pub fn skips_allowed() -> bool {
    std::env::var(ALLOW_SKIPS).is_ok_and(|value| value == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_part_fails_the_test_unless_skips_are_allowed() {
        let failed = std::panic::catch_unwind(|| {
            decide(false, "a test", "a server", "not installed", "install it")
        });
        let message = failed.unwrap_err();
        let message = message.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with("a test needs a server: not installed."),
            "{message}"
        );
        // Allowed: a printed skip, and the caller returns.
        decide(true, "a test", "a server", "not installed", "install it");
    }

    #[test]
    fn nested_builds_share_trybuilds_target_dir() {
        assert_eq!(
            nested_build_target(Path::new("/w/target/tmp")),
            Path::new("/w/target/tests/trybuild")
        );
    }

    #[test]
    fn the_workspace_lock_is_the_one_copied() {
        let folder = std::env::temp_dir().join(format!("easeml-lock-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        use_the_workspace_lock(&folder);
        let copied = std::fs::read_to_string(folder.join("Cargo.lock")).unwrap();
        std::fs::remove_dir_all(&folder).unwrap();
        assert!(
            copied.contains("name = \"easeml-test-support\""),
            "{copied:.200}"
        );
    }
}
