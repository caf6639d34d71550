//! The feed line of a checked example, as the remote client sends it: the exact inverse of the
//! line reader in [`super`] (every value reads back to the same `f32` bits; tested below).

use easeml_object::{Object, object_to_json};
use serde_json::Value;

use super::single_tensor_dims;
use crate::{CheckedOutput, Schema};

/// One feed line (with its `\n`) for a checked input and, when given, its output, as the remote
/// client sends it: `INPUT OUTPUT` with an inline nested array when the input is one tensor field
/// (the server's fast path), else a JSON Lines record. A label is always a JSON string, so any
/// label reads back as itself. Tensor values are written as the shortest decimal that reads back
/// as the same `f32` (ryu); other values go through [`object_to_json`] (exact `f64` text).
pub fn write_feed_line(
    schema: &Schema,
    input: &Object,
    output: Option<&CheckedOutput>,
    out: &mut Vec<u8>,
) {
    let mut ryu = ryu::Buffer::new();
    if let (Some(dims), [values]) = (single_tensor_dims(&schema.input), input.tensors.as_slice()) {
        write_tensor(dims, values, &mut ryu, out);
        if let Some(output) = output {
            out.push(b' ');
            write_output(schema, output, &mut ryu, out);
        }
    } else {
        out.extend_from_slice(b"{\"input\":");
        write_value(&object_to_json(&schema.input, input), out);
        if let Some(output) = output {
            out.extend_from_slice(b",\"output\":");
            write_output(schema, output, &mut ryu, out);
        }
        out.push(b'}');
    }
    out.push(b'\n');
}

/// The fewest bytes one example of `schema` takes as a feed line: every tensor value is at least
/// one digit and a separator, and a label at least one character. A server whose body limit is
/// below this can never store an example of the app, so registration refuses it.
pub fn min_feed_line_bytes(schema: &Schema) -> u64 {
    let values = |data_type: &easeml_schema::DataType| {
        data_type
            .tensors()
            .map(|tensor| tensor.element_count().saturating_mul(2))
            .fold(0u64, u64::saturating_add)
    };
    let output = if schema.label_capacity().is_some() {
        1
    } else {
        values(&schema.output)
    };
    values(&schema.input)
        .saturating_add(output)
        .saturating_add(2)
}

fn write_output(schema: &Schema, output: &CheckedOutput, ryu: &mut ryu::Buffer, out: &mut Vec<u8>) {
    match output {
        CheckedOutput::Label(label) => write_value(&Value::String(label.clone()), out),
        CheckedOutput::Object(object) => {
            match (
                single_tensor_dims(&schema.output),
                object.tensors.as_slice(),
            ) {
                (Some(dims), [values]) => write_tensor(dims, values, ryu, out),
                _ => write_value(&object_to_json(&schema.output, object), out),
            }
        }
    }
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    // Writing JSON into a Vec cannot fail (the values hold no non-string keys).
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Row-major values as arrays nested to `dims`, without spaces.
fn write_tensor(dims: &[u64], values: &[f32], ryu: &mut ryu::Buffer, out: &mut Vec<u8>) {
    match dims {
        [] | [_] => {
            out.push(b'[');
            for (index, value) in values.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                // Checked values are finite; a non-finite one would not be JSON, so write 0.
                let text = if value.is_finite() {
                    ryu.format_finite(*value)
                } else {
                    "0"
                };
                out.extend_from_slice(text.as_bytes());
            }
            out.push(b']');
        }
        [_, inner @ ..] => {
            let step = inner.iter().product::<u64>().max(1) as usize;
            out.push(b'[');
            for (index, chunk) in values.chunks(step).enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_tensor(inner, chunk, ryu, out);
            }
            out.push(b']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_compiler::{Registry, compile};
    use easeml_object::object_from_json;
    use serde_json::json;

    fn round_trip(source: &str, value: Value) {
        let schema = compile(source, "app", &Registry::builtin()).unwrap().schema;
        let object = object_from_json(&schema.input, &value, "input").unwrap();
        let back = object_to_json(&schema.input, &object);
        let again = object_from_json(&schema.input, &back, "input").unwrap();
        assert_eq!(object, again, "{back}");
    }

    #[test]
    fn every_form_reads_back() {
        round_trip(
            "Input = [2, 2]\nOutput = [1]",
            json!([[1.0, 2.0], [3.0, 4.0]]),
        );
        round_trip(
            "type Input\n  a :: Tensor[2]\n  b :: Tensor[1]\nend\nOutput = [1]",
            json!({"a": [1.0, 2.0], "b": [3.0]}),
        );
        round_trip(
            "type Input\n  x :: Tensor[1]\n  next :: Nullable{Input}\nend\nOutput = [1]",
            json!([{"x": [1.0]}, {"x": [2.0]}, {"x": [3.0]}]),
        );
        round_trip(
            "type Input\n  x :: Tensor[1]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [1]",
            json!({"x": [1.0], "left": {"x": [2.0]}, "right": null}),
        );
    }

    /// Reproducible f32 values from their bits (splitmix64), every finite kind: normal, subnormal,
    /// zeroes of both signs, the extremes.
    fn values(seed: u64, count: usize) -> Vec<f32> {
        let mut state = seed;
        let mut values = vec![0.0, -0.0, f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-45, 0.1];
        while values.len() < count {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let value = f32::from_bits((z ^ (z >> 31)) as u32);
            if value.is_finite() {
                values.push(value);
            }
        }
        values.truncate(count);
        values
    }

    /// The bits of every value of an object and its children, depth first.
    fn bits(object: &Object) -> Vec<u32> {
        let mut all: Vec<u32> = object
            .tensors
            .iter()
            .flatten()
            .map(|v| v.to_bits())
            .collect();
        for child in object.children.iter().flatten() {
            all.extend(bits(child));
        }
        all
    }

    /// What the remote client sends reads back, on the server's checked path, to the same bits.
    #[test]
    fn feed_lines_read_back_to_the_same_bits() {
        use crate::feed::{FeedOptions, LineChecker};
        let server = FeedOptions {
            allow_paths: false,
            ..FeedOptions::default()
        };
        let schema_of = |source: &str| compile(source, "app", &Registry::builtin()).unwrap().schema;
        // One tensor: `INPUT OUTPUT` lines; many random values, labels that need quoting.
        let schema =
            schema_of("Input = [20, 50]\nOutput = [3]\nlabels = [\"a b\", \"[x\", \"c.npy.txt\"]");
        for seed in 0..20 {
            let input = Object::single(values(seed, 1000));
            for label in ["a b", "[x", "c.npy.txt"] {
                let mut line = Vec::new();
                let output = CheckedOutput::Label(label.to_owned());
                write_feed_line(&schema, &input, Some(&output), &mut line);
                let text = std::str::from_utf8(&line).unwrap();
                let checker = LineChecker::new(&schema, &server, true);
                let back = checker.check_line(text).unwrap().unwrap();
                assert_eq!(bits(&back.input), bits(&input), "seed {seed}");
                assert_eq!(back.output, output);
                // And without the output (an inference line).
                line.clear();
                write_feed_line(&schema, &input, None, &mut line);
                let (back, none) = checker
                    .check_infer_line(std::str::from_utf8(&line).unwrap())
                    .unwrap()
                    .unwrap();
                assert_eq!((bits(&back), none), (bits(&input), None));
            }
        }
        // Records, chains and tensor outputs: JSON Lines records.
        let cases = [
            (
                "type Input\n  a :: Tensor[2]\n  b :: Tensor[3]\nend\nOutput = [2, 2]",
                json!({"a": [0.0, 0.0], "b": [0.0, 0.0, 0.0]}),
                json!([[0.0, 0.0], [0.0, 0.0]]),
            ),
            (
                "type Input\n  x :: Tensor[2]\n  next :: Nullable{Input}\nend\ntype Output\n  y :: Tensor[1]\n  next :: Nullable{Output}\nend",
                json!([{"x": [0.0, 0.0]}, {"x": [0.0, 0.0]}, {"x": [0.0, 0.0]}]),
                json!([{"y": [0.0]}, {"y": [0.0]}]),
            ),
            (
                "type Input\n  v :: Tensor[2]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [4]",
                json!({"v": [0.0, 0.0], "left": {"v": [0.0, 0.0], "left": null, "right": null}, "right": null}),
                json!([0.0, 0.0, 0.0, 0.0]),
            ),
        ];
        for (seed, (source, input, output)) in cases.into_iter().enumerate() {
            let schema = schema_of(source);
            let mut fill = values(100 + seed as u64, 64).into_iter();
            let mut refill = |value: &mut Value| fill_numbers(value, &mut fill);
            let (mut input, mut output) = (input, output);
            refill(&mut input);
            refill(&mut output);
            let input = object_from_json(&schema.input, &input, "input").unwrap();
            let output = object_from_json(&schema.output, &output, "output").unwrap();
            let mut line = Vec::new();
            write_feed_line(
                &schema,
                &input,
                Some(&CheckedOutput::Object(output.clone())),
                &mut line,
            );
            let text = std::str::from_utf8(&line).unwrap();
            let back = LineChecker::new(&schema, &server, false)
                .check_line(text)
                .unwrap()
                .unwrap();
            assert_eq!(bits(&back.input), bits(&input), "{source}: {text}");
            let CheckedOutput::Object(back_output) = back.output else {
                panic!("{source}: a label");
            };
            assert_eq!(bits(&back_output), bits(&output), "{source}: {text}");
        }
    }

    /// Replaces every number in `value` by the next of `values`.
    fn fill_numbers(value: &mut Value, values: &mut impl Iterator<Item = f32>) {
        match value {
            Value::Number(number) => {
                *number = serde_json::Number::from_f64(f64::from(values.next().unwrap())).unwrap();
            }
            Value::Array(items) => items.iter_mut().for_each(|item| fill_numbers(item, values)),
            Value::Object(map) => map.values_mut().for_each(|item| fill_numbers(item, values)),
            _ => {}
        }
    }
}
