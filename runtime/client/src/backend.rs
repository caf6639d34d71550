//! Where an app's data is, behind one trait: [`Backend`], implemented by the local store
//! (`local.rs`, embedded mode) and by an `easeml serve` server (`remote.rs`). [`Client`](crate::Client)
//! holds a `Box<dyn Backend>` and keeps what does not touch the data (the line checks, scoring);
//! what both backends do with a feed before storing it (the label check against a snapshot of the
//! label map, collecting the bad lines) is [`Batch`], shared here.

use easeml_object::Object;
use easeml_schema::Schema;
use easeml_store::{
    AppId, ExampleFilter, ExampleId, ExampleRecord, LabelMap, Page, PageRequest, Store,
};

use crate::client::{FeedReport, InferReport, LoadedExample};
use crate::feed::{CheckedExample, CheckedOutput, FeedOptions, LineError, LineErrors};
use crate::remote::{Remote, TokenOrigin};
use crate::{Error, Result, Status};

/// One checked line (or value) of a feed, or why it is bad.
pub(crate) type Checked = std::result::Result<CheckedExample, String>;

/// A feed's source: calls its argument once per line or value, in order.
pub(crate) type Drive<'d> =
    Box<dyn FnOnce(&mut dyn FnMut(usize, Checked) -> Result<()>) -> Result<()> + 'd>;

/// One app's data: the calls that differ between the local store and a server. Each means the same
/// in both (the client library's contract); the embedded-only and remote-only facts have defaults.
pub(crate) trait Backend: std::fmt::Debug {
    /// The app's name as its data holder knows it.
    fn app_name(&self) -> &str;

    /// The app's current data version.
    fn data_version(&self) -> Result<u64>;

    /// The app's labels in index order, `None` when its output takes no labels.
    fn labels(&self) -> Result<Option<Vec<String>>>;

    /// Whether the app's labels were declared by its program.
    fn labels_declared(&self) -> bool;

    /// Stores a checked feed (`drive` yields its lines): all good examples, or none when one is
    /// bad (unless `options.skip_bad`).
    fn feed(
        &mut self,
        schema: &Schema,
        unit: &'static str,
        options: &FeedOptions,
        drive: Drive<'_>,
    ) -> Result<FeedReport>;

    /// One page of the app's examples that pass `filter`, in id order.
    fn examples(&self, page: PageRequest, filter: &ExampleFilter) -> Result<Page<ExampleRecord>>;

    /// One example with its input and output decoded.
    fn example(&self, schema: &Schema, id: ExampleId) -> Result<LoadedExample>;

    /// Turns an example on or off; the app's data version after it.
    fn set_enabled(&mut self, id: ExampleId, enabled: bool) -> Result<u64>;

    /// The figure-5 report.
    fn status(&self, schema: &Schema) -> Result<Status>;

    /// Answers checked inputs with the app's best model.
    fn infer(&mut self, schema: &Schema, inputs: &[Object]) -> Result<InferReport>;

    /// The local store (embedded only).
    fn store(&self) -> Option<&Store> {
        None
    }

    /// The local store, writable (embedded only).
    fn store_mut(&mut self) -> Option<&mut Store> {
        None
    }

    /// The local store, given back (embedded only).
    fn into_store(self: Box<Self>) -> Option<Store> {
        None
    }

    /// The app's id in the local store (embedded only).
    fn app_id(&self) -> Option<AppId> {
        None
    }

    /// The server (remote only).
    fn remote(&self) -> Option<&Remote> {
        None
    }

    /// Where a remote client's token came from (remote only).
    fn token_origin(&self) -> Option<&TokenOrigin> {
        self.remote().map(Remote::origin)
    }
}

/// A feed being checked: the bad lines, and a snapshot of the label map so that labels beyond D are
/// found before anything is stored (the store, or the server, checks again when it stores).
pub(crate) struct Batch {
    errors: LineErrors,
    /// Lines or values seen, good and bad.
    pub(crate) total: usize,
    label_map: Option<LabelMap>,
    unit: &'static str,
}

impl Batch {
    pub(crate) fn new(label_map: Option<LabelMap>, unit: &'static str) -> Batch {
        Batch {
            errors: LineErrors::new(),
            total: 0,
            label_map,
            unit,
        }
    }

    /// Counts a checked example; `false` (and its line's error kept) when its label does not fit.
    pub(crate) fn accept(&mut self, line: usize, output: &CheckedOutput) -> bool {
        self.total += 1;
        let CheckedOutput::Label(label) = output else {
            return true;
        };
        let resolved = match self.label_map.as_mut() {
            Some(map) => map.resolve(label).map_err(|error| error.to_string()),
            None => Err("this app's output takes no labels".to_owned()),
        };
        match resolved {
            Ok(_) => true,
            Err(message) => {
                self.errors.push(LineError {
                    unit: self.unit,
                    line,
                    message: format!("field `output`: {message}"),
                });
                false
            }
        }
    }

    pub(crate) fn reject(&mut self, line: usize, message: String) {
        self.total += 1;
        self.errors.push(LineError {
            unit: self.unit,
            line,
            message,
        });
    }

    /// The bad lines to report as skipped, or the error when there are some and they may not be
    /// skipped.
    pub(crate) fn finish(self, skip_bad: bool) -> Result<LineErrors> {
        if !self.errors.is_empty() && !skip_bad {
            return Err(Error::BadInput {
                errors: self.errors,
                total: self.total,
                batch: crate::Batch::Feed,
            });
        }
        Ok(self.errors)
    }
}
