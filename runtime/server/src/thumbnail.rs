//! PNG thumbnails of image inputs (a single tensor field `[A,B,3]`, `[A,B,1]` or `[A,B]`) for the
//! refine page.

use std::io::Cursor;

use ::image::imageops::FilterType;
use ::image::{DynamicImage, GrayImage, ImageFormat, RgbImage};
use easeml_schema::{DataType, FieldKind};

/// The longest side of a thumbnail; smaller images keep their size (the page scales them up).
const MAX_SIDE: u32 = 128;

/// (rows, columns, channels) when `data_type` is an image.
pub(crate) fn image_shape(data_type: &DataType) -> Option<(u32, u32, u32)> {
    let [field] = data_type.fields.as_slice() else {
        return None;
    };
    let FieldKind::Tensor(tensor) = &field.kind else {
        return None;
    };
    let (rows, columns, channels) = match *tensor.dims.as_slice() {
        [rows, columns, 3] => (rows, columns, 3),
        [rows, columns, 1] | [rows, columns] => (rows, columns, 1),
        _ => return None,
    };
    Some((
        u32::try_from(rows).ok()?,
        u32::try_from(columns).ok()?,
        channels,
    ))
}

/// The PNG of one image input. Values in [0, 1] map to 0..255; an image with values outside that
/// range is stretched from its minimum to its maximum.
pub(crate) fn png(data_type: &DataType, values: &[f32]) -> Option<Vec<u8>> {
    let (rows, columns, channels) = image_shape(data_type)?;
    let (low, high) = values
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(low, high), &value| {
            (low.min(value), high.max(value))
        });
    let (offset, scale) = if low >= 0.0 && high <= 1.0 {
        (0.0, 255.0)
    } else if high > low {
        (low, 255.0 / (high - low))
    } else {
        (low, 0.0)
    };
    let bytes: Vec<u8> = values
        .iter()
        .map(|value| ((value - offset) * scale).round().clamp(0.0, 255.0) as u8)
        .collect();
    let image = if channels == 3 {
        DynamicImage::ImageRgb8(RgbImage::from_raw(columns, rows, bytes)?)
    } else {
        DynamicImage::ImageLuma8(GrayImage::from_raw(columns, rows, bytes)?)
    };
    let image = if rows.max(columns) > MAX_SIDE {
        let ratio = f64::from(MAX_SIDE) / f64::from(rows.max(columns));
        let width = ((f64::from(columns) * ratio).round() as u32).max(1);
        let height = ((f64::from(rows) * ratio).round() as u32).max(1);
        image.resize_exact(width, height, FilterType::Triangle)
    } else {
        image
    };
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, ImageFormat::Png).ok()?;
    Some(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_schema::{Field, Tensor};

    fn data_type(dims: &[u64]) -> DataType {
        DataType {
            fields: vec![Field {
                name: "x".to_owned(),
                kind: FieldKind::Tensor(Tensor {
                    dims: dims.to_vec(),
                }),
            }],
        }
    }

    #[test]
    fn thumbnails_of_every_image_shape() {
        for dims in [&[4, 6, 3][..], &[4, 6, 1], &[4, 6], &[300, 200, 3]] {
            let count: u64 = dims.iter().product();
            let values: Vec<f32> = (0..count).map(|i| (i % 7) as f32 / 7.0).collect();
            let bytes = png(&data_type(dims), &values).unwrap();
            let image = ::image::load_from_memory(&bytes).unwrap();
            let expected = if dims[0] == 300 { (85, 128) } else { (6, 4) };
            assert_eq!((image.width(), image.height()), expected, "{dims:?}");
        }
        assert!(png(&data_type(&[4, 6, 2]), &[0.0; 48]).is_none());
        assert!(png(&data_type(&[10]), &[0.0; 10]).is_none());
        // Values outside [0, 1] are stretched, not clipped to black and white.
        let bytes = png(&data_type(&[1, 3]), &[-10.0, 0.0, 10.0]).unwrap();
        let image = ::image::load_from_memory(&bytes).unwrap().to_luma8();
        assert_eq!(image.into_raw(), vec![0, 128, 255]);
    }
}
