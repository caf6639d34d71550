//! The Python of the generated Python package's test (`tests/tests/python_package.rs`): a
//! `python3` that can make a venv (Debian's `python3` and `python3-venv`), installed with apt-get
//! when `python3 -m venv` does not work. The test itself installs maturin, pytest, numpy and pillow
//! from PyPI into a venv under the target dir.
//!
//! Installing needs root (or passwordless sudo) and the Debian mirrors; when that fails this prints
//! a loud warning and carries on, and the test then fails saying how to install it.

use std::process::Command;

/// Whether `python3 -m venv` works: it needs the venv module and ensurepip (Debian splits both
/// into `python3-venv`).
fn venv_works() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Makes sure `python3 -m venv` works; returns whether it does.
pub fn ensure_python_venv() -> bool {
    if venv_works() {
        return true;
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
    eprintln!("==> install python3 and python3-venv (for the Python package's test)");
    let install = ["install", "-y", "-q", "python3", "python3-venv"];
    let installed = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
    if !installed || !venv_works() {
        eprintln!(
            "\n!!!!!!!!!!\n!!! WARNING: python3 cannot make a venv, so the Python package's test \
             (tests/tests/python_package.rs) will fail.\n!!! Install it with: apt-get install python3 python3-venv\n!!!!!!!!!!\n"
        );
        return false;
    }
    true
}
