//! The headless browser of the refine page's test: Debian's `chromium` and `chromium-driver`,
//! installed with apt-get when `/usr/bin/chromium` or `/usr/bin/chromedriver` is missing.
//!
//! Installing needs root (or passwordless sudo) and the Debian mirrors; when that fails this prints
//! a loud warning and carries on, and the browser test then skips with its own loud message.

use std::path::Path;
use std::process::Command;

/// Where Debian puts the browser and its WebDriver.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Makes sure Chromium and chromedriver are installed; returns whether they are.
pub fn ensure_chromium() -> bool {
    if installed() {
        return true;
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        warn("no apt-get on this machine");
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
    eprintln!("==> install chromium and chromium-driver (for the refine page's browser test)");
    let install = ["install", "-y", "-q", "chromium", "chromium-driver"];
    let installed_now = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
    if !installed_now {
        warn("apt-get install chromium chromium-driver failed");
        return false;
    }
    installed()
}

fn installed() -> bool {
    Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()
}

fn warn(why: &str) {
    eprintln!(
        "\n!!!!!!!!!!\n!!! WARNING: {why}: Chromium is not installed, so the refine page's browser test \
         (runtime/core/tests/refine_browser.rs) will SKIP.\n!!! Install it with: apt-get install chromium chromium-driver\n!!!!!!!!!!\n"
    );
}
