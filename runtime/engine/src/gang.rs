//! Data parallelism over work units: one rank of a data-parallel epoch (Cerebro's section 6.2,
//! below `p / 2` models: one model trained by every worker at once). A data-parallel run is a
//! MOP run ([`crate::mop`]) whose epochs are **gangs**: epoch `e` is `g` sub-epoch units with a
//! gang size (`easeml_store`'s "Gang ranks"), rank `r` addressed to the worker holding partition
//! `r`. [`execute_gang_rank`] (a worker, from [`crate::mop::execute_sub_epoch`]):
//!
//! 1. *Rendezvous through the store.* The rank binds a TCP listener, writes its `host:port` on
//!    its unit under the lease's fencing token ([`Store::set_gang_endpoint`]) and polls the
//!    epoch's units ([`Store::gang`]) until every rank is leased, live and has an endpoint (the
//!    store clears a unit's endpoint on every lease, so an endpoint is always its current
//!    holder's). The gang's token mixes the run, the epoch and every rank's attempt: a process
//!    holding an older attempt cannot join. A gang that does not form within
//!    [`RENDEZVOUS`] (a peer's worker is busy or gone) gives the lease back without a loss; a
//!    unit addressed to a gone worker is leased by any other, so the gang re-forms without it.
//! 2. *Train.* [`easeml_trainer::data_parallel::train_data_parallel_epoch`] from the run's last
//!    committed state (the lease's input, the same for every rank), the spec's steps (the
//!    smallest partition's batches) on the rank's partition, gradients averaged by a ring
//!    all-reduce ([`TcpRing`]) before each Adam step, so every rank takes the same step.
//! 3. *Commit.* Rank 0 alone puts the state and commits it ([`Store::commit_sub_epoch`], which
//!    closes the epoch's other ranks in the same transaction), with the gang's worker-seconds
//!    (its own times `g`) as the epoch's cost; the other ranks wait for that commit and end.
//!    A ring that breaks (a peer killed, a socket error) gives the lease back as lost
//!    ([`Store::release_lease_as_lost`]): every rank of the epoch is leased again and the epoch
//!    is trained again from the same committed state, so nothing of a broken epoch is kept and a
//!    gang that keeps breaking fails its run after `MAX_LOSSES`.
//!
//! The listener's host is `$EASEML_GANG_HOST` when set (an address the other workers can reach),
//! else the worker's host name ([`crate::worker::host_name`]), resolved by each peer.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::{Duration, Instant};

use easeml_store::{Lease, Store, SubEpochLease, SubEpochRecord, UnitState, now_ms};
use easeml_trainer::data_parallel::{TcpRing, train_data_parallel_epoch};
use easeml_trainer::hop::sub_epoch_seed;
use easeml_trainer::mop::SubEpochOutcome;
use tch::Device;

use crate::error::{Error, Result};
use crate::mop::PartitionCache;
use crate::unit::{Executed, executed};

/// How long a rank waits for every rank of its gang to join before it gives its lease back.
pub const RENDEZVOUS: Duration = Duration::from_secs(20);

/// How long a rank waits on a silent peer in an exchange of gradients once its gang formed.
pub const RING_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one try to connect a gang's ring waits before the rank reads the store again.
const CONNECT_TRY: Duration = Duration::from_secs(3);

/// How often a rank reads the store while it waits.
const POLL: Duration = Duration::from_millis(20);

/// The variable naming the host other workers reach this worker's gradient listener at.
pub const GANG_HOST_VAR: &str = "EASEML_GANG_HOST";

/// The token of a formed gang: the run, the epoch, the size and every rank's attempt.
pub fn gang_token(run: i64, epoch: u64, ranks: &[SubEpochRecord]) -> u64 {
    ranks.iter().fold(
        sub_epoch_seed(run as u64, epoch, ranks.len() as u64),
        |token, rank| sub_epoch_seed(token, u64::from(rank.attempt), rank.partition),
    )
}

/// Whether every one of `size` ranks is held under a live lease with a listener written.
fn formed(ranks: &[SubEpochRecord], size: u64, now_ms: i64) -> bool {
    ranks.len() as u64 == size
        && ranks.iter().all(|rank| {
            rank.state == UnitState::Leased
                && rank.endpoint.is_some()
                && rank
                    .lease_expires_ms
                    .is_some_and(|expires| expires >= now_ms)
        })
}

/// Whether the lease still holds its unit in `ranks`.
fn holds(ranks: &[SubEpochRecord], lease: &Lease) -> bool {
    ranks.iter().any(|rank| {
        rank.unit == lease.unit
            && rank.state == UnitState::Leased
            && rank.attempt == lease.attempt
            && rank.lease_owner.as_deref() == Some(lease.owner.as_str())
    })
}

/// The host this worker's listener is reached at.
fn advertised_host() -> String {
    std::env::var(GANG_HOST_VAR)
        .ok()
        .filter(|host| !host.trim().is_empty())
        .unwrap_or_else(crate::worker::host_name)
}

fn resolve(endpoint: &str) -> std::result::Result<SocketAddr, String> {
    endpoint
        .to_socket_addrs()
        .map_err(|error| format!("cannot resolve the gang peer `{endpoint}`: {error}"))?
        .next()
        .ok_or_else(|| format!("the gang peer `{endpoint}` resolves to no address"))
}

/// Trains a leased gang rank (see the module docs). A diverged epoch, or data changed since the
/// run was queued, fails the run; a gang that does not form or breaks gives the lease back.
pub fn execute_gang_rank(
    store: &mut Store,
    lease: &Lease,
    at: &SubEpochLease,
    device: Device,
    cache: &mut PartitionCache,
) -> Result<Executed> {
    let started = Instant::now();
    let size = at.gang.unwrap_or(1);
    let rank = at.partition;
    let (spec, examples, state) = match crate::mop::leased_work(store, lease, at, cache) {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(reason)) => return fail(store, lease, &reason, started),
        Err(error) => return fail(store, lease, &error.to_string(), started),
    };
    let listener = TcpListener::bind(("0.0.0.0", 0))
        .map_err(|error| Error::Input(format!("cannot listen for gang peers: {error}")))?;
    let port = listener
        .local_addr()
        .map_err(|error| Error::Input(format!("cannot read the gang listener: {error}")))?
        .port();
    if !store.set_gang_endpoint(lease, &format!("{}:{port}", advertised_host()))? {
        return Ok(Executed::LeaseLost(
            "the lease was taken over before the gang formed".to_owned(),
        ));
    }
    // 1. Rendezvous: until the ring connects with the gang as the store shows it, each try
    // short (a peer seen in the store may be about to give up, or gone), every try reading the
    // store again.
    let deadline = Instant::now() + RENDEZVOUS;
    let mut why = String::from("no try yet");
    let mut ring = loop {
        if Instant::now() >= deadline {
            store.release_lease(lease)?;
            return Ok(Executed::GaveBack(format!(
                "rank {rank} of {size}: the gang did not form within {RENDEZVOUS:?} ({why})"
            )));
        }
        let ranks = store.gang(lease.run, at.epoch)?;
        if !holds(&ranks, lease) {
            return Ok(Executed::LeaseLost(
                "the unit was committed or taken over while the gang formed".to_owned(),
            ));
        }
        if (crate::mop::live_workers(store, crate::mop::DEFAULT_WORKER_SILENCE)? as u64) < size {
            // Too few workers are left to form the gang: the coordinator turns it into hops.
            store.release_lease(lease)?;
            return Ok(Executed::GaveBack(format!(
                "rank {rank} of {size}: fewer than {size} workers are live"
            )));
        }
        if !formed(&ranks, size, now_ms()) {
            let waiting: Vec<String> = ranks
                .iter()
                .filter(|rank| rank.state != UnitState::Leased || rank.endpoint.is_none())
                .map(|rank| rank.partition.to_string())
                .collect();
            why = format!("waiting for rank(s) {}", waiting.join(", "));
            std::thread::sleep(POLL);
            continue;
        }
        let token = gang_token(lease.run.0, at.epoch, &ranks);
        let right = &ranks[((rank + 1) % size) as usize];
        let joined = resolve(right.endpoint.as_deref().unwrap_or_default()).and_then(|right| {
            let mut ring = TcpRing::connect(
                rank as usize,
                size as usize,
                &listener,
                right,
                token,
                CONNECT_TRY,
            )
            .map_err(|error| error.to_string())?;
            // A barrier: every rank is connected both ways before any trains.
            ring.all_reduce_mean(&mut [0.0])
                .and_then(|()| ring.set_timeout(RING_TIMEOUT))
                .map_err(|error| error.to_string())?;
            Ok(ring)
        });
        match joined {
            Ok(ring) => break ring,
            Err(error) => why = error,
        }
    };
    // 2. Train.
    let rows: Vec<usize> = (0..examples.len()).collect();
    let steps = spec.gang_steps.unwrap_or(1).max(1) as usize;
    let trained = train_data_parallel_epoch(
        &spec.setup,
        &state,
        &examples,
        &rows,
        at.epoch,
        steps,
        &mut ring,
        device,
    )
    .map_err(|error| error.to_string());
    // 3. Commit.
    let next = match trained {
        Ok(SubEpochOutcome::Trained { state, .. }) => state,
        Ok(SubEpochOutcome::Diverged(reason)) => {
            // Every rank saw the same mean loss: rank 0 records the failure.
            if rank == 0 {
                return fail(store, lease, &reason, started);
            }
            return wait_for_rank_zero(store, lease, at);
        }
        Err(reason) => {
            store.release_lease_as_lost(lease)?;
            return Ok(Executed::GaveBack(format!(
                "rank {rank} of {size}: the gang broke: {reason}"
            )));
        }
    };
    if rank != 0 {
        return wait_for_rank_zero(store, lease, at);
    }
    let result = store.put_blob(&next)?;
    let seconds = started.elapsed().as_secs_f64() * size as f64;
    executed(store.commit_sub_epoch(lease, &result, seconds))
}

/// One data-parallel epoch trained by a gang of threads of this process (one per partition in
/// `parts`, rows of `examples`) over local rings: rank 0's next state. The replay of a run's
/// gang epochs ([`crate::mop::replay`]), and the reference a test compares workers with.
pub fn train_gang_in_process(
    setup: &easeml_trainer::mop::MopSetup,
    state: &[u8],
    examples: &easeml_trainer::Examples,
    parts: &[Vec<usize>],
    epoch: u64,
    steps: usize,
    token: u64,
) -> Result<Vec<u8>> {
    let world = parts.len();
    let io = |error: std::io::Error| Error::Input(format!("a local gang cannot listen: {error}"));
    let listeners = (0..world)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)).map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let addresses = listeners
        .iter()
        .map(|listener| listener.local_addr().map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let outcomes: Vec<Result<SubEpochOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (listener, right) = (&listeners[rank], addresses[(rank + 1) % world]);
                let rows = &parts[rank];
                scope.spawn(move || -> Result<SubEpochOutcome> {
                    let mut ring = if world == 1 {
                        TcpRing::single()
                    } else {
                        TcpRing::connect(rank, world, listener, right, token, RING_TIMEOUT)?
                    };
                    Ok(train_data_parallel_epoch(
                        setup,
                        state,
                        examples,
                        rows,
                        epoch,
                        steps,
                        &mut ring,
                        Device::Cpu,
                    )?)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(Error::Input("a local gang rank panicked".into())))
            })
            .collect()
    });
    let mut first = None;
    for outcome in outcomes {
        let outcome = outcome?;
        if first.is_none() {
            first = Some(outcome);
        }
    }
    match first {
        Some(SubEpochOutcome::Trained { state, .. }) => Ok(state),
        Some(SubEpochOutcome::Diverged(reason)) => Err(Error::Input(reason)),
        None => Err(Error::Input("a gang needs at least one rank".into())),
    }
}

/// A rank other than 0 after its epoch: waits for rank 0's commit (which closes this rank's unit)
/// and gives the lease back if it does not come.
fn wait_for_rank_zero(store: &mut Store, lease: &Lease, at: &SubEpochLease) -> Result<Executed> {
    let deadline = Instant::now() + RING_TIMEOUT;
    loop {
        let ranks = store.gang(lease.run, at.epoch)?;
        let mine = ranks.iter().find(|rank| rank.unit == lease.unit);
        if mine.is_none_or(|rank| rank.state == UnitState::Committed) {
            return Ok(Executed::Committed);
        }
        if !holds(&ranks, lease) {
            return Ok(Executed::LeaseLost(
                "the unit was taken over before rank 0 committed the epoch".to_owned(),
            ));
        }
        if Instant::now() >= deadline {
            store.release_lease(lease)?;
            return Ok(Executed::GaveBack(format!(
                "rank {}: rank 0 did not commit the epoch within {RING_TIMEOUT:?}",
                at.partition
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// Fails the run from a rank (its data is gone, or its training diverged).
fn fail(store: &mut Store, lease: &Lease, reason: &str, started: Instant) -> Result<Executed> {
    executed(store.fail_sub_epoch_run(lease, reason, Some(started.elapsed().as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_store::UnitId;

    fn rank(
        partition: u64,
        attempt: u32,
        state: UnitState,
        endpoint: Option<&str>,
    ) -> SubEpochRecord {
        SubEpochRecord {
            unit: UnitId(partition as i64 + 1),
            epoch: 0,
            partition,
            state,
            attempt,
            lease_owner: Some(format!("w{partition}")),
            target_worker: None,
            input: None,
            result: None,
            seconds: None,
            seq: None,
            gang: Some(2),
            endpoint: endpoint.map(str::to_owned),
            lease_expires_ms: Some(1_000),
        }
    }

    #[test]
    fn a_gang_forms_when_every_rank_is_held_live_with_a_listener() {
        let both = [
            rank(0, 1, UnitState::Leased, Some("a:1")),
            rank(1, 1, UnitState::Leased, Some("b:1")),
        ];
        assert!(formed(&both, 2, 999));
        // A lease expired, a rank missing, a listener not written yet, a queued rank.
        assert!(!formed(&both, 2, 1_001));
        assert!(!formed(&both[..1], 2, 0));
        let unwritten = [both[0].clone(), rank(1, 1, UnitState::Leased, None)];
        assert!(!formed(&unwritten, 2, 0));
        let queued = [both[0].clone(), rank(1, 1, UnitState::Queued, Some("b:1"))];
        assert!(!formed(&queued, 2, 0));
    }

    #[test]
    fn a_gangs_token_changes_with_any_ranks_attempt() {
        let gang = |attempts: [u32; 2]| {
            [
                rank(0, attempts[0], UnitState::Leased, Some("a:1")),
                rank(1, attempts[1], UnitState::Leased, Some("b:1")),
            ]
        };
        let token = gang_token(7, 3, &gang([1, 1]));
        assert_eq!(token, gang_token(7, 3, &gang([1, 1])));
        assert_ne!(token, gang_token(7, 3, &gang([1, 2])));
        assert_ne!(token, gang_token(7, 3, &gang([2, 1])));
        assert_ne!(token, gang_token(7, 4, &gang([1, 1])));
        assert_ne!(token, gang_token(8, 3, &gang([1, 1])));
    }

    #[test]
    fn an_unresolvable_peer_is_an_error_that_names_it() {
        let error = resolve("no-such-host.invalid:1").unwrap_err();
        assert!(error.contains("no-such-host.invalid:1"), "{error}");
        assert!(resolve("127.0.0.1:9").is_ok());
    }
}
