//! `easeml export APP --store DIR --out DIR [--force]`: the model an app of a store serves written
//! to a folder, to run without easeml (`easeml_engine::export`: TorchScript or JSON, the metadata
//! and a README). The same export as a generated app's `export` command.

use std::path::PathBuf;

use anyhow::Result;
use easeml_runtime::engine::export::export_app;
use easeml_runtime::store::Store;

/// Arguments of `easeml export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The app's name.
    app: String,
    #[command(flatten)]
    store: crate::serve::StoreArgs,
    /// The folder to write (new or empty).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write over the export files of a folder that is not empty.
    #[arg(long)]
    force: bool,
}

/// Runs `easeml export`.
pub fn run(args: &ExportArgs) -> Result<()> {
    let home = args.store.existing_home()?;
    let store = Store::open(&home)?;
    let report = export_app(&store, &args.app, &args.out, args.force)?;
    println!("{report}");
    Ok(())
}
