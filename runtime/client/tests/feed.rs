//! The client library end to end on an embedded store: every loader of the `feed` formats, each of
//! their error paths (with the message checked), atomic batches, labels, toggles, paging, status.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use easeml_client::{
    CheckedOutput, Client, Connection, Error, ExampleId, FeedOptions, FeedReport, PageRequest,
    RunState, RunValidation,
};
use easeml_compiler::{Registry, compile, schema::Schema};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn connection(&self) -> Connection {
        Connection::embedded(self.path("home"))
    }

    fn client(&self, source: &str) -> Client {
        Client::open(&self.connection(), app(source)).unwrap()
    }

    fn options(&self) -> FeedOptions {
        FeedOptions {
            base_dir: Some(self.dir.path().to_owned()),
            ..FeedOptions::default()
        }
    }

    fn feed(&self, client: &mut Client, text: &str) -> Result<FeedReport, Error> {
        client.feed_lines(Cursor::new(text.as_bytes()), &self.options())
    }

    /// The error message of a feed that must fail.
    fn feed_error(&self, client: &mut Client, text: &str) -> String {
        let error = self.feed(client, text).unwrap_err();
        assert!(matches!(error, Error::BadInput { .. }), "{error}");
        error.to_string()
    }
}

fn schema(source: &str) -> Schema {
    compile(source, "app", &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
        .schema
}

/// The app of a schema, described by the manifest easemlc writes for it.
fn spec(schema: &Schema) -> easeml_client::AppSpec {
    let compiled = easeml_compiler::Compiled::from_schema(schema.clone(), &Registry::builtin())
        .expect("a template");
    easeml_client::AppSpec::from_manifest(&easeml_compiler::codegen::manifest(&compiled)).unwrap()
}

/// The app of a small `.eml` program.
fn app(source: &str) -> easeml_client::AppSpec {
    spec(&schema(source))
}

fn total(client: &Client) -> u64 {
    client.examples(PageRequest::default()).unwrap().total
}

fn input_of(client: &Client, id: ExampleId) -> Vec<f32> {
    client.example(id).unwrap().input.tensors[0].clone()
}

/// A `.npy` file (format 1.0) with the given dtype, shape (Python tuple text) and raw data.
fn write_npy(path: &Path, descr: &str, shape: &str, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

const IMAGE_APP: &str = "app pics\nInput = [4, 6, 3]\nOutput = [2]";

#[test]
fn png_and_jpeg_images_are_resized_to_the_declared_shape() {
    let fixture = Fixture::new();
    // An 8x12 (rows x columns) PNG, red on the left half, and a 4x6 grey JPEG.
    let png = image::RgbImage::from_fn(12, 8, |x, _| {
        if x < 6 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    png.save(fixture.path("a.png")).unwrap();
    let jpeg = image::RgbImage::from_pixel(6, 4, image::Rgb([128, 128, 128]));
    jpeg.save(fixture.path("b.jpg")).unwrap();

    let mut client = fixture.client(IMAGE_APP);
    let report = fixture
        .feed(&mut client, "a.png cat\n\n# a comment\nb.jpg dog\n")
        .unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        report.new_labels,
        [("cat".to_owned(), 0), ("dog".to_owned(), 1)]
    );
    let red = input_of(&client, report.ids[0]);
    assert_eq!(red.len(), 4 * 6 * 3);
    assert_eq!(&red[..3], &[1.0, 0.0, 0.0]); // row 0, column 0: red, scaled to [0, 1]
    assert_eq!(&red[15..18], &[0.0, 0.0, 1.0]); // row 0, column 5: blue
    let grey = input_of(&client, report.ids[1]);
    assert!(
        grey.iter().all(|value| (value - 0.5).abs() < 0.05),
        "{grey:?}"
    );
    let loaded = client.example(report.ids[1]).unwrap();
    assert_eq!(loaded.output, CheckedOutput::Label("dog".to_owned()));
}

#[test]
fn grey_images_fill_two_and_one_channel_shapes() {
    let fixture = Fixture::new();
    image::GrayImage::from_pixel(3, 2, image::Luma([255]))
        .save(fixture.path("g.png"))
        .unwrap();
    for source in [
        "app g2\nInput = [2, 3]\nOutput = [2]",
        "app g1\nInput = [2, 3, 1]\nOutput = [2]",
    ] {
        let mut client = fixture.client(source);
        let report = fixture.feed(&mut client, "g.png yes\n").unwrap();
        assert_eq!(input_of(&client, report.ids[0]), vec![1.0; 6]);
    }
}

#[test]
fn image_errors_name_the_file_and_the_problem() {
    let fixture = Fixture::new();
    std::fs::write(fixture.path("broken.png"), b"\x89PNG\r\n\x1a\n not really").unwrap();
    let mut client = fixture.client(IMAGE_APP);
    let message = fixture.feed_error(&mut client, "broken.png cat\n");
    assert!(
        message.starts_with("1 of 1 line(s) are bad; nothing was stored (use --skip-bad to store the good ones):\n  line 1: broken.png: not a readable image: "),
        "{message}"
    );
    let message = fixture.feed_error(&mut client, "missing.jpg cat\n");
    assert!(
        message.contains("line 1: missing.jpg: cannot read: "),
        "{message}"
    );
    let message = fixture.feed_error(&mut client, "notes.txt cat\n");
    assert!(
        message.contains("line 1: input `notes.txt` is not an image (.png, .jpg, .jpeg), a .npy file or a JSON array"),
        "{message}"
    );
    let mut tabular = fixture.client("app tab\nInput = [5]\nOutput = [2]");
    let message = fixture.feed_error(&mut tabular, "x.png cat\n");
    assert!(
        message.contains("line 1: x.png: an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]; this app's input is [5]"),
        "{message}"
    );
    assert_eq!(total(&client), 0);
}

/// The CRC-32 of PNG chunks (ISO 3309), for a hand-made header.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG file whose header declares `width` x `height` RGB pixels (its data is one empty chunk: the
/// header alone must be enough to refuse it).
fn png_header_only(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8], data: &[u8]| {
        bytes.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &header);
    chunk(b"IDAT", &[]);
    chunk(b"IEND", &[]);
    bytes
}

#[test]
fn special_files_and_oversized_images_are_refused_before_reading() {
    let fixture = Fixture::new();
    // Regression: `/dev/zero` behind a .npy name was read forever (3 GB in 3 s); a FIFO blocked.
    std::os::unix::fs::symlink("/dev/zero", fixture.path("zero.npy")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", fixture.path("zero.png")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(fixture.path("fifo.npy"))
        .status()
        .unwrap();
    assert!(fifo.success());
    std::fs::create_dir(fixture.path("folder.png")).unwrap();
    // Regression: a 20000x20000 PNG was decoded (660 MB) before its size was looked at.
    std::fs::write(fixture.path("big.png"), png_header_only(20_000, 20_000)).unwrap();
    // A photo larger than the input within the limit (16x a side, at least 4096) is read.
    std::fs::write(fixture.path("ok.png"), png_header_only(4096, 96)).unwrap();
    let mut grid = fixture.client("app grid\nInput = [2, 2]\nOutput = [2]");
    let message = fixture.feed_error(&mut grid, "zero.npy a\nfifo.npy a\n");
    assert!(
        message.contains("line 1: zero.npy: is a device, FIFO or socket, not a regular file")
            && message
                .contains("line 2: fifo.npy: is a device, FIFO or socket, not a regular file"),
        "{message}"
    );
    let mut pics = fixture.client(IMAGE_APP);
    let message = fixture.feed_error(
        &mut pics,
        "zero.png cat\nfolder.png cat\nbig.png cat\nok.png cat\n",
    );
    assert!(
        message.contains("line 1: zero.png: is a device, FIFO or socket, not a regular file"),
        "{message}"
    );
    assert!(
        message.contains("line 2: folder.png: is a folder, not a regular file"),
        "{message}"
    );
    assert!(
        message.contains("line 3: big.png: the image is 20000x20000 pixels; this app's input is 6x4, and images larger than 4096x4096"),
        "{message}"
    );
    // ok.png passes the size check and fails only at decoding (it has no pixel data).
    assert!(
        message.contains("line 4: ok.png: not a readable image"),
        "{message}"
    );
    assert_eq!(total(&grid) + total(&pics), 0);
}

/// A `.npy` file larger than the declared shape can be is refused after reading at most that much.
#[test]
fn npy_files_larger_than_the_declared_shape_are_refused() {
    let fixture = Fixture::new();
    let file = std::fs::File::create(fixture.path("sparse.npy")).unwrap();
    file.set_len(64 << 30).unwrap();
    drop(file);
    let mut grid = fixture.client("app grid\nInput = [2, 2]\nOutput = [2]");
    let message = fixture.feed_error(&mut grid, "sparse.npy a\n");
    assert!(
        message.contains(
            "line 1: sparse.npy: 68719476736 bytes, larger than any .npy file of this app's input shape [2,2] can be (1048620 bytes)"
        ),
        "{message}"
    );
}

/// Regression: a `.npy` linked to a `/proc` file passed the regular-file check (the kernel says its
/// files are regular) and was read to the declared shape's limit. Links are resolved and the kernel's
/// folders refused before opening; empty files and images larger than any accepted image can be
/// stored in are refused by their size before reading.
#[test]
fn kernel_files_empty_files_and_oversized_image_files_are_refused_before_reading() {
    let fixture = Fixture::new();
    std::os::unix::fs::symlink("/proc/self/status", fixture.path("status.npy")).unwrap();
    std::os::unix::fs::symlink("/proc/self/status", fixture.path("status.png")).unwrap();
    std::os::unix::fs::symlink("/sys/kernel", fixture.path("kernel.npy")).unwrap();
    std::fs::write(fixture.path("empty.npy"), b"").unwrap();
    std::fs::write(fixture.path("empty.png"), b"").unwrap();
    let file = std::fs::File::create(fixture.path("huge.png")).unwrap();
    file.set_len(1 << 40).unwrap();
    drop(file);
    let mut grid = fixture.client("app grid\nInput = [2, 2]\nOutput = [2]");
    let message = fixture.feed_error(&mut grid, "status.npy a\nempty.npy a\nkernel.npy a\n");
    for expected in [
        "line 1: status.npy: is /proc/",
        "one of the kernel's files under /proc, not a regular file on a disk",
        "line 2: empty.npy: is empty (0 bytes)",
        "line 3: kernel.npy: is a folder, not a regular file",
    ] {
        assert!(message.contains(expected), "{expected}: {message}");
    }
    let mut pics = fixture.client(IMAGE_APP);
    let message = fixture.feed_error(&mut pics, "status.png cat\nempty.png cat\nhuge.png cat\n");
    for expected in [
        "line 1: status.png: is /proc/",
        "line 2: empty.png: is empty (0 bytes)",
        "line 3: huge.png: 1099511627776 bytes, larger than any image of at most 4096x4096 pixels can be (150994944 bytes)",
    ] {
        assert!(message.contains(expected), "{expected}: {message}");
    }
    // A link to a regular file on a disk is read as the file itself.
    write_npy(
        &fixture.path("real.npy"),
        "<f4",
        "(2, 2)",
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0]),
    );
    std::os::unix::fs::symlink(fixture.path("real.npy"), fixture.path("link.npy")).unwrap();
    fixture.feed(&mut grid, "link.npy a\n").unwrap();
    assert_eq!(total(&grid) + total(&pics), 1);
}

/// A tree input `depth` levels deep (each node's left child is the next level) as a JSON line.
fn deep_tree_line(depth: usize) -> String {
    let mut record = "{\"word\": [1]}".to_owned();
    for _ in 1..depth {
        record = format!("{{\"word\": [1], \"left\": {record}, \"right\": null}}");
    }
    format!("{{\"input\": {record}, \"output\": \"a\"}}\n")
}

/// One nesting limit for every form: a tree as deep as an object may be (`MAX_DEPTH` levels) is
/// read, on a thread with a small stack; deeper JSON gets one clear message (serde_json used to say
/// "recursion limit exceeded" from 128 levels on, far below the documented limit).
#[test]
fn trees_nest_up_to_the_one_depth_limit_with_one_message_beyond() {
    let fixture = Fixture::new();
    let tree = "app tree\ntype Input\n  word :: Tensor[1]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [2]\nlabels = [a, b]";
    let limit = easeml_object::MAX_DEPTH;
    let (report, too_deep, brackets) = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn_scoped(scope, || {
                let mut client = fixture.client(tree);
                let report = fixture.feed(&mut client, &deep_tree_line(limit)).unwrap();
                let too_deep = fixture.feed_error(&mut client, &deep_tree_line(limit + 100));
                let brackets = fixture.feed_error(
                    &mut client,
                    &format!("{{\"input\": {}\n", "[".repeat(1 << 20)),
                );
                (report, too_deep, brackets)
            })
            .unwrap()
            .join()
            .unwrap()
    });
    assert_eq!(report.added, 1);
    let message = format!(
        "an object nests at most {limit} levels (a tree at most {limit} levels deep, a chain at most {limit} records)"
    );
    assert!(
        too_deep.contains("line 1: field `input`: the object nests more than 4096 levels deep")
            || too_deep.contains(&message),
        "{too_deep}"
    );
    assert!(
        brackets.contains("line 1: the JSON nests more than") && brackets.contains(&message),
        "{brackets}"
    );
    // A pair line's token goes through the same reader.
    let mut grid = fixture.client("app grid\nInput = [2, 2]\nOutput = [2]");
    let message = fixture.feed_error(&mut grid, &format!("{} a\n", "[".repeat(10_000)));
    assert!(message.contains("the JSON nests more than"), "{message}");
}

#[test]
fn npy_inputs_and_outputs_are_converted() {
    let fixture = Fixture::new();
    write_npy(
        &fixture.path("x.npy"),
        "<f4",
        "(2, 2)",
        &f32_bytes(&[1.0, 2.0, 3.0, 4.5]),
    );
    let f64_data: Vec<u8> = [0.5f64, -1.0, 2.0, 8.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    write_npy(&fixture.path("y.npy"), "<f8", "(2, 2)", &f64_data);
    let i32_data: Vec<u8> = [7i32, -3].iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&fixture.path("out.npy"), "<i4", "(2,)", &i32_data);
    let mut client = fixture.client("app grid\nInput = [2, 2]\nOutput = [2, 1]");
    let error = fixture.feed_error(&mut client, "x.npy out.npy\n");
    assert!(
        error.contains("line 1: out.npy: field `output`: expected shape [2,1], found [2]"),
        "{error}"
    );
    let mut client = fixture.client("app vec\nInput = [2, 2]\nOutput = [2]");
    let report = fixture
        .feed(&mut client, "x.npy [1, 0]\ny.npy out.npy\n")
        .unwrap();
    assert_eq!(input_of(&client, report.ids[0]), [1.0, 2.0, 3.0, 4.5]);
    assert_eq!(input_of(&client, report.ids[1]), [0.5, -1.0, 2.0, 8.0]);
    // `[2]` with D = 2 takes labels too, so a JSON array or a .npy output is a tensor, a word a label.
    match client.example(report.ids[1]).unwrap().output {
        CheckedOutput::Object(object) => assert_eq!(object.tensors[0], [7.0, -3.0]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn npy_errors_name_the_file_field_and_shapes() {
    let fixture = Fixture::new();
    let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    write_npy(&fixture.path("wide.npy"), "<f4", "(2, 3)", &data);
    write_npy(&fixture.path("short.npy"), "<f4", "(2, 2)", &data[..10]);
    write_npy(
        &fixture.path("nan.npy"),
        "<f4",
        "(2, 2)",
        &f32_bytes(&[1.0, f32::NAN, 0.0, 0.0]),
    );
    write_npy(
        &fixture.path("inf.npy"),
        "<f8",
        "(2, 2)",
        &[0.0f64, 0.0, 0.0, f64::NEG_INFINITY]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    std::fs::write(fixture.path("text.npy"), b"1 2 3 4").unwrap();
    std::fs::write(
        fixture.path("cut.npy"),
        b"\x93NUMPY\x01\x00\x76\x00{'descr'",
    )
    .unwrap();
    let mut client = fixture.client("app grid\nInput = [2, 2]\nOutput = [2]");
    let message = fixture.feed_error(
        &mut client,
        "wide.npy a\nshort.npy a\nnan.npy a\ninf.npy a\ntext.npy a\ncut.npy a\n",
    );
    insta::assert_snapshot!(message, @r"
    6 of 6 line(s) are bad; nothing was stored (use --skip-bad to store the good ones):
      line 1: wide.npy: field `input`: expected shape [2,2], found [2,3]
      line 2: short.npy: truncated: the header says shape [2,2] of '<f4' (16 bytes of data), the file has 10 bytes
      line 3: nan.npy: field `input`: the value at [0,1] is NaN; NaN and infinity are not allowed
      line 4: inf.npy: field `input`: the value at [1,1] is -inf; NaN and infinity are not allowed
      line 5: text.npy: not a .npy file (it does not start with \x93NUMPY)
      line 6: cut.npy: truncated: the file ends inside the .npy header
    ");
    assert_eq!(total(&client), 0);
}

#[test]
fn json_errors_give_the_column_in_the_line_and_say_what_to_write_for_nan() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app pairs\nInput = [2]\nOutput = [2]");
    let feed =
        "[NaN, 1] [0, 1]\n[1, -Infinity] [0, 1]\n[1, 2] [0, 1\n[1, 2] [0, nan]\n[1, 2] [0, 1]\n";
    let message = fixture.feed_error(&mut client, feed);
    insta::assert_snapshot!(message, @r"
    4 of 5 line(s) are bad; nothing was stored (use --skip-bad to store the good ones):
      line 1: malformed JSON at column 2: NaN and infinities are not JSON numbers; every value must be a finite number
      line 2: malformed JSON at column 6: NaN and infinities are not JSON numbers; every value must be a finite number
      line 3: malformed JSON at column 12: EOF while parsing a list
      line 4: malformed JSON at column 12: NaN and infinities are not JSON numbers; every value must be a finite number
    ");
    assert_eq!(total(&client), 0);
}

#[test]
fn inline_json_is_checked_and_a_bad_line_stores_nothing() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app grid\nInput = [2, 2]\nOutput = [3]");
    let feed = "[[1, 2], [3, 4]] cat\n[[1, 2], [3]] dog\n[[1, 2], [3, 4]] \"sea lion\"\n[[1, 2], [3, 4] cat\n[[1e39, 2], [3, 4]] cat\n[[1, 2], [3, 4]]\n[[1, 2], [3, 4]] fish\n[[1, 2], [3, 4]] bird\n";
    let message = fixture.feed_error(&mut client, feed);
    insta::assert_snapshot!(message, @r"
    5 of 8 line(s) are bad; nothing was stored (use --skip-bad to store the good ones):
      line 2: field `input`: expected shape [2,2], found a ragged array (element 0 has shape [2], element 1 has shape [1])
      line 4: malformed JSON at column 17: expected `,` or `]`
      line 5: field `input`: the value 1e+39 at [0,0] does not fit in a 32-bit float
      line 6: missing the output: a line is `INPUT OUTPUT`
      line 8: field `output`: label `bird` would be label number 4, but the output [3] holds at most 3; the labels so far are: cat, sea lion, fish
    ");
    assert_eq!(total(&client), 0);
    assert_eq!(client.data_version().unwrap(), 0);
    assert_eq!(client.labels().unwrap(), Some(Vec::new()));

    // With skip-bad, the good lines are stored and the bad ones reported.
    let options = FeedOptions {
        skip_bad: true,
        ..fixture.options()
    };
    let mut lines_seen = Vec::new();
    let report = client
        .feed_lines_with_progress(Cursor::new(feed), &options, &mut |lines| {
            lines_seen.push(lines)
        })
        .unwrap();
    assert_eq!(lines_seen, (1..=8).collect::<Vec<_>>());
    assert_eq!(report.added, 3);
    assert_eq!(
        report
            .skipped
            .iter()
            .map(|error| error.line)
            .collect::<Vec<_>>(),
        [2, 4, 5, 6, 8]
    );
    assert_eq!(
        client.labels().unwrap().unwrap(),
        ["cat", "sea lion", "fish"]
    );
    assert_eq!(client.data_version().unwrap(), 1);
}

#[test]
fn declared_labels_reject_unknown_ones() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app zoo\nInput = [2]\nOutput = [2]\nlabels = [dog, cat]");
    assert_eq!(client.labels().unwrap().unwrap(), ["dog", "cat"]);
    let message = fixture.feed_error(&mut client, "[1, 2] cat\n[1, 2] horse\n");
    assert!(
        message.ends_with(
            "line 2: field `output`: unknown label `horse`; the declared labels are: dog, cat"
        ),
        "{message}"
    );
    let report = fixture.feed(&mut client, "[1, 2] cat\n").unwrap();
    assert!(report.new_labels.is_empty());
}

#[test]
fn outputs_without_labels_take_tensors_and_numbers() {
    let fixture = Fixture::new();
    let mut regression = fixture.client("app price\nInput = [2]\nOutput = [1]");
    let report = fixture
        .feed(&mut regression, "\u{feff}[1, 2] 3.5\r\n[1, 2] [4]\r\n")
        .unwrap();
    assert_eq!(report.added, 2);
    let message = fixture.feed_error(&mut regression, "[1, 2] cheap\n");
    assert!(
        message.contains("line 1: output `cheap` looks like a label, but this app's output {[Tensor[1]], []} takes no labels; give a JSON array or a .npy path"),
        "{message}"
    );
}

const CHAIN_APP: &str = "app series\ntype Input\n  reading :: Tensor[2]\n  next :: Nullable{Input}\nend\ntype Output\n  label :: Tensor[2]\nend";
const TREE_APP: &str =
    "app parse\n{input: {[value :: Tensor[1]], [left, right]}, output: {[Tensor[2]], []}}";

#[test]
fn json_lines_carry_chains_and_trees() {
    let fixture = Fixture::new();
    let mut chain = fixture.client(CHAIN_APP);
    let report = fixture
        .feed(
            &mut chain,
            concat!(
                r#"{"input": [{"reading": [1, 2]}, {"reading": [3, 4]}, {"reading": [5, 6]}], "output": [1, 0]}"#,
                "\n",
                r#"{"input": {"reading": [1, 2], "next": {"reading": [3, 4], "next": null}}, "output": "yes"}"#,
                "\n"
            ),
        )
        .unwrap();
    assert_eq!(report.added, 2);
    let first = chain.example(report.ids[0]).unwrap();
    assert_eq!(first.input.record_count(), 3);
    let second = chain.example(report.ids[1]).unwrap();
    assert_eq!(second.input.record_count(), 2);
    assert_eq!(second.output, CheckedOutput::Label("yes".to_owned()));

    let mut tree = fixture.client(TREE_APP);
    let report = fixture
        .feed(
            &mut tree,
            concat!(
                r#"{"input": {"value": [1], "left": {"value": [2]}, "right": {"value": [3], "left": null, "right": {"value": [4]}}}, "output": "a"}"#,
                "\n"
            ),
        )
        .unwrap();
    assert_eq!(tree.example(report.ids[0]).unwrap().input.record_count(), 4);
}

#[test]
fn json_lines_errors_name_the_record_and_field() {
    let fixture = Fixture::new();
    let mut chain = fixture.client(CHAIN_APP);
    let message = fixture.feed_error(
        &mut chain,
        concat!(
            r#"{"input": [{"reading": [1, 2]}, {"reading": [3, 4, 5]}], "output": [1, 0]}"#,
            "\n",
            r#"{"input": {"reading": [1, 2]}, "output": [1, 0]"#,
            "\n",
            r#"{"input": {"reading": [1, 2], "nxt": null}, "output": "a"}"#,
            "\n",
            r#"{"input": {"reading": [1, 2]}}"#,
            "\n",
            r#"{"input": {"reading": [1, 2]}, "output": [[1, 0]]}"#,
            "\n",
            "[1, 2] a\n",
        ),
    );
    insta::assert_snapshot!(message, @r#"
    6 of 6 line(s) are bad; nothing was stored (use --skip-bad to store the good ones):
      line 1: field `input[1].reading`: expected shape [2], found [3]
      line 2: malformed JSON at column 47: EOF while parsing an object
      line 3: field `input.nxt` is not in the schema; the fields are: reading, next
      line 4: missing `output`
      line 5: field `output`: expected shape [2], found [1,2]
      line 6: field `input`: expected an object with fields reading, next, or a list of such records (a chain), found an array of 2 element(s)
    "#);
    let mut tree = fixture.client(TREE_APP);
    let message = fixture.feed_error(
        &mut tree,
        concat!(r#"{"input": {"value": [1], "left": {"value": [2], "right": {"value": [1, 2]}}}, "output": "a"}"#, "\n"),
    );
    assert!(
        message.ends_with("line 1: field `input.left.right.value`: expected shape [1], found [2]"),
        "{message}"
    );
}

#[test]
fn typed_values_feed_through_serde() {
    #[derive(serde::Serialize)]
    struct Reading {
        reading: [f32; 2],
        next: Option<Box<Reading>>,
    }
    let fixture = Fixture::new();
    let mut client = fixture.client(CHAIN_APP);
    let chain = Reading {
        reading: [1.0, 2.0],
        next: Some(Box::new(Reading {
            reading: [3.0, 4.0],
            next: None,
        })),
    };
    let report = client.feed([(chain, "up")]).unwrap();
    assert_eq!(
        client.example(report.ids[0]).unwrap().input.record_count(),
        2
    );
    let bad = Reading {
        reading: [f32::NAN, 0.0],
        next: None,
    };
    let error = client.feed([(bad, "up")]).unwrap_err().to_string();
    assert_eq!(
        error,
        "1 of 1 example(s) are bad; nothing was stored (use --skip-bad to store the good ones):\n  example 1: field `input.reading`: expected shape [2], found null (NaN and infinity serialize as null)"
    );
}

#[test]
fn toggles_bump_the_data_version_and_pages_cover_everything() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app tab\nInput = [1]\nOutput = [2]");
    let feed: String = (0..23)
        .map(|i| format!("[{i}] {}\n", if i % 2 == 0 { "even" } else { "odd" }))
        .collect();
    let report = fixture.feed(&mut client, &feed).unwrap();
    assert_eq!(report.added, 23);
    assert_eq!(client.data_version().unwrap(), 1);
    assert_eq!(client.set_enabled(report.ids[4], false).unwrap(), 2);
    assert_eq!(client.set_enabled(report.ids[4], false).unwrap(), 2);
    assert_eq!(client.set_enabled(report.ids[4], true).unwrap(), 3);
    client.set_enabled(report.ids[5], false).unwrap();

    let mut request = PageRequest {
        after: None,
        limit: 10,
    };
    let mut ids = Vec::new();
    loop {
        let page = client.examples(request).unwrap();
        ids.extend(page.items.iter().map(|item| item.id));
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    assert_eq!(ids, report.ids);
    let status = client.status().unwrap();
    assert_eq!(
        (
            status.examples,
            status.enabled_examples,
            status.data_version
        ),
        (23, 22, 4)
    );
    let error = client.set_enabled(ExampleId(10_000), true).unwrap_err();
    assert_eq!(error.to_string(), "app `tab` has no example 10000");
}

/// A run of `candidate` taken through the unit protocol to a finished commit with
/// `(quality, cost, inference latency)`.
fn finished_run(
    store: &mut easeml_store::Store,
    app: easeml_store::AppId,
    candidate: &str,
    (quality, cost_seconds, infer_latency_seconds): (f64, f64, f64),
    validation: &RunValidation,
) -> easeml_store::RunId {
    let (_, unit) = store.queue_unit(app, candidate, "{}").unwrap();
    let lease = store
        .lease_unit_by_id(unit, "worker:test", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    let checkpoint = store.put_blob(candidate.as_bytes()).unwrap();
    store
        .commit_unit(
            &lease,
            &easeml_store::UnitResult::Finished {
                quality,
                cost_seconds,
                checkpoint: &checkpoint,
                validation,
                infer_latency_seconds,
                trials: None,
            },
        )
        .unwrap();
    lease.run
}

#[test]
fn status_marks_the_best_run_within_the_constraints() {
    let fixture = Fixture::new();
    let mut client = fixture.client(
        "app tab\nInput = [1]\nOutput = [2]\nconstraint train_time <= 1m\nconstraint infer_latency <= 5ms",
    );
    let app = client.app_id().unwrap();
    let store = client.store_mut().unwrap();
    let runs: Vec<_> = [
        ("mlp_small", 0.7, 10.0),
        ("mlp_large", 0.9, 120.0),
        ("logistic", 0.8, 5.0),
    ]
    .into_iter()
    .map(|(candidate, quality, cost)| {
        // The best run was cross-validated; the others were measured on the split.
        let validation = if candidate == "logistic" {
            RunValidation {
                protocol: Some("5-fold stratified".to_owned()),
                quality_std: Some(0.05),
                validated_examples: None,
                confusion: None,
                oof: None,
            }
        } else {
            RunValidation {
                protocol: Some("split 20%".to_owned()),
                quality_std: None,
                validated_examples: None,
                confusion: None,
                oof: None,
            }
        };
        finished_run(store, app, candidate, (quality, cost, 0.0), &validation)
    })
    .collect();
    // The most accurate model within train_time is too slow to serve.
    finished_run(
        store,
        app,
        "knn",
        (0.85, 2.0, 0.0123),
        &RunValidation::default(),
    );
    let (running, _) = store.queue_unit(app, "mlp_small+norm_k1", "{}").unwrap();
    store
        .lease_unit("worker:test", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(store.run(running).unwrap().state, RunState::Running);
    let status = client.status().unwrap();
    assert_eq!(status.best.as_ref().map(|best| best.run), Some(runs[2]));
    assert!(status.runs[1].over_train_time);
    assert_eq!(
        status.runs[1].broken_constraints,
        ["train_time 2.0 min > 60.0 s"]
    );
    assert_eq!(
        status.runs[3].broken_constraints,
        ["infer_latency 12.30 ms > 5.00 ms"]
    );
    assert_eq!(status.runs[3].infer_latency_seconds, Some(0.0123));
    assert!(!status.runs[3].over_train_time && !status.runs[3].best);
    assert!(status.runs[2].broken_constraints.is_empty());
    assert_eq!(status.runs[4].state, RunState::Running);
    let text = status.to_string();
    assert!(text.starts_with("app tab: {input: {[Tensor[1]], []}, output: {[Tensor[2]], []}}\n0 examples (0 enabled), data version 0\n"), "{text}");
    let best_line = text
        .lines()
        .find(|line| line.starts_with('*') && line.contains("logistic"))
        .unwrap();
    assert!(
        best_line.contains("0.800 ± 0.050")
            && best_line.contains("5.0 s")
            && best_line.contains("5-fold stratified")
            && best_line.ends_with("done"),
        "{best_line}"
    );
    assert_eq!(
        status.runs[2].protocol.as_deref(),
        Some("5-fold stratified")
    );
    assert_eq!(status.runs[2].quality_std, Some(0.05));
    assert_eq!(status.runs[0].protocol.as_deref(), Some("split 20%"));
    assert_eq!(status.runs[0].quality_std, None);
    assert!(text.contains("split 20%"), "{text}");
    assert!(
        text.contains("done (broke train_time 2.0 min > 60.0 s)")
            && text.contains(
                "12.30 ms  -                  done (broke infer_latency 12.30 ms > 5.00 ms)"
            ),
        "{text}"
    );
}

#[test]
fn reopening_with_another_schema_is_refused() {
    let fixture = Fixture::new();
    drop(fixture.client("app tab\nInput = [1]\nOutput = [2]"));
    let error = Client::open(
        &fixture.connection(),
        app("app tab\nInput = [2]\nOutput = [2]"),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "app `tab` is already registered with type {input: {[Tensor[1]], []}, output: {[Tensor[2]], []}}, but this program has type {input: {[Tensor[2]], []}, output: {[Tensor[2]], []}}; rename the app or remove the old one"
    );
}

#[test]
fn a_manifest_opens_the_same_app() {
    let fixture = Fixture::new();
    let manifest = app("app tab\nInput = [1]\nOutput = [2]")
        .manifest()
        .to_owned();
    let spec = easeml_client::AppSpec::from_manifest_json(&manifest).unwrap();
    let mut client = Client::open(&fixture.connection(), spec).unwrap();
    fixture.feed(&mut client, "[1] a\n").unwrap();
    let again = fixture.client("app tab\nInput = [1]\nOutput = [2]");
    assert_eq!(total(&again), 1);
    let error = easeml_client::AppSpec::from_manifest_json("{\"app\": \"x\"}").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("app manifest: missing field `app_id`"),
        "{error}"
    );
    // A manifest whose keys disagree with its schema is refused, saying which key.
    let broken = manifest.replacen("\"app\": \"tab\",", "\"app\": \"other\",", 1);
    let error = easeml_client::AppSpec::from_manifest_json(&broken).unwrap_err();
    assert_eq!(
        error.to_string(),
        "app manifest: `app` is other, but the schema's is tab"
    );
}

#[test]
fn concurrent_feeders_store_every_example_exactly_once() {
    let fixture = Fixture::new();
    let source = "app shared\nInput = [1]\nOutput = [3]";
    drop(fixture.client(source));
    let threads: Vec<_> = (0..4)
        .map(|feeder| {
            let connection = fixture.connection();
            let spec = app(source);
            std::thread::spawn(move || {
                let mut client = Client::open(&connection, spec).unwrap();
                let labels = ["a", "b", "c"];
                let mut added = 0;
                for batch in 0..5 {
                    let feed: String = (0..10)
                        .map(|i| {
                            format!(
                                "[{}] {}\n",
                                feeder * 1000 + batch * 10 + i,
                                labels[(feeder + i) % 3]
                            )
                        })
                        .collect();
                    added += client
                        .feed_lines(Cursor::new(feed), &FeedOptions::default())
                        .unwrap()
                        .added;
                }
                added
            })
        })
        .collect();
    let added: usize = threads
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .sum();
    assert_eq!(added, 200);
    let client = fixture.client(source);
    assert_eq!(total(&client), 200);
    assert_eq!(client.data_version().unwrap(), 20);
    let mut labels = client.labels().unwrap().unwrap();
    labels.sort();
    assert_eq!(labels, ["a", "b", "c"]);
    let mut inputs: Vec<i64> = client
        .examples(PageRequest {
            after: None,
            limit: 1000,
        })
        .unwrap()
        .items
        .iter()
        .map(|record| input_of(&client, record.id)[0] as i64)
        .collect();
    inputs.sort();
    inputs.dedup();
    assert_eq!(inputs.len(), 200);
    assert_eq!(client.store().unwrap().integrity_check().unwrap(), Ok(()));
}

#[test]
fn large_feeds_write_blobs_as_they_go_and_still_store_all_or_nothing() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app tab\nInput = [2]\nOutput = [2]");
    let options = FeedOptions {
        max_batch_memory: 0,
        ..fixture.options()
    };
    let good: String = (0..10).map(|i| format!("[{i}, 1] [0, 1]\n")).collect();
    let report = client
        .feed_lines(Cursor::new(good.clone()), &options)
        .unwrap();
    assert_eq!(report.added, 10);
    assert_eq!(input_of(&client, report.ids[9]), [9.0, 1.0]);

    let bad = format!("{good}[1] [0, 1]\n");
    let fresh: String = (100..110).map(|i| format!("[{i}, 1] [0, 1]\n")).collect();
    let error = client
        .feed_lines(Cursor::new(format!("{fresh}{bad}")), &options)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("line 21: field `input`: expected shape [2], found [1]"),
        "{error}"
    );
    assert_eq!(total(&client), 10);
    // The failed batch's blob files are unreferenced; garbage collection removes them.
    let (removed, _) = client
        .store()
        .unwrap()
        .collect_garbage(std::time::Duration::ZERO)
        .unwrap();
    assert_eq!(removed, 10);
    assert_eq!(input_of(&client, report.ids[0]), [0.0, 1.0]);
}
