//! `easeml worker` (one worker process over a store), `easeml workers list` (the workers a store
//! knows), `easeml workers submit --slurm` (workers as a Slurm job array: [`sbatch_script`]), and
//! the local workers `easeml train --workers N` starts (`easeml_engine::local_workers`).
//!
//! A worker stops on Ctrl-C or SIGTERM: idle, at once; busy, it first gives its lease back (the
//! unit is queued again for another worker, without counting a loss) and exits, which is what a
//! batch system's TERM ahead of a time limit needs. Started by a coordinator (`--supervised`), it
//! also stops when its standard input closes, so no worker outlives its coordinator.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use easeml_runtime::app_cli::parse_duration;
use easeml_runtime::engine::choose_device;
use easeml_runtime::engine::worker::{
    DEFAULT_LEASE_TTL, WorkerConfig, WorkerEvent, run_worker, stop_on_stdin_eof,
};
use easeml_runtime::store::{Lease, Store, format_seconds, now_ms};
use easeml_trainer::device::parse_device;
use tch::Device;

/// Arguments of `easeml worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    store: crate::serve::StoreArgs,
    /// The device to train on: `cpu` or `cuda:N` (default: $EASEML_DEVICE, else CUDA when
    /// available, else the CPU).
    #[arg(long, value_name = "cpu|cuda:N", value_parser = parse_device_arg)]
    device: Option<Device>,
    /// Intra-op threads of libtorch (default: libtorch's, one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// The time to live of a lease: a unit of a worker silent this long goes to another worker.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    lease_ttl: Duration,
    /// Stop after being idle this long (default: never).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_exit: Option<Duration>,
    /// Stop when standard input closes (how `easeml train --workers N` ties its workers to it).
    #[arg(long, hide = true)]
    supervised: bool,
    /// Print only errors, not a line per unit.
    #[arg(long)]
    quiet: bool,
}

/// Arguments of `easeml workers`.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    #[command(subcommand)]
    command: WorkersCommand,
}

#[derive(Debug, Subcommand)]
enum WorkersCommand {
    /// Start workers on a Slurm cluster: an sbatch job array, one `easeml worker` per task
    /// (`--requeue`; TERM ahead of the time limit, on which a worker gives its unit back; the
    /// job's `CUDA_VISIBLE_DEVICES` honoured).
    Submit(SubmitArgs),
    /// The workers the store knows: host, pid, device, threads, state, unit, last heartbeat.
    List {
        #[command(flatten)]
        store: crate::serve::StoreArgs,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `easeml workers submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Submit to Slurm (`sbatch`); the only batch system for now, so it must be given.
    #[arg(long)]
    slurm: bool,
    /// Workers to start (the job array's size).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    count: u32,
    /// Generic resources per worker, e.g. `gpu:1` (then each worker trains on its GPU).
    #[arg(long, value_name = "GRES")]
    gres: Option<String>,
    /// The Slurm partition.
    #[arg(long, value_name = "P")]
    partition: Option<String>,
    /// Each worker's time limit in Slurm's format, e.g. `30`, `4:00:00`, `1-12:00:00`.
    #[arg(long, value_name = "T")]
    time: Option<String>,
    /// How long before the time limit Slurm sends TERM (the worker then gives its unit back).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2m")]
    term_ahead: Duration,
    /// The lease time to live of the workers.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    lease_ttl: Duration,
    /// Intra-op threads per worker (default: the CPUs Slurm gives the task).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Print the sbatch script instead of submitting it.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    store: crate::serve::StoreArgs,
}

/// Checks a value that goes into an `#SBATCH` line: letters, digits and `:_-.,+` only.
fn sbatch_value(flag: &str, value: &str, allowed: &str) -> Result<String> {
    let ok = !value.is_empty()
        && value.len() <= 200
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || allowed.contains(c));
    if !ok {
        bail!(
            "{flag} `{}`: only letters, digits and `{allowed}` are allowed here",
            value.escape_debug()
        );
    }
    Ok(value.to_owned())
}

/// A word quoted for a POSIX shell.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The sbatch script of `easeml workers submit --slurm`.
pub fn sbatch_script(
    args: &SubmitArgs,
    easeml: &std::path::Path,
    home: &std::path::Path,
) -> Result<String> {
    let mut lines = vec![
        "#!/bin/bash".to_owned(),
        "#SBATCH --job-name=easeml-worker".to_owned(),
        format!("#SBATCH --array=0-{}", args.count - 1),
        "#SBATCH --requeue".to_owned(),
        format!(
            "#SBATCH --signal=B:TERM@{}",
            args.term_ahead.as_secs().max(1)
        ),
        format!(
            "#SBATCH --output={}",
            home.join("slurm").join("worker-%A_%a.log").display()
        ),
    ];
    if let Some(time) = &args.time {
        lines.push(format!(
            "#SBATCH --time={}",
            sbatch_value("--time", time, "-:")?
        ));
    }
    if let Some(partition) = &args.partition {
        lines.push(format!(
            "#SBATCH --partition={}",
            sbatch_value("--partition", partition, "_-.,")?
        ));
    }
    if let Some(gres) = &args.gres {
        lines.push(format!(
            "#SBATCH --gres={}",
            sbatch_value("--gres", gres, ":_-.,+")?
        ));
    }
    let device = if args
        .gres
        .as_deref()
        .is_some_and(|gres| gres.starts_with("gpu"))
    {
        // Slurm sets CUDA_VISIBLE_DEVICES to the task's GPUs: the first one it sees is cuda:0.
        "cuda:0"
    } else {
        "cpu"
    };
    let threads = match args.threads {
        Some(threads) => threads.to_string(),
        None => "${SLURM_CPUS_PER_TASK:-1}".to_owned(),
    };
    lines.push("set -euo pipefail".to_owned());
    lines.push(
        "# TERM reaches the worker itself (exec): it gives its unit back and exits; Slurm requeues the task."
            .to_owned(),
    );
    lines.push(format!(
        "exec {} worker --store {} --device {device} --threads \"{threads}\" --lease-ttl {}ms",
        shell_quote(&easeml.display().to_string()),
        shell_quote(&home.display().to_string()),
        args.lease_ttl.as_millis()
    ));
    Ok(lines.join("\n") + "\n")
}

/// `easeml workers submit`.
fn submit(args: &SubmitArgs) -> Result<()> {
    if !args.slurm {
        bail!("say where the workers run: --slurm (the only batch system supported for now)");
    }
    let home = args.store.existing_home()?;
    let home = std::fs::canonicalize(&home)
        .with_context(|| format!("resolving the store path {}", home.display()))?;
    let easeml = std::env::current_exe().context("finding the easeml binary")?;
    let script = sbatch_script(args, &easeml, &home)?;
    if args.dry_run {
        print!("{script}");
        return Ok(());
    }
    let folder = home.join("slurm");
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    let path = folder.join(format!("workers-{}.sbatch", now_ms()));
    std::fs::write(&path, &script).with_context(|| format!("writing {}", path.display()))?;
    let output = Command::new("sbatch")
        .arg("--parsable")
        .arg(&path)
        .output()
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot run sbatch ({error}): is this a Slurm login node? `--dry-run` prints the script ({})",
                path.display()
            )
        })?;
    if !output.status.success() {
        bail!(
            "sbatch refused {}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let job = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    println!(
        "submitted Slurm job {job}: {} worker(s) over {} (script {}; `easeml workers list` shows them as they start)",
        args.count,
        home.display(),
        path.display()
    );
    Ok(())
}

/// `cpu`, `cuda` or `cuda:N` that exists here.
pub fn parse_device_arg(value: &str) -> std::result::Result<Device, String> {
    parse_device(value).map_err(|error| error.to_string())
}

/// Runs one worker until it is stopped.
pub fn run(args: &WorkerArgs) -> Result<()> {
    let home = args.store.existing_home()?;
    let device = match args.device {
        Some(device) => device,
        None => choose_device()?,
    };
    let mut config = WorkerConfig::for_device(device);
    config.threads = args.threads.map(|threads| threads as usize);
    config.lease_ttl = args.lease_ttl;
    config.idle_exit = args.idle_exit;
    let stop = if args.supervised {
        stop_on_stdin_eof()
    } else {
        Arc::new(AtomicBool::new(false))
    };
    let current: Arc<Mutex<Option<Lease>>> = Arc::new(Mutex::new(None));
    watch_signals(home.clone(), Arc::clone(&stop), Arc::clone(&current))?;
    let quiet = args.quiet;
    let mut name = String::from("worker");
    let mut on_event = |event: WorkerEvent| {
        let mut held = current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match event {
            WorkerEvent::Started { id, device } => {
                name = id.clone();
                if !quiet {
                    eprintln!("{id}: working on {} ({device})", home.display());
                }
            }
            WorkerEvent::Leased { lease } => {
                if !quiet {
                    eprintln!(
                        "{name}: unit {} (run {}, {}, attempt {})",
                        lease.unit.0, lease.run.0, lease.candidate, lease.attempt
                    );
                }
                *held = Some(lease);
            }
            WorkerEvent::Committed { lease, seconds } => {
                *held = None;
                if !quiet {
                    eprintln!(
                        "{name}: unit {} committed after {}",
                        lease.unit.0,
                        format_seconds(seconds)
                    );
                }
            }
            WorkerEvent::LeaseLost { lease, reason } => {
                *held = None;
                eprintln!("{name}: unit {}: result dropped: {reason}", lease.unit.0);
            }
            WorkerEvent::Dropped { lease, reason } => {
                *held = None;
                eprintln!(
                    "{name}: unit {} (run {}, {}) dropped: the session ended before it had a model ({reason}); a later session tries it again",
                    lease.unit.0, lease.run.0, lease.candidate
                );
            }
            WorkerEvent::GaveBack { lease, reason } => {
                *held = None;
                eprintln!(
                    "{name}: unit {} (run {}) given back to be leased again: {reason}",
                    lease.unit.0, lease.run.0
                );
            }
            WorkerEvent::Stopped { committed } => {
                if !quiet {
                    eprintln!("{name}: stopped after {committed} unit(s)");
                }
            }
        }
    };
    run_worker(&home, config, &stop, &mut on_event)
        .with_context(|| format!("worker over the store at {}", home.display()))?;
    Ok(())
}

/// On Ctrl-C or SIGTERM: stop between units; when a unit is held, give its lease back and exit
/// at once (the unit goes to another worker).
fn watch_signals(
    home: PathBuf,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Lease>>>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal watcher")?;
    std::thread::Builder::new()
        .name("easeml-signals".to_owned())
        .spawn(move || {
            runtime.block_on(easeml_runtime::server::shutdown_signal());
            stop.store(true, Ordering::SeqCst);
            let held = current
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone();
            if let Some(lease) = held {
                let given_back = Store::open(&home).and_then(|mut store| store.release_lease(&lease));
                match given_back {
                    Ok(true) => eprintln!(
                        "{}: stopping: gave unit {} back (run {} is queued again)",
                        lease.owner, lease.unit.0, lease.run.0
                    ),
                    Ok(false) => eprintln!(
                        "{}: stopping: unit {} was no longer ours",
                        lease.owner, lease.unit.0
                    ),
                    Err(error) => eprintln!(
                        "{}: stopping: could not give unit {} back ({error}); it goes to another worker when its lease expires",
                        lease.owner, lease.unit.0
                    ),
                }
                std::process::exit(143);
            }
        })
        .context("starting the signal watcher")?;
    Ok(())
}

/// `easeml workers list` and `easeml workers submit`.
pub fn run_workers(args: &WorkersArgs) -> Result<()> {
    let (store, json) = match &args.command {
        WorkersCommand::Submit(submit_args) => return submit(submit_args),
        WorkersCommand::List { store, json } => (store, json),
    };
    let home = store.existing_home()?;
    let store = Store::open(&home)?;
    let workers = store.workers()?;
    let now = now_ms();
    let silence = 2 * DEFAULT_LEASE_TTL.as_millis() as i64;
    if *json {
        let rows: Vec<serde_json::Value> = workers
            .iter()
            .map(|worker| {
                serde_json::json!({
                    "id": worker.id,
                    "host": worker.host,
                    "pid": worker.pid,
                    "device": worker.device,
                    "threads": worker.threads,
                    "state": worker.state.as_str(),
                    "unit": worker.unit.map(|unit| unit.0),
                    "started_ms": worker.started_ms,
                    "heartbeat_ms": worker.heartbeat_ms,
                    "live": worker.is_live(now, silence),
                    "slurm_job": worker.slurm_job,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if workers.is_empty() {
        println!("no workers have registered in {}", home.display());
        return Ok(());
    }
    println!(
        "{:<40} {:<16} {:>7} {:<7} {:>7} {:<8} {:>6} {:>14}  slurm job",
        "worker", "host", "pid", "device", "threads", "state", "unit", "last heartbeat"
    );
    for worker in &workers {
        let state = if worker.is_live(now, silence) {
            worker.state.as_str()
        } else if worker.state.as_str() == "stopped" {
            "stopped"
        } else {
            "silent"
        };
        println!(
            "{:<40} {:<16} {:>7} {:<7} {:>7} {:<8} {:>6} {:>14}  {}",
            worker.id,
            worker.host,
            worker.pid,
            worker.device,
            worker.threads,
            state,
            worker
                .unit
                .map_or_else(|| "-".to_owned(), |unit| unit.0.to_string()),
            format!(
                "{} ago",
                format_seconds(((now - worker.heartbeat_ms).max(0)) as f64 / 1000.0)
            ),
            worker.slurm_job.as_deref().unwrap_or("-"),
        );
    }
    Ok(())
}
