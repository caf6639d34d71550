//! Image inputs: PNG or JPEG decoded with the `image` crate, converted to RGB (`[A,B,3]`) or grey
//! (`[A,B,1]`, `[A,B]`), resized to the declared A rows by B columns (triangle filter) when the sizes
//! differ, and scaled from 0..255 to [0, 1]. Values are row-major: row, column, channel.

use std::path::Path;

use ::image::imageops::FilterType;

/// Loads `path` (shown as `shown` in errors) as a tensor of shape `dims`.
pub(super) fn load(path: &Path, shown: &str, dims: &[u64]) -> Result<Vec<f32>, String> {
    let (rows, columns, channels) = match *dims {
        [rows, columns, 3] => (rows, columns, 3),
        [rows, columns, 1] | [rows, columns] => (rows, columns, 1),
        _ => {
            return Err(format!(
                "{shown}: an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]; this app's input is {}",
                easeml_object::format_dims(dims)
            ));
        }
    };
    let (width, height) = match (u32::try_from(columns), u32::try_from(rows)) {
        (Ok(width), Ok(height)) => (width, height),
        _ => return Err(format!("{shown}: the declared image size is too large")),
    };
    let reader = ::image::ImageReader::open(path)
        .map_err(|error| format!("{shown}: cannot read: {error}"))?
        .with_guessed_format()
        .map_err(|error| format!("{shown}: cannot read: {error}"))?;
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
