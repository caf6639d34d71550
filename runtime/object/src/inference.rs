//! [`Inference`]: one answer of a model in the app's terms. It lives here, below both the engine
//! (which makes it) and the client library (which returns it), so that the client's inference API
//! has the same types whether or not the runtime is built with its `engine` feature (libtorch).

use serde_json::Value;

/// One inference result in the app's terms (JSON both ways: the server sends it, a remote client
/// reads it back).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inference {
    /// The output in the feed's JSON form: the label name for classification, else the output object.
    pub output: Value,
    /// The class index, for classification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<u32>,
    /// The probability of that class, for classification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The probability of every class, in class order (the order of the app's labels), for
    /// classification; they sum to 1 and `confidence` is the answered class's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<Vec<f32>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_like_the_infer_commands_json() {
        let labelled = Inference {
            output: Value::from("benign"),
            class: Some(1),
            confidence: Some(0.75),
            probabilities: Some(vec![0.25, 0.75]),
        };
        assert_eq!(
            serde_json::to_string(&labelled).unwrap(),
            r#"{"output":"benign","class":1,"confidence":0.75,"probabilities":[0.25,0.75]}"#
        );
        let regression = Inference {
            output: serde_json::json!({"progression": [0.5]}),
            class: None,
            confidence: None,
            probabilities: None,
        };
        assert_eq!(
            serde_json::to_string(&regression).unwrap(),
            r#"{"output":{"progression":[0.5]}}"#
        );
    }
}
