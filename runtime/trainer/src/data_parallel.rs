//! Synchronous data parallelism for one model over several workers (Cerebro's section 6.2: below
//! `p / 2` models MOP leaves workers idle, and the paper trains the last models with Horovod):
//! every rank holds the same training state, draws a batch from its own partition, computes its
//! gradient, and a ring all-reduce over TCP ([`TcpRing`]) gives every rank the mean gradient, so
//! every rank takes the same Adam step and the ranks stay equal. A data-parallel epoch of `g`
//! ranks with batches of `b` is sequential training with batches of `g x b` (the ranks' batches
//! concatenated), up to float summation order (`tests/data_parallel.rs` checks it).
//!
//! - [`TcpRing`]: the gradient channel. Rank `r` listens, connects to rank `r + 1`'s listener and
//!   accepts rank `r - 1`'s connection (each side says its rank and the gang's token first, so a
//!   stray connection is refused); [`TcpRing::all_reduce_mean`] is the bandwidth-optimal ring
//!   (reduce-scatter, then all-gather: `2 (g - 1) / g` of the buffer sent per rank), sending
//!   while receiving on the rank's own thread (both sockets non-blocking, polled in turn, spinning
//!   briefly before napping), so neither side blocks on a full socket buffer and no step starts a
//!   thread. A peer silent past the timeout is an error, never a hang.
//! - [`train_data_parallel_epoch`]: one epoch of one rank from a [`crate::hop::TrainingState`]
//!   (the MOP state bytes, so a run can move between hopping and data parallelism), `steps`
//!   batches (the same on every rank: the caller gives the smallest partition's batch count), in
//!   an order and with dropout masks drawn from the rank's seed for the epoch.
//!
//! Invariants: all ranks start from the same state bytes and run the same number of steps; every
//! trainable variable steps every batch (a variable no forward pass used gets a zero gradient, so
//! the flat buffers of all ranks line up); batch-norm statistics are each rank's own (as Horovod
//! without synchronized batch norm) and the state rank 0 returns is the run's.
//!
//! The engine forms the gangs: `easeml_engine::gang` (the rendezvous through the store's unit
//! rows, the commit of the epoch's state by rank 0).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

use crate::batch::{example_batch, loss};
use crate::data::{Examples, mix64};
use crate::error::{Error, Result};
use crate::hop::{SubEpoch, TrainingState, begin_sub_epoch};
use crate::mop::{MopSetup, SubEpochOutcome, restored};

/// The first bytes each side of a ring connection sends: a tag, the sender's rank, the gang token.
const HELLO: &[u8; 8] = b"EMRING1\n";

/// A rank's two connections in the ring of a gang.
#[derive(Debug)]
pub struct TcpRing {
    rank: usize,
    world: usize,
    /// To rank `rank + 1` (mod world): what this rank sends.
    right: Option<TcpStream>,
    /// From rank `rank - 1` (mod world): what this rank receives.
    left: Option<TcpStream>,
}

fn ring_error(message: String) -> Error {
    Error::Mop(format!("data parallelism: {message}"))
}

impl TcpRing {
    /// A ring of one rank: its all-reduce is the identity.
    pub fn single() -> Self {
        Self {
            rank: 0,
            world: 1,
            right: None,
            left: None,
        }
    }

    /// Joins the ring as `rank` of `world` (at least 2): connects to `right` (rank `rank + 1`'s
    /// listener address, retried until `timeout`) and accepts rank `rank - 1` on `listener`. Both
    /// connections carry `token` (the gang's) in their hello; a connection with another token or
    /// rank is dropped and waited past. Reads and writes time out after `timeout` too.
    pub fn connect(
        rank: usize,
        world: usize,
        listener: &TcpListener,
        right: SocketAddr,
        token: u64,
        timeout: Duration,
    ) -> Result<Self> {
        if world < 2 || rank >= world {
            return Err(ring_error(format!(
                "rank {rank} of {world}: a ring needs at least two ranks, each below the world size"
            )));
        }
        let deadline = Instant::now() + timeout;
        let hello = |rank: usize| {
            let mut bytes = HELLO.to_vec();
            bytes.extend_from_slice(&(rank as u64).to_le_bytes());
            bytes.extend_from_slice(&token.to_le_bytes());
            bytes
        };
        let io = |what: &str, error: std::io::Error| ring_error(format!("{what}: {error}"));
        // Connect to the right neighbour (its listener may not be up yet: retry).
        let mut right_stream = loop {
            match TcpStream::connect_timeout(&right, Duration::from_millis(200)) {
                Ok(stream) => break stream,
                Err(error) if Instant::now() >= deadline => {
                    return Err(io(&format!("rank {rank} could not reach {right}"), error));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        right_stream
            .set_write_timeout(Some(timeout))
            .and_then(|()| right_stream.set_read_timeout(Some(timeout)))
            .and_then(|()| right_stream.set_nodelay(true))
            .and_then(|()| right_stream.write_all(&hello(rank)))
            .map_err(|error| io("greeting the right neighbour", error))?;
        // Accept the left neighbour: the first connection with the right hello.
        let left_rank = (rank + world - 1) % world;
        listener
            .set_nonblocking(true)
            .map_err(|error| io("listening", error))?;
        let left_stream = loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let greeted = stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.set_read_timeout(Some(timeout)))
                        .and_then(|()| stream.set_write_timeout(Some(timeout)))
                        .and_then(|()| stream.set_nodelay(true))
                        .and_then(|()| {
                            let mut got = vec![0u8; HELLO.len() + 16];
                            stream.read_exact(&mut got).map(|()| got)
                        });
                    if matches!(greeted, Ok(ref got) if *got == hello(left_rank)) {
                        break stream;
                    }
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(ring_error(format!(
                            "rank {rank} waited {timeout:?} for rank {left_rank} to connect"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(error) => return Err(io("accepting the left neighbour", error)),
            }
        };
        Ok(Self {
            rank,
            world,
            right: Some(right_stream),
            left: Some(left_stream),
        })
    }

    /// Sets how long a read or a write waits for a silent peer (set to the connecting timeout by
    /// [`TcpRing::connect`]).
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        for stream in self.right.iter().chain(self.left.iter()) {
            stream
                .set_read_timeout(Some(timeout))
                .and_then(|()| stream.set_write_timeout(Some(timeout)))
                .map_err(|error| ring_error(format!("setting a timeout: {error}")))?;
        }
        Ok(())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Replaces `values` on every rank by the ranks' element-wise mean (every rank must call it
    /// with a buffer of the same length).
    pub fn all_reduce_mean(&mut self, values: &mut [f32]) -> Result<()> {
        let world = self.world;
        if world == 1 {
            return Ok(());
        }
        let (Some(right), Some(left)) = (self.right.as_mut(), self.left.as_mut()) else {
            return Err(ring_error("the ring is not connected".to_owned()));
        };
        let n = values.len();
        let bounds = |chunk: usize| (chunk * n / world, (chunk + 1) * n / world);
        let rank = self.rank;
        let mut received = Vec::with_capacity(n / world + 1);
        // Reduce-scatter (offset 0): after world - 1 steps rank r holds chunk r + 1 summed over
        // all ranks. All-gather (offset 1): the summed chunks passed round. At every step a rank
        // sends one chunk and receives the chunk before it.
        for (offset, gathering) in [(0, false), (1, true)] {
            for step in 0..world - 1 {
                let send = (rank + offset + world - step) % world;
                let receive = (send + world - 1) % world;
                exchange(
                    right,
                    left,
                    values,
                    bounds(send),
                    bounds(receive),
                    &mut received,
                )?;
                let (start, end) = bounds(receive);
                let chunk = &mut values[start..end];
                if gathering {
                    chunk.copy_from_slice(&received);
                } else {
                    chunk.iter_mut().zip(&received).for_each(|(v, r)| *v += r);
                }
            }
        }
        let scale = 1.0 / world as f32;
        values.iter_mut().for_each(|value| *value *= scale);
        Ok(())
    }
}

/// How long a rank polls its sockets without sleeping when neither can move: the ranks step in
/// lock step, so the neighbour's chunk usually comes within a step's compute, and waking a
/// sleeping thread costs more than that.
const SPIN: Duration = Duration::from_millis(2);

/// How long a rank sleeps between polls once it has spun [`SPIN`] without progress.
const NAP: Duration = Duration::from_micros(100);

/// Sends `values[send]` to the right while receiving the left's chunk of `receive`'s length into
/// `incoming` (resized to it), on this thread: both sockets non-blocking, each polled in turn
/// until both transfers are done, so neither side blocks on a full socket buffer whatever the
/// size, and no thread is started per exchange. A neighbour silent for the streams' timeout is an
/// error. The floats travel as their bytes in this machine's order: every rank of a gang runs on
/// the same kind of machine (a mixed-endian gang is not supported).
fn exchange(
    right: &mut TcpStream,
    left: &mut TcpStream,
    values: &[f32],
    send: (usize, usize),
    receive: (usize, usize),
    incoming: &mut Vec<f32>,
) -> Result<()> {
    let outgoing: &[u8] = bytemuck::cast_slice(&values[send.0..send.1]);
    incoming.clear();
    incoming.resize(receive.1 - receive.0, 0.0);
    let into: &mut [u8] = bytemuck::cast_slice_mut(incoming.as_mut_slice());
    let timeout = left
        .read_timeout()
        .ok()
        .flatten()
        .unwrap_or(Duration::from_secs(60));
    let set = |nonblocking: bool, right: &TcpStream, left: &TcpStream| {
        right
            .set_nonblocking(nonblocking)
            .and_then(|()| left.set_nonblocking(nonblocking))
            .map_err(|error| ring_error(format!("setting the sockets' mode: {error}")))
    };
    set(true, right, left)?;
    let moved = transfer(right, left, outgoing, into, timeout);
    set(false, right, left)?;
    moved
}

/// [`exchange`]'s loop over two non-blocking sockets.
fn transfer(
    right: &mut TcpStream,
    left: &mut TcpStream,
    outgoing: &[u8],
    into: &mut [u8],
    timeout: Duration,
) -> Result<()> {
    let (mut sent, mut received) = (0, 0);
    let mut last_progress = Instant::now();
    while sent < outgoing.len() || received < into.len() {
        let mut progress = false;
        if sent < outgoing.len() {
            match right.write(&outgoing[sent..]) {
                Ok(0) => {
                    return Err(ring_error(
                        "sending to the right neighbour: the connection is closed".to_owned(),
                    ));
                }
                Ok(count) => {
                    sent += count;
                    progress = true;
                }
                Err(error) if would_wait(&error) => {}
                Err(error) => {
                    return Err(ring_error(format!(
                        "sending to the right neighbour: {error}"
                    )));
                }
            }
        }
        if received < into.len() {
            match left.read(&mut into[received..]) {
                Ok(0) => {
                    return Err(ring_error(
                        "receiving from the left neighbour: the neighbour closed the connection"
                            .to_owned(),
                    ));
                }
                Ok(count) => {
                    received += count;
                    progress = true;
                }
                Err(error) if would_wait(&error) => {}
                Err(error) => {
                    return Err(ring_error(format!(
                        "receiving from the left neighbour: {error}"
                    )));
                }
            }
        }
        if progress {
            last_progress = Instant::now();
            continue;
        }
        let idle = last_progress.elapsed();
        if idle >= timeout {
            return Err(ring_error(format!(
                "the neighbours were silent for {timeout:?} ({sent} of {} bytes sent, {received} of {} received)",
                outgoing.len(),
                into.len()
            )));
        }
        if idle < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(NAP);
        }
    }
    Ok(())
}

/// Whether an error of a non-blocking socket only says "not now".
fn would_wait(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

/// The seed of rank `rank`'s batch order and dropout in `epoch`: a sub-epoch seed with the rank as
/// the partition, so replaying a rank's epoch draws the same.
pub fn rank_epoch_at(epoch: u64, rank: usize) -> SubEpoch {
    SubEpoch {
        epoch,
        partition: rank as u64,
    }
}

/// One data-parallel epoch of one rank: restores `state`, runs `steps` batches of its `rows` (in an
/// order drawn from the run's seed, the epoch and the rank; rows are reused in order when `steps`
/// batches need more), all-reducing the gradients over `ring` before each Adam step, and returns
/// the next state (equal on every rank up to float rounding of the reduction's order).
#[allow(clippy::too_many_arguments)]
pub fn train_data_parallel_epoch(
    setup: &MopSetup,
    state: &[u8],
    examples: &Examples,
    rows: &[usize],
    epoch: u64,
    steps: usize,
    ring: &mut TcpRing,
    device: Device,
) -> Result<SubEpochOutcome> {
    if rows.is_empty() || steps == 0 {
        return Err(ring_error(format!(
            "rank {} has {} training rows and {steps} steps: every rank needs rows and a step",
            ring.rank(),
            rows.len()
        )));
    }
    if let Some(&row) = rows.iter().find(|&&row| row >= examples.len()) {
        return Err(ring_error(format!(
            "row {row} is not among the {} examples",
            examples.len()
        )));
    }
    let (store, model, mut adam, restored_state) = restored(setup, state, device)?;
    let seed = restored_state.header.seed;
    let at = rank_epoch_at(epoch, ring.rank());
    let (rank_seed, _randomness) = begin_sub_epoch(seed, at.epoch, at.partition, device)?;
    let mut order = rows.to_vec();
    order.sort_by_key(|&row| (mix64(rank_seed ^ examples.ids[row]), row));
    let batch_size = setup.batch_size.max(1);
    // The trainable variables in Adam's order (by name), the same on every rank, so the flat
    // gradient buffers line up.
    let variables: Vec<Tensor> = adam.variables().map(Tensor::shallow_clone).collect();
    let mut loss_sum = 0.0;
    for step in 0..steps {
        let batch: Vec<usize> = (0..batch_size)
            .map(|i| order[(step * batch_size + i) % order.len()])
            .collect();
        let (input, targets) = example_batch(examples, &setup.task, &setup.config, &batch, device);
        let outputs = model.forward(&input, true);
        let batch_loss = loss(&outputs, &targets);
        let value = batch_loss.double_value(&[]);
        // Every rank reduces every step even when its loss is not finite (the others wait for
        // it); the reduced loss below says whether the run diverged.
        adam.zero_grad()?;
        batch_loss.f_backward()?;
        // Every variable gets a gradient (zero when this pass did not use it), so the buffers
        // line up: a second, tiny backward pass for the ones without (zeroing keeps a gradient,
        // so at most the first step has any).
        let untouched: Vec<&Tensor> = variables
            .iter()
            .filter(|variable| !variable.grad().defined())
            .collect();
        if let Some(zero) = untouched
            .iter()
            .map(|variable| variable.sum(Kind::Float) * 0.0)
            .reduce(|total, zero| total + zero)
        {
            zero.f_backward()?;
        }
        let grads: Vec<Tensor> = variables.iter().map(Tensor::grad).collect();
        let flat = Tensor::f_cat(
            &grads
                .iter()
                .map(|grad| {
                    grad.reshape([-1])
                        .to_kind(Kind::Float)
                        .to_device(Device::Cpu)
                })
                .collect::<Vec<_>>(),
            0,
        )?;
        let mut buffer = Vec::<f32>::try_from(&flat)?;
        buffer.push(value as f32);
        ring.all_reduce_mean(&mut buffer)?;
        let mean_loss = f64::from(buffer.pop().unwrap_or(f32::NAN));
        if !mean_loss.is_finite() {
            return Ok(SubEpochOutcome::Diverged(format!(
                "the loss is {mean_loss} in data-parallel epoch {epoch} at step {step}"
            )));
        }
        let reduced = Tensor::from_slice(&buffer).to_device(device);
        let mut offset = 0i64;
        tch::no_grad(|| -> Result<()> {
            for grad in &grads {
                let numel = grad.numel() as i64;
                let mut grad = grad.shallow_clone();
                grad.f_copy_(&reduced.narrow(0, offset, numel).view_as(&grad))?;
                offset += numel;
            }
            Ok(())
        })?;
        adam.step()?;
        loss_sum += mean_loss;
    }
    let state = TrainingState::capture(&store, &adam, seed, Some(at))?.to_bytes()?;
    Ok(SubEpochOutcome::Trained {
        state,
        loss: loss_sum / steps as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::example_batch;
    use crate::hop::sub_epoch_seed;
    use crate::models::ModelConfig;
    use crate::mop::{initial_state, partition_rows};
    use crate::{Task, synthetic};

    /// A listener on a free local port, and its address.
    fn listener() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        (listener, address)
    }

    /// `world` rings on threads, each running `work` with its rank; their results.
    fn with_rings<T: Send>(world: usize, work: impl Fn(&mut TcpRing) -> T + Sync) -> Vec<T> {
        let listeners: Vec<(TcpListener, SocketAddr)> = (0..world).map(|_| listener()).collect();
        let token = 0x5eed;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..world)
                .map(|rank| {
                    let (listener, _) = &listeners[rank];
                    let right = listeners[(rank + 1) % world].1;
                    let work = &work;
                    scope.spawn(move || {
                        let mut ring = TcpRing::connect(
                            rank,
                            world,
                            listener,
                            right,
                            token,
                            Duration::from_secs(20),
                        )
                        .unwrap();
                        work(&mut ring)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn a_ring_all_reduces_to_the_mean() {
        for world in [2, 3, 4] {
            // Lengths below the world size leave some chunks empty; the longest passes the
            // sockets' buffers many times over (partial reads and writes).
            for n in [0, 1, 2, 5, 1001, 600_001] {
                let data = |rank: usize| -> Vec<f32> {
                    (0..n)
                        .map(|i| (i * 7 + rank * 13) as f32 * 0.25 - 3.0)
                        .collect()
                };
                let inputs: Vec<Vec<f32>> = (0..world).map(data).collect();
                let results = with_rings(world, |ring| {
                    let mut values = inputs[ring.rank()].clone();
                    ring.all_reduce_mean(&mut values).unwrap();
                    values
                });
                let expected: Vec<f32> = (0..n)
                    .map(|i| inputs.iter().map(|input| input[i]).sum::<f32>() / world as f32)
                    .collect();
                for (rank, values) in results.iter().enumerate() {
                    assert_eq!(values.len(), n);
                    for (got, want) in values.iter().zip(&expected) {
                        assert!(
                            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                            "world {world}, n {n}, rank {rank}: {got} != {want}"
                        );
                    }
                }
            }
        }
        let mut single = TcpRing::single();
        let mut values = vec![1.0, 2.0];
        single.all_reduce_mean(&mut values).unwrap();
        assert_eq!(values, vec![1.0, 2.0]);
    }

    #[test]
    fn a_stray_connection_is_ignored_and_a_missing_peer_is_a_timeout_not_a_hang() {
        let (listener, address) = listener();
        // Nobody listens at the right neighbour's address: connecting gives up at the deadline.
        let gone_address = easeml_test_support::refusing_address();
        let started = Instant::now();
        let error = TcpRing::connect(0, 2, &listener, gone_address, 1, Duration::from_millis(400))
            .unwrap_err()
            .to_string();
        assert!(error.contains("could not reach"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // The right neighbour is up but the left never says the gang's hello: a stray connection
        // with another token is dropped, and the wait ends at the deadline.
        let (right, right_address) = self::listener();
        let stray = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            let mut hello = HELLO.to_vec();
            hello.extend_from_slice(&1u64.to_le_bytes());
            hello.extend_from_slice(&999u64.to_le_bytes());
            let _ = stream.write_all(&hello);
            std::thread::sleep(Duration::from_millis(600));
        });
        let error = TcpRing::connect(
            0,
            2,
            &listener,
            right_address,
            1,
            Duration::from_millis(400),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("waited"), "{error}");
        stray.join().unwrap();
        drop(right);
        let error = TcpRing::connect(2, 2, &listener, address, 1, Duration::from_millis(10))
            .unwrap_err()
            .to_string();
        assert!(error.contains("at least two ranks"), "{error}");
    }

    #[test]
    fn a_peer_that_dies_mid_reduction_is_an_error_on_the_others() {
        // Rank 1 joins and then goes away (its sockets close, as a killed process's do): rank 0's
        // next reduction fails with the broken connection instead of waiting forever.
        let errors = with_rings(2, |ring| {
            if ring.rank() == 1 {
                ring.left = None;
                ring.right = None;
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
            let mut values = vec![1.0f32; 100_000];
            Some(ring.all_reduce_mean(&mut values).unwrap_err().to_string())
        });
        let error = errors[0].as_deref().unwrap();
        assert!(error.contains("neighbour"), "{error}");
    }

    /// Run by hand: `cargo test -p easeml-trainer --release --lib ring_latency -- --ignored
    /// --nocapture`. The all-reduce of a small gradient (`mlp_large` on the CPU: 9.4 k floats)
    /// between two ranks, the per-step price of a data-parallel step of a small model.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn ring_latency() {
        let n = 9_400;
        let seconds = with_rings(2, |ring| {
            let mut values = vec![0.5f32; n];
            ring.all_reduce_mean(&mut values).unwrap();
            let started = Instant::now();
            for _ in 0..1000 {
                ring.all_reduce_mean(&mut values).unwrap();
            }
            started.elapsed().as_secs_f64() / 1000.0
        });
        println!(
            "all-reduce of {n} floats, 2 ranks: {:.1} us",
            seconds[0] * 1e6
        );
    }

    /// Run by hand: `cargo test -p easeml-trainer --release --lib ring_speed -- --ignored
    /// --nocapture`. The all-reduce of a ResNet-18-sized gradient (11.2 M floats) between two ranks
    /// on this machine's loopback.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn ring_speed() {
        let n = 11_200_000;
        let seconds = with_rings(2, |ring| {
            let mut values = vec![0.5f32; n];
            ring.all_reduce_mean(&mut values).unwrap();
            let started = Instant::now();
            for _ in 0..5 {
                ring.all_reduce_mean(&mut values).unwrap();
            }
            started.elapsed().as_secs_f64() / 5.0
        });
        println!(
            "all-reduce of {n} floats over 2 ranks: {:.1} ms ({:.0} MB/s of gradient)",
            seconds[0] * 1e3,
            n as f64 * 4.0 / seconds[0] / 1e6
        );
    }

    /// Run by hand: `cargo test -p easeml-trainer --release --lib step_overhead -- --ignored
    /// --nocapture`. One rank's data-parallel epoch (2 ranks) against a hop's sub-epoch over the
    /// same rows: what a data-parallel step costs beyond the step.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn step_overhead() {
        tch::set_num_threads(1);
        let examples = synthetic::tabular_sign(24_000, 16, 8);
        let mut setup = setup(&examples);
        setup.candidate = "mlp_large".to_owned();
        setup.config = ModelConfig::for_device(Device::Cpu);
        setup.batch_size = 32;
        let rows: Vec<usize> = (0..examples.len()).collect();
        let initial = initial_state(&setup, &examples, &rows, Device::Cpu).unwrap();
        let parts: Vec<Vec<usize>> = (0..2)
            .map(|p| partition_rows(&examples, &rows, 2, p))
            .collect();
        let steps = parts[0].len().min(parts[1].len()) / setup.batch_size;
        for _ in 0..3 {
            let started = Instant::now();
            crate::mop::train_sub_epoch(
                &setup,
                &initial,
                &examples,
                &parts[0][..steps * setup.batch_size],
                SubEpoch {
                    epoch: 0,
                    partition: 0,
                },
                Device::Cpu,
            )
            .unwrap();
            let hop = started.elapsed().as_secs_f64();
            let started = Instant::now();
            with_rings(2, |ring| {
                let part = &parts[ring.rank()];
                train_data_parallel_epoch(
                    &setup,
                    &initial,
                    &examples,
                    part,
                    0,
                    steps,
                    ring,
                    Device::Cpu,
                )
                .unwrap();
            });
            let gang = started.elapsed().as_secs_f64();
            let started = Instant::now();
            train_data_parallel_epoch(
                &setup,
                &initial,
                &examples,
                &parts[0],
                0,
                steps,
                &mut TcpRing::single(),
                Device::Cpu,
            )
            .unwrap();
            let alone = started.elapsed().as_secs_f64();
            let started = Instant::now();
            std::thread::scope(|scope| {
                for part in &parts {
                    let (setup, initial, examples) = (&setup, &initial, &examples);
                    scope.spawn(move || {
                        train_data_parallel_epoch(
                            setup,
                            initial,
                            examples,
                            part,
                            0,
                            steps,
                            &mut TcpRing::single(),
                            Device::Cpu,
                        )
                        .unwrap();
                    });
                }
            });
            println!(
                "two rings of one at once: {:.3} ms/step",
                started.elapsed().as_secs_f64() * 1e3 / steps as f64
            );
            println!(
                "{steps} steps: hop {:.3} ms/step, data-parallel rank {:.3} ms/step (a ring of one: {:.3})",
                hop * 1e3 / steps as f64,
                gang * 1e3 / steps as f64,
                alone * 1e3 / steps as f64
            );
        }
    }

    fn setup(examples: &Examples) -> MopSetup {
        MopSetup {
            candidate: "mlp_small".to_owned(),
            task: Task::of(examples).unwrap(),
            config: ModelConfig {
                width: 0.5,
                ..ModelConfig::for_device(Device::Cpu)
            },
            learning_rate: 0.01,
            seed: 21,
            batch_size: 8,
        }
    }

    /// The variables of a state, by name.
    fn variables(state: &[u8]) -> std::collections::BTreeMap<String, Tensor> {
        TrainingState::from_bytes(state).unwrap().variables
    }

    #[test]
    fn a_data_parallel_epoch_equals_sequential_training_on_the_concatenated_batches() {
        tch::set_num_threads(1);
        let examples = synthetic::tabular_sign(96, 5, 8);
        let setup = setup(&examples);
        let rows: Vec<usize> = (0..examples.len()).collect();
        let initial = initial_state(&setup, &examples, &rows, Device::Cpu).unwrap();
        let parts: Vec<Vec<usize>> = (0..2)
            .map(|p| partition_rows(&examples, &rows, 2, p))
            .collect();
        let steps = parts.iter().map(Vec::len).min().unwrap() / setup.batch_size;
        assert!(steps >= 3, "{steps}");
        let epoch = 4;
        let results = with_rings(2, |ring| {
            let part = &parts[ring.rank()];
            match train_data_parallel_epoch(
                &setup,
                &initial,
                &examples,
                part,
                epoch,
                steps,
                ring,
                Device::Cpu,
            )
            .unwrap()
            {
                SubEpochOutcome::Trained { state, loss } => (state, loss),
                SubEpochOutcome::Diverged(reason) => panic!("{reason}"),
            }
        });
        // The ranks agree (the same reduced gradient, the same Adam step).
        let (rank0, rank1) = (variables(&results[0].0), variables(&results[1].0));
        for (name, tensor) in &rank0 {
            assert!(
                tensor.equal(&rank1[name]),
                "{name} differs between the ranks"
            );
        }
        assert_eq!(results[0].1, results[1].1);
        // Sequential training on the two ranks' batches concatenated.
        let (store, model, mut adam, _) = restored(&setup, &initial, Device::Cpu).unwrap();
        let orders: Vec<Vec<usize>> = (0..2)
            .map(|rank| {
                let rank_seed = sub_epoch_seed(setup.seed, epoch, rank as u64);
                let mut order = parts[rank].clone();
                order.sort_by_key(|&row| (mix64(rank_seed ^ examples.ids[row]), row));
                order
            })
            .collect();
        let b = setup.batch_size;
        for step in 0..steps {
            let batch: Vec<usize> = orders
                .iter()
                .flat_map(|order| order[step * b..(step + 1) * b].iter().copied())
                .collect();
            let (input, targets) =
                example_batch(&examples, &setup.task, &setup.config, &batch, Device::Cpu);
            adam.backward_step(&loss(&model.forward(&input, true), &targets))
                .unwrap();
        }
        let sequential = TrainingState::capture(&store, &adam, setup.seed, None)
            .unwrap()
            .variables;
        let mut largest = 0.0f64;
        for (name, tensor) in &rank0 {
            let reference = &sequential[name];
            let scale = reference.abs().max().double_value(&[]).max(1e-6);
            let difference = (tensor - reference).abs().max().double_value(&[]) / scale;
            largest = largest.max(difference);
        }
        println!("data parallel vs sequential: max relative difference {largest:e}");
        assert!(
            largest < 1e-5,
            "data parallelism drifted from sequential: {largest}"
        );
        // And it trained: the weights moved.
        let start = variables(&initial);
        assert!(
            rank0
                .iter()
                .any(|(name, tensor)| !tensor.equal(&start[name]))
        );
    }
}
