// The watchdog of a server started for the tests of one test process: a shell that starts the
// server in the background, waits for this process to exit (tests end without a hook to stop what
// they started), then stops the server and removes its files. Used by `postgres_server.rs` and
// `s3_server.rs`, which name it `crate::watchdog`: a test crate that includes either includes
// this file once at its root as `watchdog`.

use std::process::{Command, Stdio};

/// Starts `command` (a shell command line, the server) in the background under a watchdog that,
/// once this process has exited, runs `stop` (where `$server` is the background job's pid).
pub fn spawn(what: &str, command: &str, stop: &str) {
    let script = format!(
        "{command} & server=$!; while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; {stop}",
        parent = std::process::id(),
    );
    let watchdog = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("starting the {what}'s watchdog: {error}"));
    // Never waited for: it outlives this process on purpose (it stops the server afterwards).
    std::mem::forget(watchdog);
}

/// `text` as one word of a POSIX shell command line.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
