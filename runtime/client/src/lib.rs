//! easeml's client library: one app's handle on its data, embedded or remote.
//!
//! [`Client::open`] opens one app by a [`Connection`]: embedded (the local store under
//! `$EASEML_HOME`, no daemon) or remote (an `easeml serve` server, over HTTP; [`TokenOrigin`] says
//! where its token came from). Both backends share
//! everything that does not touch the data, so every call below means the same in both modes. A client feeds examples ([`Client::feed_lines`] for the
//! `feed` command's text formats, [`Client::feed`] for typed values), lists them page by page
//! ([`Client::examples`]), turns them on and off ([`Client::set_enabled`]), answers inputs with the
//! best model ([`Client::infer`]) and reports the app's runs ([`Client::status`]). Every input is
//! checked against the app's schema before anything is stored or sent, and a batch is stored whole
//! or not at all.
//!
//! Modules: [`feed`] (the loaders of the feed formats, DESIGN.md section 2), `wire` (the JSON
//! bodies of `/api/v1`, shared with the server crate `easeml-server`), `backend` (the `Backend`
//! trait both data holders implement), `local` (the local store's backend), `remote` (the HTTP
//! backend), [`tensor`] (the value type of generated tensor fields). Tokens (issue, hash, compare,
//! files) are `easeml_store::tokens`. The error type is [`Error`].
//!
//! The library never links libtorch: embedded inference asks the model loader installed in the
//! process ([`LocalModels`], provided by `easeml-engine`); without one an embedded `infer` says so
//! ([`Error::NoEngine`]).

mod backend;
mod classified;
mod client;
mod connection;
mod error;
pub mod feed;
mod local;
mod remote;
mod status;
pub mod tensor;
pub mod wire;

pub use classified::Classified;
pub use client::{AppSpec, Client, FeedReport, InferReport, LoadedExample, Score};
pub use connection::Connection;
/// The checked object model and its encoding.
pub use easeml_object as object;
pub use easeml_object::{Inference, Object};
/// The schema model (`easeml-schema`): what an app is, its manifest and its rules.
pub use easeml_schema as schema;
pub use easeml_schema::{Manifest, Schema};
pub use easeml_serving::{
    LoadedModel, LocalModels, QualityMetric, constraint_limits, install_local_models, local_models,
};
/// The store.
pub use easeml_store as store;
pub use easeml_store::{
    ExampleId, ExampleRecord, Page, PageRequest, RunId, RunState, RunValidation, StoredOutput,
};
pub use error::{Batch, Error, Result};
pub use feed::{
    CheckedExample, CheckedOutput, CsvOptions, FeedOptions, IgnoredFiles, LineError, LineErrors,
    MAX_KEPT_LINE_ERRORS, MAX_LINE_ERROR_BYTES,
};
pub use remote::TokenOrigin;
pub use status::{
    BestModel, EXPECTED_METHOD, EnsembleMemberReport, EnsembleReport, ExpectedQuality, HopProgress,
    Phase, RunReport, Status, TrialReport, TunedTrialReport,
};
pub use tensor::{ShapeError, Tensor, UnknownLabel};
