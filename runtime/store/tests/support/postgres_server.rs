// A real PostgreSQL server for the tests of one test process: `initdb` in a temporary directory,
// `postgres` on a free loopback port, started by the first test that asks for a database and
// stopped (its directory removed) by a watchdog once the test process has exited. Every call of
// `database()` creates a fresh database, so tests never see each other's rows.
//
// Debian's `postgresql` package provides the server (`cargo xtask setup` installs it). As root the
// server runs as the `postgres` user (PostgreSQL refuses to run as root). `EASEML_TEST_POSTGRES`
// (`postgres://user@host:port`, no database: a server whose user may create databases) replaces the server started
// here. Without either, `database()` says so loudly and returns `None`: the caller skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// The test crate's root includes `support/watchdog.rs` as `watchdog` beside this module.
use crate::watchdog;
use crate::watchdog::shell_quote;

/// A server: the URL of its `postgres` database, and the count of databases made so far.
struct Server {
    base: String,
    made: AtomicUsize,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();

/// A new empty database on the test server, as a URL; `None` (after a loud banner) when no server
/// can run here.
pub fn database() -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    let index = server.made.fetch_add(1, Ordering::SeqCst);
    let name = format!("easeml_test_{}_{index}", std::process::id());
    Some(easeml_store::create_database(&server.base, &name).expect("creating a test database"))
}

/// A failure (or, with `EASEML_ALLOW_SKIPS=1`, a loud skip): `easeml_test_support::missing_part`.
fn banner(why: &str) {
    easeml_test_support::missing_part(
        "the PostgreSQL tests",
        "a PostgreSQL server",
        why,
        "`cargo xtask setup` installs it (apt-get install postgresql), or set EASEML_TEST_POSTGRES",
    );
}

/// The newest installed server's programs (`/usr/lib/postgresql/<version>/bin`).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// `program args...`, as the `postgres` user when running as root.
fn as_server_user(program: &Path, root: bool) -> Command {
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn start() -> Option<Server> {
    if let Ok(url) = std::env::var("EASEML_TEST_POSTGRES") {
        return Some(Server {
            base: url.trim_end_matches('/').to_owned(),
            made: AtomicUsize::new(0),
        });
    }
    let Some(bin) = bin_dir() else {
        banner("no /usr/lib/postgresql/<version>/bin/postgres");
        return None;
    };
    let root = is_root();
    let dir = std::env::temp_dir().join(format!("easeml-test-postgres-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test server's directory");
    if root {
        let owned = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .is_ok_and(|status| status.success());
        if !owned {
            banner("cannot hand its directory to the `postgres` user");
            return None;
        }
    }
    let data = dir.join("data");
    let initdb = as_server_user(&bin.join("initdb"), root)
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match initdb {
        Ok(output) if output.status.success() => {}
        Ok(output) => {
            banner(&format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
            return None;
        }
        Err(error) => {
            banner(&format!("initdb cannot run: {error}"));
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port");
    // The watchdog: the server runs until this test process is gone, then stops and its
    // directory goes.
    let mut server = as_server_user(&bin.join("postgres"), root);
    server
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(&dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_connections=200",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]);
    let program = format!("{:?}", server.get_program());
    let args: Vec<String> = server
        .get_args()
        .map(|arg| shell_quote(&arg.to_string_lossy()))
        .collect();
    watchdog::spawn(
        "test PostgreSQL server",
        &format!(
            "{program} {} >{log} 2>&1",
            args.join(" "),
            log = shell_quote(&dir.join("server.log").to_string_lossy()),
        ),
        // The postmaster itself: `runuser` does not pass signals on.
        &format!(
            "kill -INT \"$(head -n 1 {pid_file})\" 2>/dev/null || kill -INT $server; wait $server; rm -rf {dir}",
            pid_file = shell_quote(&data.join("postmaster.pid").to_string_lossy()),
            dir = shell_quote(&dir.to_string_lossy()),
        ),
    );
    let base = format!("postgres://postgres@127.0.0.1:{port}");
    let started = Instant::now();
    loop {
        if postgres::Client::connect(&format!("{base}/postgres"), postgres::NoTls).is_ok() {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            panic!("the test PostgreSQL server did not start within 30 s:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Server {
        base,
        made: AtomicUsize::new(0),
    })
}
