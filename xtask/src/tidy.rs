//! `cargo xtask tidy`: the architecture's rules that a machine can check, in seconds and without
//! building anything (the first step of `cargo xtask test`).
//!
//! 1. **Forbidden dependency edges** ([`RULES`]), read from `cargo metadata`: from a workspace
//!    crate, the normal dependencies are followed (dev and build dependencies do not count, nor do
//!    the dependencies of a proc-macro crate, which run at compile time and are not linked; reaching
//!    a forbidden proc-macro crate itself counts). The resolve graph of `cargo metadata` unifies
//!    features over the whole workspace, so the check over-approximates: an edge enabled by any
//!    member's features counts. A rule naming a crate that does not exist is itself an error, so
//!    the table cannot silently go stale.
//! 2. **ARCHITECTURE.md names only what exists**: every backticked span that looks like a repository
//!    path ([`looks_like_path`]) must exist, and every backticked `Type::function` or
//!    `module::function` ([`looks_like_item`]) must name a `fn` that exists in a Rust file of the
//!    workspace, beside a type, module or crate of the first name.
//! 3. **Generated crates build easeml's crates as the workspace does** ([`profile_violations`]):
//!    the `[profile.dev]` sections of the generated app crate and of its Python crate (read from the
//!    golden `breast_cancer` crate, which `golden_files.rs` keeps equal to the generator's output)
//!    give every workspace crate the crate reaches (normal and build dependencies, from its declared
//!    `easeml-*` dependencies) the opt-level the workspace gives it, name no other crate (cargo
//!    warns about a package spec that matches nothing), and keep the workspace's settings for the
//!    other dependencies (`"*"`) and build scripts.
//! 4. **The service binary links no lab** (`lab.rs`): easeml-cli reaches easeml-bench and
//!    plotters only through its `lab` feature, and its own source stays under 2,000 lines.
//! 5. **The Python package pins the torch easeml builds against** ([`torch_pin_violations`]): the
//!    generated `pyproject.toml` (the golden `breast_cancer`'s) depends on
//!    `torch=={TORCH_VERSION}`, whose libtorch the engine binaries of its wheel load.
//! 6. **No file over 1,000 lines, no function over 150** (`sizes.rs`): every git-tracked Rust
//!    file outside tests, `fuzz/` and the golden crates, before its test module.
//!
//! Every violation is printed (not just the first), each with what to do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// One forbidden reach: `from` never reaches any of `never`, and why.
pub struct Rule {
    /// The workspace crate the rule is about.
    pub from: &'static str,
    /// Crates it must not reach through normal dependencies.
    pub never: &'static [&'static str],
    /// Why, in one line.
    pub why: &'static str,
}

/// The forbidden edges of ARCHITECTURE.md's invariants (one place).
pub const RULES: &[Rule] = &[
    Rule {
        from: "easeml-scheduler",
        never: &["axum", "ureq", "rusqlite", "tch"],
        why: "the scheduler is pure Rust + nalgebra: no HTTP, SQL or libtorch",
    },
    Rule {
        from: "easeml-tuner",
        never: &[
            "axum",
            "ureq",
            "rusqlite",
            "tch",
            "torch-sys",
            "easeml-scheduler",
        ],
        why: "the tuner (TrimTuner) is pure Rust + nalgebra: no HTTP, SQL or libtorch, and it shares \
              only easeml-stats with the multi-tenant scheduler",
    },
    Rule {
        from: "easeml-trainer",
        never: &["axum", "ureq", "rusqlite", "easeml-scheduler"],
        why: "the trainer never sees HTTP or SQL, nor the multi-tenant scheduler (the tuner's GP \
              shares only easeml-stats with it)",
    },
    Rule {
        from: "easeml-store",
        never: &["tch", "axum", "easeml-schema"],
        why: "the store keeps blobs, labels and manifests as text: no libtorch, HTTP or schema",
    },
    Rule {
        from: "easeml-schema",
        never: &["tch", "rusqlite", "axum", "pest", "ureq"],
        why: "the schema model knows no syntax, SQL, HTTP or libtorch",
    },
    Rule {
        from: "easeml-object",
        never: &["rusqlite", "axum", "tch"],
        why: "objects and their encoding know nothing of SQL, HTTP or libtorch",
    },
    Rule {
        from: "easeml-client",
        never: &["tch", "torch-sys", "axum", "syn", "pest", "handlebars"],
        why: "the client library never links libtorch (models come through LocalModels) nor the compiler",
    },
    Rule {
        from: "easeml-server",
        never: &["tch", "torch-sys", "syn", "pest", "handlebars"],
        why: "the server never links libtorch (inference through the client) nor the compiler",
    },
    Rule {
        from: "easeml-runtime",
        never: &[
            "syn",
            "handlebars",
            "pest",
            "easeml-compiler",
            "easeml-grammar",
            "annotate-snippets",
        ],
        why: "generated apps depend on the runtime, never on the compiler",
    },
    Rule {
        from: "easeml-python",
        // libtorch: the workspace's resolve unifies easeml-runtime's `engine` feature, so the
        // extension's freedom from it is checked on the built extension (python_package.rs, NEEDED).
        never: &["handlebars", "pest", "easeml-compiler"],
        why: "the Python extensions never reach the compiler",
    },
    Rule {
        from: "easeml-app-engine",
        never: &[
            "syn",
            "handlebars",
            "pest",
            "easeml-compiler",
            "easeml-grammar",
        ],
        why: "generated apps' engine binaries depend on it, never on the compiler",
    },
    Rule {
        from: "easeml-engine",
        never: &["easeml-client", "ureq"],
        why: "the engine shares the model loader seam, the quality metric and the constraint limits \
              with the client through easeml-serving, below both, and never links the client",
    },
    Rule {
        from: "easeml-serving",
        never: &["tch", "torch-sys", "axum", "ureq", "easeml-client"],
        why: "the seam between the client and the engine links neither, nor libtorch or HTTP",
    },
    Rule {
        from: "easeml-cli",
        never: &["easeml-app-engine"],
        why: "the service binary prints its training sessions with easeml_engine::progress; \
              easeml-app-engine is the generated apps' engine binaries' crate",
    },
];

/// Runs every check over the workspace at `root`; an error lists every violation.
pub fn run(root: &Path) -> Result<()> {
    let metadata = cargo_metadata(root)?;
    let graph = Graph::read(&metadata)?;
    let mut violations = dependency_violations(&graph, RULES);
    violations.extend(crate::lab::dependency_violations(&metadata, &graph));
    violations.extend(crate::lab::size_violations(
        &root.join(crate::lab::SERVICE_SOURCE),
        crate::lab::MAX_SERVICE_LINES,
    ));
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).context("reading ARCHITECTURE.md")?;
    let code = RustCode::read(root)?;
    violations.extend(architecture_violations(&architecture, root, &code));
    let read_toml = |relative: &str| -> Result<toml::Table> {
        let text = std::fs::read_to_string(root.join(relative))
            .with_context(|| format!("reading {relative}"))?;
        text.parse()
            .with_context(|| format!("{relative} is not valid TOML"))
    };
    let workspace = read_toml("Cargo.toml")?;
    let app = read_toml(GENERATED_APP_MANIFEST)?;
    let python = read_toml(GENERATED_PYTHON_MANIFEST)?;
    let app_crates = reached_members(&graph, &declared_easeml_dependencies(&app))?;
    let mut python_crates = reached_members(&graph, &declared_easeml_dependencies(&python))?;
    python_crates.extend(app_crates.iter().cloned());
    violations.extend(profile_violations(
        &workspace,
        &app,
        &app_crates,
        GENERATED_APP_MANIFEST,
    ));
    violations.extend(profile_violations(
        &workspace,
        &python,
        &python_crates,
        GENERATED_PYTHON_MANIFEST,
    ));
    violations.extend(torch_pin_violations(&read_toml(GENERATED_PYPROJECT)?));
    violations.extend(crate::doc_links::violations(root));
    violations.extend(crate::sizes::violations(root));
    if violations.is_empty() {
        eprintln!(
            "tidy: {} dependency rules hold; the service binary links no lab and its source is \
             under {} lines; every path and item ARCHITECTURE.md names exists; \
             every document's link resolves and the README is a user's page; \
             no source file has over {} lines nor any function over {} ({} left to split); \
             generated crates build easeml's {} crates as the workspace does",
            RULES.len(),
            crate::lab::MAX_SERVICE_LINES,
            crate::sizes::MAX_FILE_LINES,
            crate::sizes::MAX_FN_LINES,
            crate::sizes::LEFT.len(),
            python_crates.len()
        );
        return Ok(());
    }
    for violation in &violations {
        eprintln!("tidy: {violation}");
    }
    bail!("{} tidy violation(s)", violations.len())
}

/// `cargo metadata` for this machine's platform (the dependencies of other platforms are never
/// linked here, and need not be downloaded).
fn cargo_metadata(root: &Path) -> Result<Value> {
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV names no host")?;
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("reading cargo metadata's JSON")
}

/// The dependency graph of a `cargo metadata` document, read once for every check over it.
pub struct Graph<'a> {
    /// Package id -> crate name.
    pub(crate) names: BTreeMap<&'a str, &'a str>,
    /// The ids of proc-macro crates.
    pub(crate) proc_macros: BTreeSet<&'a str>,
    /// The ids of the workspace's crates.
    pub(crate) members: BTreeSet<&'a str>,
    /// Package id -> the ids of its normal dependencies.
    pub(crate) normal_deps: BTreeMap<&'a str, Vec<&'a str>>,
    /// Package id -> the ids of its build dependencies.
    pub(crate) build_deps: BTreeMap<&'a str, Vec<&'a str>>,
}

impl<'a> Graph<'a> {
    /// Reads the packages, the workspace's members and the resolve graph of `metadata`.
    pub fn read(metadata: &'a Value) -> Result<Graph<'a>> {
        let mut graph = Graph {
            names: BTreeMap::new(),
            proc_macros: BTreeSet::new(),
            members: metadata["workspace_members"]
                .as_array()
                .map_or(BTreeSet::new(), |members| {
                    members.iter().filter_map(Value::as_str).collect()
                }),
            normal_deps: BTreeMap::new(),
            build_deps: BTreeMap::new(),
        };
        for package in metadata["packages"]
            .as_array()
            .context("cargo metadata has no packages")?
        {
            let id = package["id"].as_str().unwrap_or_default();
            graph
                .names
                .insert(id, package["name"].as_str().unwrap_or_default());
            let is_proc_macro = package["targets"].as_array().is_some_and(|targets| {
                targets.iter().any(|target| {
                    target["kind"]
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|kind| kind == "proc-macro"))
                })
            });
            if is_proc_macro {
                graph.proc_macros.insert(id);
            }
        }
        for node in metadata["resolve"]["nodes"]
            .as_array()
            .context("cargo metadata has no resolve graph")?
        {
            let id = node["id"].as_str().unwrap_or_default();
            let of_kind = |wanted: &dyn Fn(&Value) -> bool| -> Vec<&'a str> {
                node["deps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|dep| {
                        dep["dep_kinds"]
                            .as_array()
                            .is_some_and(|kinds| kinds.iter().any(|kind| wanted(&kind["kind"])))
                    })
                    .filter_map(|dep| dep["pkg"].as_str())
                    .collect()
            };
            graph.normal_deps.insert(id, of_kind(&Value::is_null));
            graph
                .build_deps
                .insert(id, of_kind(&|kind: &Value| kind == "build"));
        }
        Ok(graph)
    }
}

/// The violations of `rules` in the dependency graph.
pub fn dependency_violations(graph: &Graph<'_>, rules: &[Rule]) -> Vec<String> {
    let Graph {
        names,
        proc_macros,
        members: workspace,
        normal_deps,
        ..
    } = graph;
    let known: BTreeSet<&str> = names.values().copied().collect();
    let mut violations = Vec::new();
    for rule in rules {
        let Some(start) = workspace
            .iter()
            .find(|id| names.get(*id) == Some(&rule.from))
        else {
            violations.push(format!(
                "the rule for `{}` names a crate that is not in the workspace; update xtask/src/tidy.rs",
                rule.from
            ));
            continue;
        };
        for never in rule.never {
            if !known.contains(never) {
                // Not in the lock file at all: nothing can reach it (and the rule still documents).
                continue;
            }
            if let Some(path) = path_to(start, never, names, normal_deps, proc_macros) {
                violations.push(format!(
                    "`{}` reaches `{never}` ({}): {}; remove that dependency or move the code",
                    rule.from,
                    path.join(" -> "),
                    rule.why
                ));
            }
        }
    }
    violations
}

/// The shortest chain of crate names from `start` to a crate named `target`, if any.
pub(crate) fn path_to(
    start: &str,
    target: &str,
    names: &BTreeMap<&str, &str>,
    deps: &BTreeMap<&str, Vec<&str>>,
    proc_macros: &BTreeSet<&str>,
) -> Option<Vec<String>> {
    let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut seen = BTreeSet::from([start]);
    while let Some(id) = queue.pop_front() {
        if names.get(id) == Some(&target) {
            let mut chain = vec![names[id].to_owned()];
            let mut at = id;
            while let Some(&before) = previous.get(at) {
                chain.push(names[before].to_owned());
                at = before;
            }
            chain.reverse();
            return Some(chain);
        }
        if id != start && proc_macros.contains(id) {
            continue;
        }
        for &next in deps.get(id).into_iter().flatten() {
            if seen.insert(next) {
                previous.insert(next, id);
                queue.push_back(next);
            }
        }
    }
    None
}

/// What the Rust code of the workspace defines, for the item check: `fn` names, and type, module
/// and crate names.
pub struct RustCode {
    functions: BTreeSet<String>,
    owners: BTreeSet<String>,
    /// Every file and folder, relative to the root, with `/` separators.
    paths: BTreeSet<String>,
}

impl RustCode {
    /// Reads every `.rs` file under `root` (not `target/` or hidden folders).
    pub fn read(root: &Path) -> Result<RustCode> {
        let mut code = RustCode {
            functions: BTreeSet::new(),
            owners: BTreeSet::new(),
            paths: BTreeSet::new(),
        };
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in
                std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
            {
                let path = entry?.path();
                let name = path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .unwrap_or("");
                if name.starts_with('.') || name == "target" {
                    continue;
                }
                if let Ok(relative) = path.strip_prefix(root) {
                    code.paths
                        .insert(relative.to_string_lossy().replace('\\', "/"));
                }
                if path.is_dir() {
                    code.owners.insert(name.replace('-', "_"));
                    stack.push(path);
                } else if let Some(stem) = name.strip_suffix(".rs") {
                    code.owners.insert(stem.to_owned());
                    code.add_source(&std::fs::read_to_string(&path).unwrap_or_default());
                } else if name == "Cargo.toml" {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    if let Some(package) = text
                        .lines()
                        .find_map(|line| line.strip_prefix("name = \""))
                        .and_then(|rest| rest.strip_suffix('"'))
                    {
                        code.owners.insert(package.replace('-', "_"));
                    }
                }
            }
        }
        Ok(code)
    }

    /// Adds the names a Rust source defines.
    pub fn add_source(&mut self, source: &str) {
        let words: Vec<&str> = source
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|word| !word.is_empty())
            .collect();
        for pair in words.windows(2) {
            match pair[0] {
                "fn" => {
                    self.functions.insert(pair[1].to_owned());
                }
                // A public field (`Config::max_body_bytes` names one as well as a function).
                "pub" => {
                    self.functions.insert(pair[1].to_owned());
                }
                "struct" | "enum" | "trait" | "mod" | "type" | "union" => {
                    self.owners.insert(pair[1].to_owned());
                }
                _ => {}
            }
        }
    }
}

/// The generated app crate that stands for every generated crate in the profile check.
const GENERATED_APP_MANIFEST: &str = "tests/golden/breast_cancer/Cargo.toml";
/// Its Python crate.
const GENERATED_PYTHON_MANIFEST: &str = "tests/golden/breast_cancer/python/Cargo.toml";

/// Its Python package's project file.
const GENERATED_PYPROJECT: &str = "tests/golden/breast_cancer/python/pyproject.toml";

/// The generated Python package must depend on the torch whose libtorch easeml builds against
/// (`torch=={TORCH_VERSION}`): its wheel's engine binaries load that libtorch.
pub fn torch_pin_violations(pyproject: &toml::Table) -> Vec<String> {
    let wanted = format!("torch=={}", crate::torch::TORCH_VERSION);
    let dependencies = pyproject
        .get("project")
        .and_then(|project| project.get("dependencies"))
        .and_then(toml::Value::as_array);
    let pinned = dependencies.is_some_and(|list| {
        list.iter().any(|item| {
            item.as_str()
                .is_some_and(|text| text.replace(' ', "") == wanted)
        })
    });
    if pinned {
        Vec::new()
    } else {
        vec![format!(
            "{GENERATED_PYPROJECT} does not depend on `{wanted}` (the torch easeml builds against, xtask/src/torch.rs); fix templates/crate/python/pyproject.toml.hbs and run `cargo xtask bless`"
        )]
    }
}

/// The `easeml-*` crates a manifest declares as normal or build dependencies.
pub fn declared_easeml_dependencies(manifest: &toml::Table) -> BTreeSet<String> {
    ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|section| manifest.get(*section).and_then(toml::Value::as_table))
        .flat_map(|dependencies| dependencies.keys())
        .filter(|name| name.starts_with("easeml-"))
        .cloned()
        .collect()
}

/// The workspace crates reached from `starts` (workspace crate names) through normal and build
/// dependencies, `starts` included.
pub fn reached_members(graph: &Graph<'_>, starts: &BTreeSet<String>) -> Result<BTreeSet<String>> {
    let name = |id: &str| graph.names.get(id).copied().unwrap_or_default();
    let mut queue: Vec<&str> = graph
        .members
        .iter()
        .copied()
        .filter(|id| starts.contains(name(id)))
        .collect();
    if let Some(missing) = starts
        .iter()
        .find(|start| !queue.iter().any(|id| name(id) == start.as_str()))
    {
        bail!("a generated crate depends on `{missing}`, which is not a workspace crate");
    }
    let mut seen: BTreeSet<&str> = queue.iter().copied().collect();
    while let Some(id) = queue.pop() {
        let deps = graph.normal_deps.get(id).into_iter().flatten();
        for &next in deps.chain(graph.build_deps.get(id).into_iter().flatten()) {
            if graph.members.contains(next) && seen.insert(next) {
                queue.push(next);
            }
        }
    }
    Ok(seen.iter().map(|id| name(id).to_owned()).collect())
}

/// The dev profile's value of `key` for a package, as the manifest's profile resolves it: its
/// `[profile.dev.package.NAME]`, else (when the package is no member) `[profile.dev.package."*"]`,
/// else `[profile.dev]`.
fn dev_setting<'a>(
    manifest: &'a toml::Table,
    package: &str,
    member: bool,
    key: &str,
) -> Option<&'a toml::Value> {
    let dev = manifest.get("profile")?.get("dev")?;
    let packages = dev.get("package");
    let named = packages.and_then(|packages| packages.get(package)?.get(key));
    let any = (!member)
        .then(|| packages.and_then(|packages| packages.get("*")?.get(key)))
        .flatten();
    named.or(any).or_else(|| dev.get(key))
}

/// The violations of check 3 for one generated manifest (`label` names it) whose dependency graph
/// holds the workspace crates `crates`.
pub fn profile_violations(
    workspace: &toml::Table,
    generated: &toml::Table,
    crates: &BTreeSet<String>,
    label: &str,
) -> Vec<String> {
    let opt_level = |value: Option<&toml::Value>| value.cloned().unwrap_or(toml::Value::Integer(0));
    let mut violations = Vec::new();
    for name in crates {
        let expected = opt_level(dev_setting(workspace, name, true, "opt-level"));
        let actual = opt_level(dev_setting(generated, name, false, "opt-level"));
        if expected != actual {
            violations.push(format!(
                "{label} builds `{name}` at opt-level {actual}, the workspace at {expected}; \
                 give it `[profile.dev.package.{name}] opt-level = {expected}` in templates/crate/profile.toml (the Python crate's own in its Cargo.toml.hbs)"
            ));
        }
    }
    let named = generated
        .get("profile")
        .and_then(|profile| profile.get("dev")?.get("package")?.as_table());
    for name in named.into_iter().flat_map(|packages| packages.keys()) {
        if name != "*" && !crates.contains(name) && name.starts_with("easeml-") {
            violations.push(format!(
                "{label} names `[profile.dev.package.{name}]`, a crate it does not depend on (cargo \
                 warns at every build); remove it from the template"
            ));
        }
    }
    let section = |manifest: &'_ toml::Table, path: &[&str]| {
        let (first, rest) = path.split_first()?;
        rest.iter()
            .try_fold(manifest.get(*first)?, |value, key| value.get(key))
            .cloned()
    };
    for path in [
        &["profile", "dev", "package", "*"][..],
        &["profile", "dev", "build-override"],
        &["profile", "dev", "debug"],
    ] {
        if section(workspace, path) != section(generated, path) {
            violations.push(format!(
                "{label}'s `{}` differs from the workspace's; make templates/crate/profile.toml match Cargo.toml",
                path.join(".")
            ));
        }
    }
    violations
}

/// A backticked span that names a repository path: it has a `/` or a known file ending, and no
/// placeholder (`<`, `*`, `{`, `$`), space, URL, home or `../shared` prefix.
pub fn looks_like_path(span: &str) -> bool {
    const ENDINGS: [&str; 8] = [
        ".rs", ".toml", ".md", ".hbs", ".html", ".py", ".pest", ".eml",
    ];
    let placeholder = span.contains(['<', '*', '{', '$', ' ', '|', '='])
        || span.starts_with("../")
        || span.starts_with("http")
        || span.starts_with('~')
        || span.starts_with("target/")
        || span.starts_with('/')
        || span.starts_with('-')
        || (span.starts_with('.') && !span.contains('/'));
    let pathish = span.contains('/') || ENDINGS.iter().any(|ending| span.ends_with(ending));
    pathish
        && !placeholder
        && span
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
}

/// A backticked span that names an item: identifiers joined by `::`, the last one snake_case (a
/// function), e.g. `Registry::matching` or `diagnostic::render`.
pub fn looks_like_item(span: &str) -> bool {
    let segments: Vec<&str> = span.split("::").collect();
    segments.len() >= 2
        && segments.iter().all(|segment| {
            !segment.is_empty()
                && segment.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !segment.starts_with(|c: char| c.is_ascii_digit())
        })
        && segments.last().is_some_and(|last| {
            last.starts_with(|c: char| c.is_ascii_lowercase())
                && last
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

/// The backticked spans of a markdown text (single backticks; code blocks are skipped).
fn backticked(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            spans.push(inside.to_owned());
        }
    }
    spans
}

/// The violations of ARCHITECTURE.md: paths that do not exist, items that name no function.
pub fn architecture_violations(text: &str, root: &Path, code: &RustCode) -> Vec<String> {
    let mut violations = Vec::new();
    let mut reported = BTreeSet::new();
    for span in backticked(text) {
        if !reported.insert(span.clone()) {
            continue;
        }
        if looks_like_path(&span) {
            // A path from the root, or a short name in the context of the paragraph (`gp.rs`
            // under `runtime/scheduler/`): then some file or folder must end with it.
            let trimmed = span.trim_end_matches('/');
            let path: PathBuf = root.join(trimmed);
            let suffix = format!("/{trimmed}");
            let found = path.exists()
                || (!trimmed.starts_with('.')
                    && code.paths.iter().any(|known| known.ends_with(&suffix)));
            if !found {
                violations.push(format!(
                    "ARCHITECTURE.md names `{span}`, which does not exist; fix the path or the text"
                ));
            }
        } else if looks_like_item(&span) {
            let segments: Vec<&str> = span.split("::").collect();
            let function = segments[segments.len() - 1];
            let owner = segments[segments.len() - 2];
            let function_found =
                code.functions.contains(function) || code.owners.contains(function);
            if !function_found || !code.owners.contains(owner) {
                violations.push(format!(
                    "ARCHITECTURE.md names `{span}`, but no `fn {function}` beside a type, module or crate `{owner}` exists; fix the name or the text"
                ));
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A workspace of `app` -> `runtime` -> `libtorch-binding` and a proc macro that uses `syn`.
    fn metadata() -> Value {
        let package = |name: &str, proc_macro: bool| {
            json!({
                "id": format!("{name} 0.1.0"),
                "name": name,
                "targets": [{"kind": [if proc_macro { "proc-macro" } else { "lib" }]}],
            })
        };
        let normal =
            |name: &str| json!({"pkg": format!("{name} 0.1.0"), "dep_kinds": [{"kind": null}]});
        let dev =
            |name: &str| json!({"pkg": format!("{name} 0.1.0"), "dep_kinds": [{"kind": "dev"}]});
        json!({
            "packages": [
                package("app", false), package("runtime", false), package("tch", false),
                package("derive", true), package("syn", false), package("tester", false),
            ],
            "workspace_members": ["app 0.1.0", "runtime 0.1.0"],
            "resolve": {"nodes": [
                {"id": "app 0.1.0", "deps": [normal("runtime"), normal("derive"), dev("tester")]},
                {"id": "runtime 0.1.0", "deps": [normal("tch")]},
                {"id": "derive 0.1.0", "deps": [normal("syn")]},
                {"id": "tester 0.1.0", "deps": [normal("tch")]},
                {"id": "tch 0.1.0", "deps": []},
                {"id": "syn 0.1.0", "deps": []},
            ]},
        })
    }

    #[test]
    fn forbidden_edges_are_found_with_their_path_and_the_rest_passes() {
        let rules = [
            Rule {
                from: "app",
                never: &["tch"],
                why: "no libtorch",
            },
            Rule {
                from: "app",
                never: &["syn", "tester"],
                why: "proc macros' and dev dependencies do not count",
            },
            Rule {
                from: "gone",
                never: &["tch"],
                why: "a stale rule",
            },
        ];
        let metadata = metadata();
        let violations = dependency_violations(&Graph::read(&metadata).unwrap(), &rules);
        assert_eq!(violations.len(), 2, "{violations:#?}");
        assert!(violations[0].contains("`app` reaches `tch` (app -> runtime -> tch)"));
        assert!(violations[1].contains("`gone` names a crate that is not in the workspace"));
    }

    #[test]
    fn architecture_paths_and_items_are_checked() {
        let dir = std::env::temp_dir().join(format!("easeml-tidy-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "").unwrap();
        let mut code = RustCode {
            functions: BTreeSet::new(),
            owners: BTreeSet::new(),
            paths: BTreeSet::from(["src".to_owned(), "src/lib.rs".to_owned()]),
        };
        code.add_source("pub struct Registry; impl Registry { pub fn matching() {} }\nmod diagnostic { pub fn render() {} }");
        let text = "`src/lib.rs` and `src/gone.rs`, `Registry::matching`, `Registry::select`,\n\
                    `diagnostic::render`, `<app>-feed`, `../shared/x.md`, `target/demo`\n\
                    ```\nsrc/in_a_block.rs `src/also_in_a_block.rs`\n```\n";
        let violations = architecture_violations(text, &dir, &code);
        assert_eq!(violations.len(), 2, "{violations:#?}");
        assert!(violations[0].contains("`src/gone.rs`"));
        assert!(violations[1].contains("`Registry::select`"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(looks_like_item("easeml_app_engine::run_engine"));
        assert!(!looks_like_item("easeml_runtime::Client"));
        assert!(!looks_like_path("Cargo.toml in the user's crate"));
    }

    #[test]
    fn the_python_package_pins_the_torch_easeml_builds_against() {
        let pinned = format!(
            "[project]\ndependencies = [\"numpy\", \"torch == {}\"]",
            crate::torch::TORCH_VERSION
        );
        assert!(torch_pin_violations(&pinned.parse().unwrap()).is_empty());
        for other in [
            "[project]\ndependencies = [\"numpy\", \"torch==1.0.0\"]",
            "[project]\ndependencies = [\"numpy\"]",
            "[project]",
        ] {
            let violations = torch_pin_violations(&other.parse().unwrap());
            assert_eq!(violations.len(), 1, "{other}");
            assert!(
                violations[0].contains("pyproject.toml.hbs"),
                "{violations:?}"
            );
        }
    }

    #[test]
    fn generated_profiles_are_held_to_the_workspace() {
        let workspace: toml::Table = r#"
            [profile.dev]
            debug = "line-tables-only"
            [profile.dev.package."*"]
            opt-level = 1
            [profile.dev.package.trainer]
            opt-level = 2
        "#
        .parse()
        .unwrap();
        let crates = BTreeSet::from(["runtime".to_owned(), "trainer".to_owned()]);
        let mirrored: toml::Table = r#"
            [profile.dev]
            debug = "line-tables-only"
            [profile.dev.package."*"]
            opt-level = 1
            [profile.dev.package.runtime]
            opt-level = 0
            [profile.dev.package.trainer]
            opt-level = 2
        "#
        .parse()
        .unwrap();
        assert_eq!(
            profile_violations(&workspace, &mirrored, &crates, "app"),
            Vec::<String>::new()
        );
        // Without its own sections, `"*"` optimizes the runtime and under-optimizes the trainer; a
        // section for a crate the app does not reach, and a changed `"*"`, are reported too.
        let drifted: toml::Table = r#"
            [profile.dev]
            debug = "line-tables-only"
            [profile.dev.package."*"]
            opt-level = 3
            [profile.dev.package.easeml-gone]
            opt-level = 0
        "#
        .parse()
        .unwrap();
        let violations = profile_violations(&workspace, &drifted, &crates, "app");
        assert_eq!(violations.len(), 4, "{violations:#?}");
        assert!(violations[0].contains("builds `runtime` at opt-level 3, the workspace at 0"));
        assert!(violations[1].contains("builds `trainer` at opt-level 3, the workspace at 2"));
        assert!(violations[2].contains("`[profile.dev.package.easeml-gone]`"));
        assert!(violations[3].contains("`profile.dev.package.*` differs"));
        let manifest: toml::Table = r#"
            [dependencies]
            easeml-runtime = { path = "r" }
            serde = "1"
            [build-dependencies]
            easeml-torch-link = { path = "t" }
            [dev-dependencies]
            easeml-tests = { path = "x" }
        "#
        .parse()
        .unwrap();
        assert_eq!(
            declared_easeml_dependencies(&manifest),
            BTreeSet::from(["easeml-runtime".to_owned(), "easeml-torch-link".to_owned()])
        );
    }

    #[test]
    fn reached_members_follow_normal_and_build_edges_inside_the_workspace() {
        let mut metadata = metadata();
        metadata["resolve"]["nodes"][0]["deps"]
            .as_array_mut()
            .unwrap()
            .push(json!({"pkg": "tester 0.1.0", "dep_kinds": [{"kind": "build"}]}));
        metadata["workspace_members"]
            .as_array_mut()
            .unwrap()
            .push(json!("tester 0.1.0"));
        let graph = Graph::read(&metadata).unwrap();
        let reached = reached_members(&graph, &BTreeSet::from(["app".to_owned()])).unwrap();
        // `runtime` (normal) and `tester` (build) are members; `tch` and `syn` are not.
        assert_eq!(
            reached,
            BTreeSet::from(["app".to_owned(), "runtime".to_owned(), "tester".to_owned()])
        );
        let error = reached_members(&graph, &BTreeSet::from(["nowhere".to_owned()]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`nowhere`, which is not a workspace crate"),
            "{error}"
        );
    }
}
