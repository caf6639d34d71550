//! `cargo xtask tidy`'s size rule: no Rust source file of the workspace has more than
//! [`MAX_FILE_LINES`] lines before its test module, and no function more than
//! [`MAX_FN_LINES`] lines, so that a reader finds a file's parts by their names.
//!
//! The rule reads every git-tracked `*.rs` file except those under a `tests/` folder, under
//! `fuzz/`, and the golden generated crates (paths holding `/golden/`), which are tests or
//! generated. A file's test part begins at its first line that is `#[cfg(test)]` at column 0;
//! neither check reads past it. A function runs from its `fn` line (any indentation, after any
//! `pub(...)`, `const`, `async` or `unsafe`) to the first line that is `}` at that line's
//! indentation, where rustfmt puts its closing brace; a `fn` whose signature ends in `;` has no
//! body and is not measured.
//!
//! [`LEFT`] lists the offenders not split yet, each with the size it may not pass; the list only
//! shrinks (an entry that no longer offends is itself reported, so it cannot go stale).

use std::path::Path;
use std::process::Command;

/// The most lines a file may have before its test module.
pub const MAX_FILE_LINES: usize = 1000;
/// The most lines a function may have, from its `fn` line to its closing brace.
pub const MAX_FN_LINES: usize = 150;

/// Offenders not split yet: (file, function or `""` for the file itself, the size it may not pass).
pub const LEFT: &[(&str, &str, usize)] = &[];

/// One file or function over its limit.
#[derive(Debug, PartialEq, Eq)]
pub struct Offence {
    /// The function's name, or `None` for the file itself.
    pub function: Option<String>,
    /// Its lines.
    pub lines: usize,
}

/// Whether the rule reads the file at `path` (relative to the root, with `/` separators).
pub fn is_measured(path: &str) -> bool {
    let in_tests = path.starts_with("tests/") || path.contains("/tests/");
    path.ends_with(".rs") && !in_tests && !path.starts_with("fuzz/") && !path.contains("/golden/")
}

/// The name of the function a line declares, if it declares one.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = if let Some(scoped) = after.strip_prefix('(') {
            scoped.split_once(')')?.1
        } else {
            after
        };
        rest = rest.strip_prefix(' ')?;
    }
    for prefix in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The offences of one file's `source`: the file (lines before its test module) and every function
/// before it, over the limits.
pub fn offences(source: &str, max_file: usize, max_fn: usize) -> Vec<Offence> {
    let lines: Vec<&str> = source.lines().collect();
    let end = lines
        .iter()
        .position(|line| line.trim_end() == "#[cfg(test)]")
        .unwrap_or(lines.len());
    let lines = &lines[..end];
    let mut found = Vec::new();
    if lines.len() > max_file {
        found.push(Offence {
            function: None,
            lines: lines.len(),
        });
    }
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = declared_fn(line) else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        // The signature's last line: the first ending in `{` (a body), `;` (none) or `}` (a body on
        // one line).
        let Some(open) = (start..lines.len()).find(|&i| {
            let trimmed = lines[i].trim_end();
            trimmed.ends_with('{') || trimmed.ends_with(';') || trimmed.ends_with('}')
        }) else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let closing = |i: &usize| {
            let candidate = lines[*i].trim_end();
            candidate.len() == indent + 1
                && candidate.ends_with('}')
                && candidate[..indent].trim().is_empty()
        };
        let Some(close) = (open + 1..lines.len()).find(closing) else {
            continue;
        };
        let length = close - start + 1;
        if length > max_fn {
            found.push(Offence {
                function: Some(name.to_owned()),
                lines: length,
            });
        }
    }
    found
}

/// The violations of the rule in one file, given the offenders still `left`.
pub fn file_violations(
    path: &str,
    source: &str,
    left: &[(&str, &str, usize)],
    max_file: usize,
    max_fn: usize,
) -> Vec<String> {
    let mut violations = Vec::new();
    let found = offences(source, max_file, max_fn);
    for offence in &found {
        let function = offence.function.as_deref().unwrap_or("");
        let allowed = left
            .iter()
            .find(|(file, name, _)| *file == path && *name == function)
            .map(|(_, _, size)| *size);
        if allowed.is_some_and(|size| offence.lines <= size) {
            continue;
        }
        violations.push(match &offence.function {
            None => format!(
                "`{path}` has {} lines before its test module, over {max_file}; split it into modules along its parts (one concern a module, each with a `//!` header)",
                offence.lines
            ),
            Some(name) => format!(
                "`{path}`: fn `{name}` has {} lines, over {max_fn}; split it along its parts (helper fns named for set-up, one iteration, the report; or a struct holding a long loop's state)",
                offence.lines
            ),
        });
    }
    for (file, name, _) in left.iter().filter(|(file, _, _)| *file == path) {
        let still = found
            .iter()
            .any(|offence| offence.function.as_deref().unwrap_or("") == *name);
        if !still {
            violations.push(format!(
                "`{file}`{} is within the size limits now; remove its entry from `LEFT` in xtask/src/sizes.rs",
                if name.is_empty() { String::new() } else { format!(": fn `{name}`") }
            ));
        }
    }
    violations
}

/// The violations of the rule over the git-tracked files of the workspace at `root`.
pub fn violations(root: &Path) -> Vec<String> {
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--", "*.rs"])
        .current_dir(root)
        .output();
    let listed = match listed {
        Ok(output) if output.status.success() => output.stdout,
        _ => return vec!["the size rule could not list the files (`git ls-files` failed)".into()],
    };
    let mut violations = Vec::new();
    let mut seen = Vec::new();
    for path in String::from_utf8_lossy(&listed).split('\0') {
        if !is_measured(path) {
            continue;
        }
        let Ok(source) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        seen.push(path.to_owned());
        violations.extend(file_violations(
            path,
            &source,
            LEFT,
            MAX_FILE_LINES,
            MAX_FN_LINES,
        ));
    }
    for (file, _, _) in LEFT {
        if !seen.iter().any(|path| path == file) {
            violations.push(format!(
                "`{file}` is listed in `LEFT` in xtask/src/sizes.rs but is not a measured file; remove its entry"
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function named `name` at `indent` spaces with `body` lines inside.
    fn function(signature: &str, indent: usize, body: usize) -> String {
        let pad = " ".repeat(indent);
        let mut text = format!("{pad}{signature} {{\n");
        for i in 0..body {
            text.push_str(&format!("{pad}    let x{i} = {i};\n"));
        }
        text.push_str(&format!("{pad}}}\n"));
        text
    }

    #[test]
    fn declarations_are_read_through_their_prefixes() {
        assert_eq!(declared_fn("fn main() {"), Some("main"));
        assert_eq!(declared_fn("    pub(crate) async fn run<T>("), Some("run"));
        assert_eq!(
            declared_fn("pub const unsafe fn raw() -> u8 {"),
            Some("raw")
        );
        assert_eq!(declared_fn("    // fn commented() {"), None);
        assert_eq!(declared_fn("    let fnord = 1;"), None);
        assert_eq!(declared_fn("pub struct Fn;"), None);
    }

    #[test]
    fn a_long_function_is_found_with_its_length() {
        let source = format!(
            "impl A {{\n{}{}}}\n",
            function("pub(crate) fn short(&self)", 4, 3),
            function("pub async fn long(&self)", 4, 9)
        );
        assert_eq!(
            offences(&source, 1000, 10),
            vec![Offence {
                function: Some("long".into()),
                lines: 11
            }]
        );
        assert!(offences(&source, 1000, 11).is_empty());
    }

    #[test]
    fn the_test_module_is_excluded_from_both_checks() {
        let source = format!(
            "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            function("fn kept()", 0, 2),
            function("fn long_test()", 4, 50)
        );
        assert!(offences(&source, 4, 10).is_empty());
        assert_eq!(
            offences(&source, 3, 10),
            vec![Offence {
                function: None,
                lines: 4
            }]
        );
        // An indented `#[cfg(test)]` (a test-only item inside a module) does not end the file.
        let nested = format!(
            "mod a {{\n    #[cfg(test)]\n{}}}\n",
            function("fn f()", 4, 20)
        );
        assert_eq!(offences(&nested, 1000, 10).len(), 1);
    }

    #[test]
    fn bodiless_and_one_line_functions_are_not_measured() {
        let source = format!(
            "trait T {{\n    fn required(&self) -> u8;\n    fn one(&self) {{}}\n}}\n{}",
            function("fn after()", 0, 3)
        );
        assert!(offences(&source, 1000, 5).is_empty());
    }

    #[test]
    fn offenders_left_may_not_grow_and_leave_the_list_when_split() {
        let source = function("fn long()", 0, 20);
        let left = [("a.rs", "long", 22)];
        assert!(file_violations("a.rs", &source, &left, 1000, 10).is_empty());
        let grown = function("fn long()", 0, 30);
        let violations = file_violations("a.rs", &grown, &left, 1000, 10);
        assert_eq!(violations.len(), 1, "{violations:#?}");
        assert!(violations[0].contains("fn `long` has 32 lines, over 10; split it"));
        let split = function("fn long()", 0, 2);
        let violations = file_violations("a.rs", &split, &left, 1000, 10);
        assert_eq!(violations.len(), 1, "{violations:#?}");
        assert!(violations[0].contains("remove its entry from `LEFT`"));
    }

    #[test]
    fn tests_fuzz_and_golden_files_are_not_measured() {
        assert!(is_measured("runtime/store/src/units.rs"));
        assert!(is_measured("bench/src/tests.rs"));
        assert!(!is_measured("runtime/store/tests/conformance.rs"));
        assert!(!is_measured("tests/end_to_end.rs"));
        assert!(!is_measured("fuzz/fuzz_targets/parse.rs"));
        assert!(!is_measured("compiler/tests/golden/app/src/main.rs"));
        assert!(!is_measured("compiler/src/golden/x.rs"));
        assert!(!is_measured("README.md"));
    }
}
