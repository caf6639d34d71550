//! Criterion benchmark of the front end on a large generated program: parse only, and
//! parse + check + match + explain, with throughput in bytes (criterion prints MB/s). As a baseline
//! run side by side, serde_json parses a JSON document of the same schema and about the same size,
//! so the ratio to a mature hand-tuned parser can be read off one run.

#![allow(missing_docs)] // criterion_group! generates undocumented public items.

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Registry, compile};

/// A program of `field_count` fields in every form: a type block with comments, and labels.
fn large_program(field_count: usize) -> String {
    let mut text = String::from("# a large generated program\napp large\ntype Input\n");
    for index in 0..field_count {
        let _ = writeln!(
            text,
            "  field_{index} :: Tensor[{}, {}, 3] # feature {index}",
            index % 97 + 1,
            index % 13 + 1
        );
    }
    text.push_str("  next :: Nullable{Input}\nend\n");
    let _ = writeln!(text, "Output = [{field_count}]");
    text.push_str("labels = [");
    for index in 0..field_count {
        if index > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "class_{index}");
    }
    text.push_str("]\nconstraint train_time <= 30m\n");
    text
}

/// The same schema as JSON, for the serde_json baseline.
fn large_json(field_count: usize) -> String {
    let fields: Vec<serde_json::Value> = (0..field_count)
        .map(|index| {
            serde_json::json!({"name": format!("field_{index}"), "tensor": [index % 97 + 1, index % 13 + 1, 3], "comment": format!("feature {index}")})
        })
        .collect();
    let labels: Vec<String> = (0..field_count)
        .map(|index| format!("class_{index}"))
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({"app": "large", "input": fields, "output": [field_count], "labels": labels}))
        .unwrap_or_default()
}

fn front_end(c: &mut Criterion) {
    let registry = Registry::builtin();
    let program = large_program(20_000);
    let json = large_json(20_000);
    let mut group = c.benchmark_group("front_end");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(program.len() as u64));
    group.bench_function("parse", |b| {
        b.iter(|| easeml_grammar::parse(black_box(&program)))
    });
    group.bench_function("parse_check_explain", |b| {
        b.iter(|| {
            let compiled = compile(black_box(&program), "large", &registry)
                .unwrap_or_else(|errors| panic!("{errors:?}"));
            serde_json::to_string(&Explanation::new(&compiled)).unwrap_or_default()
        })
    });
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("baseline_serde_json_value", |b| {
        b.iter(|| {
            serde_json::from_str::<serde_json::Value>(black_box(&json))
                .map(|value| value.is_object())
        })
    });
    group.finish();
}

criterion_group!(benches, front_end);
criterion_main!(benches);
