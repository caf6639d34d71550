//! The count of tests `cargo xtask test` ran: `cargo test`'s output is echoed as it comes and its
//! `test result:` lines summed, so that every run ends saying how many tests passed (a test that
//! returns early is still counted: the outside parts they need are checked by
//! `easeml-test-support`, which fails them when missing).

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// How many tests a `cargo test` run ran, summed over its test binaries' `test result:` lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TestTally {
    /// Test binaries (and doc-test groups) that reported.
    pub binaries: usize,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Tests marked `#[ignore]`, not run.
    pub ignored: usize,
}

impl TestTally {
    /// Adds one line of `cargo test`'s output when it is a `test result:` line.
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        self.binaries += 1;
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(count) = count.parse::<usize>() else {
                continue;
            };
            match what {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

impl std::fmt::Display for TestTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tests passed, {} failed, {} ignored, in {} test binaries",
            self.passed, self.failed, self.ignored, self.binaries
        )
    }
}

/// `run_step` (in `main.rs`) for `cargo test`: its standard output is echoed line by line as it comes and the
/// tests it ran are counted ([`TestTally`]), printed when the step ends.
pub fn run_tests_counting(name: &str, mut command: Command) -> Result<TestTally> {
    use std::io::{BufRead, Write};
    eprintln!("==> {name}");
    let started = Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start the step `{name}`"))?;
    let mut tally = TestTally::default();
    if let Some(stdout) = child.stdout.take() {
        let mut echo = std::io::stdout().lock();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.context("reading the tests' output")?;
            tally.add_line(&line);
            writeln!(echo, "{line}")?;
            echo.flush()?;
        }
    }
    let status = child.wait().context("waiting for the tests")?;
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("step `{name}` failed after {seconds:.1}s ({status}); {tally}");
    }
    eprintln!("==> {name}: ok in {seconds:.1}s; {tally}");
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::TestTally;

    #[test]
    fn test_result_lines_are_summed_and_other_lines_ignored() {
        let mut tally = TestTally::default();
        for line in [
            "running 3 tests",
            "test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 2 filtered out; finished in 0.10s",
            "test a ... ok",
            "test result: FAILED. 5 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s",
            "   Doc-tests easeml_store",
        ] {
            tally.add_line(line);
        }
        assert_eq!(
            tally,
            TestTally {
                binaries: 2,
                passed: 8,
                failed: 2,
                ignored: 1
            }
        );
        assert_eq!(
            tally.to_string(),
            "8 tests passed, 2 failed, 1 ignored, in 2 test binaries"
        );
    }
}
