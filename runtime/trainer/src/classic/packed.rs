//! A classic model's float buffers in its checkpoint state, packed (`#[serde(with = "packed")]`,
//! and [`rows`] for a list of buffers): the state is JSON (the
//! checkpoint's `extra`), and a buffer of `n` floats as a JSON array takes about 19 bytes a float
//! and a `serde_json::Value` node each when read back. k-NN and kernel ridge keep every training
//! row (41 images of 256x256x3 made a 157 MB state, 4.8 times the examples, and 5 s to read in a
//! debug build), so their buffers (and DTW 1-NN's series, MiniRocket's biases, standardization
//! and ridge weights) are written as one string, [`PREFIX`] and then the floats' little-endian
//! bytes in base64 (5.3 bytes a float, read at memory speed).
//!
//! Reading takes either form: the packed string, or the plain array that checkpoints written
//! before kept (and that a hand-written state may use). A string without the prefix, bad base64 or
//! a byte count that is not a whole number of floats is an error (the checkpoint is malformed).
//! An export writes plain arrays ([`unpacked`]): its `model.json` is for people and other tools.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// What starts a packed buffer: the element type and byte order, then base64.
pub const PREFIX: &str = "f32le-base64:";

/// Serializes `floats` packed (`#[serde(with = "packed")]`).
pub fn serialize<S: Serializer>(floats: &[f32], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&pack(floats))
}

/// Deserializes a packed string or a plain array of numbers.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
    deserializer.deserialize_any(FloatsVisitor)
}

/// `floats` as a packed string.
pub fn pack(floats: &[f32]) -> String {
    let mut bytes = Vec::with_capacity(floats.len() * 4);
    for value in floats {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    let mut text = String::with_capacity(PREFIX.len() + bytes.len().div_ceil(3) * 4);
    text.push_str(PREFIX);
    STANDARD.encode_string(&bytes, &mut text);
    text
}

/// The floats of a packed string; `Err` says what is wrong with it.
pub fn unpack(text: &str) -> Result<Vec<f32>, String> {
    let Some(encoded) = text.strip_prefix(PREFIX) else {
        return Err(format!(
            "a float buffer is a list of numbers or a string starting `{PREFIX}`"
        ));
    };
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|error| format!("a packed float buffer is not base64: {error}"))?;
    if bytes.len() % 4 != 0 {
        return Err(format!(
            "a packed float buffer has {} bytes, not a whole number of 4-byte floats",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect())
}

/// `state` with every packed buffer in it (at any depth) written as a plain array of numbers.
pub fn unpacked(mut state: serde_json::Value) -> serde_json::Value {
    unpack_in_place(&mut state);
    state
}

fn unpack_in_place(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) if text.starts_with(PREFIX) => {
            if let Ok(floats) = unpack(text) {
                *value = floats.into_iter().map(serde_json::Value::from).collect();
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unpack_in_place),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(unpack_in_place),
        _ => {}
    }
}

/// A list of float buffers, each packed (`#[serde(with = "packed::rows")]`): MiniRocket's
/// per-class ridge weights.
pub mod rows {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// One buffer, read in either form.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    struct Row(#[serde(with = "super")] Vec<f32>);

    /// Serializes `rows` as a list of packed strings.
    pub fn serialize<S: Serializer>(rows: &[Vec<f32>], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(rows.iter().map(|row| super::pack(row)))
    }

    /// Deserializes a list whose items are packed strings or plain arrays.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Vec<f32>>, D::Error> {
        let rows = Vec::<Row>::deserialize(deserializer)?;
        Ok(rows.into_iter().map(|row| row.0).collect())
    }
}

struct FloatsVisitor;

impl<'de> Visitor<'de> for FloatsVisitor {
    type Value = Vec<f32>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "a list of numbers or a string starting `{PREFIX}`"
        )
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Vec<f32>, E> {
        unpack(text).map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Vec<f32>, A::Error> {
        // The hint is the input's own count, bounded: a bad state cannot make us reserve more.
        let mut floats = Vec::with_capacity(items.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(value) = items.next_element::<f32>()? {
            floats.push(value);
        }
        Ok(floats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct State {
        #[serde(with = "super")]
        floats: Vec<f32>,
    }

    #[test]
    fn a_buffer_round_trips_packed_bit_for_bit() {
        let state = State {
            floats: vec![0.0, -1.5, f32::MIN_POSITIVE, 1e-30, 3.4e38, 0.1],
        };
        let json = serde_json::to_value(&state).unwrap();
        assert!(
            json["floats"].as_str().unwrap().starts_with(PREFIX),
            "{json}"
        );
        let back: State = serde_json::from_value(json).unwrap();
        assert_eq!(back, state);
        let empty = State { floats: vec![] };
        let back: State = serde_json::from_value(serde_json::to_value(&empty).unwrap()).unwrap();
        assert_eq!(back, empty);
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Rows {
        #[serde(with = "super::rows")]
        rows: Vec<Vec<f32>>,
    }

    #[test]
    fn a_list_of_buffers_round_trips_and_reads_either_form() {
        let state = Rows {
            rows: vec![vec![1.0, -2.0], vec![], vec![0.25]],
        };
        let json = serde_json::to_value(&state).unwrap();
        assert!(
            json["rows"][0].as_str().unwrap().starts_with(PREFIX),
            "{json}"
        );
        assert_eq!(serde_json::from_value::<Rows>(json).unwrap(), state);
        let mixed = serde_json::json!({"rows": [[1.0, -2.0], [], pack(&[0.25])]});
        assert_eq!(serde_json::from_value::<Rows>(mixed).unwrap(), state);
        let error = serde_json::from_str::<Rows>(r#"{"rows": ["x"]}"#).unwrap_err();
        assert!(error.to_string().contains("a string starting"), "{error}");
    }

    #[test]
    fn a_plain_array_still_reads_and_an_export_gets_one() {
        let old: State = serde_json::from_str(r#"{"floats": [1, 2.5, -3]}"#).unwrap();
        assert_eq!(old.floats, vec![1.0, 2.5, -3.0]);
        let packed = serde_json::json!({"a": {"floats": pack(&[1.0, 2.5])}, "b": ["x", pack(&[])]});
        assert_eq!(
            unpacked(packed),
            serde_json::json!({"a": {"floats": [1.0, 2.5]}, "b": ["x", []]})
        );
    }

    #[test]
    fn a_malformed_buffer_is_an_error_that_says_what_is_wrong() {
        for (text, says) in [
            (r#"{"floats": "1,2,3"}"#.to_owned(), "a string starting"),
            (format!(r#"{{"floats": "{PREFIX}***"}}"#), "not base64"),
            (
                format!(r#"{{"floats": "{PREFIX}AAAA"}}"#),
                "not a whole number",
            ),
            (r#"{"floats": {"x": 1}}"#.to_owned(), "a list of numbers"),
            (r#"{"floats": [1, "x"]}"#.to_owned(), "invalid type"),
        ] {
            let error = serde_json::from_str::<State>(&text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
