//! `cargo xtask tidy`'s check that the service binary stays apart from the lab: the lab's crates
//! ([`LAB_ONLY`]: easeml-bench, plotters) are optional dependencies of easeml-cli, enabled only
//! by its [`LAB_FEATURE`] (which its `default` may name), and none of its other normal
//! dependencies reaches them; and easeml-cli's own source stays small ([`MAX_SERVICE_LINES`]).
//!
//! So `cargo tree -p easeml-cli --no-default-features -e normal` holds neither crate. The reach
//! is followed in the workspace's resolve graph (features unified over every member: an
//! over-approximation, as for the other dependency rules).

use std::path::Path;

use serde_json::Value;

use crate::tidy::Graph;

/// The service binary's crate.
pub const SERVICE: &str = "easeml-cli";
/// The feature that adds the lab to it.
pub const LAB_FEATURE: &str = "lab";
/// The crates only the lab may bring into it.
pub const LAB_ONLY: &[&str] = &["easeml-bench", "plotters"];
/// Its own source, relative to the repository root.
pub const SERVICE_SOURCE: &str = "runtime/cli/src";
/// The most lines its own source may have.
pub const MAX_SERVICE_LINES: usize = 2000;

/// The violations of the rule in `cargo metadata`'s document and its `graph`.
pub fn dependency_violations(metadata: &Value, graph: &Graph<'_>) -> Vec<String> {
    let Some(service) = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == SERVICE)
    else {
        return vec![format!(
            "the lab rule names `{SERVICE}`, which is not in the workspace; update xtask/src/lab.rs"
        )];
    };
    let mut violations = Vec::new();
    let mut always = Vec::new();
    for dependency in service["dependencies"].as_array().into_iter().flatten() {
        let name = dependency["name"].as_str().unwrap_or_default();
        if !dependency["kind"].is_null() {
            continue;
        }
        if dependency["optional"].as_bool() == Some(true) {
            continue;
        }
        if LAB_ONLY.contains(&name) {
            violations.push(format!(
                "`{SERVICE}` depends on `{name}` unconditionally; make it `optional = true` and enable it only in its `{LAB_FEATURE}` feature (the service binary links no lab)"
            ));
        } else {
            always.push(name);
        }
    }
    for (feature, enables) in service["features"].as_object().into_iter().flatten() {
        if feature == LAB_FEATURE {
            continue;
        }
        for item in enables.as_array().into_iter().flatten() {
            let item = item.as_str().unwrap_or_default();
            let named = item.trim_start_matches("dep:");
            let crate_name = named.split(['/', '?']).next().unwrap_or_default();
            let lab = LAB_ONLY.contains(&crate_name);
            let lab_feature = item == LAB_FEATURE && feature != "default";
            if lab || lab_feature {
                violations.push(format!(
                    "`{SERVICE}`'s feature `{feature}` enables `{item}`; only its `{LAB_FEATURE}` feature (named by `default`) may bring the lab in"
                ));
            }
        }
    }
    if let Some(id) = graph
        .members
        .iter()
        .find(|id| graph.names.get(*id) == Some(&SERVICE))
    {
        for &dependency in graph.normal_deps.get(id).into_iter().flatten() {
            if !always.contains(&graph.names[dependency]) {
                continue;
            }
            for lab in LAB_ONLY {
                if let Some(path) = crate::tidy::path_to(
                    dependency,
                    lab,
                    &graph.names,
                    &graph.normal_deps,
                    &graph.proc_macros,
                ) {
                    violations.push(format!(
                        "`{SERVICE}` reaches `{lab}` without its `{LAB_FEATURE}` feature ({SERVICE} -> {}); the service binary links no lab: remove that dependency or move the code",
                        path.join(" -> ")
                    ));
                }
            }
        }
    }
    violations
}

/// The violation of the size rule: easeml-cli's own source (every `.rs` file under `source`)
/// over `limit` lines.
pub fn size_violations(source: &Path, limit: usize) -> Vec<String> {
    let mut lines = 0;
    let mut stack = vec![source.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return vec![format!("cannot read `{}`", dir.display())];
        };
        for path in entries.filter_map(|entry| entry.ok().map(|entry| entry.path())) {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ending| ending == "rs") {
                lines += std::fs::read_to_string(&path)
                    .unwrap_or_default()
                    .lines()
                    .count();
            }
        }
    }
    if lines > limit {
        vec![format!(
            "`{}` has {lines} lines of Rust, over {limit}: the service binary's own code stays small (the lab goes to bench/, shared code to the runtime's crates)",
            source.display()
        )]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// easeml-cli with `helper` (normal), the lab's crates as `optional`, and `features`;
    /// `helper` reaches plotters when `leaky`.
    fn metadata(plotters_optional: bool, features: Value, leaky: bool) -> Value {
        let package =
            |name: &str| json!({"id": format!("{name} 0.1.0"), "name": name, "targets": []});
        let mut service = package(SERVICE);
        service["dependencies"] = json!([
            {"name": "helper", "kind": null, "optional": false},
            {"name": "easeml-bench", "kind": null, "optional": true},
            {"name": "plotters", "kind": null, "optional": plotters_optional},
            {"name": "tester", "kind": "dev", "optional": false},
        ]);
        service["features"] = features;
        let normal =
            |name: &str| json!({"pkg": format!("{name} 0.1.0"), "dep_kinds": [{"kind": null}]});
        let helper_deps = if leaky {
            json!([normal("plotters")])
        } else {
            json!([])
        };
        json!({
            "packages": [service, package("helper"), package("easeml-bench"), package("plotters"), package("tester")],
            "workspace_members": [format!("{SERVICE} 0.1.0"), "easeml-bench 0.1.0"],
            "resolve": {"nodes": [
                {"id": format!("{SERVICE} 0.1.0"), "deps": [normal("helper"), normal("easeml-bench"), normal("plotters")]},
                {"id": "helper 0.1.0", "deps": helper_deps},
                {"id": "easeml-bench 0.1.0", "deps": [normal("plotters")]},
                {"id": "plotters 0.1.0", "deps": []},
                {"id": "tester 0.1.0", "deps": []},
            ]},
        })
    }

    fn violations_of(metadata: &Value) -> Vec<String> {
        dependency_violations(metadata, &Graph::read(metadata).unwrap())
    }

    #[test]
    fn the_lab_behind_its_feature_passes() {
        let good = metadata(
            true,
            json!({"default": ["lab"], "lab": ["dep:easeml-bench", "dep:plotters"], "s3": ["helper/s3"]}),
            false,
        );
        assert_eq!(violations_of(&good), Vec::<String>::new());
    }

    #[test]
    fn the_lab_outside_its_feature_is_reported() {
        let bad = metadata(
            false,
            json!({"default": ["lab", "dep:easeml-bench"], "lab": ["dep:easeml-bench"], "s3": ["lab"]}),
            true,
        );
        let violations = violations_of(&bad);
        assert_eq!(violations.len(), 4, "{violations:#?}");
        assert!(violations[0].contains("depends on `plotters` unconditionally"));
        assert!(violations[1].contains("feature `default` enables `dep:easeml-bench`"));
        assert!(violations[2].contains("feature `s3` enables `lab`"));
        assert!(violations[3].contains("reaches `plotters` without its `lab` feature"));
        assert!(violations[3].contains("easeml-cli -> helper -> plotters"));
    }

    #[test]
    fn a_big_service_source_is_reported() {
        let dir = std::env::temp_dir().join(format!("easeml-tidy-lab-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("main.rs"), "fn main() {}\n\n").unwrap();
        std::fs::write(dir.join("sub/part.rs"), "//! x\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "a\nb\nc\nd\n").unwrap();
        assert_eq!(size_violations(&dir, 3), Vec::<String>::new());
        let violations = size_violations(&dir, 2);
        assert_eq!(violations.len(), 1);
        assert!(violations[0].contains("has 3 lines of Rust, over 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
