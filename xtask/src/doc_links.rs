//! The user-facing documents stay readable and whole: every relative link in the README,
//! CONTRIBUTING.md, ARCHITECTURE.md, DECISIONS.md, `docs/*.md` and `bench/results/*/README.md`
//! points at a file or folder that exists, and the README stays a user's page (at most
//! [`README_MAX_LINES`] lines, an install and a concepts section, no issue numbers: history goes to
//! `bench/results/` and the issues' notes). Part of `cargo xtask tidy`.

use std::path::{Path, PathBuf};

/// The README's length limit: past it the reference belongs in `docs/`.
pub const README_MAX_LINES: usize = 450;

/// The sections a user looks for first; the README must have a `## ` heading starting with each.
pub const README_SECTIONS: &[&str] = &["## Install", "## Concepts", "## Tutorial", "## Reference"];

/// The documents whose links are checked, relative to the repository root.
pub fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "ARCHITECTURE.md",
        "DECISIONS.md",
    ]
    .iter()
    .map(|name| root.join(name))
    .collect();
    let mut in_folder = |folder: PathBuf, file_name: Option<&str>| {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            return;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter_map(|path| match file_name {
                None => (path.extension().is_some_and(|ext| ext == "md")).then_some(path),
                Some(name) => Some(path.join(name)).filter(|file| file.is_file()),
            })
            .collect();
        found.sort();
        files.extend(found);
    };
    in_folder(root.join("docs"), None);
    in_folder(root.join("bench/results"), Some("README.md"));
    files
}

/// Every Markdown link target in `text` (`[words](target)`), outside code blocks and code spans.
pub fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'`' => in_code = !in_code,
                b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                    if let Some(end) = line[i + 2..].find(')') {
                        targets.push((number + 1, line[i + 2..i + 2 + end].to_string()));
                        i += 2 + end;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    targets
}

/// Whether a link leaves the repository (a web address, mail) or stays inside the page.
fn is_outside_or_anchor(target: &str) -> bool {
    target.starts_with('#') || target.contains("://") || target.starts_with("mailto:")
}

/// The broken links of one document, as `file:line: ...` sentences.
pub fn broken_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let folder = file.parent().unwrap_or(root);
    link_targets(text)
        .into_iter()
        .filter(|(_, target)| !is_outside_or_anchor(target))
        .filter_map(|(line, target)| {
            let path = target.split('#').next().unwrap_or_default();
            (path.is_empty() || !folder.join(path).exists()).then(|| {
                format!("{shown}:{line}: the link `{target}` points at nothing in the repository")
            })
        })
        .collect()
}

/// What makes the README not a user's page.
pub fn readme_violations(text: &str) -> Vec<String> {
    let mut violations = Vec::new();
    let lines = text.lines().count();
    if lines > README_MAX_LINES {
        violations.push(format!(
            "README.md has {lines} lines, over {README_MAX_LINES}: move reference to docs/ and \
             measurements to bench/results/"
        ));
    }
    for section in README_SECTIONS {
        if !text.lines().any(|line| line.starts_with(section)) {
            violations.push(format!("README.md has no `{section}` section"));
        }
    }
    for (number, line) in text.lines().enumerate() {
        if let Some(at) = issue_number_at(line) {
            violations.push(format!(
                "README.md:{}: names an issue (`{}`): a user's page tells what is, not its history",
                number + 1,
                &line[at..(at + 12).min(line.len())]
            ));
        }
    }
    violations
}

/// Where `issue N` (any case, N a number) starts in `line`, if anywhere.
fn issue_number_at(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    lower.match_indices("issue ").find_map(|(at, word)| {
        let starts_a_word = !lower[..at].ends_with(|c: char| c.is_ascii_alphanumeric());
        let numbered = lower[at + word.len()..].starts_with(|c: char| c.is_ascii_digit());
        (starts_a_word && numbered).then_some(at)
    })
}

/// Every violation of the documents under `root`.
pub fn violations(root: &Path) -> Vec<String> {
    let mut violations = Vec::new();
    for file in documents(root) {
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                violations.extend(broken_links(root, &file, &text));
                if file == root.join("README.md") {
                    violations.extend(readme_violations(&text));
                }
            }
            Err(error) => violations.push(format!("cannot read {}: {error}", file.display())),
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_outside_code_only() {
        let text =
            "see [a](docs/a.md) and `[b](not.md)`\n```\n[c](no.md)\n```\n[d](x.md#part) [e](#top)";
        let targets: Vec<String> = link_targets(text).into_iter().map(|(_, t)| t).collect();
        assert_eq!(targets, ["docs/a.md", "x.md#part", "#top"]);
    }

    #[test]
    fn a_link_to_a_missing_file_is_named_with_its_line() {
        let root = std::env::temp_dir().join(format!("easeml-doc-links-{}", std::process::id()));
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/here.md"), "x").unwrap();
        let text = "[ok](docs/here.md)\n[web](https://example.org)\n[gone](docs/gone.md#x)";
        let broken = broken_links(&root, &root.join("README.md"), text);
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(broken[0].starts_with("README.md:3:"), "{broken:?}");
        assert!(broken[0].contains("docs/gone.md#x"), "{broken:?}");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_readme_with_history_or_without_its_sections_is_refused() {
        let good = README_SECTIONS.join("\n") + "\nthe tissue 3 times\n";
        assert!(
            readme_violations(&good).is_empty(),
            "{:?}",
            readme_violations(&good)
        );
        let bad = "## Install\nas issue 45 says\n".to_string() + &"x\n".repeat(README_MAX_LINES);
        let found = readme_violations(&bad);
        assert!(found.iter().any(|v| v.contains("over 450")), "{found:?}");
        assert!(
            found.iter().any(|v| v.contains("no `## Concepts`")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| v.contains("README.md:2: names an issue")),
            "{found:?}"
        );
    }

    #[test]
    fn this_repository_s_documents_hold() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(violations(root), Vec::<String>::new());
    }
}
