//! Local worker processes of a coordinator: [`LocalWorkers`] starts `easeml worker --supervised`
//! children of the running `easeml` binary (for `easeml train --workers N`, `easeml serve
//! --workers N` and the lab's `easeml bench mop --real`), and [`worker_devices`] checks the devices
//! they train on. The child side, one worker, is [`crate::worker`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use easeml_store::Store;
use easeml_trainer::device::{choose_device, device_name, parse_device};
use tch::Device;

/// The most local worker processes per core (or device) a coordinator starts.
pub const MAX_LOCAL_WORKERS_PER_CORE: usize = 4;

/// Why the local workers could not be started, or their devices not chosen (in the words of the
/// `--workers` and `--devices` flags that carry them).
#[derive(Debug, thiserror::Error)]
pub enum LocalWorkersError {
    /// `--devices` named no device.
    #[error(
        "--devices is empty: name at least one device, e.g. --devices cpu or --devices cuda:0,cuda:1"
    )]
    NoDevices,
    /// A device of `--devices` that does not exist here.
    #[error("--devices: {0} (known: cpu, cuda, cuda:N for a GPU that exists here)")]
    BadDevice(easeml_trainer::Error),
    /// Several devices for one worker in process.
    #[error(
        "--devices names {0} devices but --workers is 1: one worker trains on one device (use --workers {0})"
    )]
    OneWorkerManyDevices(usize),
    /// The default device could not be chosen.
    #[error(transparent)]
    Device(#[from] easeml_trainer::Error),
    /// Far more workers than this machine runs.
    #[error(
        "--workers {count} local worker processes on {cores} core(s): at most {most} ({MAX_LOCAL_WORKERS_PER_CORE} per core or device) run on one machine; run `easeml worker` on other machines and coordinate them with --workers 0"
    )]
    TooMany {
        /// The workers asked for.
        count: usize,
        /// The cores of this machine.
        cores: usize,
        /// The most it runs.
        most: usize,
    },
    /// The running binary cannot be found.
    #[error("finding the easeml binary: {0}")]
    Executable(std::io::Error),
    /// A worker process that cannot be started.
    #[error("starting worker {index} ({}): {source}", program.display())]
    Spawn {
        /// Its number, from 1.
        index: usize,
        /// The binary.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A worker's state that cannot be read.
    #[error("watching the local workers: {0}")]
    Wait(std::io::Error),
    /// A worker that exited before it registered.
    #[error("a local worker stopped before it registered ({0}); its error is above")]
    Exited(ExitStatus),
    /// Workers that did not register in time.
    #[error("only {registered} of {count} local workers registered within 2 minutes")]
    Timeout {
        /// How many did.
        registered: usize,
        /// How many were started.
        count: usize,
    },
    /// The store the workers register in.
    #[error(transparent)]
    Store(#[from] easeml_store::Error),
}

/// The devices of `--devices` for `--workers` workers, checked: each one exists here, and one
/// worker (in process) takes one device. Without `--devices`: the one `choose_device` picks.
pub fn worker_devices(
    workers: usize,
    list: Option<&[String]>,
) -> Result<Vec<Device>, LocalWorkersError> {
    let Some(list) = list else {
        return Ok(vec![choose_device()?]);
    };
    if list.is_empty() {
        return Err(LocalWorkersError::NoDevices);
    }
    let devices = list
        .iter()
        .map(|name| parse_device(name).map_err(LocalWorkersError::BadDevice))
        .collect::<Result<Vec<_>, _>>()?;
    if workers == 1 && devices.len() > 1 {
        return Err(LocalWorkersError::OneWorkerManyDevices(devices.len()));
    }
    Ok(devices)
}

/// Worker processes started by a coordinator: `easeml worker --supervised` children of this
/// process (the running binary must be `easeml`, whose `worker` subcommand they run), one per
/// device in turn, their intra-op threads dividing the cores; they stop when dropped (their
/// standard input closes) and are killed if they do not.
#[derive(Debug)]
pub struct LocalWorkers {
    children: Vec<Child>,
}

impl LocalWorkers {
    /// Starts `count` workers over `home` and waits until each has registered.
    pub fn start(
        home: &Path,
        count: usize,
        devices: &[Device],
        lease_ttl: Duration,
    ) -> Result<LocalWorkers, LocalWorkersError> {
        let executable = std::env::current_exe().map_err(LocalWorkersError::Executable)?;
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        // Each worker process loads libtorch (hundreds of MB): a count far past the machine's
        // cores and devices is a typo, not a plan, and would exhaust its memory.
        let most = MAX_LOCAL_WORKERS_PER_CORE * cores.max(devices.len());
        if count > most {
            return Err(LocalWorkersError::TooMany { count, cores, most });
        }
        let threads = (cores / count).max(1);
        // One connection watches the registrations (each query reads the store as it is now).
        let store = Store::open(home)?;
        let before = store.workers()?.len();
        let mut workers = LocalWorkers {
            children: Vec::new(),
        };
        for index in 0..count {
            let device = devices[index % devices.len()];
            let child = Command::new(&executable)
                .arg("worker")
                .arg("--store")
                .arg(home)
                .args(["--device", &device_name(device)])
                .args(["--threads", &threads.to_string()])
                .args(["--lease-ttl", &format!("{}ms", lease_ttl.as_millis())])
                .args(["--supervised", "--quiet"])
                .stdin(Stdio::piped())
                .spawn()
                .map_err(|source| LocalWorkersError::Spawn {
                    index: index + 1,
                    program: executable.clone(),
                    source,
                })?;
            workers.children.push(child);
        }
        eprintln!(
            "started {count} local worker(s), {threads} thread(s) each, on {}",
            devices
                .iter()
                .take(count)
                .map(|device| device_name(*device))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let started = Instant::now();
        loop {
            let registered = store.workers()?.len().saturating_sub(before);
            if registered >= count {
                return Ok(workers);
            }
            for child in &mut workers.children {
                if let Some(status) = child.try_wait().map_err(LocalWorkersError::Wait)? {
                    return Err(LocalWorkersError::Exited(status));
                }
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(LocalWorkersError::Timeout { registered, count });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The workers' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for LocalWorkers {
    fn drop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in &mut self.children {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
