//! `cargo xtask gpu-bundle`: the GPU check as one command (issue 17, item 6).
//!
//! The lent GPU machines have PyTorch 2.11 (in `python3`) and no cargo, and nothing there can be
//! downloaded; easeml builds against PyTorch 2.13 (`tch` 0.26), whose CUDA libraries are too large
//! to carry. So the check is built here, against the machine's libtorch, and only the binaries
//! travel:
//! 1. libtorch 2.11.0 (PyPI's `torch` wheel, CUDA 13.0, the build the machines have) is unpacked,
//!    headers and libraries only, into `${XDG_CACHE_HOME:-$HOME/.cache}/easeml/libtorch-2.11.0`
//!    (once; about 0.5 GB downloaded, 1 GB unpacked);
//! 2. the working tree (tracked and untracked-but-not-ignored files) is mirrored into
//!    `target/gpu/src` with `tch` / `torch-sys` pinned to `=0.24.0` (the bindings of PyTorch 2.11;
//!    easeml's code compiles against both) — a copy, so the workspace's own `Cargo.lock` and
//!    target dir never see the other version (one `links = "tch"` per dependency graph: a cargo
//!    feature could not switch them);
//! 3. `easeml` and the trainer's test binaries are built there in release mode (target dir
//!    `target/gpu/target`, kept between calls) with `LIBTORCH` pointing at the unpacked install;
//!    the CUDA runtime libraries it needs are not unpacked here, so the link allows undefined
//!    symbols in shared libraries (`--allow-shlib-undefined`): the machine's libtorch brings them;
//! 4. the stripped binaries, `xtask/gpu/run.sh` and `BUILD.txt` (commit, versions) go to
//!    `gpu-check/` at the repository root (git-ignored), at most [`MAX_BUNDLE_BYTES`].
//!
//! Then, on a session with a lent machine: the device tool's `run` with `carry: ["gpu-check"]`
//! and `command: "bash gpu-check/run.sh"`. The script finds the machine's libtorch through its
//! `python3`, runs the trainer's tests on CUDA, `easeml bench trainer` against PyTorch on the same
//! GPU, and `easeml bench mop --real` with one and several workers sharing the GPU; logs and
//! summaries come back in `$OUT`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::run_step;

/// The PyTorch the lent machines have.
pub const TORCH_VERSION: &str = "2.11.0";

/// The tch (and torch-sys) release built for [`TORCH_VERSION`].
pub const TCH_VERSION: &str = "0.24.0";

/// The most the bundle may hold: the device tool carries 64 MiB in all, the tracked tree included.
pub const MAX_BUNDLE_BYTES: u64 = 48 * 1024 * 1024;

/// Where libtorch 2.11 is unpacked: `<cache>/easeml/libtorch-2.11.0` (its `torch/` holds `include/`
/// and `lib/`).
fn libtorch_home() -> Result<PathBuf> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?,
        )
        .join(".cache"),
    };
    Ok(cache
        .join("easeml")
        .join(format!("libtorch-{TORCH_VERSION}")))
}

/// Downloads and unpacks libtorch [`TORCH_VERSION`] once; returns its `torch/` dir (`LIBTORCH`).
fn ensure_libtorch(python: &Path) -> Result<PathBuf> {
    let home = libtorch_home()?;
    let torch = home.join("torch");
    let marker = home.join(".easeml-unpacked");
    if marker.is_file() && torch.join("lib").join("libtorch_cpu.so").is_file() {
        return Ok(torch);
    }
    let wheels = home.join("wheel");
    std::fs::create_dir_all(&wheels).with_context(|| format!("creating {}", wheels.display()))?;
    let mut download = Command::new(python);
    download.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]);
    download.args([
        "--python-version",
        "3.12",
        "--platform",
        "manylinux_2_28_x86_64",
    ]);
    download
        .arg(format!("torch=={TORCH_VERSION}"))
        .arg("-d")
        .arg(&wheels);
    run_step(
        &format!("download PyPI's torch {TORCH_VERSION} wheel"),
        download,
    )?;
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    name.starts_with(&format!("torch-{TORCH_VERSION}-")) && name.ends_with(".whl")
                })
        })
        .context("pip downloaded no torch wheel")?;
    // Python's zipfile: no `unzip` needed. Only the headers, the libraries and the version.
    let mut unpack = Command::new(python);
    unpack.args([
        "-c",
        "import sys, zipfile\n\
         z = zipfile.ZipFile(sys.argv[1])\n\
         names = [n for n in z.namelist() if n.startswith(('torch/include/', 'torch/lib/', 'torch/share/')) or n == 'torch/version.py']\n\
         z.extractall(sys.argv[2], names)\n",
    ]);
    unpack.arg(&wheel).arg(&home);
    run_step("unpack libtorch's headers and libraries", unpack)?;
    std::fs::remove_dir_all(&wheels).ok();
    std::fs::write(&marker, TORCH_VERSION)?;
    Ok(torch)
}

/// The files of the working tree as git sees them: tracked, and untracked but not ignored.
fn tree_files(root: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .context("running git ls-files")?;
    if !output.status.success() {
        bail!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let listed: BTreeSet<PathBuf> = output
        .stdout
        .split(|&byte| byte == 0)
        .filter(|name| !name.is_empty())
        .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
        .collect();
    // A tracked file deleted in the working tree is listed but gone.
    Ok(listed
        .into_iter()
        .filter(|path| root.join(path).is_file())
        .collect())
}

/// Mirrors `files` of `root` into `mirror`: a file whose bytes are already there keeps its time
/// stamp (so cargo rebuilds only what changed), files no longer listed are removed.
fn mirror_tree(root: &Path, files: &[PathBuf], mirror: &Path) -> Result<()> {
    let wanted: BTreeSet<&Path> = files.iter().map(PathBuf::as_path).collect();
    for file in files {
        let (from, to) = (root.join(file), mirror.join(file));
        let bytes = std::fs::read(&from).with_context(|| format!("reading {}", from.display()))?;
        if std::fs::read(&to).is_ok_and(|old| old == bytes) {
            continue;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&to, &bytes).with_context(|| format!("writing {}", to.display()))?;
    }
    remove_unlisted(mirror, mirror, &wanted)
}

fn remove_unlisted(mirror: &Path, dir: &Path, wanted: &BTreeSet<&Path>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let relative = path.strip_prefix(mirror).unwrap_or(&path);
        if path.is_dir() {
            remove_unlisted(mirror, &path, wanted)?;
        } else if !wanted.contains(relative) && relative != Path::new("Cargo.lock") {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// The workspace manifest with `tch` and `torch-sys` pinned to [`TCH_VERSION`]; an error when the
/// manifest no longer declares them the way this rewrite expects.
pub fn pin_tch(manifest: &str) -> Result<String> {
    let mut pinned = 0;
    let lines: Vec<String> = manifest
        .lines()
        .map(|line| {
            let key = line.split('=').next().unwrap_or("").trim();
            if (key == "tch" || key == "torch-sys") && line.trim_start() == line {
                pinned += 1;
                format!("{key} = \"={TCH_VERSION}\"")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if pinned != 2 {
        bail!(
            "the workspace Cargo.toml should declare `tch = ...` and `torch-sys = ...` once each in \
             [workspace.dependencies] (found {pinned}); update xtask/src/gpu.rs"
        );
    }
    Ok(lines.join("\n") + "\n")
}

/// Runs `cargo <args>` in the mirror with libtorch 2.11's environment; returns its stdout.
fn mirror_cargo(mirror: &Path, target: &Path, libtorch: &Path, args: &[&str]) -> Result<String> {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(mirror).args(args);
    // The 2.13 venv's variables would win over LIBTORCH in torch-sys.
    for variable in [
        "LIBTORCH_USE_PYTORCH",
        "VIRTUAL_ENV",
        "LIBTORCH_INCLUDE",
        "LIBTORCH_LIB",
    ] {
        command.env_remove(variable);
    }
    command
        .env("LIBTORCH", libtorch)
        .env("LIBTORCH_CXX11_ABI", "1")
        .env("CARGO_TARGET_DIR", target)
        .env("RUSTFLAGS", "-C link-arg=-Wl,--allow-shlib-undefined")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
        .env("CARGO_INCREMENTAL", "0");
    eprintln!("==> cargo {}", args.join(" "));
    let started = std::time::Instant::now();
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo in the mirror")?;
    if !output.status.success() {
        bail!("cargo {} failed ({})", args.join(" "), output.status);
    }
    eprintln!(
        "==> cargo {}: ok in {:.1}s",
        args[0],
        started.elapsed().as_secs_f64()
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The test executables in cargo's `--message-format=json` output, by target name.
pub fn test_executables(messages: &str) -> Vec<(String, PathBuf)> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| {
            message["reason"] == "compiler-artifact" && message["profile"]["test"] == true
        })
        .filter_map(|message| {
            let name = message["target"]["name"].as_str()?.to_owned();
            let executable = message["executable"].as_str()?;
            Some((name, PathBuf::from(executable)))
        })
        .collect()
}

fn commit(root: &Path) -> String {
    Command::new("git")
        .current_dir(root)
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `cargo xtask gpu-bundle`: see the module docs.
pub fn bundle(root: &Path, python: &Path) -> Result<()> {
    let libtorch = ensure_libtorch(python)?;
    let work = root.join("target").join("gpu");
    let mirror = work.join("src");
    let target = work.join("target");
    std::fs::create_dir_all(&mirror)?;
    let files = tree_files(root)?;
    mirror_tree(root, &files, &mirror)?;
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let pinned = pin_tch(&manifest)?;
    if std::fs::read_to_string(mirror.join("Cargo.toml"))
        .ok()
        .as_deref()
        != Some(pinned.as_str())
    {
        std::fs::write(mirror.join("Cargo.toml"), pinned)?;
    }
    if !mirror.join("Cargo.lock").exists() {
        std::fs::copy(root.join("Cargo.lock"), mirror.join("Cargo.lock"))?;
    }
    mirror_cargo(
        &mirror,
        &target,
        &libtorch,
        &["build", "--release", "-p", "easeml-cli", "--bin", "easeml"],
    )?;
    let messages = mirror_cargo(
        &mirror,
        &target,
        &libtorch,
        &[
            "test",
            "--release",
            "-p",
            "easeml-trainer",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ],
    )?;
    let tests = test_executables(&messages);
    if tests.is_empty() {
        bail!("cargo built no test executable of easeml-trainer");
    }
    let bundle = root.join("gpu-check");
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle)?;
    }
    let bin = bundle.join("bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::copy(target.join("release").join("easeml"), bin.join("easeml"))?;
    for (name, executable) in &tests {
        std::fs::copy(executable, bin.join(format!("trainer-{name}")))?;
    }
    std::fs::copy(
        root.join("xtask").join("gpu").join("run.sh"),
        bundle.join("run.sh"),
    )?;
    std::fs::write(
        bundle.join("BUILD.txt"),
        format!(
            "commit {}\ntch {TCH_VERSION} against PyPI's torch {TORCH_VERSION} (CUDA 13.0 build)\ntrainer tests: {}\n",
            commit(root),
            tests
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )?;
    let mut bytes = 0;
    for entry in std::fs::read_dir(&bin)? {
        bytes += entry?.metadata()?.len();
    }
    if bytes > MAX_BUNDLE_BYTES {
        bail!(
            "the bundle holds {:.1} MiB, more than the {} MiB the device tool can carry beside the tree",
            bytes as f64 / 1048576.0,
            MAX_BUNDLE_BYTES / 1048576
        );
    }
    eprintln!(
        "==> gpu-check/ holds {:.1} MiB. On a session with a lent GPU machine, call the device tool's \
         run with carry [\"gpu-check\"] and command \"bash gpu-check/run.sh\" (timeout_s 540)",
        bytes as f64 / 1048576.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tch_and_torch_sys_are_pinned_and_nothing_else_changes() {
        let manifest = "[workspace.dependencies]\ntch = \"0.26\"\ntorch-sys = \"0.26\"\ntch-extra = \"1\"\n  tch = \"nested\"\n";
        let pinned = pin_tch(manifest).unwrap();
        assert_eq!(
            pinned,
            "[workspace.dependencies]\ntch = \"=0.24.0\"\ntorch-sys = \"=0.24.0\"\ntch-extra = \"1\"\n  tch = \"nested\"\n"
        );
        let error = pin_tch("[workspace.dependencies]\ntch = \"0.26\"\n").unwrap_err();
        assert!(error.to_string().contains("found 1"), "{error}");
    }

    #[test]
    fn the_workspace_manifest_can_be_pinned() {
        let manifest = std::fs::read_to_string(crate::project_root().join("Cargo.toml")).unwrap();
        assert!(pin_tch(&manifest).unwrap().contains("tch = \"=0.24.0\""));
    }

    #[test]
    fn test_executables_are_read_from_cargos_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"learn"},"profile":{"test":true},"executable":"/t/learn-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"easeml_trainer"},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        assert_eq!(
            test_executables(messages),
            vec![("learn".to_owned(), PathBuf::from("/t/learn-1"))]
        );
    }
}
