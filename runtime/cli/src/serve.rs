//! `easeml serve`: the HTTP server of `easeml_runtime::server` over a store directory, until Ctrl-C
//! or SIGTERM (graceful: requests in flight finish).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use easeml_runtime::server;

/// `easeml serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The store's folder (default: $EASEML_HOME, else the platform data dir).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// A file holding the admin token; then registering an app needs it (`Authorization: Bearer`).
    /// Without it anyone who reaches the server may register apps.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// The largest request body in bytes (larger requests get 413).
    #[arg(long, value_name = "BYTES", default_value_t = server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// The format of the logs on standard error (level: RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines with key=value fields.
    Text,
    /// One JSON object per line.
    Json,
}

/// The store folder: `--data`, else `$EASEML_HOME`, else the platform data dir.
pub fn data_dir(data: Option<&PathBuf>) -> Result<PathBuf> {
    match data {
        Some(dir) => Ok(dir.clone()),
        None => Ok(easeml_runtime::store::default_home()?),
    }
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> Result<()> {
    server::init_logging(args.log_format == LogFormat::Json);
    let home = data_dir(args.data.as_ref())?;
    let mut config = server::Config::new(&home);
    config.listen = args.listen;
    config.max_body_bytes = args.max_body_bytes;
    if let Some(file) = &args.admin_token_file {
        let token = std::fs::read_to_string(file)
            .with_context(|| format!("reading the admin token file {}", file.display()))?;
        let token = token.trim();
        if token.len() < 16 {
            bail!(
                "the admin token in {} is shorter than 16 characters; use a long random one",
                file.display()
            );
        }
        config.admin_token = Some(token.to_owned());
    }
    let runtime = server::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        let server = server::Server::bind(config).await?;
        let address = server.local_addr()?;
        println!(
            "easeml: serving http://{address} (store {}); Ctrl-C stops",
            home.display()
        );
        server.run(server::shutdown_signal()).await?;
        anyhow::Ok(())
    })
}
