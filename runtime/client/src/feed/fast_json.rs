//! A fast path for inline JSON tensors: parses a nested array straight into row-major `f32`s while
//! checking the declared shape, without building a `serde_json::Value` tree. Any problem returns
//! `None`, and the caller re-reads the token on the checked path, which names the problem exactly.

use std::fmt;

use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};

/// The nested array at the start of `text` when it has exactly shape `dims` and only finite values
/// that fit `f32`: its values and the rest of `text` after it.
///
/// Memory follows the text, never the declared shape: a number and its separator take at least two
/// bytes, so the array's text bounds how many values it can hold (a 6-byte line for an app that
/// declares 2^31 elements reserves 3 values, not 8 GiB).
pub(super) fn tensor_prefix<'t>(text: &'t str, dims: &[u64]) -> Option<(Vec<f32>, &'t str)> {
    let end = array_end(text)?;
    let declared = usize::try_from(dims.iter().product::<u64>()).ok()?;
    let mut values = Vec::with_capacity(declared.min(end / 2 + 1));
    let mut deserializer = serde_json::Deserializer::from_str(&text[..end]);
    Level {
        dims,
        values: &mut values,
    }
    .deserialize(&mut deserializer)
    .ok()?;
    deserializer.end().ok()?;
    Some((values, &text[end..]))
}

/// The byte index just after the bracket that closes the array at the start of `text`; `None` when
/// it holds strings (left to the checked path) or does not close.
fn array_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (index, byte) in text.bytes().enumerate() {
        match byte {
            b'[' => depth += 1,
            b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            b'"' | b'{' => return None,
            _ => {}
        }
    }
    None
}

/// One nesting level: an array of `dims[0]` elements of shape `dims[1..]`, or a number when `dims`
/// is empty.
struct Level<'v, 'd> {
    dims: &'d [u64],
    values: &'v mut Vec<f32>,
}

impl<'de> DeserializeSeed<'de> for Level<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.dims.is_empty() {
            deserializer.deserialize_f64(self)
        } else {
            deserializer.deserialize_seq(self)
        }
    }
}

impl<'de> Visitor<'de> for Level<'_, '_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a tensor")
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        let narrow = value as f32;
        if !self.dims.is_empty() || !narrow.is_finite() {
            return Err(E::custom("not a finite f32 here"));
        }
        self.values.push(narrow);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        self.visit_f64(value as f64)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        self.visit_f64(value as f64)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<(), A::Error> {
        let Some((&length, inner)) = self.dims.split_first() else {
            return Err(de::Error::custom("an array where a number belongs"));
        };
        let mut count = 0u64;
        while sequence
            .next_element_seed(Level {
                dims: inner,
                values: &mut *self.values,
            })?
            .is_some()
        {
            count += 1;
            if count > length {
                return Err(de::Error::custom("too many elements"));
            }
        }
        if count == length {
            Ok(())
        } else {
            Err(de::Error::custom("too few elements"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exact_shapes_only() {
        let (values, rest) = tensor_prefix("[[1, 2.5], [-3, 4e1]] cat", &[2, 2]).unwrap();
        assert_eq!(values, [1.0, 2.5, -3.0, 40.0]);
        assert_eq!(rest, " cat");
        assert!(tensor_prefix("[[1, 2], [3]] cat", &[2, 2]).is_none());
        assert!(tensor_prefix("[[1, 2], [3, 4], [5, 6]] cat", &[2, 2]).is_none());
        assert!(tensor_prefix("[[1, 2], [3, 1e39]] cat", &[2, 2]).is_none());
        assert!(tensor_prefix("[[1, 2], [3, \"a\"]] cat", &[2, 2]).is_none());
        assert!(tensor_prefix("[[1, 2], [3, 4] cat", &[2, 2]).is_none());
        assert!(tensor_prefix("[1, 2, 3, 4] cat", &[2, 2]).is_none());
    }

    #[test]
    fn reserves_by_the_text_not_the_declared_shape() {
        // Regression: `[1] a` for `Input = [2147483647]` reserved 8 GiB before the shape check.
        assert!(tensor_prefix("[1] a", &[2_147_483_647]).is_none());
        let end = array_end("[1, 2, 3]").unwrap();
        assert!(
            end / 2 + 1 >= 3,
            "the bound must fit every value the text can hold"
        );
        let (values, _) = tensor_prefix("[1,2,3] x", &[3]).unwrap();
        assert_eq!(values, [1.0, 2.0, 3.0]);
    }
}
