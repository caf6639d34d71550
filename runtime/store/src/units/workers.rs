//! Workers: their registration, heartbeats and records.

use super::*;

/// A worker as it registers itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorker {
    /// Its id, unique in the store (see [`worker_id`]).
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// The device it trains on, e.g. `cpu` or `cuda:0`.
    pub device: String,
    /// Its intra-op threads.
    pub threads: u32,
    /// Its Slurm job (`<job>` or `<array job>_<task>`), when Slurm started it.
    pub slurm_job: Option<String>,
}

/// A worker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Waiting for a unit.
    Idle,
    /// Working on a unit.
    Busy,
    /// Stopped in an orderly way.
    Stopped,
}

impl WorkerState {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Idle => "idle",
            WorkerState::Busy => "busy",
            WorkerState::Stopped => "stopped",
        }
    }

    fn parse(text: &str) -> WorkerState {
        match text {
            "idle" => WorkerState::Idle,
            "busy" => WorkerState::Busy,
            _ => WorkerState::Stopped,
        }
    }
}

/// A worker the store knows.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// Its id.
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its device.
    pub device: String,
    /// Its intra-op threads.
    pub threads: u32,
    /// When it registered.
    pub started_ms: i64,
    /// Its last heartbeat.
    pub heartbeat_ms: i64,
    /// The unit it holds.
    pub unit: Option<UnitId>,
    /// Its state.
    pub state: WorkerState,
    /// Its Slurm job, when Slurm started it.
    pub slurm_job: Option<String>,
}

impl WorkerRecord {
    /// Whether it is working or waiting and heartbeat within `max_silence_ms` of `now`.
    pub fn is_live(&self, now: i64, max_silence_ms: i64) -> bool {
        self.state != WorkerState::Stopped && now - self.heartbeat_ms <= max_silence_ms
    }
}

/// A worker id: `<role>:<host>:<pid>:<8 random hex digits>` (the random part tells apart two
/// processes that reuse a pid).
pub fn worker_id(role: &str, host: &str, pid: u32) -> String {
    let mut bytes = [0u8; 4];
    let random = getrandom::fill(&mut bytes)
        .map(|()| u32::from_le_bytes(bytes))
        .unwrap_or_else(|_| now_ms() as u32);
    format!("{role}:{host}:{pid}:{random:08x}")
}

pub(super) const WORKER_COLUMNS: &str =
    "id, host, pid, device, threads, started_ms, heartbeat_ms, unit, state, slurm_job";

pub(super) fn worker_from_row(row: &Row) -> DbResult<WorkerRecord> {
    Ok(WorkerRecord {
        id: row.get(0)?,
        host: row.get(1)?,
        pid: row.get(2)?,
        device: row.get(3)?,
        threads: row.get(4)?,
        started_ms: row.get(5)?,
        heartbeat_ms: row.get(6)?,
        unit: row.get::<Option<i64>>(7)?.map(UnitId),
        state: WorkerState::parse(&row.get::<String>(8)?),
        slurm_job: row.get(9)?,
    })
}

impl Store {
    /// Registers a worker (idle, heartbeat now).
    pub fn register_worker(&mut self, worker: &NewWorker) -> Result<()> {
        let now = now_ms();
        self.connection
            .execute(
                "INSERT INTO workers (id, host, pid, device, threads, started_ms, heartbeat_ms, unit, state, slurm_job) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, NULL, 'idle', ?7)",
                params![
                    worker.id,
                    worker.host,
                    worker.pid,
                    worker.device,
                    worker.threads,
                    now,
                    worker.slurm_job
                ],
            )
            .map_err(db(format!("registering worker `{}`", worker.id)))?;
        Ok(())
    }

    /// A worker's heartbeat: its state and the unit it holds.
    pub fn worker_heartbeat(
        &mut self,
        id: &str,
        state: WorkerState,
        unit: Option<UnitId>,
    ) -> Result<()> {
        self.connection
            .execute(
                "UPDATE workers SET heartbeat_ms = ?1, state = ?2, unit = ?3 WHERE id = ?4",
                params![now_ms(), state.as_str(), unit.map(|unit| unit.0), id],
            )
            .map_err(db(format!("recording a heartbeat of worker `{id}`")))?;
        Ok(())
    }

    /// Every worker the store knows, by start time.
    pub fn workers(&self) -> Result<Vec<WorkerRecord>> {
        let context = "listing workers";
        self.connection
            .query_map(
                &format!("SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_ms, id"),
                (),
                worker_from_row,
            )
            .map_err(db(context))
    }
}
