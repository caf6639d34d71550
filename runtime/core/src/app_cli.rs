//! The command line of every generated app: `<app> [feed|refine|infer|status|train|export]` and the
//! paper's stand-alone `<app>-feed`, `<app>-refine` and `<app>-infer` binaries, driven by the app's
//! `easeml.json` manifest. `export` is the engine's (`easeml_engine::export`): `<app> export`
//! starts `<app>-train export`, where it is a hidden subcommand.
//!
//! Generated `main.rs` files are one line that calls [`run`] (or, for `<app>-infer` and
//! `<app>-train`, `easeml_app_engine::run_engine`, which adds the engine): the behaviour lives here, once, and is
//! tested here, so every app behaves the same and regenerating an app never changes its behaviour.

use std::io::{BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgGroup, ArgMatches, Command};
use indicatif::{ProgressBar, ProgressStyle};

use crate::feed::{CsvOptions, FeedOptions, IgnoredFiles, is_table_path};
use crate::{
    AppSpec, Client, Connection, ExampleId, PageRequest, Schema, Score, StoredOutput, TokenOrigin,
};
use easeml_schema::FieldKind;

/// Which binary of the app is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `<app>`: subcommands, and the status report with none.
    App,
    /// `<app>-feed`: the `feed` command alone.
    Feed,
    /// `<app>-refine`: the `refine` command alone.
    Refine,
    /// `<app>-infer`: the `infer` command alone (an engine binary: links libtorch).
    Infer,
    /// `<app>-train`: the `train` command alone (an engine binary: links libtorch).
    Train,
}

/// What only the engine binaries can do, handed to the command line by `easeml-app-engine`'s
/// `run_engine` (through [`run_with`]); absent in `<app>`, `<app>-feed`, `<app>-refine`.
pub struct EngineCommands {
    /// `train` over the local store, in this process.
    pub train: fn(&Client, &ArgMatches) -> Result<(), CommandError>,
    /// `export --out DIR [--force]`: the served model of the local store written to a folder.
    pub export: fn(&Client, &ArgMatches) -> Result<(), CommandError>,
}

/// Why a command of a generated app failed. Its words are what the app prints after `error: `;
/// the kinds keep the cause (and its source chain) for a program that runs the commands.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The client library's error: bad lines, no model yet, the store, the server.
    #[error(transparent)]
    Client(#[from] easeml_client::Error),
    /// A file the command reads or writes, or a program it starts.
    #[error("{context}: {source}")]
    Io {
        /// What the command was doing, naming the path.
        context: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// How the command was asked: arguments that do not go together, or that cannot be used in
    /// this build or against this store, with what to do instead.
    #[error("{0}")]
    Usage(String),
    /// What the command ran failed (the engine's training or export, the refine page's server),
    /// with its own error.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// Settings baked in by `easemlc` when it generated the app.
#[derive(Debug, Clone, Default)]
pub struct Baked {
    /// The server URL given to `easemlc --server`, if any (`EASEML_SERVER` overrides it).
    pub server: Option<String>,
}

/// Runs one of the app's binaries with the process arguments; never panics on user input. This
/// process has no engine: `train` and an embedded `infer` start the app's `<app>-train` /
/// `<app>-infer` binary beside this one (see `app_engine`).
pub fn run(manifest_json: &str, entry: Entry, baked: &Baked) -> ExitCode {
    run_from(manifest_json, entry, baked, std::env::args_os())
}

/// [`run`] with the arguments given (the first is the program's name), for tests and wrappers.
pub fn run_from(
    manifest_json: &str,
    entry: Entry,
    baked: &Baked,
    arguments: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> ExitCode {
    run_with(manifest_json, entry, baked, arguments, None)
}

/// [`run_from`] with the engine's commands when this process has the engine (what
/// `easeml-app-engine` calls).
pub fn run_with(
    manifest_json: &str,
    entry: Entry,
    baked: &Baked,
    arguments: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
    engine: Option<&EngineCommands>,
) -> ExitCode {
    let arguments: Vec<std::ffi::OsString> = arguments.into_iter().map(Into::into).collect();
    let spec = match AppSpec::from_manifest_json(manifest_json) {
        Ok(spec) => spec,
        Err(error) => {
            eprintln!(
                "error: the app's easeml.json is broken ({error}); regenerate the app with easemlc"
            );
            return ExitCode::from(2);
        }
    };
    let app = spec.schema().app.clone();
    let command = command(&spec, entry);
    let matches = match command.try_get_matches_from(&arguments) {
        Ok(matches) => matches,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    match execute(&spec, entry, &matches, baked, &arguments, engine) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{app}: error: {message}");
            ExitCode::from(1)
        }
    }
}

/// The clap command of a binary.
pub fn command(spec: &AppSpec, entry: Entry) -> Command {
    let schema = spec.schema();
    let app = schema.app.clone();
    let connection_args = [
        Arg::new("server")
            .long("server")
            .value_name("URL")
            .global(true)
            .help("Talk to an easeml server instead of the local store (also EASEML_SERVER; the app's token: EASEML_TOKEN, else the saved token file, else the app is registered)"),
        Arg::new("home")
            .long("home")
            .value_name("DIR")
            .global(true)
            .help("The local store's folder (also EASEML_HOME; default: the platform data dir)"),
    ];
    match entry {
        Entry::App => Command::new(app.clone())
            .about(format!("The easeml app `{app}`: {}", schema.system_type()))
            .long_about(format!(
                "The easeml app `{app}`, generated by easemlc.\n\nWith no command it prints the status report: \
                 every trained model with its quality and cost, the best marked.\n\nInput and output: {}",
                schema.system_type()
            ))
            .args(connection_args)
            .subcommand(feed_command(schema).name("feed"))
            .subcommand(refine_command().name("refine"))
            .subcommand(infer_command(schema).name("infer"))
            .subcommand(Command::new("status").about("Print the report of every training run, the best marked"))
            .subcommand(train_command())
            .subcommand(export_command()),
        Entry::Feed => feed_command(schema).name(format!("{app}-feed")).args(connection_args),
        Entry::Refine => refine_command().name(format!("{app}-refine")).args(connection_args),
        Entry::Infer => infer_command(schema).name(format!("{app}-infer")).args(connection_args),
        // `<app> export` runs `<app>-train export` (the engine is in that binary).
        Entry::Train => train_command()
            .name(format!("{app}-train"))
            .args(connection_args)
            .subcommand(export_command().hide(true)),
    }
}

fn infer_command(schema: &Schema) -> Command {
    Command::new("infer")
        .about("Answer inputs with the best model so far: one INPUT per line (as for feed), from a file or standard input")
        .after_help(format!(
            "{}\nA line may also carry its expected OUTPUT (the feed format): then the answers are scored \
             (accuracy, or mean squared error) on standard error.\n\nNothing is stored: inputs and \
             answers are not kept, and labelled lines do not become examples (use `feed` for that). \
             Standard error names the run that answered and the data version it was trained on.",
            feed_help(schema).replace(" OUTPUT", "").replacen("Line formats:", "Input formats (the output part is optional):", 1)
        ))
        .arg(Arg::new("file").value_name("FILE").help("Read inputs from FILE instead of standard input"))
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("Print one JSON object per input: {\"line\", \"output\", \"class\", \"confidence\"}"),
        )
}

fn export_command() -> Command {
    Command::new("export")
        .about("Write the served model (the one `infer` answers with) to a folder, to run without easeml")
        .long_about(
            "Write the served model (the one `infer` answers with) to a folder, to run without easeml: \
             a network as TorchScript (model.pt: `torch.jit.load(\"model.pt\")(x)` in Python, the \
             input normalization inside), kernel ridge, k-NN, gradient-boosted trees and random forests as JSON (model.json), with \
             easeml-export.json (the app, schema, label names in class order, the run, its quality) \
             and a README.md on loading it. Reads the local store; on a server's machine use \
             `easeml export APP --store DIR --out DIR`.",
        )
        .arg(
            Arg::new("out")
                .long("out")
                .value_name("DIR")
                .required(true)
                .help("The folder to write (new or empty)"),
        )
        .arg(
            Arg::new("force")
                .long("force")
                .action(ArgAction::SetTrue)
                .help("Write over the export files of a folder that is not empty"),
        )
}

fn train_command() -> Command {
    Command::new("train")
        .about("Train candidate models of every app in the local store, in the foreground (the multi-tenant loop)")
        .long_about(
            "Train candidate models of every app in the local store, in the foreground: the scheduler \
             picks which candidate of which app to train next, so that every app's best model improves \
             as fast as possible. Stops when the budget is spent or every candidate is trained on the \
             current data; feeding or refining later makes the candidates eligible again.\n\n\
             The device is CUDA when available, else the CPU; EASEML_DEVICE=cpu|cuda|cuda:N overrides.\n\n\
             With a server (--server, EASEML_SERVER) the server trains in the background; `train` then \
             only says so and prints the app's runs.",
        )
        .arg(
            Arg::new("budget")
                .long("budget")
                .value_name("DURATION")
                .value_parser(parse_duration)
                .help("Stop after this long, e.g. 90s, 10m, 2h (default: until every candidate is trained)"),
        )
        .arg(
            Arg::new("max-run")
                .long("max-run")
                .value_name("DURATION")
                .value_parser(parse_duration)
                .help("The longest one training run may take (default: 2m on the CPU, 10m on CUDA)"),
        )
}

/// Parses `90`, `90s`, `500ms`, `10m`, `2h` into a duration.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write e.g. 90s, 10m or 2h"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`; use ms, s, m or h"
            ));
        }
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("the duration `{text}` must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

fn feed_command(schema: &Schema) -> Command {
    Command::new("feed")
        .about("Add labelled examples: one `INPUT OUTPUT` pair per line (a file or standard input), a CSV / TSV table, or an image folder by class")
        .after_help(format!("{}\n\n{}", feed_help(schema), table_help(schema)))
        .arg(Arg::new("file").value_name("FILE").help(
            "Read pairs from FILE instead of standard input; a FILE ending in .csv, .tsv or .tab is a table with a header row (see --label-column)",
        ))
        .arg(
            Arg::new("label-column")
                .long("label-column")
                .value_name("NAME")
                .requires("file")
                .help("The column of a .csv / .tsv FILE that holds each row's output (a label or a value), by its header name; the other columns are the input"),
        )
        .arg(
            Arg::new("images")
                .long("images")
                .value_name("DIR")
                .conflicts_with_all(["file", "label-column"])
                .help("Feed the images of DIR, laid out one sub-folder per class: DIR/cat/1.png is an example labelled `cat`"),
        )
        .arg(
            Arg::new("skip-bad")
                .long("skip-bad")
                .action(ArgAction::SetTrue)
                .help("Store the good lines (rows, images) and report the bad ones (default: store nothing when one is bad)"),
        )
}

/// The `feed --help` text on tables and image folders, for this very schema.
pub fn table_help(schema: &Schema) -> String {
    let app = &schema.app;
    let input = &schema.input;
    let mut text = String::from(
        "Tables (a FILE ending in .csv, .tsv or .tab; a header row names the columns):\n",
    );
    let label = schema
        .labels
        .as_ref()
        .and_then(|labels| labels.first())
        .map_or("species", String::as_str);
    if input.recursive_names().next().is_some() {
        text.push_str("  not for this app: its input is recursive (feed JSON Lines)\n");
    } else {
        let tensors: Vec<_> = input.tensors().collect();
        let columns = match (input.fields.as_slice(), tensors.as_slice()) {
            ([field], [tensor]) if tensor.dims.len() == 1 || tensor.element_count() == 1 => {
                format!(
                    "the other {} columns, in file order (or one named `{}` holding a JSON array or a .npy path)",
                    tensor.element_count(),
                    field.name
                )
            }
            ([field], [_]) => format!(
                "one other column (or one named `{}`), each cell an image or .npy path (read from the table's folder) or a JSON array",
                field.name
            ),
            (fields, _) => format!(
                "one column per field, by name: {} (a number, or for a larger field a JSON array or an image / .npy path); other columns are refused",
                fields
                    .iter()
                    .map(|field| format!("`{}`", field.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        text.push_str(&format!(
            "  {app} feed data.csv --label-column NAME\n  the column NAME holds each row's output (e.g. {label}); the input is {columns}.\n"
        ));
        text.push_str("  Missing values (an empty cell, NA, NaN, ?) are refused with their line and column.\n");
        if schema.label_capacity().is_some() {
            text.push_str("  scikit-learn's layout (a first line like `569,30,malignant,benign`, the class index last) needs no --label-column.\n");
        }
    }
    text.push_str("Image folders (one sub-folder per class, named by its label):\n");
    let image = match input.tensors().collect::<Vec<_>>().as_slice() {
        [tensor] if input.fields.len() == 1 && schema.label_capacity().is_some() => {
            match tensor.dims.as_slice() {
                [_, _, 3] | [_, _, 1] | [_, _] => Some(tensor.dims.clone()),
                _ => None,
            }
        }
        _ => None,
    };
    match image {
        Some(dims) => text.push_str(&format!(
            "  {app} feed --images DIR          (DIR/{label}/0001.png; PNG or JPEG, resized to {dims:?}; other files are passed over)"
        )),
        None => text.push_str(
            "  not for this app: --images needs an input of one image tensor and an output of labels",
        ),
    }
    text
}

fn refine_command() -> Command {
    Command::new("refine")
        .about("List the examples fed so far and turn each on or off for training")
        .long_about(
            "List the examples fed so far and turn each on or off for training.\n\nWith no option it serves \
             the refine web page (thumbnails, filters, a switch per example) on --listen until Ctrl-C; \
             with a server (--server, EASEML_SERVER) it prints the address of the server's page instead.",
        )
        .arg(
            Arg::new("list")
                .long("list")
                .action(ArgAction::SetTrue)
                .help("List every example"),
        )
        .arg(
            Arg::new("disable")
                .long("disable")
                .value_name("ID")
                .value_parser(clap::value_parser!(i64))
                .help("Stop training on example ID"),
        )
        .arg(
            Arg::new("enable")
                .long("enable")
                .value_name("ID")
                .value_parser(clap::value_parser!(i64))
                .help("Train on example ID again"),
        )
        .arg(
            Arg::new("listen")
                .long("listen")
                .value_name("ADDR")
                .default_value("127.0.0.1:9000")
                .value_parser(clap::value_parser!(std::net::SocketAddr))
                .conflicts_with("action")
                .help(
                    "Serve the refine web page on this address (the default with no option); \
                     only loopback addresses unless --allow-remote",
                ),
        )
        .arg(
            Arg::new("allow_remote")
                .long("allow-remote")
                .action(ArgAction::SetTrue)
                .conflicts_with("action")
                .help(
                    "Let --listen take an address other machines reach (0.0.0.0, a LAN address): \
                     the page and its access token are then served to the network, and anyone who \
                     can reach it can change which examples train",
                ),
        )
        .group(ArgGroup::new("action").args(["list", "disable", "enable"]))
}

/// The `feed --help` text: the line format, with an example for this very schema.
pub fn feed_help(schema: &Schema) -> String {
    let output_example = match (&schema.labels, schema.output.single_vector()) {
        (Some(labels), _) => labels.first().map_or("LABEL".to_owned(), |label| {
            if label.contains(char::is_whitespace) {
                format!("{label:?}")
            } else {
                label.clone()
            }
        }),
        (None, Some(classes)) if classes >= 2 => "LABEL (a class name; at most {classes} distinct)"
            .replace("{classes}", &classes.to_string()),
        _ => json_example(&schema.output),
    };
    let recursive = schema.input.recursive_names().next().is_some()
        || schema.output.recursive_names().next().is_some();
    let tensors: Vec<_> = schema.input.tensors().collect();
    let mut text = String::from("Line formats:\n");
    if recursive {
        let output_example = match &schema.labels {
            Some(labels) => labels
                .first()
                .map_or("\"LABEL\"".to_owned(), |label| format!("{label:?}")),
            None => output_example,
        };
        text.push_str("  JSON Lines, one example per line: {\"input\": ..., \"output\": ...}\n");
        text.push_str(&format!(
            "  e.g. {{\"input\": {}, \"output\": {}}}\n",
            json_example(&schema.input),
            output_example
        ));
        return text;
    }
    if let [tensor] = tensors.as_slice() {
        match tensor.dims.as_slice() {
            [_, _, 3] | [_, _, 1] | [_, _] => text.push_str(&format!(
                "  photos/0001.jpg {output_example}          (PNG or JPEG, resized to {:?})\n",
                tensor.dims
            )),
            _ => {}
        }
        text.push_str(&format!(
            "  sample.npy {output_example}               (a .npy array of shape {:?})\n",
            tensor.dims
        ));
    }
    text.push_str(&format!(
        "  {} {output_example}   (inline JSON)\n",
        json_example(&schema.input)
    ));
    text.push_str("  {\"input\": ..., \"output\": ...}   (JSON Lines)\n");
    text.push_str(
        "Relative paths are read from the current directory. Nothing is stored if a line is bad.",
    );
    text
}

/// A compact JSON example of a data type (long tensors shortened with `...`).
fn json_example(data_type: &easeml_schema::DataType) -> String {
    let tensor_example = |dims: &[u64]| -> String {
        let mut text = "0.5".to_owned();
        for dim in dims.iter().rev() {
            text = if *dim <= 3 {
                format!("[{}]", vec![text; *dim as usize].join(", "))
            } else {
                format!("[{text}, ...]")
            };
        }
        text
    };
    match data_type.fields.as_slice() {
        [field] => match &field.kind {
            FieldKind::Tensor(tensor) => tensor_example(&tensor.dims),
            FieldKind::Recursive => "null".to_owned(),
        },
        fields => {
            let parts: Vec<String> = fields
                .iter()
                .map(|field| match &field.kind {
                    FieldKind::Tensor(tensor) => {
                        format!("\"{}\": {}", field.name, tensor_example(&tensor.dims))
                    }
                    FieldKind::Recursive => format!("\"{}\": null", field.name),
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

fn execute(
    spec: &AppSpec,
    entry: Entry,
    matches: &ArgMatches,
    baked: &Baked,
    raw_arguments: &[std::ffi::OsString],
    engine: Option<&EngineCommands>,
) -> Result<(), CommandError> {
    let (command, arguments) = match entry {
        Entry::Feed => ("feed", matches),
        Entry::Refine => ("refine", matches),
        Entry::Infer => ("infer", matches),
        Entry::Train => match matches.subcommand() {
            Some(("export", export)) => ("export", export),
            _ => ("train", matches),
        },
        Entry::App => matches.subcommand().unwrap_or(("status", matches)),
    };
    let server = matches
        .get_one::<String>("server")
        .cloned()
        .or_else(|| std::env::var("EASEML_SERVER").ok())
        .or_else(|| baked.server.clone());
    let home = matches.get_one::<String>("home").map(PathBuf::from);
    let connection = Connection::from_settings(server.as_deref(), home)?;
    let embedded = matches!(connection, Connection::Embedded { .. });
    if command == "export" && !embedded {
        return Err(CommandError::Usage(format!(
            "`export` reads the local store, not a server's; on the server's machine run `easeml export {} --store DIR --out DIR`",
            spec.schema().app
        )));
    }
    if embedded && engine.is_none() && matches!(command, "train" | "infer" | "export") {
        // The engine (libtorch) is in the sibling binary, not in this one.
        return match entry {
            Entry::App => run_sibling(&spec.schema().app, command, raw_arguments),
            _ => Err(CommandError::Usage(format!(
                "`{command}` over the local store needs the engine (libtorch), which this build of the app leaves out; build easeml-runtime with its `engine` feature (the default), or use a server (--server, EASEML_SERVER)"
            ))),
        };
    }
    let mut client = Client::open(&connection, spec.clone())?;
    tell_about_registration(&client);
    match command {
        "feed" => feed(&mut client, arguments),
        "refine" => refine(&mut client, arguments),
        "infer" => infer(&mut client, arguments),
        "train" => match engine {
            Some(engine) if client.server_url().is_none() => (engine.train)(&client, arguments),
            _ => remote_train(&client),
        },
        "export" => match engine {
            Some(engine) => (engine.export)(&client, arguments),
            None => Err(CommandError::Usage(
                "`export` needs the engine (libtorch)".to_owned(),
            )),
        },
        _ => {
            let status = client.status()?;
            print!("{status}");
            Ok(())
        }
    }
}

/// `feed`: an image folder (`--images DIR`), a table (a FILE ending in .csv / .tsv / .tab, with
/// `--label-column`, or scikit-learn's layout without it), or feed lines (any other FILE, or
/// standard input).
fn feed(client: &mut Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    let options = FeedOptions {
        skip_bad: arguments.get_flag("skip-bad"),
        ..FeedOptions::default()
    };
    let file = arguments.get_one::<String>("file");
    let label_column = arguments.get_one::<String>("label-column");
    let images = arguments.get_one::<String>("images");
    let table = file.filter(|path| is_table_path(std::path::Path::new(path)));
    if let (Some(path), Some(_), None) = (file, label_column, table) {
        return Err(CommandError::Usage(format!(
            "--label-column is for a table: a FILE ending in .csv, .tsv or .tab; `{path}` is read as feed lines (`INPUT OUTPUT`)"
        )));
    }
    let unit = match (images, table) {
        (Some(_), _) => "images read",
        (None, Some(_)) => "rows checked",
        (None, None) => "lines checked",
    };
    let progress = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template(&format!("{{spinner}} {{pos}} {unit} ({{per_sec}})"))
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut on_line = |lines: usize| progress.set_position(lines as u64);
    let report = match (images, table, file) {
        (Some(dir), _, _) => client.feed_image_folder(dir, &options, &mut on_line),
        (None, Some(path), _) => {
            let csv = CsvOptions {
                label_column: label_column.cloned(),
                delimiter: None,
            };
            client.feed_csv(path, &csv, &options, &mut on_line)
        }
        (None, None, Some(path)) => {
            let file = open_lines_file(path)?;
            let mut options = options;
            options.base_dir = PathBuf::from(path).parent().map(PathBuf::from);
            client.feed_lines_with_progress(BufReader::new(file), &options, &mut on_line)
        }
        (None, None, None) => {
            let stdin = std::io::stdin();
            client.feed_lines_with_progress(stdin.lock(), &options, &mut on_line)
        }
    };
    progress.finish_and_clear();
    let report = report?;
    let app = client.app_name().to_owned();
    if let Some(note) = ignored_note(&report.ignored_files) {
        eprintln!("{app}: {note}");
    }
    for skipped in &report.skipped {
        eprintln!("{app}: skipped {skipped}");
    }
    if report.skipped.not_kept() > 0 {
        eprintln!(
            "{app}: skipped {} more bad line(s) ({} in all)",
            report.skipped.not_kept(),
            report.skipped.count()
        );
    }
    println!(
        "{app}: {} example{} added",
        report.added,
        if report.added == 1 { "" } else { "s" }
    );
    Ok(())
}

/// What an image-folder feed passed over, in words; `None` when nothing was.
fn ignored_note(ignored: &IgnoredFiles) -> Option<String> {
    let mut parts = Vec::new();
    if ignored.not_images > 0 {
        parts.push(format!(
            "{} not an image (.png, .jpg, .jpeg)",
            ignored.not_images
        ));
    }
    if ignored.not_regular > 0 {
        parts.push(format!(
            "{} not a regular file (symbolic links are not followed, nor folders inside a class folder)",
            ignored.not_regular
        ));
    }
    if ignored.outside_classes > 0 {
        parts.push(format!(
            "{} beside the class folders",
            ignored.outside_classes
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "passed over {} file(s): {}",
            ignored.total(),
            parts.join("; ")
        )
    })
}

fn refine(client: &mut Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    if arguments.get_flag("list") {
        let mut request = PageRequest::default();
        loop {
            let page = client.examples(request)?;
            for example in &page.items {
                let output = match &example.output {
                    StoredOutput::Label { name, .. } => name.clone(),
                    _ => "(tensor)".to_owned(),
                };
                let state = if example.enabled { "on " } else { "off" };
                println!("{:>8}  {state}  {output}", example.id.0);
            }
            match page.next {
                Some(next) => request = next,
                None => break,
            }
        }
        return Ok(());
    }
    let (id, enabled) = match (
        arguments.get_one::<i64>("enable"),
        arguments.get_one::<i64>("disable"),
    ) {
        (Some(id), _) => (*id, true),
        (_, Some(id)) => (*id, false),
        _ => return refine_page(client, arguments),
    };
    let version = client.set_enabled(ExampleId(id), enabled)?;
    println!(
        "{}: example {id} {} (data version {version})",
        client.app_name(),
        if enabled { "enabled" } else { "disabled" }
    );
    Ok(())
}

/// `refine` with no option: the web page for this app, from the local store, until Ctrl-C; in
/// remote mode, the server's page for the app.
fn refine_page(client: &Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    let app = client.app_name().to_owned();
    let home = match (client.server_url(), client.store()) {
        (Some(url), _) => {
            println!("{app}: the refine page is at {url}/apps/{app}/refine");
            eprintln!(
                "{app}: the page asks for the app's token ({}); or open the page with #token=TOKEN after its address",
                token_whereabouts(client)
            );
            return Ok(());
        }
        (None, Some(store)) => store.home().to_owned(),
        (None, None) => {
            return Err(CommandError::Usage(
                "no local store and no server".to_owned(),
            ));
        }
    };
    let listen = arguments
        .get_one::<std::net::SocketAddr>("listen")
        .copied()
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 9000)));
    if !listen.ip().is_loopback() && !arguments.get_flag("allow_remote") {
        return Err(CommandError::Usage(format!(
            "--listen {listen} is not a loopback address: the refine page (and the access token inside it) would be served to the network, where anyone who reaches it can change which examples train; listen on 127.0.0.1 (the default), or pass --allow-remote if you mean it"
        )));
    }
    crate::server::serve_refine_page(home, &app, listen, |url| {
        println!("{app}: the refine page is at {url} (Ctrl-C to stop)");
    })
    .map_err(|error| CommandError::Failed(Box::new(error)))
}

/// The FILE of `feed` / `infer`, opened for reading (a folder is named as such, not as an I/O error).
fn open_lines_file(path: &str) -> Result<std::fs::File, CommandError> {
    if std::path::Path::new(path).is_dir() {
        return Err(CommandError::Usage(format!(
            "`{path}` is a folder; give a file of lines, or no FILE to read standard input"
        )));
    }
    std::fs::File::open(path).map_err(|source| CommandError::Io {
        context: format!("cannot read `{path}`"),
        source,
    })
}

fn infer(client: &mut Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    let options = FeedOptions::default();
    let report = match arguments.get_one::<String>("file") {
        Some(path) => {
            let file = open_lines_file(path)?;
            let mut options = options;
            options.base_dir = PathBuf::from(path).parent().map(PathBuf::from);
            client.infer_lines(BufReader::new(file), &options)
        }
        None => {
            let stdin = std::io::stdin();
            client.infer_lines(stdin.lock(), &options)
        }
    }?;
    let json = arguments.get_flag("json");
    let mut out = std::io::stdout().lock();
    for (line, answer) in &report.answers {
        let written = if json {
            let mut value = serde_json::to_value(answer).unwrap_or_default();
            if let Some(map) = value.as_object_mut() {
                map.insert("line".to_owned(), (*line).into());
            }
            writeln!(out, "{value}")
        } else {
            match answer.output.as_str() {
                Some(label) => writeln!(out, "{label}"),
                None => writeln!(out, "{}", answer.output),
            }
        };
        written.map_err(|source| CommandError::Io {
            context: "cannot write the answers".to_owned(),
            source,
        })?;
    }
    let app = client.app_name();
    eprintln!(
        "{app}: {} input{} answered by run {} ({}, trained on data version {})",
        report.answers.len(),
        if report.answers.len() == 1 { "" } else { "s" },
        if report.run_number > 0 {
            report.run_number
        } else {
            report.run.0.max(0) as u64
        },
        report.candidate,
        report.data_version
    );
    match report.score {
        Some(Score::Accuracy { correct, total }) => eprintln!(
            "{app}: accuracy {:.3} ({correct} of {total} labelled inputs right)",
            correct as f64 / total.max(1) as f64
        ),
        Some(Score::MeanSquaredError { value, total }) => {
            eprintln!("{app}: mean squared error {value:.4} over {total} inputs")
        }
        None => {}
    }
    Ok(())
}

/// Says, once, that the app was registered on its server just now, and where its token is (or the
/// token itself when it could not be saved: it is shown only this once).
fn tell_about_registration(client: &Client) {
    let (Some(url), Some(TokenOrigin::Registered { file, problem })) =
        (client.server_url(), client.token_origin())
    else {
        return;
    };
    let app = client.app_name();
    match (file, problem) {
        (Some(file), _) => eprintln!(
            "{app}: registered on {url}; its token is saved in {}",
            file.display()
        ),
        (None, problem) => eprintln!(
            "{app}: registered on {url}, but its token could not be saved ({}); keep it, it is shown only once: {} (set EASEML_TOKEN to it)",
            problem.as_deref().unwrap_or("no token file"),
            client.token().unwrap_or_default()
        ),
    }
}

/// Where a remote client's token is, in words.
fn token_whereabouts(client: &Client) -> String {
    match client.token_origin() {
        Some(TokenOrigin::File(file))
        | Some(TokenOrigin::Registered {
            file: Some(file), ..
        }) => {
            format!("it is in {}", file.display())
        }
        Some(TokenOrigin::Given) => "it is in EASEML_TOKEN".to_owned(),
        _ => "the one shown when the app was registered".to_owned(),
    }
}

/// Runs `<app>-COMMAND`, the engine binary beside this one, with this process's arguments less the
/// subcommand's name, in place of this process (`exec` on Unix: its exit status is the app's);
/// `export` runs `<app>-train export` with the arguments as they are.
fn run_sibling(
    app: &str,
    command: &str,
    raw_arguments: &[std::ffi::OsString],
) -> Result<(), CommandError> {
    let this = std::env::current_exe().map_err(|source| CommandError::Io {
        context: "cannot find this program's own path".to_owned(),
        source,
    })?;
    let (binary, drop_command) = match command {
        "export" => ("train", false),
        _ => (command, true),
    };
    let sibling = this.with_file_name(format!("{app}-{binary}"));
    if !sibling.is_file() {
        return Err(CommandError::Usage(format!(
            "`{app} {command}` runs `{}`, which is not there; build the app's crate again (`cargo build` builds all of its binaries)",
            sibling.display()
        )));
    }
    let mut arguments: Vec<&std::ffi::OsString> = raw_arguments.iter().skip(1).collect();
    if let Some(position) = arguments.iter().position(|argument| *argument == command)
        && drop_command
    {
        arguments.remove(position);
    }
    let mut child = std::process::Command::new(&sibling);
    child.args(arguments);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let source = child.exec();
        Err(CommandError::Io {
            context: format!("cannot start `{}`", sibling.display()),
            source,
        })
    }
    #[cfg(not(unix))]
    {
        let status = child.status().map_err(|source| CommandError::Io {
            context: format!("cannot start `{}`", sibling.display()),
            source,
        })?;
        if status.success() {
            Ok(())
        } else {
            std::process::exit(status.code().unwrap_or(1))
        }
    }
}

/// `train` in remote mode: the server trains; say so, and show where it stands.
fn remote_train(client: &Client) -> Result<(), CommandError> {
    let app = client.app_name();
    let url = client.server_url().unwrap_or_default();
    eprintln!(
        "{app}: the server at {url} trains every app in the background (`easeml serve`; if it was started with --no-train, run `easeml train` on its machine); nothing to do here. Its runs so far:"
    );
    let status = client.status()?;
    print!("{status}");
    Ok(())
}

/// A duration in words for people, as the training session prints it (the store's one rule).
pub use easeml_client::store::format_seconds;

#[cfg(test)]
mod tests {
    //! `feed FILE.csv --label-column NAME` and `feed --images DIR` through [`run_from`], the
    //! generated binaries' one entry, on an embedded store in a temporary folder.

    use std::path::Path;
    use std::process::ExitCode;

    use easeml_compiler::{Compiled, Registry, codegen, compile};

    use super::{Baked, Entry, run_from};
    use crate::{AppSpec, Client, Connection, PageRequest};

    const IRIS: &str = "app iris\ntype Input\n  sepal_length :: Tensor[1]\n  petal_width :: Tensor[1]\nend\nOutput = [3]\nlabels = [setosa, versicolor, virginica]";
    const PICS: &str = "app pics\nInput = [4, 6, 3]\nOutput = [2]";

    fn manifest_of(source: &str) -> String {
        let schema = compile(source, "app", &Registry::builtin())
            .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
            .schema;
        let compiled = Compiled::from_schema(schema, &Registry::builtin()).expect("a template");
        codegen::manifest(&compiled).to_json()
    }

    /// Runs `<app> --home HOME ARGS...`.
    fn run(manifest: &str, home: &Path, arguments: &[&str]) -> ExitCode {
        let home = home.to_str().unwrap();
        let mut all = vec!["app", "--home", home];
        all.extend_from_slice(arguments);
        run_from(manifest, Entry::App, &Baked::default(), all)
    }

    /// How many examples the app of `manifest` holds in `home`.
    fn stored(manifest: &str, home: &Path) -> u64 {
        let spec = AppSpec::from_manifest_json(manifest).unwrap();
        let client = Client::open(&Connection::embedded(home), spec).unwrap();
        client.examples(PageRequest::default()).unwrap().total
    }

    #[test]
    fn feed_reads_a_csv_by_its_label_column() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let manifest = manifest_of(IRIS);
        let csv = dir.path().join("iris.csv");
        std::fs::write(
            &csv,
            "petal_width,species,sepal_length\n0.2,setosa,5.1\n1.3,versicolor,5.7\n,setosa,5.0\n",
        )
        .unwrap();
        let csv = csv.to_str().unwrap();
        // A bad row stores nothing; --skip-bad stores the good ones.
        let feed = ["feed", csv, "--label-column", "species"];
        assert_eq!(run(&manifest, &home, &feed), ExitCode::from(1));
        assert_eq!(stored(&manifest, &home), 0);
        let feed = ["feed", csv, "--label-column", "species", "--skip-bad"];
        assert_eq!(run(&manifest, &home, &feed), ExitCode::SUCCESS);
        assert_eq!(stored(&manifest, &home), 2);
        // No --label-column for a table with a header: an error, nothing stored.
        assert_eq!(run(&manifest, &home, &["feed", csv]), ExitCode::from(1));
        // --label-column for a file of lines, or with no FILE at all.
        let lines = dir.path().join("lines.txt");
        std::fs::write(&lines, "[5.1, 0.2] setosa\n").unwrap();
        let lines = lines.to_str().unwrap();
        let feed = ["feed", lines, "--label-column", "species"];
        assert_eq!(run(&manifest, &home, &feed), ExitCode::from(1));
        let feed = ["feed", "--label-column", "species"];
        assert_eq!(run(&manifest, &home, &feed), ExitCode::from(2));
        assert_eq!(stored(&manifest, &home), 2);
    }

    #[test]
    fn feed_reads_an_image_folder_by_class() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let manifest = manifest_of(PICS);
        let images = dir.path().join("images");
        for (class, name) in [("cat", "1.png"), ("cat", "2.jpg"), ("dog", "1.png")] {
            std::fs::create_dir_all(images.join(class)).unwrap();
            image::RgbImage::from_pixel(6, 4, image::Rgb([10, 20, 30]))
                .save(images.join(class).join(name))
                .unwrap();
        }
        std::fs::write(images.join("cat/notes.txt"), "passed over").unwrap();
        let images = images.to_str().unwrap();
        assert_eq!(
            run(&manifest, &home, &["feed", "--images", images]),
            ExitCode::SUCCESS
        );
        assert_eq!(stored(&manifest, &home), 3);
        // --images conflicts with FILE and --label-column.
        let feed = ["feed", "--images", images, "data.csv"];
        assert_eq!(run(&manifest, &home, &feed), ExitCode::from(2));
        // An app whose input is not an image.
        let iris = manifest_of(IRIS);
        assert_eq!(
            run(&iris, &home, &["feed", "--images", images]),
            ExitCode::from(1)
        );
        assert_eq!(stored(&iris, &home), 0);
    }

    #[test]
    fn feed_help_names_tables_and_image_folders_for_the_schema() {
        let help = |source: &str| {
            let spec = AppSpec::from_manifest_json(&manifest_of(source)).unwrap();
            let mut command = super::command(&spec, Entry::App);
            command
                .find_subcommand_mut("feed")
                .unwrap()
                .render_long_help()
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let iris = help(IRIS);
        for expected in [
            "--label-column <NAME>",
            "--images <DIR>",
            "iris feed data.csv --label-column NAME",
            "one column per field, by name: `sepal_length`, `petal_width`",
            "scikit-learn's layout",
            "not for this app: --images needs an input of one image tensor",
        ] {
            assert!(iris.contains(expected), "{expected}\n{iris}");
        }
        let pics = help(PICS);
        assert!(
            pics.contains("pics feed --images DIR") && pics.contains("resized to [4, 6, 3]"),
            "{pics}"
        );
    }

    #[test]
    fn export_runs_in_the_engine_binary_and_needs_its_out_folder() {
        let spec = AppSpec::from_manifest_json(&manifest_of(PICS)).unwrap();
        // `<app> export` takes --out (required) and --force.
        let parse = |entry: Entry, arguments: &[&str]| {
            super::command(&spec, entry)
                .try_get_matches_from(arguments)
                .map(|matches| {
                    let (name, export) = matches.subcommand().expect("a subcommand");
                    (
                        name.to_owned(),
                        export.get_one::<String>("out").cloned(),
                        export.get_flag("force"),
                    )
                })
        };
        assert_eq!(
            parse(Entry::App, &["pics", "export", "--out", "dir", "--force"]).unwrap(),
            ("export".to_owned(), Some("dir".to_owned()), true)
        );
        assert!(parse(Entry::App, &["pics", "export"]).is_err());
        // What `<app> export` starts: `<app>-train export ...`, the arguments as they are.
        assert_eq!(
            parse(
                Entry::Train,
                &["pics-train", "--home", "h", "export", "--out", "dir"]
            )
            .unwrap(),
            ("export".to_owned(), Some("dir".to_owned()), false)
        );
        // Without the engine in this process, `export` starts `pics-train` beside it, which is
        // not beside the test binary: an error, and no folder.
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        assert_eq!(
            run(
                &manifest_of(PICS),
                &dir.path().join("home"),
                &["export", "--out", out.to_str().unwrap()]
            ),
            ExitCode::from(1)
        );
        assert!(!out.exists());
    }

    /// The kinds of a command's errors: a folder given as a file of lines is a usage error in
    /// words, a file that is not there an I/O error that keeps the system's error as its source,
    /// and the client library's errors pass through unchanged in words.
    #[test]
    fn command_errors_keep_their_kind_and_cause() {
        use super::{CommandError, open_lines_file};
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().display().to_string();
        match open_lines_file(&folder) {
            Err(CommandError::Usage(words)) => {
                assert!(
                    words.ends_with(
                        "is a folder; give a file of lines, or no FILE to read standard input"
                    ),
                    "{words}"
                )
            }
            other => panic!("{other:?}"),
        }
        let missing = dir.path().join("missing.txt").display().to_string();
        let error = open_lines_file(&missing).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot read `{missing}`: ")),
            "{error}"
        );
        let source = std::error::Error::source(&error)
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .expect("the system's error");
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        let client = CommandError::from(easeml_client::Error::NoEngine);
        assert_eq!(
            client.to_string(),
            easeml_client::Error::NoEngine.to_string()
        );
    }
}
