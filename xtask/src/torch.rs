//! libtorch set-up for the trainer (DESIGN.md section 6): PyPI's `torch` in a virtual environment under
//! the user's cache dir, found by `torch-sys` through `LIBTORCH_USE_PYTORCH=1`.
//!
//! `torch-sys` 0.26 runs `python` (when `VIRTUAL_ENV` is set, else `python3`) from `PATH` to ask torch
//! where its headers and libraries are, so the environment is: `LIBTORCH_USE_PYTORCH=1`,
//! `VIRTUAL_ENV=<venv>` and `<venv>/bin` first on `PATH`. The set-up writes a marker file once pip has
//! succeeded, so a second call costs a few file checks.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The PyTorch version `tch` 0.26 expects.
pub const TORCH_VERSION: &str = "2.13.0";

/// Where the venv lives and the environment that points `torch-sys` at it.
pub struct TorchEnv {
    /// The virtual environment, `${XDG_CACHE_HOME:-$HOME/.cache}/easeml/torch-venv`.
    pub venv: PathBuf,
}

impl TorchEnv {
    /// The venv path from `EASEML_TORCH_VENV`, else `XDG_CACHE_HOME`, else `HOME/.cache`.
    pub fn locate() -> Result<Self> {
        if let Some(venv) = std::env::var_os("EASEML_TORCH_VENV") {
            return Ok(Self {
                venv: PathBuf::from(venv),
            });
        }
        let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => {
                let home =
                    std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?;
                PathBuf::from(home).join(".cache")
            }
        };
        Ok(Self {
            venv: cache.join("easeml").join("torch-venv"),
        })
    }

    fn bin(&self) -> PathBuf {
        self.venv.join("bin")
    }

    pub fn python(&self) -> PathBuf {
        self.bin().join("python")
    }

    fn marker(&self) -> PathBuf {
        self.venv.join(format!(".easeml-torch-{TORCH_VERSION}-ok"))
    }

    /// True when a previous set-up finished and the venv's python is still there.
    pub fn is_installed(&self) -> bool {
        self.marker().is_file() && self.python().exists()
    }

    /// `PATH` with the venv's `bin` first.
    fn path_with_venv(&self) -> Result<OsString> {
        let mut paths = vec![self.bin()];
        if let Some(path) = std::env::var_os("PATH") {
            paths.extend(std::env::split_paths(&path).filter(|dir| dir != &self.bin()));
        }
        std::env::join_paths(paths).context("PATH contains a character that cannot be joined")
    }

    /// Applies the libtorch environment to a command.
    pub fn apply(&self, command: &mut Command) {
        command.env("LIBTORCH_USE_PYTORCH", "1");
        command.env("VIRTUAL_ENV", &self.venv);
        if let Ok(path) = self.path_with_venv() {
            command.env("PATH", path);
        }
    }

    /// The same environment as shell exports.
    pub fn shell_exports(&self) -> String {
        let venv = self.venv.display();
        format!(
            "export LIBTORCH_USE_PYTORCH=1\nexport VIRTUAL_ENV='{venv}'\nexport PATH='{venv}/bin':\"$PATH\"\n"
        )
    }
}

/// Creates the venv and installs torch unless already done; returns the environment.
pub fn setup() -> Result<TorchEnv> {
    let torch = TorchEnv::locate()?;
    if torch.is_installed() {
        eprintln!(
            "==> libtorch: torch=={TORCH_VERSION} already set up in {}",
            torch.venv.display()
        );
        return Ok(torch);
    }
    let started = Instant::now();
    eprintln!(
        "==> libtorch: installing torch=={TORCH_VERSION} into {} (a few minutes, ~4.7 GB)",
        torch.venv.display()
    );
    if !torch.python().exists() {
        if let Some(parent) = torch.venv.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        let python = std::env::var_os("EASEML_PYTHON").unwrap_or_else(|| "python3".into());
        run(
            Command::new(&python).args(["-m", "venv"]).arg(&torch.venv),
            "python3 -m venv",
        )?;
    }
    run(
        Command::new(torch.python())
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(format!("torch=={TORCH_VERSION}")),
        "pip install torch",
    )?;
    check_lib_dir(&torch.venv)?;
    std::fs::write(torch.marker(), format!("torch=={TORCH_VERSION}\n"))
        .with_context(|| format!("could not write {}", torch.marker().display()))?;
    eprintln!(
        "==> libtorch: ok in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(torch)
}

fn run(command: &mut Command, name: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("could not start `{name}`"))?;
    if !status.success() {
        bail!("`{name}` failed ({status})");
    }
    Ok(())
}

/// Checks that the install has `torch/lib/libtorch_cpu.so` somewhere under the venv's site-packages.
fn check_lib_dir(venv: &Path) -> Result<()> {
    let lib = venv.join("lib");
    let entries = std::fs::read_dir(&lib).with_context(|| format!("no {}", lib.display()))?;
    for entry in entries.flatten() {
        let torch_lib = entry.path().join("site-packages/torch/lib");
        if torch_lib.join("libtorch_cpu.so").exists() {
            return Ok(());
        }
    }
    bail!(
        "pip finished but no torch/lib/libtorch_cpu.so under {}",
        lib.display()
    )
}
