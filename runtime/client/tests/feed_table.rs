//! Tables (CSV / TSV, scikit-learn's layout) and image folders fed into an embedded store through
//! `Client::feed_csv` and `Client::feed_image_folder`: every layout, and every error path with its
//! message checked (the line and the column, and what to do).

use std::path::{Path, PathBuf};

use easeml_client::{
    CheckedOutput, Client, Connection, CsvOptions, Error, ExampleId, FeedOptions, FeedReport,
    IgnoredFiles, PageRequest,
};
use easeml_compiler::{Registry, compile};

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

    fn client(&self, source: &str) -> Client {
        Client::open(&Connection::embedded(self.path("home")), app(source)).unwrap()
    }

    /// Writes `text` to `name` (its folders made) and returns the path.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// The app of a small `.eml` program, described by the manifest easemlc writes for it.
fn app(source: &str) -> easeml_client::AppSpec {
    let schema = compile(source, "app", &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
        .schema;
    let compiled =
        easeml_compiler::Compiled::from_schema(schema, &Registry::builtin()).expect("a template");
    easeml_client::AppSpec::from_manifest(&easeml_compiler::codegen::manifest(&compiled)).unwrap()
}

fn label(column: &str) -> CsvOptions {
    CsvOptions {
        label_column: Some(column.to_owned()),
        ..CsvOptions::default()
    }
}

fn feed_csv(client: &mut Client, path: &Path, csv: &CsvOptions) -> Result<FeedReport, Error> {
    client.feed_csv(path, csv, &FeedOptions::default(), &mut |_| {})
}

/// The message of a table feed that fails, and that it stored nothing.
fn csv_error(client: &mut Client, path: &Path, csv: &CsvOptions) -> String {
    let error = feed_csv(client, path, csv).unwrap_err();
    assert_eq!(total(client), 0, "a failed feed stores nothing");
    error.to_string()
}

fn total(client: &Client) -> u64 {
    client.examples(PageRequest::default()).unwrap().total
}

fn example(client: &Client, id: ExampleId) -> (Vec<Vec<f32>>, CheckedOutput) {
    let loaded = client.example(id).unwrap();
    (loaded.input.tensors.clone(), loaded.output)
}

fn label_of(name: &str) -> CheckedOutput {
    CheckedOutput::Label(name.to_owned())
}

const IRIS: &str = "app iris\ntype Input\n  sepal_length :: Tensor[1]\n  petal_width :: Tensor[1]\nend\nOutput = [3]\nlabels = [setosa, versicolor, virginica]";
const VECTOR: &str = "app vector\nInput = [3]\nOutput = [2]\nlabels = [a, b]";
const REGRESSION: &str = "app regression\nInput = [2]\nOutput = [1]";
const PICS: &str = "app pics\nInput = [4, 6, 3]\nOutput = [3]";

#[test]
fn columns_are_matched_by_the_schema_field_names_in_any_order() {
    let fixture = Fixture::new();
    let mut client = fixture.client(IRIS);
    let path = fixture.write(
        "iris.csv",
        "petal_width,species,sepal_length\n0.2,setosa,5.1\n\"1.3\",versicolor, 5.7 \n",
    );
    let report = feed_csv(&mut client, &path, &label("species")).unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        example(&client, report.ids[0]),
        (vec![vec![5.1], vec![0.2]], label_of("setosa"))
    );
    assert_eq!(
        example(&client, report.ids[1]),
        (vec![vec![5.7], vec![1.3]], label_of("versicolor"))
    );
}

#[test]
fn a_vector_input_takes_the_other_columns_in_file_order() {
    let fixture = Fixture::new();
    let mut client = fixture.client(VECTOR);
    let path = fixture.write("v.csv", "x1,x2,class,x3\n1,2,b,3\n-0.5,.25,a,1e-2\n");
    let report = feed_csv(&mut client, &path, &label("class")).unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        example(&client, report.ids[0]),
        (vec![vec![1.0, 2.0, 3.0]], label_of("b"))
    );
    assert_eq!(
        example(&client, report.ids[1]),
        (vec![vec![-0.5, 0.25, 0.01]], label_of("a"))
    );
}

#[test]
fn a_one_value_output_column_is_a_number() {
    let fixture = Fixture::new();
    let mut client = fixture.client(REGRESSION);
    let path = fixture.write("r.csv", "a,b,y\n1,2,3.5\n");
    let report = feed_csv(&mut client, &path, &label("y")).unwrap();
    let (_, output) = example(&client, report.ids[0]);
    let CheckedOutput::Object(object) = output else {
        panic!("{output:?}")
    };
    assert_eq!(object.tensors, vec![vec![3.5]]);
    // A word where a number belongs is the feed lines' message, in its column.
    let path = fixture.write("word.csv", "a,b,y\n1,2,high\n");
    let message = csv_error(&mut Fixture::new().client(REGRESSION), &path, &label("y"));
    assert!(
        message.contains("line 2: column `y`: output `high` looks like a label"),
        "{message}"
    );
}

#[test]
fn tsv_files_are_split_at_tabs_and_other_files_by_their_header() {
    let fixture = Fixture::new();
    let mut client = fixture.client("app plankton\nInput = [2]\nOutput = [2]");
    let path = fixture.write(
        "p.tsv",
        "size\tcolour\tspecies\n1\t2\tsea lion\n3\t4\tcopepod\n",
    );
    let report = feed_csv(&mut client, &path, &label("species")).unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        report.new_labels,
        [("sea lion".to_owned(), 0), ("copepod".to_owned(), 1)]
    );
    // No known extension: the header's most frequent separator (`;`, not the decimal comma's).
    let path = fixture.write("p.txt", "size;colour;species\n5;6;copepod\n");
    assert_eq!(
        feed_csv(&mut client, &path, &label("species"))
            .unwrap()
            .added,
        1
    );
    // Given explicitly.
    let path = fixture.write("p.data", "size|colour|species\n7|8|copepod\n");
    let csv = CsvOptions {
        delimiter: Some(b'|'),
        ..label("species")
    };
    assert_eq!(feed_csv(&mut client, &path, &csv).unwrap().added, 1);
}

#[test]
fn scikit_learns_breast_cancer_file_is_read_whole_with_its_class_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = std::fs::read_to_string(root.join("examples/breast_cancer.eml")).unwrap();
    let data = root.join("examples/rust-schema/data/breast_cancer.csv");
    let fixture = Fixture::new();
    let mut client = fixture.client(&source);
    let mut rows = 0;
    let report = client
        .feed_csv(
            &data,
            &CsvOptions::default(),
            &FeedOptions::default(),
            &mut |read| rows = read,
        )
        .unwrap();
    assert_eq!(report.added, 569);
    assert_eq!(rows, 569);
    assert!(report.skipped.is_empty());
    let (input, output) = example(&client, report.ids[0]);
    assert_eq!(input[0].len(), 30);
    assert_eq!(input[0][0], 17.99);
    assert_eq!(output, label_of("malignant")); // class index 0
    let benign = (0..569)
        .filter(|index| example(&client, report.ids[*index]).1 == label_of("benign"))
        .count();
    assert_eq!(benign, 357); // scikit-learn's count
}

#[test]
fn scikit_learns_layout_errors() {
    let fixture = Fixture::new();
    let source = "app cells\nInput = [2]\nOutput = [2]\nlabels = [malignant, benign]";
    // A class index beyond the names.
    let path = fixture.write("bad_index.csv", "2,2,malignant,benign\n1,2,0\n3,4,2\n");
    let message = csv_error(&mut fixture.client(source), &path, &CsvOptions::default());
    assert!(
        message.contains(
            "line 3: column 3 (the class index): `2` is not a class index; the first line names 2 classes, so it is 0 to 1"
        ),
        "{message}"
    );
    // Fewer rows than the first line says.
    let path = fixture.write("short.csv", "3,2,malignant,benign\n1,2,0\n3,4,1\n");
    let message = csv_error(&mut fixture.client(source), &path, &CsvOptions::default());
    assert!(
        message.contains("the first line says 3 rows (scikit-learn's layout), but the file has 2; is it cut short?"),
        "{message}"
    );
    // A label column given for a file that has none.
    let path = fixture.write("ok.csv", "1,2,malignant,benign\n1,2,0\n");
    let message = csv_error(&mut fixture.client(source), &path, &label("target"));
    assert!(
        message.contains("leave out --label-column `target`"),
        "{message}"
    );
    // A feature count that is not the schema's.
    let path = fixture.write("wide.csv", "1,3,malignant,benign\n1,2,3,0\n");
    let message = csv_error(&mut fixture.client(source), &path, &CsvOptions::default());
    assert!(
        message.contains("the first line says each row has 3 features (scikit-learn's layout); this app's input is"),
        "{message}"
    );
}

#[test]
fn a_header_without_a_label_column_says_to_name_one() {
    let fixture = Fixture::new();
    let path = fixture.write(
        "iris.csv",
        "sepal_length,petal_width,species\n5.1,0.2,setosa\n",
    );
    let message = csv_error(&mut fixture.client(IRIS), &path, &CsvOptions::default());
    assert!(
        message.contains(
            "no label column was named: pass --label-column NAME, the column that holds each row's output; the header's columns are `sepal_length`, `petal_width`, `species`"
        ),
        "{message}"
    );
}

#[test]
fn a_missing_label_column_is_named_with_the_header_columns() {
    let fixture = Fixture::new();
    let path = fixture.write(
        "iris.csv",
        "sepal_length,petal_width,species\n5.1,0.2,setosa\n",
    );
    let error = feed_csv(&mut fixture.client(IRIS), &path, &label("kind")).unwrap_err();
    assert!(matches!(error, Error::Read(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(
            "the label column `kind` is not in the header; its columns are `sepal_length`, `petal_width`, `species`"
        ),
        "{message}"
    );
}

#[test]
fn missing_values_are_refused_with_their_line_and_column() {
    let fixture = Fixture::new();
    let path = fixture.write(
        "iris.csv",
        "sepal_length,petal_width,species\n5.1,0.2,setosa\n5.0,,setosa\nNA,0.1,setosa\n4.9,0.3,?\n4.8,NaN,setosa\n",
    );
    let message = csv_error(&mut fixture.client(IRIS), &path, &label("species"));
    for expected in [
        "4 of 5 line(s) are bad",
        "line 3: column `petal_width`: the value is missing; fill it in or remove the row",
        "line 4: column `sepal_length`: the value is missing (`NA`); fill it in or remove the row",
        "line 5: column `species`: the value is missing (`?`); fill it in or remove the row",
        "line 6: column `petal_width`: the value is missing (`NaN`); fill it in or remove the row",
    ] {
        assert!(message.contains(expected), "{expected}\n{message}");
    }
}

#[test]
fn values_that_are_not_finite_numbers_are_refused() {
    let fixture = Fixture::new();
    let path = fixture.write(
        "v.csv",
        "x1,x2,x3,class\n1,two,3,a\n1,inf,3,a\n1,1e39,3,a\n",
    );
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    for expected in [
        "line 2: column `x2`: `two` is not a number",
        "line 3: column `x2`: `inf` is not a finite number",
        "line 4: column `x2`: `1e39` is not a finite number (or too large for 32 bits)",
    ] {
        assert!(message.contains(expected), "{expected}\n{message}");
    }
}

#[test]
fn ragged_rows_are_refused_with_their_counts() {
    let fixture = Fixture::new();
    let path = fixture.write("v.csv", "x1,x2,x3,class\n1,2,3,a\n1,2,a\n1,2,3,4,a\n");
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    assert!(
        message.contains(
            "line 3: the row has 3 cells, the header 4 columns; every row needs one value per column (quote a value that holds the separator)"
        ),
        "{message}"
    );
    assert!(
        message.contains("line 4: the row has 5 cells, the header 4 columns"),
        "{message}"
    );
}

#[test]
fn skip_bad_stores_the_good_rows_and_reports_the_bad_ones() {
    let fixture = Fixture::new();
    let mut client = fixture.client(VECTOR);
    let path = fixture.write("v.csv", "x1,x2,x3,class\n1,2,3,a\n1,,3,a\n4,5,6,b\n");
    let options = FeedOptions {
        skip_bad: true,
        ..FeedOptions::default()
    };
    let report = client
        .feed_csv(&path, &label("class"), &options, &mut |_| {})
        .unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(report.skipped.count(), 1);
    assert_eq!(report.skipped.kept()[0].line, 3);
    assert_eq!(
        report.skipped.kept()[0].to_string(),
        "line 3: column `x2`: the value is missing; fill it in or remove the row"
    );
}

#[test]
fn a_wrong_number_of_input_columns_lists_them() {
    let fixture = Fixture::new();
    let path = fixture.write("v.csv", "x1,x2,class\n1,2,a\n");
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    assert!(
        message.contains(
            "expected 3 input columns besides the label column `class`, found 2: `x1`, `x2`"
        ),
        "{message}"
    );
}

#[test]
fn a_header_wider_than_the_schema_is_refused_before_its_rows() {
    let fixture = Fixture::new();
    let header: Vec<String> = (0..100_000).map(|index| format!("c{index}")).collect();
    let path = fixture.write("wide.csv", &format!("{},class\n", header.join(",")));
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    assert!(
        message.contains(
            "the header has 100001 columns; this app's input [3] and a label column take at most 4"
        ),
        "{message}"
    );
}

#[test]
fn by_name_a_missing_field_or_an_extra_column_is_an_error() {
    let fixture = Fixture::new();
    let path = fixture.write("missing.csv", "sepal_length,species\n5.1,setosa\n");
    let message = csv_error(&mut fixture.client(IRIS), &path, &label("species"));
    assert!(
        message.contains("takes one column per field, by name; the header has none for `petal_width`; its columns are `sepal_length`, `species`"),
        "{message}"
    );
    let path = fixture.write(
        "extra.csv",
        "id,sepal_length,petal_width,species\n1,5.1,0.2,setosa\n",
    );
    let message = csv_error(&mut fixture.client(IRIS), &path, &label("species"));
    assert!(
        message.contains(
            "the header also has `id`: remove it (extra columns are refused, not ignored)"
        ),
        "{message}"
    );
    let path = fixture.write(
        "twice.csv",
        "species,sepal_length,petal_width,species\nsetosa,5.1,0.2,setosa\n",
    );
    let message = csv_error(&mut fixture.client(IRIS), &path, &label("species"));
    assert!(
        message
            .contains("the header names the column `species` twice (columns 1 and 4); rename one"),
        "{message}"
    );
}

#[test]
fn unknown_labels_beyond_the_declared_ones_are_refused_by_line() {
    let fixture = Fixture::new();
    let path = fixture.write("v.csv", "x1,x2,x3,class\n1,2,3,a\n1,2,3,c\n");
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    assert!(
        message
            .contains("line 3: field `output`: unknown label `c`; the declared labels are: a, b"),
        "{message}"
    );
}

#[test]
fn cells_may_hold_images_and_json_arrays_read_from_the_tables_folder() {
    let fixture = Fixture::new();
    let source = "app galaxies\ntype Input\n  image :: Tensor[4, 6, 3]\n  photometry :: Tensor[2]\nend\nOutput = [3]";
    std::fs::create_dir_all(fixture.path("data/pics")).unwrap();
    image::RgbImage::from_pixel(6, 4, image::Rgb([255, 0, 0]))
        .save(fixture.path("data/pics/a.png"))
        .unwrap();
    let path = fixture.write(
        "data/galaxies.csv",
        "image,photometry,kind\npics/a.png,\"[0.5, 1]\",spiral\n",
    );
    let mut client = fixture.client(source);
    let report = feed_csv(&mut client, &path, &label("kind")).unwrap();
    let (input, output) = example(&client, report.ids[0]);
    assert_eq!(input[0][..3], [1.0, 0.0, 0.0]);
    assert_eq!(input[1], [0.5, 1.0]);
    assert_eq!(output, label_of("spiral"));
    // A number where the field has several values, a missing file, a JSON array of the wrong shape.
    let path = fixture.write(
        "data/bad.csv",
        "image,photometry,kind\npics/a.png,3,spiral\npics/none.png,\"[1, 2]\",spiral\npics/a.png,\"[1, 2, 3]\",spiral\n",
    );
    let message = csv_error(&mut Fixture::new().client(source), &path, &label("kind"));
    for expected in [
        "line 2: column `photometry`: one number, but the field `photometry` is",
        "line 3: column `image`: pics/none.png: cannot read",
        "line 4: column `photometry`: ",
    ] {
        assert!(message.contains(expected), "{expected}\n{message}");
    }
}

#[test]
fn a_table_of_image_paths_feeds_an_image_app() {
    let fixture = Fixture::new();
    image::RgbImage::from_pixel(6, 4, image::Rgb([0, 0, 255]))
        .save(fixture.path("b.png"))
        .unwrap();
    let path = fixture.write("files.csv", "file,label\nb.png,sky\n");
    let mut client = fixture.client(PICS);
    let report = feed_csv(&mut client, &path, &label("label")).unwrap();
    let (input, output) = example(&client, report.ids[0]);
    assert_eq!(input[0][..3], [0.0, 0.0, 1.0]);
    assert_eq!(output, label_of("sky"));
}

#[test]
fn recursive_inputs_and_missing_files_are_refused() {
    let fixture = Fixture::new();
    let chain = "app series\ntype Input\n  reading :: Tensor[2]\n  next :: Nullable{Input}\nend\nOutput = [2]";
    let path = fixture.write("c.csv", "reading,label\n\"[1, 2]\",a\n");
    let message = csv_error(&mut fixture.client(chain), &path, &label("label"));
    assert!(
        message
            .contains("is recursive (field `next`); a table row cannot hold it: feed JSON Lines"),
        "{message}"
    );
    let message = csv_error(
        &mut fixture.client(VECTOR),
        &fixture.path("none.csv"),
        &label("class"),
    );
    assert!(message.contains("none.csv"), "{message}");
    let message = csv_error(
        &mut fixture.client(VECTOR),
        fixture.dir.path(),
        &label("class"),
    );
    assert!(
        message.contains("is a folder; give a CSV or TSV file"),
        "{message}"
    );
    let path = fixture.write("empty.csv", "");
    let message = csv_error(&mut fixture.client(VECTOR), &path, &label("class"));
    assert!(
        message.contains("is empty; a table starts with a header row"),
        "{message}"
    );
}

/// A tiny PNG or JPEG (by the extension of `name`) of one colour.
fn write_image(path: &Path, colour: [u8; 3]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::RgbImage::from_pixel(6, 4, image::Rgb(colour))
        .save(path)
        .unwrap();
}

fn feed_folder(client: &mut Client, dir: &Path, skip_bad: bool) -> Result<FeedReport, Error> {
    let options = FeedOptions {
        skip_bad,
        ..FeedOptions::default()
    };
    client.feed_image_folder(dir, &options, &mut |_| {})
}

#[test]
fn an_image_folder_feeds_one_example_per_image_labelled_by_its_folder() {
    let fixture = Fixture::new();
    let root = fixture.path("images");
    write_image(&root.join("dog/2.jpg"), [0, 0, 255]);
    write_image(&root.join("cat/b.png"), [0, 255, 0]);
    write_image(&root.join("cat/a.PNG"), [255, 0, 0]);
    std::fs::write(root.join("cat/notes.txt"), "not an image").unwrap();
    std::fs::write(root.join("README"), "beside the classes").unwrap();
    std::fs::create_dir_all(root.join("cat/nested")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/proc/self/environ", root.join("cat/escape.png")).unwrap();
        std::os::unix::fs::symlink("/proc", root.join("proc")).unwrap();
    }
    let mut client = fixture.client(PICS);
    let mut seen = 0;
    let report = client
        .feed_image_folder(&root, &FeedOptions::default(), &mut |images| seen = images)
        .unwrap();
    assert_eq!(report.added, 3);
    assert_eq!(seen, 3);
    assert_eq!(
        report.new_labels,
        [("cat".to_owned(), 0), ("dog".to_owned(), 1)]
    );
    // Sorted: cat/a.PNG, cat/b.png, dog/2.jpg.
    let firsts: Vec<(Vec<f32>, CheckedOutput)> = report
        .ids
        .iter()
        .map(|id| {
            let (input, output) = example(&client, *id);
            (input[0][..3].to_vec(), output)
        })
        .collect();
    assert_eq!(firsts[0], (vec![1.0, 0.0, 0.0], label_of("cat")));
    assert_eq!(firsts[1], (vec![0.0, 1.0, 0.0], label_of("cat")));
    assert_eq!(firsts[2].1, label_of("dog"));
    let not_regular = if cfg!(unix) { 3 } else { 1 };
    assert_eq!(
        report.ignored_files,
        IgnoredFiles {
            not_images: 1,
            not_regular,
            outside_classes: 1,
        }
    );
}

#[test]
fn an_unreadable_image_is_a_bad_line_naming_the_file() {
    let fixture = Fixture::new();
    let root = fixture.path("images");
    write_image(&root.join("cat/a.png"), [255, 0, 0]);
    std::fs::write(root.join("cat/broken.png"), "not a PNG").unwrap();
    let mut client = fixture.client(PICS);
    let message = feed_folder(&mut client, &root, false)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("1 of 2 image(s) are bad; nothing was stored"),
        "{message}"
    );
    assert!(
        message.contains("image 2: cat/broken.png: not a readable image"),
        "{message}"
    );
    assert_eq!(total(&client), 0);
    let report = feed_folder(&mut client, &root, true).unwrap();
    assert_eq!(report.added, 1);
    assert_eq!(report.skipped.count(), 1);
}

#[test]
fn an_image_folder_needs_an_image_app_with_labels_and_class_folders() {
    let fixture = Fixture::new();
    let root = fixture.path("images");
    write_image(&root.join("cat/a.png"), [255, 0, 0]);
    let message = feed_folder(&mut fixture.client(VECTOR), &root, false)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("an image folder feeds an app whose input is one image tensor ([A,B,3], [A,B,1] or [A,B]); this app's input is [3]"),
        "{message}"
    );
    let message = feed_folder(
        &mut fixture.client("app denoise\nInput = [4, 6, 3]\nOutput = [1]"),
        &root,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        message
            .contains("labels each image by its sub-folder; this app's output [1] takes no labels"),
        "{message}"
    );
    let message = feed_folder(&mut fixture.client(PICS), &root.join("cat"), false)
        .unwrap_err()
        .to_string();
    assert!(message.contains("has no sub-folders"), "{message}");
    let message = feed_folder(&mut fixture.client(PICS), &root.join("cat/a.png"), false)
        .unwrap_err()
        .to_string();
    assert!(message.contains("is not a folder"), "{message}");
    // More classes than the output has room for: the label check of every feed.
    let three = fixture.path("three");
    for class in ["a", "b", "c", "d"] {
        write_image(&three.join(class).join("1.png"), [0, 0, 0]);
    }
    let message = feed_folder(&mut fixture.client(PICS), &three, false)
        .unwrap_err()
        .to_string();
    assert!(message.contains("image 4: field `output`:"), "{message}");
}
