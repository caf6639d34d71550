//! Image folders laid out by class (torchvision's ImageFolder): `DIR/LABEL/*.png`, one example
//! per image, labelled by the name of its sub-folder (`Client::feed_image_folder`,
//! `<app> feed --images DIR`).
//!
//! - The app's input must be one image tensor (`[A,B,3]`, `[A,B,1]` or `[A,B]`) and its output
//!   must take labels; else the whole feed is refused, saying what the schema wants.
//! - Images are read by the feed lines' loader (`read_input_file`: PNG / JPEG by extension,
//!   resized and scaled as `image.rs` says); an unreadable one is a
//!   [`LineError`](super::LineError) (unit `image`, its 1-based position in the feed) naming the
//!   file, so `skip_bad` and the capped error list work as for lines. Labels go through the feed's
//!   one label check (declared labels, or new ones up to the output's size).
//! - Only regular files and real folders are read: every entry is looked at with
//!   `symlink_metadata`, so a symbolic link (to `/proc`, to another tree) is never followed, and it
//!   is passed over and counted ([`IgnoredFiles`]), as are files that are not images by their
//!   extension, folders inside a class folder (not walked), and files beside the class folders.
//! - Order: class folders by name, then each one's files by name (bytes): the same feed every
//!   time. Only one folder's file names are held at a time, never the images.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use easeml_schema::Schema;

use super::{
    CheckedExample, CheckedOutput, describe_type, is_image_name, read_input_file,
    single_tensor_dims,
};
use crate::{Error, Result};

/// What an image-folder feed passed over without reading (all zero for other feeds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IgnoredFiles {
    /// Files in class folders that are not images by their extension (`.png`, `.jpg`, `.jpeg`).
    pub not_images: usize,
    /// Entries that are neither a regular file nor a real folder where one was looked for:
    /// symbolic links (never followed), devices, FIFOs, and folders inside a class folder.
    pub not_regular: usize,
    /// Files beside the class folders, in the top folder itself.
    pub outside_classes: usize,
}

impl IgnoredFiles {
    /// How many entries were passed over in all.
    pub fn total(&self) -> usize {
        self.not_images + self.not_regular + self.outside_classes
    }
}

/// An image folder, its class folders listed and its schema checked, its images not read yet.
pub(crate) struct ImageFolder {
    dir: PathBuf,
    /// The class folders' names (the labels), in order.
    classes: Vec<String>,
    ignored: IgnoredFiles,
}

fn folder_error(dir: &Path, kind: std::io::ErrorKind, message: impl std::fmt::Display) -> Error {
    Error::Read(std::io::Error::new(
        kind,
        format!("{}: {message}", dir.display()),
    ))
}

/// The entries of a folder, sorted by name (bytes).
fn sorted_entries(dir: &Path) -> Result<Vec<OsString>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| folder_error(dir, error.kind(), format!("cannot list: {error}")))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|error| folder_error(dir, error.kind(), format!("cannot list: {error}")))?;
        names.push(entry.file_name());
    }
    names.sort();
    Ok(names)
}

impl ImageFolder {
    /// Checks that `schema` takes images and labels, and lists `dir`'s class folders.
    pub(crate) fn open(dir: &Path, schema: &Schema) -> Result<ImageFolder> {
        let invalid = std::io::ErrorKind::InvalidInput;
        let takes_image = single_tensor_dims(&schema.input)
            .and_then(super::image::image_shape)
            .is_some();
        if !takes_image {
            return Err(folder_error(
                dir,
                invalid,
                format!(
                    "an image folder feeds an app whose input is one image tensor ([A,B,3], [A,B,1] or [A,B]); this app's input is {}: feed a file of lines or a CSV instead",
                    describe_type(&schema.input)
                ),
            ));
        }
        if schema.label_capacity().is_none() {
            return Err(folder_error(
                dir,
                invalid,
                format!(
                    "an image folder labels each image by its sub-folder; this app's output {} takes no labels",
                    describe_type(&schema.output)
                ),
            ));
        }
        let metadata = std::fs::metadata(dir)
            .map_err(|error| folder_error(dir, error.kind(), format!("cannot read: {error}")))?;
        if !metadata.is_dir() {
            return Err(folder_error(
                dir,
                invalid,
                "is not a folder; --images takes a folder with one sub-folder of images per class (DIR/cat/1.png, DIR/dog/2.jpg)",
            ));
        }
        let mut classes = Vec::new();
        let mut ignored = IgnoredFiles::default();
        for name in sorted_entries(dir)? {
            let path = dir.join(&name);
            let metadata = std::fs::symlink_metadata(&path).map_err(|error| {
                folder_error(&path, error.kind(), format!("cannot read: {error}"))
            })?;
            if metadata.is_dir() {
                let label = name.into_string().map_err(|name| {
                    folder_error(
                        &dir.join(name),
                        invalid,
                        "the folder's name (a label) is not UTF-8 text; rename it",
                    )
                })?;
                classes.push(label);
            } else if metadata.is_file() {
                ignored.outside_classes += 1;
            } else {
                ignored.not_regular += 1;
            }
        }
        if classes.is_empty() {
            return Err(folder_error(
                dir,
                invalid,
                "has no sub-folders; lay the images out as one sub-folder per class, named by its label (DIR/cat/1.png, DIR/dog/2.jpg)",
            ));
        }
        Ok(ImageFolder {
            dir: dir.to_owned(),
            classes,
            ignored,
        })
    }

    /// Reads every image, handing each to `each` with its 1-based position (checked, or why
    /// not), and `progress` the images read so far; returns what was passed over.
    pub(crate) fn read_images(
        self,
        schema: &Schema,
        each: &mut dyn FnMut(usize, std::result::Result<CheckedExample, String>) -> Result<()>,
        progress: &mut dyn FnMut(usize),
    ) -> Result<IgnoredFiles> {
        let mut ignored = self.ignored;
        let mut position = 0;
        for label in &self.classes {
            let folder = self.dir.join(label);
            for name in sorted_entries(&folder)? {
                let path = folder.join(&name);
                let shown = Path::new(label).join(&name).display().to_string();
                let metadata = std::fs::symlink_metadata(&path).map_err(|error| {
                    folder_error(&path, error.kind(), format!("cannot read: {error}"))
                })?;
                if !metadata.is_file() {
                    ignored.not_regular += 1;
                    continue;
                }
                if !is_image_name(&shown) {
                    ignored.not_images += 1;
                    continue;
                }
                position += 1;
                let checked =
                    read_input_file(&schema.input, &path, &shown).map(|values| CheckedExample {
                        input: easeml_object::Object::single(values),
                        output: CheckedOutput::Label(label.clone()),
                    });
                each(position, checked)?;
                progress(position);
            }
        }
        Ok(ignored)
    }
}
