//! The storage form of a checked object: a compact, documented binary encoding.
//!
//! ```text
//! blob   := magic node
//! magic  := "EMX1"                                   4 bytes: format "easeml example", version 1
//! node   := tensor* link*                            in the type's declaration order
//! tensor := f32 * element_count                      little-endian IEEE 754, row-major
//! link   := 0x00                                     null
//!         | 0x01 node                                the child object (pre-order)
//! ```
//! Shapes are not repeated in the blob: they are the schema's, whose canonical system type is stored
//! with the app. A `[32,32,3]` image is therefore 4 + 12,288 bytes. A chain of n records of `[10]` is
//! 4 + n * (40 + 1) bytes. Decoding checks the length, the link bytes, finiteness and the depth limit,
//! so a corrupt or truncated blob is an error, never a panic.

use easeml_schema::{DataType, FieldKind};

use crate::object::{MAX_DEPTH, Object, check_tensor_values};
use crate::{Error, Result};

/// The 4-byte header of every encoded object.
pub const MAGIC: &[u8; 4] = b"EMX1";

/// Encodes a checked object of `data_type`. The object must have passed [`Object::check`] (or come
/// from [`crate::object_from_json`]); the encoding follows its tensors and children as they are.
pub fn encode(object: &Object) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + 4 * values_in(object));
    bytes.extend_from_slice(MAGIC);
    encode_node(object, &mut bytes);
    bytes
}

fn values_in(object: &Object) -> usize {
    object
        .records()
        .map(|record| record.tensors.iter().map(Vec::len).sum::<usize>())
        .sum()
}

fn encode_node(object: &Object, bytes: &mut Vec<u8>) {
    for tensor in &object.tensors {
        for value in tensor {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    for child in &object.children {
        match child {
            None => bytes.push(0),
            Some(child) => {
                bytes.push(1);
                crate::deep_json::with_deep_stack(|| encode_node(child, bytes));
            }
        }
    }
}

/// Decodes a blob written by [`encode`] for an object of `data_type`.
pub fn decode(data_type: &DataType, bytes: &[u8]) -> Result<Object> {
    let Some(body) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return Err(Error::Decode(format!(
            "the blob does not start with {:?} (found {:?})",
            String::from_utf8_lossy(MAGIC),
            String::from_utf8_lossy(&bytes[..bytes.len().min(4)])
        )));
    };
    let mut reader = Reader {
        bytes: body,
        offset: 0,
    };
    let object = decode_node(data_type, &mut reader, "object", 1)?;
    if reader.offset != body.len() {
        return Err(Error::Decode(format!(
            "{} unexpected trailing byte(s) after the object",
            body.len() - reader.offset
        )));
    }
    Ok(object)
}

/// Reads the bytes a model predicted for an object of `data_type` (the general auto-encoder writes
/// the encoding bit by bit) as an object, never failing, so that every prediction answers with a
/// value of the output type: the first four bytes stand for the magic and are not checked, bytes
/// missing at the end read as zero, a value that is not finite reads as 0, a link byte with its
/// low bit set is a child (a model gets one bit right, not all eight), links past the end of the
/// bytes or below [`MAX_DEPTH`] are null, and trailing bytes are ignored. Every record but the
/// root takes a link byte that is present, so the object has at most `bytes.len()` records.
pub fn decode_prediction(data_type: &DataType, bytes: &[u8]) -> Object {
    let body = bytes.get(MAGIC.len()..).unwrap_or_default();
    let mut offset = 0;
    decode_predicted_node(data_type, body, &mut offset, 1)
}

fn decode_predicted_node(
    data_type: &DataType,
    bytes: &[u8],
    offset: &mut usize,
    depth: usize,
) -> Object {
    let mut object = Object::default();
    for tensor in data_type.tensors() {
        let values = (0..tensor.element_count())
            .map(|_| {
                let mut raw = [0u8; 4];
                for byte in &mut raw {
                    *byte = next_byte(bytes, offset).unwrap_or(0);
                }
                let value = f32::from_le_bytes(raw);
                if value.is_finite() { value } else { 0.0 }
            })
            .collect();
        object.tensors.push(values);
    }
    for _ in data_type.recursive_names() {
        let present = next_byte(bytes, offset).is_some_and(|tag| tag & 1 == 1) && depth < MAX_DEPTH;
        let child = present.then(|| {
            Box::new(crate::deep_json::with_deep_stack(|| {
                decode_predicted_node(data_type, bytes, offset, depth + 1)
            }))
        });
        object.children.push(child);
    }
    object
}

fn next_byte(bytes: &[u8], offset: &mut usize) -> Option<u8> {
    let byte = bytes.get(*offset).copied();
    *offset = offset.saturating_add(1);
    byte
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize, what: &str) -> Result<&[u8]> {
        let end = self
            .offset
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::Decode(format!(
                "truncated: {what} needs {count} byte(s) at offset {}, the blob has {} left",
                self.offset + 4,
                self.bytes.len() - self.offset
            )));
        };
        let slice = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(slice)
    }
}

fn decode_node(
    data_type: &DataType,
    reader: &mut Reader<'_>,
    path: &str,
    depth: usize,
) -> Result<Object> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep {
            field: path.to_owned(),
            limit: MAX_DEPTH,
        });
    }
    let mut object = Object::default();
    for field in &data_type.fields {
        if let FieldKind::Tensor(tensor) = &field.kind {
            let field_path = format!("{path}.{}", field.name);
            let count = tensor.element_count() as usize;
            let raw = reader.take(count.saturating_mul(4), &format!("field `{field_path}`"))?;
            let values: Vec<f32> = raw
                .chunks_exact(4)
                .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
                .collect();
            check_tensor_values(&field_path, &tensor.dims, &values)?;
            object.tensors.push(values);
        }
    }
    for name in data_type.recursive_names() {
        let field_path = format!("{path}.{name}");
        let tag = reader.take(1, &format!("the link `{field_path}`"))?[0];
        let child = match tag {
            0 => None,
            1 => Some(Box::new(crate::deep_json::with_deep_stack(|| {
                decode_node(data_type, reader, &field_path, depth + 1)
            })?)),
            other => {
                return Err(Error::Decode(format!(
                    "the link `{field_path}` has tag {other}, expected 0 (null) or 1"
                )));
            }
        };
        object.children.push(child);
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use easeml_schema::{Field, Tensor};

    use super::*;

    fn chain() -> DataType {
        DataType {
            fields: vec![
                Field {
                    name: "reading".to_owned(),
                    kind: FieldKind::Tensor(Tensor { dims: vec![2] }),
                },
                Field {
                    name: "next".to_owned(),
                    kind: FieldKind::Recursive,
                },
            ],
        }
    }

    fn three_records() -> Object {
        let leaf = Object {
            tensors: vec![vec![5.0, 6.0]],
            children: vec![None],
        };
        let middle = Object {
            tensors: vec![vec![3.0, 4.0]],
            children: vec![Some(Box::new(leaf))],
        };
        Object {
            tensors: vec![vec![1.0, 2.0]],
            children: vec![Some(Box::new(middle))],
        }
    }

    #[test]
    fn round_trip_and_size() {
        let object = three_records();
        let bytes = encode(&object);
        assert_eq!(bytes.len(), 4 + 3 * (8 + 1));
        assert_eq!(&bytes[..8], b"EMX1\0\0\x80\x3f");
        assert_eq!(decode(&chain(), &bytes).unwrap(), object);
    }

    #[test]
    fn corrupt_blobs_are_errors() {
        let bytes = encode(&three_records());
        assert_eq!(
            decode(&chain(), &bytes[..bytes.len() - 3])
                .unwrap_err()
                .to_string(),
            "encoded example: truncated: field `object.next.next.reading` needs 8 byte(s) at offset 22, the blob has 6 left"
        );
        let mut bad_tag = bytes.clone();
        bad_tag[12] = 7;
        assert_eq!(
            decode(&chain(), &bad_tag).unwrap_err().to_string(),
            "encoded example: the link `object.next` has tag 7, expected 0 (null) or 1"
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            decode(&chain(), &trailing).unwrap_err().to_string(),
            "encoded example: 1 unexpected trailing byte(s) after the object"
        );
        assert!(decode(&chain(), b"PNG!").is_err());
        let mut nan = bytes;
        nan[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(matches!(
            decode(&chain(), &nan),
            Err(Error::NotFinite { .. })
        ));
    }

    #[test]
    fn predicted_bytes_always_read_as_an_object_of_the_type() {
        let object = three_records();
        let bytes = encode(&object);
        assert_eq!(decode_prediction(&chain(), &bytes), object);
        // Any link byte with its low bit set is a child; trailing bytes are ignored.
        let mut fuzzy = bytes.clone();
        fuzzy[12] = 0xFF;
        fuzzy.extend_from_slice(b"junk");
        assert_eq!(decode_prediction(&chain(), &fuzzy), object);
        // Missing bytes read as zero: the values as 0, the links as null.
        let cut = decode_prediction(&chain(), &bytes[..10]);
        assert_eq!(cut.tensors, vec![vec![1.0, 0.0]]);
        assert_eq!(cut.children, vec![None]);
        assert_eq!(
            decode_prediction(&chain(), b""),
            Object {
                tensors: vec![vec![0.0, 0.0]],
                children: vec![None],
            }
        );
        // A value that is not finite reads as 0; the result passes the object check.
        let mut nan = bytes;
        nan[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
        let read = decode_prediction(&chain(), &nan);
        assert_eq!(read.tensors[0], vec![0.0, 2.0]);
        read.check(&chain(), "output").unwrap();
        // All links set: 100 records in the bytes and one read past their end, all values 0.
        let all_ones = vec![0xFF; 4 + 9 * 100];
        let deep = decode_prediction(&chain(), &all_ones);
        assert_eq!(deep.record_count(), 101);
        deep.check(&chain(), "output").unwrap();
        let deepest = decode_prediction(&chain(), &vec![0xFF; 4 + 9 * (MAX_DEPTH + 10)]);
        assert_eq!(deepest.record_count(), MAX_DEPTH);
        deepest.check(&chain(), "output").unwrap();
    }
}
