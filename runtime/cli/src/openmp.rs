//! OpenMP's wait policy for the processes that answer requests beside training: `easeml serve`
//! and `easeml bench service` (which hosts a server).
//!
//! libtorch's CPU kernels run on libgomp's threads, which by default spin for a while after each
//! parallel region instead of sleeping. Training between its libtorch calls (batching, a classic
//! model's pure-Rust work) then keeps a spinning thread on a core that requests need: on 2 cores
//! with 64 clients asking while one run trained, `perf` found 18% of all samples in one such
//! thread, and `OMP_WAIT_POLICY=PASSIVE` took the answers' p99 from 39.7 / 44.6 ms to 26.1 /
//! 27.5 ms (bench/results/service fix 11).
//!
//! libgomp reads `OMP_WAIT_POLICY` once, when it is loaded: before `main`, as a library libtorch
//! needs. So a serving process without the variable sets it and executes itself again (same
//! program, arguments and process id); an operator's own setting, whatever it is, is kept.

use std::os::unix::process::CommandExt;

/// The variable libgomp reads.
pub const WAIT_POLICY: &str = "OMP_WAIT_POLICY";

/// Returns at once when `OMP_WAIT_POLICY` is set; else replaces this process by the same command
/// with `OMP_WAIT_POLICY=PASSIVE`, and returns only if that fails (the process then goes on as it
/// is, after saying so on stderr).
pub fn passive_or_restart() {
    if std::env::var_os(WAIT_POLICY).is_some() {
        return;
    }
    let mut arguments = std::env::args_os();
    let program = arguments.next();
    let executable = match std::env::current_exe() {
        Ok(executable) => executable,
        Err(error) => return not_restarted(&error),
    };
    let mut command = std::process::Command::new(executable);
    if let Some(program) = program {
        command.arg0(program);
    }
    let error = command.args(arguments).env(WAIT_POLICY, "PASSIVE").exec();
    not_restarted(&error);
}

fn not_restarted(error: &std::io::Error) {
    eprintln!(
        "easeml: could not restart with {WAIT_POLICY}=PASSIVE ({error}); training's threads may \
         spin on the cores requests need (set {WAIT_POLICY}=PASSIVE before starting easeml)"
    );
}
