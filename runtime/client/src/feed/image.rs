//! Image inputs: PNG or JPEG decoded with the `image` crate, converted to RGB (`[A,B,3]`) or grey
//! (`[A,B,1]`, `[A,B]`), resized to the declared A rows by B columns (triangle filter) when the sizes
//! differ, and scaled from 0..255 to [0, 1]. Values are row-major: row, column, channel.
//!
//! Only regular files on a disk are read, none larger than the largest image accepted can be
//! stored in (`MAX_FILE_BYTES_PER_PIXEL` a pixel, plus `FILE_SLACK_BYTES`), and an image's header is
//! checked before it is decoded: a side more than 16 times the declared one (and over 4096 pixels)
//! is refused.

use std::io::Cursor;
use std::path::Path;

use ::image::imageops::FilterType;

/// An image may be at most this many times the declared size on each side (it is resized down)...
const MAX_SCALE: u32 = 16;

/// ... or this many pixels a side, whichever is larger.
const MIN_LIMIT: u32 = 4096;

/// The most bytes a pixel takes in an image file: 16-bit RGBA stored without compression.
const MAX_FILE_BYTES_PER_PIXEL: u64 = 8;

/// What an image file may hold besides its pixels (row filters, chunk and block headers, colour
/// profiles, metadata).
const FILE_SLACK_BYTES: u64 = 16 << 20;

/// The largest image side accepted for a declared side of `declared` pixels.
fn max_side(declared: u32) -> u32 {
    declared.saturating_mul(MAX_SCALE).max(MIN_LIMIT)
}

/// The rows, columns and channels (3: RGB, 1: grey) of an image tensor of shape `dims`: `[A,B,3]`,
/// `[A,B,1]` or `[A,B]`; `None` for any other shape.
pub(super) fn image_shape(dims: &[u64]) -> Option<(u64, u64, u8)> {
    match *dims {
        [rows, columns, 3] => Some((rows, columns, 3)),
        [rows, columns, 1] | [rows, columns] => Some((rows, columns, 1)),
        _ => None,
    }
}

/// Loads `path` (shown as `shown` in errors) as a tensor of shape `dims`.
pub(super) fn load(path: &Path, shown: &str, dims: &[u64]) -> Result<Vec<f32>, String> {
    let Some((rows, columns, channels)) = image_shape(dims) else {
        return Err(format!(
            "{shown}: an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]; this app's input is {}",
            easeml_object::format_dims(dims)
        ));
    };
    let (width, height) = match (u32::try_from(columns), u32::try_from(rows)) {
        (Ok(width), Ok(height)) => (width, height),
        _ => return Err(format!("{shown}: the declared image size is too large")),
    };
    let max_width = max_side(width);
    let max_height = max_side(height);
    let limit = (u64::from(max_width) * u64::from(max_height))
        .saturating_mul(MAX_FILE_BYTES_PER_PIXEL)
        .saturating_add(FILE_SLACK_BYTES);
    let what = format!("any image of at most {max_width}x{max_height} pixels");
    let bytes = super::read_data_file(path, shown, limit, &what)?;
    let mut file = Cursor::new(bytes);
    let cannot_read = |error: std::io::Error| format!("{shown}: cannot read: {error}");
    // The header's size is checked before anything is decoded: a 389 KB PNG can declare
    // 20000x20000 pixels (1.2 GB decoded). Then the same file is read again from its start.
    let (found_width, found_height) = ::image::ImageReader::new(&mut file)
        .with_guessed_format()
        .map_err(cannot_read)?
        .into_dimensions()
        .map_err(|error| format!("{shown}: not a readable image: {error}"))?;
    if found_width > max_width || found_height > max_height {
        return Err(format!(
            "{shown}: the image is {found_width}x{found_height} pixels; this app's input is {width}x{height}, and images larger than {max_width}x{max_height} ({MAX_SCALE} times the input, at least {MIN_LIMIT} pixels a side) are refused before decoding: resize it first"
        ));
    }
    file.set_position(0);
    let mut reader = ::image::ImageReader::new(file)
        .with_guessed_format()
        .map_err(cannot_read)?;
    let mut limits = ::image::Limits::default();
    limits.max_image_width = Some(max_width);
    limits.max_image_height = Some(max_height);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|error| format!("{shown}: not a readable image: {error}"))?;
    let bytes = if channels == 3 {
        let rgb = decoded.to_rgb8();
        if rgb.dimensions() == (width, height) {
            rgb.into_raw()
        } else {
            ::image::imageops::resize(&rgb, width, height, FilterType::Triangle).into_raw()
        }
    } else {
        let grey = decoded.to_luma8();
        if grey.dimensions() == (width, height) {
            grey.into_raw()
        } else {
            ::image::imageops::resize(&grey, width, height, FilterType::Triangle).into_raw()
        }
    };
    Ok(bytes
        .into_iter()
        .map(|byte| f32::from(byte) / 255.0)
        .collect())
}
