//! Checks on the text of a feed line's JSON that a parsed `serde_json::Value` can no longer make
//! (issue 49): a key given twice in one object (the parsed map keeps the last, silently), and a
//! number that is not 0 but becomes 0 as a 32-bit value (`1e-400`, `1e-50`). Both scan the text
//! once, without recursion; the text has already parsed as JSON.

use std::collections::HashSet;

/// The first key that appears twice in one object of `text` (valid JSON).
pub(crate) fn duplicate_key(text: &str) -> Option<String> {
    // One entry per open array (`None`) or object (its keys so far).
    let mut open: Vec<Option<HashSet<String>>> = Vec::new();
    let mut expect_key = false;
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => {
                open.push(Some(HashSet::new()));
                expect_key = true;
            }
            b'[' => {
                open.push(None);
                expect_key = false;
            }
            b'}' | b']' => {
                open.pop();
                expect_key = false;
            }
            b',' => expect_key = matches!(open.last(), Some(Some(_))),
            b'"' => {
                let end = string_end(bytes, at)?;
                if expect_key {
                    let raw = &text[at..end];
                    let key: String = serde_json::from_str(raw).unwrap_or_else(|_| raw.to_owned());
                    if let Some(Some(keys)) = open.last_mut()
                        && !keys.insert(key.clone())
                    {
                        return Some(key);
                    }
                    expect_key = false;
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The index just past the string starting at `start` (a `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// The shortest number written without an exponent that can be 0 as an `f32` without being 0:
/// `0.` and 45 zeros before a digit (1e-46 rounds to 0; 1e-45 does not); a sign makes it longer.
const MIN_PLAIN_DIGITS_TO_ROUND_TO_ZERO: usize = 48;

/// The first number of `text` (JSON, outside strings) that is not 0 but is 0 as an `f32`.
pub(crate) fn number_rounding_to_zero(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => at = string_end(bytes, at)?,
            b'-' | b'0'..=b'9' => {
                let start = at;
                let mut exponent = false;
                while at < bytes.len()
                    && matches!(bytes[at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    exponent |= matches!(bytes[at], b'e' | b'E');
                    at += 1;
                }
                // Without an exponent a number needs 45 zeros after its point to fall below half
                // of f32's smallest (1.4e-45): shorter ones are not parsed (a feed of images is
                // millions of numbers, and this scan runs on every line).
                if !exponent && at - start < MIN_PLAIN_DIGITS_TO_ROUND_TO_ZERO {
                    continue;
                }
                let token = &text[start..at];
                let mantissa = token.split(['e', 'E']).next().unwrap_or("");
                let nonzero = mantissa.bytes().any(|byte| matches!(byte, b'1'..=b'9'));
                if nonzero
                    && token
                        .parse::<f64>()
                        .is_ok_and(|value| value.is_finite() && (value as f32) == 0.0)
                {
                    return Some(token);
                }
            }
            _ => at += 1,
        }
    }
    None
}

/// The message for a number that rounds to 0.
pub(crate) fn rounds_to_zero_message(token: &str) -> String {
    let shown: String = token.chars().take(40).collect();
    format!(
        "`{shown}` is not 0 but rounds to 0 as a 32-bit number (the smallest is about 1.4e-45); write 0, or scale the value"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        assert_eq!(
            duplicate_key(r#"{"input": [1], "input": [2]}"#).as_deref(),
            Some("input")
        );
        assert_eq!(
            duplicate_key(r#"{"input": {"a": 1, "b": [{"x": 1, "x": 2}]}, "output": 1}"#)
                .as_deref(),
            Some("x")
        );
        // The same key in sibling objects, keys equal to values, escapes that differ in text only.
        assert_eq!(
            duplicate_key(r#"{"a": [{"k": 1}, {"k": 2}], "b": "a", "c": {"a": "a"}}"#),
            None
        );
        assert_eq!(
            duplicate_key(r#"{"a\u0062": 1, "ab": 2}"#).as_deref(),
            Some("ab")
        );
        assert_eq!(duplicate_key(r#"{"a": "x\"}", "b": 1}"#), None);
    }

    #[test]
    fn numbers_that_round_to_zero_are_found() {
        assert_eq!(number_rounding_to_zero("[1e-400, 1]"), Some("1e-400"));
        assert_eq!(number_rounding_to_zero("[0.5, -1E-50]"), Some("-1E-50"));
        assert_eq!(number_rounding_to_zero("[0, 0.0, -0e5, 1e-45, 3]"), None);
        assert_eq!(number_rounding_to_zero(r#"{"p": "1e-400", "q": 2}"#), None);
        // Written out: 1e-46 (45 zeros after the point) rounds to 0, 1e-45 (44) does not.
        let plain = |zeros: usize| format!("0.{}1", "0".repeat(zeros));
        assert_eq!(plain(45).len(), MIN_PLAIN_DIGITS_TO_ROUND_TO_ZERO);
        let text = format!("[{}, -{}]", plain(44), plain(45));
        assert_eq!(
            number_rounding_to_zero(&text),
            Some(format!("-{}", plain(45)).as_str())
        );
        assert_eq!(number_rounding_to_zero(&format!("[{}]", plain(44))), None);
        assert!(plain(44).parse::<f64>().unwrap() as f32 > 0.0);
    }
}
