//! Fuzz target: parse + check + match + explain + render on arbitrary input must never panic or
//! hang, and every diagnostic must point inside the source.
#![no_main]

use easeml_compiler::diagnostic::{render, to_json};
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Registry, compile};
use libfuzzer_sys::fuzz_target;

/// The registry is parsed once, not per input, so the fuzzer spends its time in the front end.
static REGISTRY: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(Registry::builtin);

fuzz_target!(|data: &[u8]| {
    let source = String::from_utf8_lossy(data);
    let registry = &*REGISTRY;
    match compile(&source, "fuzz", registry) {
        Ok(compiled) => {
            let explanation = Explanation::new(&compiled);
            let _ = explanation.to_text(registry);
            let _ = serde_json::to_string(&explanation);
            assert!(!compiled.candidates.is_empty());
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty());
            for diagnostic in &diagnostics {
                assert!(diagnostic.span.start <= diagnostic.span.end && diagnostic.span.end <= source.len());
                let _ = to_json(diagnostic, &source, "fuzz.eml");
            }
            let _ = render(&diagnostics, &source, "fuzz.eml", false);
        }
    }
});
