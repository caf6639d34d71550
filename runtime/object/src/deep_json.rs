//! JSON text as deep as objects may be: one nesting limit, [`MAX_DEPTH`], for every front door.
//!
//! serde_json stops at 128 levels by default ("recursion limit exceeded"), far below the
//! [`MAX_DEPTH`] levels a tree may have, and without that limit its recursive parser would overflow
//! the stack on hostile input. So the text's nesting is counted first, without allocating
//! ([`json_nesting`]); beyond [`MAX_JSON_NESTING`] it is refused with one clear message
//! ([`too_deep_message`]); within it, the value is parsed with the recursion limit off on a stack
//! that grows as needed (`serde_stacker`), and dropped without recursion ([`DeepValue`]).

use serde::Deserialize;
use serde_json::Value;

use crate::object::MAX_DEPTH;

/// The deepest JSON text read: an object of [`MAX_DEPTH`] levels, plus room for the arrays of its
/// tensors and the record around it.
pub const MAX_JSON_NESTING: usize = MAX_DEPTH + 64;

/// The deepest nesting of arrays and objects in `text` (strings skipped), counted up to
/// `MAX_JSON_NESTING + 1`.
pub fn json_nesting(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > MAX_JSON_NESTING {
                    return deepest;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The one message for JSON nested deeper than [`MAX_JSON_NESTING`].
pub fn too_deep_message(nesting: usize) -> String {
    format!(
        "the JSON nests {}{nesting} levels deep; an object nests at most {MAX_DEPTH} levels (a tree at most {MAX_DEPTH} levels deep, a chain at most {MAX_DEPTH} records)",
        if nesting > MAX_JSON_NESTING {
            "more than "
        } else {
            ""
        },
        nesting = nesting.min(MAX_JSON_NESTING)
    )
}

/// Why JSON text could not be read.
#[derive(Debug)]
pub enum DeepJsonError {
    /// Nested deeper than [`MAX_JSON_NESTING`] (the count, capped one past the limit).
    TooDeep(usize),
    /// Not JSON: serde_json's error (line and column within the text).
    Syntax(serde_json::Error),
}

/// A parsed JSON value that is dropped without recursion (a value nested thousands of levels
/// deep would otherwise be dropped by as many nested calls).
#[derive(Debug)]
pub struct DeepValue(Option<Value>);

impl DeepValue {
    /// The value.
    pub fn value(&self) -> &Value {
        self.0.as_ref().unwrap_or(&Value::Null)
    }
}

impl Drop for DeepValue {
    fn drop(&mut self) {
        let mut stack: Vec<Value> = self.0.take().into_iter().collect();
        while let Some(value) = stack.pop() {
            match value {
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => stack.extend(map.into_iter().map(|(_, value)| value)),
                _ => {}
            }
        }
    }
}

/// Parses `text` as exactly one JSON value (surrounding whitespace allowed).
pub fn parse_deep_json(text: &str) -> Result<DeepValue, DeepJsonError> {
    let nesting = json_nesting(text);
    if nesting > MAX_JSON_NESTING {
        return Err(DeepJsonError::TooDeep(nesting));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = {
        let stacked = serde_stacker::Deserializer::new(&mut deserializer);
        Value::deserialize(stacked).map_err(DeepJsonError::Syntax)?
    };
    let value = DeepValue(Some(value));
    deserializer.end().map_err(DeepJsonError::Syntax)?;
    Ok(value)
}

/// The byte index just after the JSON value at the start of `text` (an array, an object or a
/// string), found by balancing brackets outside strings; `None` when it does not close.
pub fn json_value_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, byte) in text.bytes().enumerate() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    if depth == 0 {
                        return Some(index + 1);
                    }
                }
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            _ if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// Runs `f` on a stack with room for recursion over an object of up to [`MAX_DEPTH`] levels
/// (it grows the stack in 1 MiB segments when less than 64 KiB are left).
pub fn with_deep_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(64 << 10, 1 << 20, f)
}

/// Runs `f` on a stack with room for a recursion of [`MAX_DEPTH`] levels of up to 8 KiB each
/// (32 MiB, reserved and touched only as deep as `f` goes): for code whose recursion easeml does
/// not write, such as `serde`'s over a generated type's `Option<Box<Self>>` chain.
pub fn with_stack_for_max_depth<T>(f: impl FnOnce() -> T) -> T {
    stacker::grow((MAX_DEPTH + 64) * (8 << 10), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings() {
        assert_eq!(json_nesting("[1, [2, {\"a\": [3]}]]"), 4);
        assert_eq!(json_nesting("\"[[[[\" [1]"), 1);
        assert_eq!(json_nesting("[\"\\\"[[\"]"), 1);
        assert_eq!(json_nesting(&"[".repeat(1_000_000)), MAX_JSON_NESTING + 1);
    }

    #[test]
    fn deep_values_parse_and_drop_on_a_small_stack() {
        let depth = MAX_JSON_NESTING;
        let text = format!("{}1{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        let parsed = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || parse_deep_json(&text).map(|value| value.value().is_array()))
            .unwrap()
            .join()
            .unwrap();
        assert!(matches!(parsed, Ok(true)), "{parsed:?}");
        let too_deep = format!("{}1{}", "[".repeat(depth + 1), "]".repeat(depth + 1));
        assert!(matches!(
            parse_deep_json(&too_deep),
            Err(DeepJsonError::TooDeep(_))
        ));
        assert!(matches!(
            parse_deep_json("[1] x"),
            Err(DeepJsonError::Syntax(_))
        ));
        assert_eq!(
            too_deep_message(MAX_JSON_NESTING + 1),
            format!(
                "the JSON nests more than {MAX_JSON_NESTING} levels deep; an object nests at most {MAX_DEPTH} levels (a tree at most {MAX_DEPTH} levels deep, a chain at most {MAX_DEPTH} records)"
            )
        );
    }

    #[test]
    fn value_ends_are_found() {
        assert_eq!(json_value_end("[1, [2]] cat"), Some(8));
        assert_eq!(json_value_end("\"sea lion\" x"), Some(10));
        assert_eq!(json_value_end("{\"a\": \"]\"} x"), Some(10));
        assert_eq!(json_value_end("[1, 2"), None);
        assert_eq!(json_value_end("]"), None);
    }
}
