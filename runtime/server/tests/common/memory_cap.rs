//! Runs one test of the current test binary again in a child process whose address space is capped
//! (`ulimit -v`), so that an allocation sized by hostile input fails the test (the child aborts
//! with "memory allocation of N bytes failed") instead of passing on a large machine.
//!
//! A test calls [`run_capped`] first; in the parent it re-runs itself and returns `false`, in the
//! child (marked by an environment variable) it returns `true` and the test goes on.

use std::process::Command;

/// Set in the capped child.
const CHILD: &str = "EASEML_TEST_MEMORY_CAPPED";

/// In the parent: runs test `name` (its full path in this binary, e.g. `hostile_lines`) in a child
/// capped at `kib` KiB of address space, asserts that it passed, and returns `false` (the caller
/// returns). In the child: returns `true`.
pub fn run_capped(name: &str, kib: u64) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(&exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // What the child reported (shown with --nocapture).
    eprint!("{stderr}");
    assert!(
        output.status.success(),
        "`{name}` failed under a {kib} KiB address-space cap ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the capped child ran no test `{name}`:\n{stdout}\n{stderr}"
    );
    false
}
