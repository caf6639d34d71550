//! The Debian packages some tests need beyond the Rust toolchain, installed with apt-get when a
//! file they provide is missing: Chromium and chromedriver (the browser tests of the refine page and the web console),
//! munge and Slurm (the tests that run workers on a real Slurm cluster), the PostgreSQL server
//! (the store's conformance suite and the cluster tests), and a `python3` that can make a venv (the
//! generated Python package's test, which then installs maturin, pytest, numpy and pillow from PyPI
//! into a venv of its own).
//!
//! Installing needs root (or passwordless sudo) and the Debian mirrors; when that fails this prints
//! a loud warning and carries on, and the tests that need the package then skip with their own
//! loud message.

use std::path::Path;
use std::process::Command;

/// Packages some tests need.
pub struct Need {
    /// The Debian packages.
    pub packages: &'static [&'static str],
    /// Files they install: the packages count as installed when all of these exist (a `*` stands
    /// for one path component, e.g. a version folder).
    pub files: &'static [&'static str],
    /// A command that must succeed too (empty: none).
    pub probe: &'static [&'static str],
    /// Which tests need them.
    pub tests: &'static str,
}

/// Headless Chromium and its WebDriver.
pub const CHROMIUM: Need = Need {
    packages: &["chromium", "chromium-driver"],
    files: &["/usr/bin/chromium", "/usr/bin/chromedriver"],
    probe: &[],
    tests: "the browser tests (runtime/server/tests/refine_browser.rs, runtime/cli/tests/web.rs)",
};

/// munge and the Slurm daemons and client commands.
pub const SLURM: Need = Need {
    packages: &["slurm-wlm", "munge"],
    files: &[
        "/usr/sbin/munged",
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/bin/sbatch",
    ],
    probe: &[],
    tests: "the Slurm cluster test (runtime/cli/tests/slurm.rs)",
};

/// The PostgreSQL server (its programs under `/usr/lib/postgresql/<version>/bin`).
pub const POSTGRES: Need = Need {
    packages: &["postgresql"],
    files: &[
        "/usr/lib/postgresql/*/bin/postgres",
        "/usr/lib/postgresql/*/bin/initdb",
    ],
    probe: &[],
    tests: "the PostgreSQL store tests (runtime/store/tests/conformance.rs)",
};

/// A `python3` whose venv module works (Debian splits it, and ensurepip, into `python3-venv`).
pub const PYTHON_VENV: Need = Need {
    packages: &["python3", "python3-venv"],
    files: &[],
    probe: &["python3", "-c", "import venv, ensurepip"],
    tests: "the Python package's test (tests/tests/python_package.rs)",
};

/// Makes sure the packages are installed; returns whether they are.
pub fn ensure(need: &Need) -> bool {
    if installed(need) {
        return true;
    }
    let names = need.packages.join(" ");
    if !Path::new("/usr/bin/apt-get").exists() {
        warn(need, "no apt-get on this machine");
        return false;
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0");
    let apt = |args: &[&str]| -> bool {
        let mut command = if is_root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|status| status.success())
    };
    eprintln!("==> install {names} (for {})", need.tests);
    let mut install = vec!["install", "-y", "-q"];
    install.extend_from_slice(need.packages);
    let installed_now = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
    if !installed_now {
        warn(need, &format!("apt-get install {names} failed"));
        return false;
    }
    installed(need)
}

fn installed(need: &Need) -> bool {
    let probe_passes = match need.probe.split_first() {
        None => true,
        Some((program, args)) => Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|output| output.status.success()),
    };
    need.files.iter().all(|file| exists(file)) && probe_passes
}

/// Whether `pattern` names a file; a `*` matches any one path component.
fn exists(pattern: &str) -> bool {
    let Some((prefix, suffix)) = pattern.split_once('*') else {
        return Path::new(pattern).exists();
    };
    let Ok(entries) = std::fs::read_dir(prefix) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let candidate = entry.path().to_string_lossy().into_owned() + suffix;
        exists(&candidate)
    })
}

fn warn(need: &Need, why: &str) {
    eprintln!(
        "\n!!!!!!!!!!\n!!! WARNING: {why}: {} not installed, so {} will SKIP.\n!!! Install with: apt-get install {}\n!!!!!!!!!!\n",
        need.packages.join(" and "),
        need.tests,
        need.packages.join(" ")
    );
}
