//! `easemlc`: the easeml compiler's command line.
//!
//! `easemlc check FILE...` validates programs; `easemlc explain FILE` shows the canonical system
//! type, the matching templates, the workload and the candidate models. Exit codes: 0 valid,
//! 1 the program has errors (diagnostics printed), 2 the command itself failed (unreadable file,
//! bad registry, bad arguments).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use easeml_compiler::codegen::{CrateOptions, RuntimeSource, crate_files, rustfmt_files};
use easeml_compiler::diagnostic::{self, JsonDiagnostic};
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Compiled, Diagnostic, Registry};

/// The easeml compiler: from a `.eml` schema to model candidates and a client crate.
#[derive(Parser)]
#[command(
    name = "easemlc",
    version,
    about,
    long_about = "The easeml compiler.\n\n\
        A .eml program says what goes into a model and what comes out, e.g.\n\n    \
        Input  = [256, 256, 3]\n    Output = [3]\n\n\
        easemlc checks it, prints its canonical system type, and picks the candidate models that \
        fit it from the template registry.",
    after_help = "Exit codes: 0 = valid, 1 = the program has errors, 2 = the command failed.\n\
        Examples:\n  easemlc check examples/*.eml\n  easemlc explain examples/galaxy_morphology.eml --json\n  easemlc examples/galaxy_morphology.eml -o galaxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check programs for errors; prints every error rustc-style (or as JSON) and exits 1 on errors.
    Check {
        /// The `.eml` files to check (`-` reads standard input).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        options: CommonOptions,
    },
    /// Generate the app's client crate (also: `easemlc FILE.eml`): typed Input/Output, a Client, and
    /// the binaries `<app>`, `<app>-feed`, `<app>-refine`, `<app>-infer`, `<app>-train`.
    Build {
        /// The `.eml` file to compile.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Where to write the crate (default: `./<app>/`).
        #[arg(short = 'o', long = "out", value_name = "DIR")]
        out: Option<PathBuf>,
        /// Bake a server URL into the binaries (EASEML_SERVER still overrides it).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// The checkout's `runtime/core` the crate's Cargo.toml takes easeml's runtime from, as a
        /// path (default: that of the checkout easemlc was built from, while it exists).
        #[arg(long, value_name = "PATH", conflicts_with = "runtime_git")]
        runtime_path: Option<String>,
        /// Take easeml's runtime from this git repository instead (cargo fetches it; no clone to
        /// keep), e.g. the URL easemlc was installed from with `cargo install --git URL`.
        #[arg(long, value_name = "URL")]
        runtime_git: Option<String>,
        /// With --runtime-git: the commit or tag (default: the repository's default branch).
        #[arg(long, value_name = "REV", requires = "runtime_git")]
        runtime_rev: Option<String>,
        /// Also write `DIR/python/`: the app's Python package (`pip install DIR/python`, then
        /// `import <app>`), a maturin project over the same generated client.
        #[arg(long)]
        python: bool,
        /// Do not write `.cargo/config.toml`, which makes the crate's builds share one build dir
        /// with every other app's (`$XDG_CACHE_HOME/easeml/app-build`); the crate then builds
        /// libtorch's bindings and the runtime again, into its own `target/`.
        #[arg(long)]
        no_shared_build: bool,
        #[command(flatten)]
        options: CommonOptions,
    },
    /// Show the canonical system type, the matching templates, the workload and the candidates.
    Explain {
        /// The `.eml` file to explain (`-` reads standard input).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[command(flatten)]
        options: CommonOptions,
    },
}

#[derive(Args)]
struct CommonOptions {
    /// Print machine-readable JSON on standard output instead of text.
    #[arg(long)]
    json: bool,
    /// Use this template registry (TOML) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    templates: Option<PathBuf>,
    /// The normalization exponents k of f_k for image-shaped inputs, e.g. `1,2,4` (the default of
    /// the built-in registry); `none` turns the augmentation off.
    #[arg(long, value_name = "K,K,...|none", value_parser = parse_normalization_ks)]
    norm_k: Option<NormalizationKs>,
    /// When to color the diagnostics.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Clone, Copy, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    // `easemlc FILE.eml ...` is `easemlc build FILE.eml ...`.
    let mut arguments: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = arguments.get(1).and_then(|first| first.to_str())
        && !first.starts_with('-')
        && !["check", "explain", "build", "help"].contains(&first)
    {
        arguments.insert(1, "build".into());
    }
    let cli = Cli::parse_from(arguments);
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs a command; `Ok(false)` when a program has errors.
fn run(cli: Cli) -> Result<bool> {
    match cli.command {
        Command::Check { files, options } => {
            let registry = load_registry(&options)?;
            let mut all_valid = true;
            let mut json: Vec<JsonDiagnostic> = Vec::new();
            for path in &files {
                let input = Input::read(path)?;
                match input.compile(&registry) {
                    Ok(compiled) => {
                        if !options.json {
                            let count = compiled.candidates.len();
                            println!(
                                "ok: {}: {} -> {} ({count} candidate{})",
                                input.name,
                                compiled.schema.system_type(),
                                compiled.workload(),
                                if count == 1 { "" } else { "s" }
                            );
                            for renamed in Explanation::new(&compiled).renamed_fields {
                                println!("  note: {}", renamed.note());
                            }
                        }
                    }
                    Err(diagnostics) => {
                        all_valid = false;
                        if options.json {
                            json.extend(input.json(&diagnostics));
                        } else {
                            input.print(&diagnostics, options.color);
                        }
                    }
                }
            }
            if options.json {
                print_json(&json)?;
            }
            Ok(all_valid)
        }
        Command::Build {
            file,
            out,
            server,
            runtime_path,
            runtime_git,
            runtime_rev,
            python,
            no_shared_build,
            options,
        } => {
            let registry = load_registry(&options)?;
            let input = Input::read(&file)?;
            let compiled = match input.compile(&registry) {
                Ok(compiled) => compiled,
                Err(diagnostics) => {
                    if options.json {
                        print_json(&input.json(&diagnostics))?;
                    } else {
                        input.print(&diagnostics, options.color);
                    }
                    return Ok(false);
                }
            };
            if !options.json {
                for renamed in Explanation::new(&compiled).renamed_fields {
                    eprintln!("note: {}", renamed.note());
                }
            }
            let runtime = match (runtime_git, runtime_path) {
                (Some(url), _) => RuntimeSource::Git {
                    url,
                    rev: runtime_rev,
                },
                (None, Some(path)) => RuntimeSource::Path(path),
                (None, None) => RuntimeSource::Path(default_runtime_path()?),
            };
            let mut files = crate_files(
                &compiled,
                &CrateOptions {
                    runtime,
                    server,
                    python,
                },
            )?;
            rustfmt_files(&mut files);
            let out = out.unwrap_or_else(|| PathBuf::from(&compiled.schema.app));
            let written = write_crate(&out, &files)?;
            eprintln!(
                "easemlc: {} ({} -> {}, {} candidates): {written} of {} files written",
                compiled.schema.app,
                compiled.schema.system_type(),
                compiled.workload(),
                compiled.candidates.len(),
                files.len()
            );
            if !no_shared_build && let Some(build_dir) = share_build_dir(&out)? {
                eprintln!(
                    "easemlc: its builds share one build dir with every other app's, `{}` \
                     (`.cargo/config.toml`; `--no-shared-build` leaves it out)",
                    build_dir.display()
                );
            }
            println!("{}", out.display());
            Ok(true)
        }
        Command::Explain { file, options } => {
            let registry = load_registry(&options)?;
            let input = Input::read(&file)?;
            match input.compile(&registry) {
                Ok(compiled) => {
                    let explanation = Explanation::new(&compiled);
                    if options.json {
                        print_json(&explanation)?;
                    } else {
                        print!("{}", explanation.to_text(&registry));
                    }
                    Ok(true)
                }
                Err(diagnostics) => {
                    if options.json {
                        print_json(&input.json(&diagnostics))?;
                    } else {
                        input.print(&diagnostics, options.color);
                    }
                    Ok(false)
                }
            }
        }
    }
}

/// The `runtime/core` of the checkout easemlc was built from; an error saying what to pass when
/// that checkout is gone (easemlc installed from a clone since removed, or from git).
fn default_runtime_path() -> Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/core");
    match std::fs::canonicalize(&path) {
        Ok(path) if path.join("Cargo.toml").is_file() => Ok(path.display().to_string()),
        _ => anyhow::bail!(
            "easemlc was built from {}, which has no easeml runtime any more; pass --runtime-git URL \
             (the repository easemlc was installed from, with --runtime-rev REV for its commit or tag) \
             or --runtime-path DIR (a checkout's runtime/core)",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap_or(Path::new("/"))
                .display()
        ),
    }
}

/// Writes the crate's files under `out`, only those whose content changed; returns how many.
/// Refuses a folder that exists, is not empty, and was not generated by easemlc.
fn write_crate(out: &Path, files: &std::collections::BTreeMap<String, String>) -> Result<usize> {
    if out.exists() {
        if !out.is_dir() {
            anyhow::bail!(
                "`{}` exists and is not a folder; pass another `-o DIR`",
                out.display()
            );
        }
        let empty = std::fs::read_dir(out)
            .with_context(|| format!("cannot read the folder `{}`", out.display()))?
            .next()
            .is_none();
        let generated = std::fs::read_to_string(out.join("easeml.json"))
            .is_ok_and(|text| text.contains(easeml_compiler::codegen::GENERATED_HEADER));
        if !empty && !generated {
            anyhow::bail!(
                "`{}` exists and was not generated by easemlc; pass another `-o DIR` or remove it",
                out.display()
            );
        }
    }
    let mut written = 0;
    for (relative, content) in files {
        let path = out.join(relative);
        let existing = std::fs::read_to_string(&path).ok();
        written += usize::from(write_if_changed(&path, existing.as_deref(), content)?);
    }
    Ok(written)
}

/// Writes `content` to `path` (creating its folder) unless `existing`, the file's current text,
/// is already that; true when it wrote.
fn write_if_changed(path: &Path, existing: Option<&str>, content: &str) -> Result<bool> {
    if existing == Some(content) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create the folder `{}`", parent.display()))?;
    }
    std::fs::write(path, content).with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(true)
}

/// The build dir every app's crate shares: `${XDG_CACHE_HOME:-$HOME/.cache}/easeml/app-build`,
/// beside the libtorch venv of `cargo xtask setup`; `None` when neither variable is set.
fn shared_app_build_dir() -> Option<PathBuf> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").filter(|dir| !dir.is_empty())?).join(".cache")
        }
    };
    Some(cache.join("easeml").join("app-build"))
}

/// Makes the crate at `out` build into the build dir all apps share (cargo's `build.build-dir`:
/// intermediate artifacts there, the binaries still in the crate's `target/`), so that only the
/// first app of a machine builds libtorch's bindings, the runtime and every registry crate (for
/// minutes), and the next ones reuse them: writes `.cargo/config.toml` (unless the user wrote one
/// of their own) and, when the crate (or its Python crate) has no `Cargo.lock` yet, copies this
/// checkout's, so every app resolves the very versions easeml is tested with and they share one
/// build of each. Not the easeml workspace's own target dir, though its artifacts would serve the
/// first app too: `cargo clean` in an app deletes its build dir, and must not delete easeml's
/// build. Returns the build dir, or `None` when there is no cache folder to put it in.
fn share_build_dir(out: &Path) -> Result<Option<PathBuf>> {
    let Some(build_dir) = shared_app_build_dir() else {
        return Ok(None);
    };
    let config = out.join(".cargo/config.toml");
    let header = easeml_compiler::codegen::GENERATED_HEADER;
    let existing = std::fs::read_to_string(&config).ok();
    if existing
        .as_deref()
        .is_some_and(|text| !text.contains(header))
    {
        return Ok(None);
    }
    let text = format!(
        "# {header}\n\
         # Every easeml app builds into one shared build dir, so libtorch's bindings and the runtime\n\
         # are built once for all of them; the binaries still land in ./target/. `cargo clean` here\n\
         # empties that shared dir (the next app build then takes minutes again). Remove this file\n\
         # (and pass --no-shared-build to easemlc) to build everything in ./target/ instead.\n\
         [build]\n\
         build-dir = {}\n",
        toml::Value::String(build_dir.display().to_string())
    );
    write_if_changed(&config, existing.as_deref(), &text)?;
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    // The app's crate, and its Python crate (a workspace of its own) when there is one.
    for folder in [out.to_owned(), out.join("python")] {
        let crate_lock = folder.join("Cargo.lock");
        if lock.is_file() && folder.join("Cargo.toml").is_file() && !crate_lock.exists() {
            std::fs::copy(&lock, &crate_lock)
                .with_context(|| format!("cannot write `{}`", crate_lock.display()))?;
        }
    }
    Ok(Some(build_dir))
}

fn load_registry(options: &CommonOptions) -> Result<Registry> {
    let mut registry = match &options.templates {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("cannot read the template registry `{}`", path.display())
            })?;
            Registry::from_toml(&text, &path.display().to_string())?
        }
        None => Registry::builtin(),
    };
    if let Some(NormalizationKs(ks)) = &options.norm_k {
        registry.normalization_ks = ks.clone();
    }
    Ok(registry)
}

/// The value of `--norm-k`.
#[derive(Clone)]
struct NormalizationKs(Vec<u32>);

fn parse_normalization_ks(text: &str) -> Result<NormalizationKs, String> {
    if text.trim() == "none" {
        return Ok(NormalizationKs(Vec::new()));
    }
    text.split(',')
        .map(|k| match k.trim().parse::<u32>() {
            Ok(0) => Err("every k must be at least 1".to_owned()),
            Ok(k) => Ok(k),
            Err(_) => Err(format!(
                "`{}` is not a whole number; write e.g. `1,2,4` or `none`",
                k.trim()
            )),
        })
        .collect::<Result<Vec<u32>, String>>()
        .map(NormalizationKs)
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// One program as read from disk or standard input.
struct Input {
    /// The name used in messages (the path as given, or `<stdin>`).
    name: String,
    /// The app name to use when the program has no `app` item.
    stem: String,
    /// The text (lossy where the file is not UTF-8; for the diagnostics).
    source: String,
    bytes: Vec<u8>,
}

impl Input {
    fn read(path: &Path) -> Result<Input> {
        let (name, stem, bytes) = if path == Path::new("-") {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
            ("<stdin>".to_owned(), "stdin".to_owned(), bytes)
        } else {
            let bytes = std::fs::read(path).with_context(|| match std::fs::metadata(path) {
                Ok(metadata) if metadata.is_dir() => {
                    format!("`{}` is a directory, not a .eml file", path.display())
                }
                _ => format!("cannot read `{}`", path.display()),
            })?;
            let stem = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            (path.display().to_string(), stem, bytes)
        };
        let source = String::from_utf8_lossy(&bytes).into_owned();
        Ok(Input {
            name,
            stem,
            source,
            bytes,
        })
    }

    fn compile(&self, registry: &Registry) -> Result<Compiled, Vec<Diagnostic>> {
        easeml_compiler::compile_bytes(&self.bytes, &self.stem, registry).1
    }

    fn json(&self, diagnostics: &[Diagnostic]) -> Vec<JsonDiagnostic> {
        diagnostics
            .iter()
            .map(|diagnostic| diagnostic::to_json(diagnostic, &self.source, &self.name))
            .collect()
    }

    fn print(&self, diagnostics: &[Diagnostic], color: Color) {
        let color = match color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        };
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "{}",
            diagnostic::render_failure(diagnostics, &self.source, &self.name, color)
        );
    }
}
