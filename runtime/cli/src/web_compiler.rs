//! The compiler of `easeml serve`'s web console: `easeml-compiler` behind the server's
//! [`ProgramCompiler`] interface (the server never links the compiler). Diagnostics are rendered
//! by the function `easemlc` prints with, the explanation is `easemlc explain`'s, the manifest
//! `codegen::manifest`'s and the files those `easemlc build` writes.

use std::collections::BTreeMap;
use std::path::Path;

use easeml_compiler::codegen::{CrateOptions, RuntimeSource, crate_files, rustfmt_files};
use easeml_compiler::diagnostic::{render_failure, to_json};
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Compiled, Registry, compile_bytes};
use easeml_runtime::server::{Compilation, CompiledProgram, GenerateFailure, ProgramCompiler};

/// Where a downloaded crate finds easeml's runtime: a checkout of easeml (`git clone` of the
/// repository, folder `easeml`) beside the unpacked `APP/` folder.
pub const DOWNLOAD_RUNTIME_PATH: &str = "../easeml/runtime/core";

/// The workspace's `Cargo.lock`, put into every downloaded crate (and its Python crate) as
/// `easemlc` copies it into the crates it writes: the download resolves the very versions easeml
/// is built and tested with, wherever it is unpacked.
const WORKSPACE_LOCK: &str = include_str!("../../../Cargo.lock");

/// The built-in template registry, the generated crates' path to the runtime.
pub struct WebCompiler {
    registry: Registry,
    runtime: RuntimeSource,
}

impl WebCompiler {
    /// The compiler with the built-in registry (as `easemlc` without `--templates`). The files it
    /// generates name the runtime as [`DOWNLOAD_RUNTIME_PATH`], a checkout of easeml beside the
    /// unpacked folder, never this server's own checkout (issue 49: an unauthenticated download
    /// must not tell where the server's files are).
    pub fn builtin() -> WebCompiler {
        WebCompiler::with_runtime(RuntimeSource::Path(DOWNLOAD_RUNTIME_PATH.to_owned()))
    }

    /// The compiler with the built-in registry, its downloads taking the runtime from `runtime`
    /// (`easeml serve --download-runtime-git URL`: a repository, so a download builds anywhere
    /// without a checkout beside it).
    pub fn with_runtime(runtime: RuntimeSource) -> WebCompiler {
        WebCompiler {
            registry: Registry::builtin(),
            runtime,
        }
    }

    /// The program compiled, or what `easemlc` prints for its errors (and their JSON form).
    fn compiled(
        &self,
        program: &[u8],
        file: &str,
    ) -> Result<Compiled, (String, serde_json::Value)> {
        let stem = Path::new(file)
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (source, outcome) = compile_bytes(program, &stem, &self.registry);
        outcome.map_err(|diagnostics| {
            let json: Vec<_> = diagnostics
                .iter()
                .map(|diagnostic| to_json(diagnostic, &source, file))
                .collect();
            (
                render_failure(&diagnostics, &source, file, false),
                serde_json::to_value(json).unwrap_or_default(),
            )
        })
    }
}

impl ProgramCompiler for WebCompiler {
    fn compile(&self, program: &[u8], file: &str) -> Compilation {
        match self.compiled(program, file) {
            Err((rendered, diagnostics)) => Compilation::Failed {
                rendered,
                diagnostics,
            },
            Ok(compiled) => {
                let explanation = Explanation::new(&compiled);
                Compilation::Compiled(CompiledProgram {
                    app: compiled.schema.app.clone(),
                    manifest: easeml_compiler::codegen::manifest(&compiled).to_json(),
                    explain: explanation.to_text(&self.registry),
                    explanation: serde_json::to_value(&explanation).unwrap_or_default(),
                })
            }
        }
    }

    fn generate(
        &self,
        program: &[u8],
        file: &str,
        server: Option<&str>,
    ) -> Result<(String, BTreeMap<String, String>), GenerateFailure> {
        let compiled = self
            .compiled(program, file)
            .map_err(|(rendered, _)| GenerateFailure::Program(rendered))?;
        let options = CrateOptions {
            runtime: self.runtime.clone(),
            server: server.map(str::to_owned),
            python: true,
        };
        // The client crate as `easemlc --python` writes it: the Rust crate and, under `python/`,
        // the app's Python package (`pip install APP/python`).
        let mut files = crate_files(&compiled, &options)
            .map_err(|error| GenerateFailure::Internal(error.to_string()))?;
        rustfmt_files(&mut files);
        for manifest in ["Cargo.toml", "python/Cargo.toml"] {
            if files.contains_key(manifest) {
                let lock = manifest.replace("Cargo.toml", "Cargo.lock");
                files.insert(lock, WORKSPACE_LOCK.to_owned());
            }
        }
        Ok((compiled.schema.app.clone(), files))
    }
}
