//! `easeml apps list|register|remove`: the apps of a local store, worked on directly (no server).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use easeml_runtime::AppSpec;
use easeml_runtime::store::Store;

/// `easeml apps` options.
#[derive(Debug, Args)]
pub struct AppsArgs {
    #[command(flatten)]
    store: crate::serve::StoreArgs,
    #[command(subcommand)]
    command: AppsCommand,
}

#[derive(Debug, Subcommand)]
enum AppsCommand {
    /// List every app: id, name, examples (enabled), data version, type.
    List,
    /// Register the app of an `easeml.json` manifest and print its token (shown once).
    Register {
        /// The generated crate's `easeml.json`.
        manifest: PathBuf,
    },
    /// Remove an app with all its examples, labels and runs.
    Remove {
        /// The app's name.
        name: String,
    },
}

/// Runs one `apps` command.
pub fn run(args: &AppsArgs) -> Result<()> {
    let home = args.store.home()?;
    // Registering may create the store; listing and removing only read an existing one.
    let home = match &args.command {
        AppsCommand::Register { .. } => home,
        AppsCommand::List | AppsCommand::Remove { .. } => crate::serve::existing_store(home)?,
    };
    let mut store = Store::open(&home)?;
    match &args.command {
        AppsCommand::List => {
            let apps = store.apps()?;
            if apps.is_empty() {
                println!("no apps in {}", home.display());
                return Ok(());
            }
            println!(
                "{:>4}  {:<24} {:>10} {:>10} {:>8}  type",
                "id", "name", "examples", "enabled", "version"
            );
            for app in apps {
                let (examples, enabled) = store.example_counts(app.id)?;
                println!(
                    "{:>4}  {:<24} {examples:>10} {enabled:>10} {:>8}  {}",
                    app.id.0, app.name, app.data_version, app.system_type
                );
            }
        }
        AppsCommand::Register { manifest } => {
            let text = std::fs::read_to_string(manifest)
                .with_context(|| format!("reading {}", manifest.display()))?;
            let spec = AppSpec::from_manifest_json(&text)
                .with_context(|| format!("{} is not an app manifest", manifest.display()))?;
            let (app, token) = spec.register(&mut store)?;
            println!("registered app `{}` (id {})", app.name, app.id.0);
            println!("token: {token}");
            eprintln!("keep the token: it is shown only once (the store keeps only its hash)");
        }
        AppsCommand::Remove { name } => {
            let Some(app) = store.app_by_name(name)? else {
                bail!("no app named `{name}` in {}", home.display());
            };
            let (examples, _) = store.example_counts(app.id)?;
            store.remove_app(app.id)?;
            println!("removed app `{name}` and its {examples} example(s)");
        }
    }
    Ok(())
}
