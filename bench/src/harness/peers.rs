//! The peer harness: Optuna's samplers over exactly the same replay splits.
//!
//! `splits.json` is already in the output folder; this runs `bench/peers/optuna_peer.py` with the
//! peer Python (`$EASEML_PEER_PYTHON`, else `bench/peers/.venv/bin/python` in the repository) and
//! merges its traces into the outcome, aggregated on the same grid as easeml's policies.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::replay::{PolicyName, ReplayOutcome, Trace};
use anyhow::{Context, bail};

/// The environment variable naming the Python interpreter of the peer harness.
pub const PEER_PYTHON_ENV: &str = "EASEML_PEER_PYTHON";

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The peer Python: `$EASEML_PEER_PYTHON`, else `bench/peers/.venv/bin/python`; when neither is
/// there, an error that says how to make the venv (`peer`: who needs it, `needs`: what it needs,
/// `requirements`: its requirements file under `bench/peers/`).
pub fn peer_python(peer: &str, needs: &str, requirements: &str) -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os(PEER_PYTHON_ENV) {
        let python = PathBuf::from(python);
        if python.components().count() > 1 && !python.exists() {
            bail!(
                "{PEER_PYTHON_ENV}=`{}` does not exist; unset it to use bench/peers/.venv, or point \
                 it at a Python with {needs}",
                python.display()
            );
        }
        return Ok(python);
    }
    let venv = repository_root().join("bench/peers/.venv/bin/python");
    if venv.is_file() {
        return Ok(venv);
    }
    bail!(
        "{peer} needs a Python with {needs}: run\n  \
         python3 -m venv bench/peers/.venv && bench/peers/.venv/bin/pip install -r bench/peers/{requirements}\n\
         (in the repository, {}) or set {PEER_PYTHON_ENV}=/path/to/python",
        repository_root()
            .canonicalize()
            .unwrap_or_else(|_| repository_root())
            .display()
    )
}

/// The repository file `relative` (the peer scripts live in `bench/peers/`).
pub fn repository_file(relative: &str) -> PathBuf {
    repository_root().join(relative)
}

/// Runs the requested peers and adds their curves to `outcome`.
pub fn run_peers(
    outcome: &mut ReplayOutcome,
    peers: &[PolicyName],
    out: &Path,
) -> anyhow::Result<()> {
    let python = peer_python(
        "the Optuna peer harness",
        "optuna (and torch + scipy for its GP sampler)",
        "requirements.txt",
    )?;
    let script = repository_root().join("bench/peers/optuna_peer.py");
    let samplers: Vec<&str> = peers
        .iter()
        .map(|peer| match peer {
            PolicyName::OptunaGp => "gp",
            _ => "tpe",
        })
        .collect();
    let traces_path = out.join("peers.json");
    let status = Command::new(&python)
        .arg(&script)
        .arg("--splits")
        .arg(out.join("splits.json"))
        .arg("--samplers")
        .arg(samplers.join(","))
        .arg("--out")
        .arg(&traces_path)
        .status()
        .with_context(|| format!("cannot run `{}`", python.display()))?;
    if !status.success() {
        bail!("the peer harness `{}` failed ({status})", script.display());
    }
    let text = std::fs::read_to_string(&traces_path)
        .with_context(|| format!("cannot read `{}`", traces_path.display()))?;
    let result: serde_json::Value = serde_json::from_str(&text)?;
    for &peer in peers {
        let entry = &result[peer.as_str()];
        let traces = entry["traces"]
            .as_array()
            .with_context(|| {
                format!(
                    "`{}` has no traces for {}",
                    traces_path.display(),
                    peer.as_str()
                )
            })?
            .iter()
            .map(|trace| Trace {
                points: trace
                    .as_array()
                    .map(|points| {
                        points
                            .iter()
                            .filter_map(|point| Some((point[0].as_f64()?, point[1].as_f64()?)))
                            .collect()
                    })
                    .unwrap_or_default(),
                decisions: Vec::new(),
            })
            .collect::<Vec<_>>();
        outcome.add_external_policy(peer, &traces, entry["seconds"].as_f64().unwrap_or(0.0))?;
    }
    Ok(())
}
