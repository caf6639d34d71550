//! `easeml bench scheduler`: parse the dataset spec, run the replay with a progress bar, write the
//! outputs (`curves.csv`, `summary.json`, `loss.svg`, `loss.png`).

use std::path::{Path, PathBuf};

use crate::dataset::{self, Dataset, SyntheticSpec};
use crate::replay::{
    LOSS_LEVELS, PolicyName, ReplayConfig, ReplayOutcome, check_replay, cost_to_reach,
    effective_test_users, run_replay,
};
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use easeml_scheduler::KernelKind;
use easeml_scheduler::acquisition::BetaForm;
use easeml_scheduler::kernel::HistoryCovariance;
use easeml_scheduler::picker::Line8Rule;
use indicatif::{ProgressBar, ProgressStyle};

use crate::harness::plot::{LossPlot, LossSeries};

/// The environment variable that points at the shared data tables.
pub const DATA_DIR_ENV: &str = "EASEML_SHARED_DATA";

/// Arguments of `easeml bench scheduler`.
#[derive(Debug, Args)]
pub struct SchedulerBenchArgs {
    /// The table to replay: `synthetic:SIGMA_M,ALPHA` (200 users x 100 models), `delgado179`,
    /// `easeml-dl`, or `matrix:QUALITY_FILE[,COST_FILE]` (rows = users, columns = models; CSV or
    /// whitespace; header row and index column detected; values above 1 are read as percent).
    #[arg(long, value_name = "SPEC")]
    dataset: String,
    /// Cost-aware mode: cost-aware GP-UCB, budget = 10% of the test users' total cost, x-axis in
    /// summed cost (real costs where the table has them, else U(0,1)). Default: cost-oblivious
    /// (budget = 50% of the test users' models, x-axis in runs).
    #[arg(long)]
    cost_aware: bool,
    /// Repetitions (random splits into test users and kernel users).
    #[arg(long, default_value_t = 50, value_name = "N")]
    repeats: usize,
    /// Test users per repetition (clamped to what the table allows).
    #[arg(long, default_value_t = 10, value_name = "N")]
    test_users: usize,
    /// Seed of every random choice (splits, synthetic costs, Random's picks, synthetic data).
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Comma-separated policies: default (easeml's: EI per cost inside each user, Hybrid with a
    /// round-robin floor over users, on the quality scale its history chooses), fcfs,
    /// round_robin, random, greedy, hybrid (the paper's), most_cited, most_recent, spearmint,
    /// hybrid_cost_oblivious (lesion), oracle_user (diagnostic: serves the user with the largest
    /// true loss), hybrid_ei (diagnostic: Hybrid's user picker over Spearmint*'s EI per second), default_ucb / default_rbf / default_no_floor /
    /// default_all_residuals / default_level_amplitude / default_regret / default_ml_kernel /
    /// default_history_covariance / default_identity_scale (ablations of default).
    /// Default: all but the lesion, the diagnostics and the ablations.
    #[arg(long, value_delimiter = ',', value_name = "a,b,...")]
    policies: Option<Vec<String>>,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Folder of the shared tables (default: $EASEML_SHARED_DATA, else ../shared/data from the
    /// repository root).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Kernel of the GP-UCB policies and of the default (Spearmint* always uses RBF).
    #[arg(long, value_enum, default_value_t = KernelArg::Matern52)]
    kernel: KernelArg,
    /// Fraction of the non-test users used to build the kernel (lesion of figure 14).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    kernel_fraction: f64,
    /// Hybrid's s: frozen steps before switching to round robin.
    #[arg(long, default_value_t = 10, value_name = "S")]
    hybrid_patience: usize,
    /// Algorithm 2's line-8 rule for greedy, hybrid and the default: ucb-gap (the paper's: largest
    /// upper confidence bound minus the best quality so far) or expected-improvement (the expected
    /// gain of the user's next run over its best so far); per unit cost of that run when
    /// cost-aware. Default: each policy's own (greedy and hybrid: ucb-gap; the default: ucb-gap
    /// when cost-oblivious, expected-improvement when cost-aware).
    #[arg(long, value_enum, value_name = "RULE")]
    line8: Option<Line8Arg>,
    /// Worker threads (results do not depend on it). Default: available cores.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// delta of GP-UCB's beta_t = log(K t^2 / delta).
    #[arg(long, default_value_t = 0.1, value_name = "D")]
    delta: f64,
    /// Form of GP-UCB's beta_t: practical = log(K t^2 / delta) (Algorithm 1), theorem =
    /// 2 c* log(pi^2 K t^2 / (6 delta)) (Theorem 1, c* = 1 after normalising costs).
    #[arg(long, value_enum, default_value_t = BetaArg::Practical)]
    beta_form: BetaArg,
    /// Multiplier of beta_t (1 = the paper's exploration; Srinivas et al. use 0.2 in practice).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    beta_scale: f64,
    /// Per-user amplitude estimate of the GPs, as pseudo-observations at the shared amplitude
    /// (0 turns it off; 1: each user's amplitude is nearly its own maximum-likelihood value).
    #[arg(long, default_value_t = easeml_scheduler::DEFAULT_AMPLITUDE_PRIOR_STRENGTH, value_name = "C")]
    amplitude_prior: f64,
    /// The weight of the history's own sample covariance in default_history_covariance's kernel:
    /// `cross_validated` (chosen per repetition by held-out history users' likelihood), `off`, or
    /// a weight in [0, 1).
    #[arg(long, default_value = "cross_validated", value_name = "W")]
    history_covariance: String,
    /// Reproduce a lesion study of the paper (section 5.3) on --dataset: `cost` (figure 13: hybrid
    /// against hybrid_cost_oblivious; implies --cost-aware), `kernel` (figure 14: hybrid with the
    /// kernel built from 10%, 50% and 100% of the training users; implies --cost-aware; one
    /// sub-folder per fraction plus lesion.json and lesion.svg/png comparing them), `hybrid`
    /// (figure 15: hybrid, greedy and round_robin). Replaces --policies (and --kernel-fraction).
    #[arg(long, value_enum, value_name = "NAME")]
    lesion: Option<LesionArg>,
    /// Concurrent runs: K simulated workers; each free worker starts the policy's next decision,
    /// a run takes its cost (1 when cost-oblivious) and is reported when it finishes. The budget
    /// (summed cost) is the same as with 1; the x-axis becomes wall-clock time (the makespan) and
    /// ends when the last run started within the budget finishes. 1 = the sequential replay. `round_robin` under --parallel K is the
    /// "K independent round-robin workers" baseline. The Optuna peers support only 1.
    #[arg(long, default_value_t = 1, value_name = "K")]
    parallel: usize,
    /// Ablation of GP-BUCB: runs in flight are not hallucinated (the scheduler's posterior ignores
    /// them until they finish; they are only excluded from the choice). Matters with --parallel > 1.
    #[arg(long)]
    no_hallucination: bool,
}

/// The lesion studies of section 5.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LesionArg {
    /// Figure 13: cost-aware against cost-oblivious GP-UCB inside Hybrid.
    Cost,
    /// Figure 14: the kernel from 10%, 50% and 100% of the training users.
    Kernel,
    /// Figure 15: Hybrid against Greedy and RoundRobin.
    Hybrid,
}

/// The kernel fractions of figure 14.
pub const KERNEL_LESION_FRACTIONS: [f64; 3] = [0.1, 0.5, 1.0];

/// Line-8 rules on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Line8Arg {
    /// The largest upper confidence bound minus the best quality so far (the paper's rule).
    UcbGap,
    /// The expected improvement of the user's next run over its best quality so far.
    ExpectedImprovement,
}

/// The beta forms on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BetaArg {
    /// log(K t^2 / delta).
    Practical,
    /// 2 c* log(pi^2 K t^2 / (6 delta)).
    Theorem,
}

/// The kernel choices on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelArg {
    /// Matern-5/2.
    Matern52,
    /// Squared exponential.
    Rbf,
}

/// The data folder: the flag, else the environment variable, else `../shared/data` next to the
/// repository (found from the build's manifest dir and from the current dir).
pub(crate) fn resolve_data_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let repository_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [
        repository_root.join("../shared/data"),
        PathBuf::from("../shared/data"),
    ];
    candidates
        .iter()
        .find(|dir| dir.is_dir())
        .cloned()
        .with_context(|| {
            format!(
                "the shared data tables are not found: looked for `../shared/data` relative to the \
                 repository root ({}) and the current directory; pass --data-dir DIR or set {DATA_DIR_ENV}",
                repository_root.display()
            )
        })
}

fn require_dir(dir: &Path, what: &str) -> anyhow::Result<()> {
    if !dir.is_dir() {
        bail!(
            "{what}: folder `{}` does not exist (pass --data-dir DIR or set {DATA_DIR_ENV})",
            dir.display()
        );
    }
    Ok(())
}

/// Loads the table a dataset spec names.
pub fn load_dataset(spec: &str, data_dir: Option<&Path>, seed: u64) -> anyhow::Result<Dataset> {
    if let Some(parameters) = spec.strip_prefix("synthetic:") {
        let parts: Vec<&str> = parameters.split(',').collect();
        let [sigma_m, alpha] = parts.as_slice() else {
            bail!("`{spec}`: expected synthetic:SIGMA_M,ALPHA, e.g. synthetic:0.5,0.1");
        };
        let sigma_m: f64 = sigma_m
            .trim()
            .parse()
            .with_context(|| format!("SIGMA_M in `{spec}`"))?;
        let alpha: f64 = alpha
            .trim()
            .parse()
            .with_context(|| format!("ALPHA in `{spec}`"))?;
        return Ok(dataset::generate_synthetic(
            SyntheticSpec::paper(sigma_m, alpha),
            seed,
        )?);
    }
    if let Some(files) = spec.strip_prefix("matrix:") {
        return Ok(dataset::load_matrix_spec(files)?);
    }
    match spec {
        "delgado179" => {
            let dir = resolve_data_dir(data_dir)?;
            require_dir(&dir.join("delgado179"), "delgado179")?;
            Ok(dataset::load_delgado179(&dir)?)
        }
        "easeml-dl" => {
            let dir = resolve_data_dir(data_dir)?;
            require_dir(&dir.join("easeml-deeplearning"), "easeml-dl")?;
            Ok(dataset::load_easeml_deeplearning(&dir)?)
        }
        _ => bail!(
            "unknown dataset `{spec}`: use synthetic:SIGMA_M,ALPHA, delgado179, easeml-dl or \
             matrix:QUALITY_FILE[,COST_FILE]"
        ),
    }
}

/// Runs the benchmark and writes its outputs.
pub fn run(args: &SchedulerBenchArgs) -> anyhow::Result<()> {
    if args.parallel == 0 {
        bail!("--parallel must be at least 1 (the number of concurrent runs), got 0");
    }
    let dataset = load_dataset(&args.dataset, args.data_dir.as_deref(), args.seed)?;
    if dataset.imputed_costs > 0 {
        eprintln!(
            "note: {} cost cells of known qualities were empty or 0 in `{}`: an empty one takes \
             the median of its user's costs, a 0 the table's smallest positive cost",
            dataset.imputed_costs, args.dataset
        );
    }
    let all_policies = match (args.lesion, &args.policies) {
        (Some(LesionArg::Cost), _) => vec![PolicyName::Hybrid, PolicyName::HybridCostOblivious],
        (Some(LesionArg::Kernel), _) => vec![PolicyName::Hybrid],
        (Some(LesionArg::Hybrid), _) => vec![
            PolicyName::Hybrid,
            PolicyName::Greedy,
            PolicyName::RoundRobin,
        ],
        (None, Some(names)) => names
            .iter()
            .filter(|name| !name.trim().is_empty())
            .map(|name| PolicyName::parse(name))
            .collect::<Result<Vec<_>, _>>()?,
        (None, None) => PolicyName::ALL
            .into_iter()
            .filter(|p| {
                !matches!(
                    p,
                    PolicyName::HybridCostOblivious | PolicyName::OracleUser | PolicyName::HybridEi
                ) && !p.is_ablation()
            })
            .collect(),
    };
    let (external, policies): (Vec<PolicyName>, Vec<PolicyName>) =
        all_policies.into_iter().partition(|p| p.is_external());
    if policies.is_empty() {
        bail!("--policies needs at least one easeml policy next to the peers (e.g. round_robin)");
    }
    if args.parallel > 1 && !external.is_empty() {
        bail!(
            "--parallel {} is not supported by the peers ({}): their harness replays one run at a \
             time; leave them out or use --parallel 1",
            args.parallel,
            external
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !(args.kernel_fraction > 0.0 && args.kernel_fraction <= 1.0) {
        bail!(
            "--kernel-fraction must be in (0, 1], got {}",
            args.kernel_fraction
        );
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let config = ReplayConfig {
        cost_aware: args.cost_aware
            || matches!(args.lesion, Some(LesionArg::Cost | LesionArg::Kernel)),
        repeats: args.repeats,
        test_users: args.test_users,
        seed: args.seed,
        policies,
        kernel: match args.kernel {
            KernelArg::Matern52 => KernelKind::Matern52,
            KernelArg::Rbf => KernelKind::Rbf,
        },
        kernel_user_fraction: args.kernel_fraction,
        hybrid_patience: args.hybrid_patience,
        threads,
        ucb_delta: args.delta,
        beta_scale: args.beta_scale,
        beta_form: match args.beta_form {
            BetaArg::Practical => BetaForm::Practical,
            BetaArg::Theorem => BetaForm::Theorem,
        },
        amplitude_prior_strength: (args.amplitude_prior > 0.0).then_some(args.amplitude_prior),
        quality_ceiling: Some(1.0),
        line8_rule: args.line8.map(|rule| match rule {
            Line8Arg::UcbGap => Line8Rule::UcbGap,
            Line8Arg::ExpectedImprovement => Line8Rule::ExpectedImprovement,
        }),
        parallel: args.parallel,
        hallucinate_in_flight: !args.no_hallucination,
        history_covariance: HistoryCovariance::parse(&args.history_covariance)?,
    };
    check_replay(&dataset, &config)?;
    let test_users = effective_test_users(&dataset, &config);
    if test_users != config.test_users {
        eprintln!(
            "note: {} allows {test_users} test users here, not {} ({}); using {test_users}",
            dataset.name,
            config.test_users,
            if config.cost_aware && dataset.has_real_costs() {
                "only the users with runtimes can be test users"
            } else {
                "at least two users must be left to build the kernel"
            }
        );
    }
    if args.lesion == Some(LesionArg::Kernel) {
        return run_kernel_lesion(&dataset, &config, &external, &args.out);
    }
    run_and_write(&dataset, &config, &external, &args.out)?;
    Ok(())
}

/// Runs one replay (and the peers) and writes its outputs into `out`.
fn run_and_write(
    dataset: &Dataset,
    config: &ReplayConfig,
    external: &[PolicyName],
    out: &Path,
) -> anyhow::Result<ReplayOutcome> {
    let progress = ProgressBar::new(config.repeats as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} repetitions ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_prefix(dataset.name.clone());
    let mut outcome = run_replay(dataset, config, &|| progress.inc(1))?;
    progress.finish_and_clear();

    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{}`", out.display()))?;
    write(
        &out.join("splits.json"),
        &serde_json::to_string(&outcome.splits)?,
    )?;
    if !external.is_empty() {
        crate::harness::peers::run_peers(&mut outcome, external, out)?;
    }
    let summary = outcome.summary();
    write(&out.join("curves.csv"), &outcome.curves_csv())?;
    write(
        &out.join("summary.json"),
        &(serde_json::to_string_pretty(&summary)? + "\n"),
    )?;
    let plot_notes = crate::harness::plot::write_plots(&outcome, out)?;
    print_report(&summary, out);
    for note in plot_notes {
        eprintln!("note: {note}");
    }
    Ok(outcome)
}

/// Figure 14: Hybrid with the kernel from 10%, 50% and 100% of the training users, each in
/// `out/kernel-PERCENT/`, and `lesion.json` + `lesion.svg/png` comparing them in `out`.
fn run_kernel_lesion(
    dataset: &Dataset,
    config: &ReplayConfig,
    external: &[PolicyName],
    out: &Path,
) -> anyhow::Result<()> {
    let mut outcomes = Vec::new();
    for fraction in KERNEL_LESION_FRACTIONS {
        let percent = (fraction * 100.0).round() as u32;
        let config = ReplayConfig {
            kernel_user_fraction: fraction,
            ..config.clone()
        };
        println!("kernel from {percent}% of the training users:");
        let outcome = run_and_write(
            dataset,
            &config,
            external,
            &out.join(format!("kernel-{percent}")),
        )?;
        outcomes.push((percent, outcome));
    }
    // The splits and costs do not depend on the fraction (the kernel users are drawn after them),
    // so every run has the same grid.
    let grid = outcomes[0].1.grid.clone();
    if outcomes.iter().any(|(_, o)| o.grid != grid) {
        bail!("the kernel lesion's runs have different cost grids");
    }
    let label = |percent: u32| format!("hybrid, kernel from {percent}% of training users");
    let mut entries = serde_json::Map::new();
    let full = &outcomes.last().expect("three fractions").1.curves[0];
    for (percent, outcome) in &outcomes {
        let curves = &outcome.curves[0];
        let mut to_mean = serde_json::Map::new();
        let mut slowdown = serde_json::Map::new();
        for level in LOSS_LEVELS {
            let mine = cost_to_reach(&grid, &curves.mean_loss, level);
            let with_all = cost_to_reach(&grid, &full.mean_loss, level);
            to_mean.insert(format!("{level}"), serde_json::json!(mine));
            let ratio = match (mine, with_all) {
                (Some(mine), Some(all)) if all > 0.0 => Some(mine / all),
                _ => None,
            };
            slowdown.insert(format!("{level}"), serde_json::json!(ratio));
        }
        entries.insert(
            format!("{percent}%"),
            serde_json::json!({
                "kernel_user_fraction": *percent as f64 / 100.0,
                "cost_to_mean_loss": to_mean,
                "cost_relative_to_100%": slowdown,
                "final_mean_loss": curves.mean_loss.last(),
                "final_worst_loss": curves.worst_loss.last(),
            }),
        );
    }
    let lesion = serde_json::json!({
        "lesion": "kernel (figure 14)",
        "dataset": dataset.name,
        "mode": if config.cost_aware { "cost_aware" } else { "cost_oblivious" },
        "repeats": config.repeats,
        "policy": "hybrid",
        "fractions": entries,
    });
    write(
        &out.join("lesion.json"),
        &(serde_json::to_string_pretty(&lesion)? + "\n"),
    )?;
    let plot = LossPlot {
        subject: format!(
            "{} ({}), kernel lesion",
            dataset.name,
            if config.cost_aware {
                "cost-aware"
            } else {
                "cost-oblivious"
            }
        ),
        cost_aware: config.cost_aware,
        grid: &grid,
        series: outcomes
            .iter()
            .map(|(percent, outcome)| LossSeries {
                label: label(*percent),
                mean_loss: &outcome.curves[0].mean_loss,
                worst_loss: &outcome.curves[0].worst_loss,
            })
            .collect(),
    };
    for note in crate::harness::plot::write_loss_plots(&plot, out, "lesion")? {
        eprintln!("note: {note}");
    }
    println!(
        "wrote {}/{{lesion.json, lesion.svg, lesion.png}} and kernel-{{10,50,100}}/",
        out.display()
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

fn print_report(summary: &serde_json::Value, out: &Path) {
    let unit = summary["cost_unit"].as_str().unwrap_or("cost");
    let parallel = summary["parallel"].as_u64().unwrap_or(1);
    println!(
        "{} ({}), {} repetitions x {} test users, {:.1}s{}",
        summary["dataset"].as_str().unwrap_or(""),
        summary["mode"].as_str().unwrap_or(""),
        summary["repeats"],
        summary["test_users"],
        summary["wall_seconds"].as_f64().unwrap_or(0.0),
        if parallel > 1 {
            format!(", {parallel} concurrent runs (x = wall-clock)")
        } else {
            String::new()
        }
    );
    println!(
        "{:<22} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}   ({unit} to reach mean loss)",
        "policy", "0.1", "0.05", "0.02", "0.01", "final mean", "final worst"
    );
    if let Some(policies) = summary["policies"].as_object() {
        for (name, entry) in policies {
            let level = |key: &str| match entry["cost_to_mean_loss"][key].as_f64() {
                Some(value) => format!("{value:.2}"),
                None => "-".to_owned(),
            };
            println!(
                "{:<22} {:>10} {:>10} {:>10} {:>10} {:>11.4} {:>11.4}",
                name,
                level("0.1"),
                level("0.05"),
                level("0.02"),
                level("0.01"),
                entry["final_mean_loss"].as_f64().unwrap_or(f64::NAN),
                entry["final_worst_loss"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    println!(
        "wrote {}/{{curves.csv, summary.json, loss.svg, loss.png}}",
        out.display()
    );
}

#[cfg(test)]
mod tests {
    use crate::dataset::{SyntheticSpec, generate_synthetic};

    use super::*;

    #[test]
    fn kernel_lesion_writes_one_run_per_fraction_and_a_comparison() {
        let spec = SyntheticSpec {
            n_users: 16,
            n_models: 8,
            ..SyntheticSpec::paper(0.5, 0.1)
        };
        let dataset = generate_synthetic(spec, 3).unwrap();
        let config = ReplayConfig {
            cost_aware: true,
            repeats: 2,
            test_users: 3,
            policies: vec![PolicyName::Hybrid],
            ..ReplayConfig::default()
        };
        let out = tempfile::tempdir().unwrap();
        run_kernel_lesion(&dataset, &config, &[], out.path()).unwrap();
        for percent in [10, 50, 100] {
            let folder = out.path().join(format!("kernel-{percent}"));
            let summary: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(folder.join("summary.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(summary["kernel_user_fraction"], f64::from(percent) / 100.0);
            assert!(folder.join("loss.svg").is_file());
        }
        let lesion: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("lesion.json")).unwrap())
                .unwrap();
        assert_eq!(lesion["fractions"].as_object().unwrap().len(), 3);
        for level in LOSS_LEVELS {
            let ratio = &lesion["fractions"]["100%"]["cost_relative_to_100%"][format!("{level}")];
            assert!(ratio.is_null() || ratio.as_f64() == Some(1.0), "{ratio}");
        }
        assert!(out.path().join("lesion.svg").is_file());
        assert!(out.path().join("lesion.png").is_file());
    }

    /// The arguments `easeml bench scheduler ARGS...` parses to.
    fn parse(args: &[&str]) -> SchedulerBenchArgs {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: SchedulerBenchArgs,
        }
        use clap::Parser;
        Command::try_parse_from(std::iter::once("scheduler").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn zero_parallel_runs_are_a_clear_error() {
        let out = tempfile::tempdir().unwrap();
        let out = out.path().to_str().unwrap();
        let error = run(&parse(&[
            "--dataset",
            "synthetic:0.5,0.1",
            "--parallel",
            "0",
            "--out",
            out,
        ]))
        .unwrap_err();
        assert!(
            error.to_string().contains("--parallel must be at least 1"),
            "{error}"
        );
        let error = run(&parse(&[
            "--dataset",
            "synthetic:0.5,0.1",
            "--parallel",
            "2",
            "--policies",
            "round_robin,optuna_tpe",
            "--out",
            out,
        ]))
        .unwrap_err();
        assert!(
            error.to_string().contains("not supported by the peers"),
            "{error}"
        );
    }

    #[test]
    fn a_parallel_replay_records_its_workers() {
        let out = tempfile::tempdir().unwrap();
        let spec = SyntheticSpec {
            n_users: 16,
            n_models: 8,
            ..SyntheticSpec::paper(0.5, 0.1)
        };
        let dataset = generate_synthetic(spec, 3).unwrap();
        for cost_aware in [false, true] {
            let config = ReplayConfig {
                cost_aware,
                repeats: 2,
                test_users: 4,
                policies: vec![PolicyName::Hybrid, PolicyName::RoundRobin],
                parallel: 4,
                ..ReplayConfig::default()
            };
            run_and_write(&dataset, &config, &[], out.path()).unwrap();
            let summary: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(out.path().join("summary.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(summary["parallel"], 4);
            assert!(summary["policies"]["hybrid"]["final_mean_loss"].is_number());
            assert!(out.path().join("loss.svg").is_file());
        }
    }
}
