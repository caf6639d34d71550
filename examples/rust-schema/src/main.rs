//! `easeml-example-rust-schema [--budget SECONDS] [--max-run SECONDS] [--home DIR]`: both
//! `#[easeml_schema]` forms end to end in embedded mode (see the library's docs). Without `--home`
//! the store is a fresh temporary directory, removed at the end. Prints each app's status report
//! (every run, the best marked) and its held-out accuracy; while training, one line per run started
//! and finished on stderr (a spinner on a terminal).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use easeml_example_rust_schema::run;

const USAGE: &str =
    "usage: easeml-example-rust-schema [--budget SECONDS] [--max-run SECONDS] [--home DIR]
  --budget SECONDS   training time for both apps together (default 30)
  --max-run SECONDS  the longest one training run may take (default 10)
  --home DIR         the store to use (default: a fresh temporary one, removed at the end)";

/// The command line.
struct Options {
    budget: Duration,
    max_run: Duration,
    home: Option<PathBuf>,
}

fn parse_arguments(mut arguments: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        budget: Duration::from_secs(30),
        max_run: Duration::from_secs(10),
        home: None,
    };
    while let Some(argument) = arguments.next() {
        let mut value = || {
            arguments
                .next()
                .ok_or_else(|| format!("{argument} needs a value"))
        };
        let seconds = |text: String| {
            text.parse::<f64>()
                .ok()
                .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("{argument}: `{text}` is not a positive number of seconds"))
        };
        match argument.as_str() {
            "--budget" => options.budget = seconds(value()?)?,
            "--max-run" => options.max_run = seconds(value()?)?,
            "--home" => options.home = Some(PathBuf::from(value()?)),
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match parse_arguments(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // The temporary store lives until the end of `main` (dropping it removes the directory).
    let (home, _temporary) = match options.home {
        Some(home) => (home, None),
        None => match tempfile::Builder::new().prefix("easeml-home-").tempdir() {
            Ok(dir) => (dir.path().to_owned(), Some(dir)),
            Err(error) => {
                eprintln!("error: cannot create a temporary store: {error}");
                return ExitCode::FAILURE;
            }
        },
    };
    println!(
        "store: {} (embedded), training budget {:.0} s",
        home.display(),
        options.budget.as_secs_f64()
    );
    let started = Instant::now();
    match run(&home, options.budget, options.max_run) {
        Ok(report) => {
            for app in &report.apps {
                println!("{}", app.status);
            }
            for app in &report.apps {
                let best = app.best.as_ref().map_or_else(
                    || "no model".to_owned(),
                    |(candidate, quality)| {
                        format!("best model {candidate}, validation quality {quality:.3}")
                    },
                );
                println!(
                    "{}: declared {}, {} examples fed, held-out accuracy {:.3} ({} of {}), {best}",
                    app.app,
                    app.form,
                    app.fed,
                    app.accuracy(),
                    app.correct,
                    app.held_out
                );
            }
            println!(
                "{} runs finished, {} failed, in {:.1} s of training; {:.1} s in all",
                report.runs.0,
                report.runs.1,
                report.train_seconds,
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<Options, String> {
        parse_arguments(arguments.iter().map(|argument| argument.to_string()))
    }

    #[test]
    fn arguments_and_their_errors() {
        let options = parse(&["--budget", "20", "--max-run", "5.5", "--home", "/x"]).unwrap();
        assert_eq!(options.budget, Duration::from_secs(20));
        assert_eq!(options.max_run, Duration::from_secs_f64(5.5));
        assert_eq!(options.home, Some(PathBuf::from("/x")));
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.budget, Duration::from_secs(30));
        assert!(defaults.home.is_none());
        assert_eq!(
            parse(&["--budget"]).err().unwrap(),
            "--budget needs a value"
        );
        assert_eq!(
            parse(&["--budget", "-1"]).err().unwrap(),
            "--budget: `-1` is not a positive number of seconds"
        );
        assert_eq!(
            parse(&["--bugdet", "1"]).err().unwrap(),
            "unknown argument `--bugdet`"
        );
        assert_eq!(parse(&["--help"]).err().unwrap(), "");
    }
}
