//! A small `.npy` reader (NumPy format versions 1-3): C-order arrays of floats, integers or booleans,
//! converted to `f32`. The shape must equal the declared one.

use std::path::Path;

use easeml_object::{Error as ExampleError, check_tensor_values, format_dims};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The longest header read: NumPy writes headers of a few hundred bytes (version 1 caps them at
/// 64 KiB); a longer one is not a `.npy` file this reader takes.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// The most bytes one element of a supported type takes (`f8`, `i8`, `u8`).
const MAX_ELEMENT_BYTES: u64 = 8;

/// Reads `path` (shown as `shown` in errors) as the `side` (`input`/`output`) tensor of shape `dims`.
///
/// A file larger than an array of the declared shape can be (the header's limit plus 8 bytes an
/// element) is refused by its size before anything is read; only regular files on a disk are read
/// (`super::read_data_file`).
pub(super) fn load(path: &Path, shown: &str, side: &str, dims: &[u64]) -> Result<Vec<f32>, String> {
    let elements = dims.iter().product::<u64>();
    let limit = elements
        .saturating_mul(MAX_ELEMENT_BYTES)
        .saturating_add(12 + MAX_HEADER_BYTES);
    let what = format!(
        "any .npy file of this app's {side} shape {}",
        format_dims(dims)
    );
    let bytes = super::read_data_file(path, shown, limit, &what)?;
    let values = parse(&bytes, side, dims).map_err(|message| format!("{shown}: {message}"))?;
    Ok(values)
}

fn parse(bytes: &[u8], side: &str, dims: &[u64]) -> Result<Vec<f32>, String> {
    if !bytes.starts_with(MAGIC) {
        return Err("not a .npy file (it does not start with \\x93NUMPY)".to_owned());
    }
    let truncated_header = || "truncated: the file ends inside the .npy header".to_owned();
    let major = *bytes.get(6).ok_or_else(truncated_header)?;
    let (header_len, header_start) = match major {
        1 => {
            let raw = bytes.get(8..10).ok_or_else(truncated_header)?;
            (usize::from(u16::from_le_bytes([raw[0], raw[1]])), 10)
        }
        2 | 3 => {
            let raw = bytes.get(8..12).ok_or_else(truncated_header)?;
            (
                u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize,
                12,
            )
        }
        other => return Err(format!("unsupported .npy format version {other}")),
    };
    let header_end = header_start + header_len;
    let header = bytes
        .get(header_start..header_end)
        .ok_or_else(truncated_header)?;
    let header =
        std::str::from_utf8(header).map_err(|_| "the .npy header is not text".to_owned())?;
    let descr = dict_value(header, "descr")
        .and_then(|value| {
            value
                .strip_prefix('\'')
                .and_then(|value| value.split('\'').next())
        })
        .ok_or_else(|| format!("the .npy header has no 'descr': {}", header.trim()))?;
    if dict_value(header, "fortran_order").is_some_and(|value| value.starts_with("True")) {
        return Err(
            "Fortran-order arrays are not supported; save with numpy.ascontiguousarray".to_owned(),
        );
    }
    let shape = parse_shape(header)?;
    let kind = ElementKind::parse(descr)?;
    let count = shape
        .iter()
        .try_fold(1usize, |product, dim| product.checked_mul(*dim))
        .ok_or_else(|| "the .npy shape is too large".to_owned())?;
    if shape.len() != dims.len() || shape.iter().zip(dims).any(|(a, b)| *a as u64 != *b) {
        return Err(ExampleError::Shape {
            field: side.to_owned(),
            expected: format_dims(dims),
            found: format_dims(&shape.iter().map(|dim| *dim as u64).collect::<Vec<_>>()),
        }
        .to_string());
    }
    let data = &bytes[header_end..];
    let needed = count.saturating_mul(kind.size);
    if data.len() < needed {
        return Err(format!(
            "truncated: the header says shape {} of '{descr}' ({needed} bytes of data), the file has {} bytes",
            format_dims(&shape),
            data.len()
        ));
    }
    if data.len() > needed {
        return Err(format!(
            "{} unexpected bytes after the array data",
            data.len() - needed
        ));
    }
    let values: Vec<f32> = data
        .chunks_exact(kind.size)
        .map(|raw| kind.read(raw))
        .collect();
    check_tensor_values(side, dims, &values).map_err(|error| error.to_string())?;
    Ok(values)
}

/// The text after `'key':` in a Python dict literal, trimmed at the start.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?;
    Some(rest.trim_start())
}

fn parse_shape(header: &str) -> Result<Vec<usize>, String> {
    let value = dict_value(header, "shape")
        .and_then(|value| value.strip_prefix('('))
        .and_then(|value| value.split(')').next())
        .ok_or_else(|| format!("the .npy header has no 'shape': {}", header.trim()))?;
    value
        .split(',')
        .map(str::trim)
        .filter(|dim| !dim.is_empty())
        .map(|dim| {
            dim.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| format!("the .npy shape has a bad dimension `{dim}`"))
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Numeric {
    Float,
    Signed,
    Unsigned,
    Bool,
}

#[derive(Debug, Clone, Copy)]
struct ElementKind {
    numeric: Numeric,
    size: usize,
    big_endian: bool,
}

impl ElementKind {
    fn parse(descr: &str) -> Result<ElementKind, String> {
        let unsupported = || {
            format!(
                "unsupported .npy dtype '{descr}' (supported: float16/32/64, int8-64, uint8-64, bool)"
            )
        };
        let mut chars = descr.chars();
        let order = chars.next().ok_or_else(unsupported)?;
        let big_endian = match order {
            '<' | '|' | '=' => false,
            '>' => true,
            _ => return Err(unsupported()),
        };
        let numeric = match chars.next() {
            Some('f') => Numeric::Float,
            Some('i') => Numeric::Signed,
            Some('u') => Numeric::Unsigned,
            Some('b') => Numeric::Bool,
            _ => return Err(unsupported()),
        };
        let size: usize = chars.as_str().parse().map_err(|_| unsupported())?;
        let valid = match numeric {
            Numeric::Float => matches!(size, 2 | 4 | 8),
            Numeric::Signed | Numeric::Unsigned => matches!(size, 1 | 2 | 4 | 8),
            Numeric::Bool => size == 1,
        };
        if !valid {
            return Err(unsupported());
        }
        Ok(ElementKind {
            numeric,
            size,
            big_endian,
        })
    }

    fn read(&self, raw: &[u8]) -> f32 {
        let mut buffer = [0u8; 8];
        buffer[..self.size].copy_from_slice(raw);
        if self.big_endian {
            buffer[..self.size].reverse();
        }
        let unsigned = u64::from_le_bytes(buffer);
        match (self.numeric, self.size) {
            (Numeric::Float, 2) => f16_to_f32(unsigned as u16),
            (Numeric::Float, 4) => f32::from_bits(unsigned as u32),
            (Numeric::Float, _) => f64::from_bits(unsigned) as f32,
            (Numeric::Signed, size) => {
                let shift = 64 - 8 * size as u32;
                ((unsigned << shift) as i64 >> shift) as f32
            }
            (Numeric::Unsigned, _) => unsigned as f32,
            (Numeric::Bool, _) => f32::from(u8::from(unsigned != 0)),
        }
    }
}

fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f32::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(exponent - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn integer_and_float_types_convert() {
        let data: Vec<u8> = [-2i16, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            parse(&npy("<i2", "(2,)", &data), "input", &[2]).unwrap(),
            [-2.0, 3.0]
        );
        let data: Vec<u8> = [1.5f64, -0.25]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        assert_eq!(
            parse(&npy(">f8", "(2,)", &data), "input", &[2]).unwrap(),
            [1.5, -0.25]
        );
        assert_eq!(
            parse(&npy("|u1", "(1, 2)", &[0, 255]), "input", &[1, 2]).unwrap(),
            [0.0, 255.0]
        );
        assert_eq!(
            parse(
                &npy("<f2", "(2,)", &[0x00, 0x3c, 0x00, 0xc0]),
                "input",
                &[2]
            )
            .unwrap(),
            [1.0, -2.0]
        );
        assert_eq!(
            parse(&npy("|b1", "(2,)", &[1, 0]), "input", &[2]).unwrap(),
            [1.0, 0.0]
        );
    }

    #[test]
    fn unsupported_dtypes_are_named() {
        assert_eq!(
            parse(&npy("<c8", "(1,)", &[0; 8]), "input", &[1]).unwrap_err(),
            "unsupported .npy dtype '<c8' (supported: float16/32/64, int8-64, uint8-64, bool)"
        );
    }
}
