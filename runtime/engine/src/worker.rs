//! A worker: leases work units from a store, trains them on its device, commits them with their
//! fencing tokens ([`crate::unit`]; a MOP sub-epoch unit: [`crate::mop`]), until it is told to stop. `easeml worker` runs one per process;
//! `easeml train --workers N` starts N of them as child processes.
//!
//! A worker registers itself in the store's `workers` table (host, pid, device, threads) and
//! heartbeats there: every poll while idle, every third of the lease's time to live while busy
//! (the [`Heartbeat`] thread, which also renews the lease). Asked to stop, an idle worker stops at
//! once and a busy one after committing its unit; a worker killed mid-unit loses its lease when
//! the lease expires, and the unit is leased again by another worker (never recorded as failed).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use easeml_store::{Lease, NewWorker, Store, WorkerState, worker_id};
use easeml_trainer::device::device_name;
use tch::Device;

use crate::error::Result;
use crate::unit::{self, AppCache, Executed, Heartbeat};

/// The default time to live of a lease: a worker silent this long has lost its unit.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The device it trains on.
    pub device: Device,
    /// Its intra-op threads (libtorch's `set_num_threads`), when set.
    pub threads: Option<usize>,
    /// The time to live of its leases.
    pub lease_ttl: Duration,
    /// How long it waits between looks for work when idle.
    pub poll: Duration,
    /// Stop after being idle this long (`None`: never).
    pub idle_exit: Option<Duration>,
}

impl WorkerConfig {
    /// Defaults for `device`: 30 s leases, a look every 250 ms, never idle-exits.
    pub fn for_device(device: Device) -> WorkerConfig {
        WorkerConfig {
            device,
            threads: None,
            lease_ttl: DEFAULT_LEASE_TTL,
            poll: Duration::from_millis(250),
            idle_exit: None,
        }
    }
}

/// What a worker did, for its log.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    /// It registered.
    Started {
        /// Its id.
        id: String,
        /// Its device.
        device: String,
    },
    /// It leased a unit.
    Leased {
        /// The lease.
        lease: Lease,
    },
    /// It committed a unit.
    Committed {
        /// The lease.
        lease: Lease,
        /// Seconds from lease to commit.
        seconds: f64,
    },
    /// Its lease was taken over before it could commit: its result was dropped.
    LeaseLost {
        /// The lease.
        lease: Lease,
        /// The store's refusal.
        reason: String,
    },
    /// The training session's end cut its unit before the run had a model: the run was dropped
    /// ([`Executed::Dropped`]).
    Dropped {
        /// The lease.
        lease: Lease,
        /// Why the run had no model.
        reason: String,
    },
    /// It gave its lease back: the unit is queued again ([`Executed::GaveBack`]).
    GaveBack {
        /// The lease.
        lease: Lease,
        /// Why.
        reason: String,
    },
    /// It stopped.
    Stopped {
        /// Units it committed.
        committed: usize,
    },
}

/// The host name for worker records: `$HOSTNAME`, else the kernel's, else `localhost`.
pub fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The Slurm job of this process from Slurm's environment: `<array job>_<task>` for a task of a job
/// array, else `<job>`; `None` outside Slurm.
pub fn slurm_job() -> Option<String> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
    };
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(job), Some(task)) => Some(format!("{job}_{task}")),
        _ => var("SLURM_JOB_ID"),
    }
}

/// One registered worker over a store: the in-process worker of the engine and
/// [`run_worker`] are both this.
#[derive(Debug)]
pub struct Worker {
    home: PathBuf,
    id: String,
    config: WorkerConfig,
    cache: AppCache,
    partitions: crate::mop::PartitionCache,
}

impl Worker {
    /// Registers a worker (`role` is `worker` or `in-process`) in the store.
    pub fn register(store: &mut Store, role: &str, config: WorkerConfig) -> Result<Worker> {
        let host = host_name();
        let pid = std::process::id();
        let id = worker_id(role, &host, pid);
        let threads = config
            .threads
            .unwrap_or_else(|| usize::try_from(tch::get_num_threads()).unwrap_or(1));
        store.register_worker(&NewWorker {
            id: id.clone(),
            host,
            pid,
            device: device_name(config.device),
            threads: u32::try_from(threads).unwrap_or(u32::MAX),
            slurm_job: slurm_job(),
        })?;
        Ok(Worker {
            home: store.home().to_owned(),
            id,
            config,
            cache: AppCache::default(),
            partitions: crate::mop::PartitionCache::default(),
        })
    }

    /// Its id (the owner of its leases).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its configuration.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The cache of the app it trains (the engine seeds it with the examples it loaded).
    pub fn cache(&mut self) -> &mut AppCache {
        &mut self.cache
    }

    /// Works on a leased unit with a heartbeat running, then marks itself idle.
    pub fn work(&mut self, store: &mut Store, lease: &Lease) -> Result<Executed> {
        store.worker_heartbeat(&self.id, WorkerState::Busy, Some(lease.unit))?;
        let executed = {
            let _heartbeat = Heartbeat::start(&self.home, lease, &self.id, self.config.lease_ttl)?;
            if lease.sub_epoch.is_some() {
                crate::mop::execute_sub_epoch(
                    store,
                    lease,
                    self.config.device,
                    &mut self.partitions,
                )
            } else {
                unit::execute(store, lease, self.config.device, &mut self.cache)
            }
        };
        store.worker_heartbeat(&self.id, WorkerState::Idle, None)?;
        executed
    }

    /// Marks it stopped in the store.
    pub fn stop(&self, store: &mut Store) -> Result<()> {
        Ok(store.worker_heartbeat(&self.id, WorkerState::Stopped, None)?)
    }
}

/// Runs a worker over the store at `home` until `stop` is set (checked between units) or it has
/// been idle for `config.idle_exit`.
pub fn run_worker(
    home: &Path,
    config: WorkerConfig,
    stop: &AtomicBool,
    events: &mut dyn FnMut(WorkerEvent),
) -> Result<usize> {
    if let Some(threads) = config.threads {
        tch::set_num_threads(i32::try_from(threads).unwrap_or(i32::MAX));
    }
    let mut store = Store::open(home)?;
    let mut worker = Worker::register(&mut store, "worker", config)?;
    events(WorkerEvent::Started {
        id: worker.id.clone(),
        device: device_name(worker.config.device),
    });
    let mut committed = 0;
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        match store.lease_unit(&worker.id, worker.config.lease_ttl)? {
            Some(lease) => {
                events(WorkerEvent::Leased {
                    lease: lease.clone(),
                });
                let started = Instant::now();
                match worker.work(&mut store, &lease)? {
                    Executed::Committed => {
                        committed += 1;
                        events(WorkerEvent::Committed {
                            lease,
                            seconds: started.elapsed().as_secs_f64(),
                        });
                    }
                    Executed::LeaseLost(reason) => events(WorkerEvent::LeaseLost { lease, reason }),
                    Executed::Dropped(reason) => events(WorkerEvent::Dropped { lease, reason }),
                    Executed::GaveBack(reason) => events(WorkerEvent::GaveBack { lease, reason }),
                }
                idle_since = Instant::now();
            }
            None => {
                if worker
                    .config
                    .idle_exit
                    .is_some_and(|limit| idle_since.elapsed() >= limit)
                {
                    break;
                }
                store.worker_heartbeat(&worker.id, WorkerState::Idle, None)?;
                std::thread::sleep(worker.config.poll);
            }
        }
    }
    worker.stop(&mut store)?;
    events(WorkerEvent::Stopped { committed });
    Ok(committed)
}

/// The ids of the store's live workers, in the store's order: registered, not stopped, heard from
/// within `silence`, and not an embedded engine's in-process worker (it trains whole runs only,
/// never a sub-epoch or a gang's rank). The one rule for the coordinator's places and a gang's
/// quorum.
pub fn live_worker_ids(store: &Store, silence: Duration) -> Result<Vec<String>> {
    let now = easeml_store::now_ms();
    let silence = i64::try_from(silence.as_millis()).unwrap_or(i64::MAX / 4);
    Ok(store
        .workers()?
        .into_iter()
        .filter(|worker| !easeml_store::is_in_process(&worker.id) && worker.is_live(now, silence))
        .map(|worker| worker.id)
        .collect())
}

/// A stop flag set when standard input reaches its end: a worker started by a coordinator gets a
/// pipe as stdin, which closes when the coordinator ends or dies, so no worker outlives it.
pub fn stop_on_stdin_eof() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    let _ = std::thread::Builder::new()
        .name("easeml-stdin-watch".to_owned())
        .spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            set.store(true, Ordering::SeqCst);
        });
    flag
}
