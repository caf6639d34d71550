//! Property: every checked object decodes to itself, and JSON and the codec agree.

use easeml_object::{Object, codec};
use easeml_schema::{DataType, Field, FieldKind, Tensor};
use proptest::prelude::*;

fn tree_type() -> DataType {
    DataType {
        fields: vec![
            Field {
                name: "value".to_owned(),
                kind: FieldKind::Tensor(Tensor { dims: vec![2, 2] }),
            },
            Field {
                name: "left".to_owned(),
                kind: FieldKind::Recursive,
            },
            Field {
                name: "flag".to_owned(),
                kind: FieldKind::Tensor(Tensor { dims: vec![1] }),
            },
            Field {
                name: "right".to_owned(),
                kind: FieldKind::Recursive,
            },
        ],
    }
}

/// Values that JSON carries exactly (dyadic rationals), so the JSON comparison is exact.
fn finite() -> impl Strategy<Value = f32> {
    (-4000i32..4000).prop_map(|value| value as f32 / 8.0)
}

fn object() -> impl Strategy<Value = Object> {
    let leaf = (prop::collection::vec(finite(), 4), finite()).prop_map(|(value, flag)| Object {
        tensors: vec![value, vec![flag]],
        children: vec![None, None],
    });
    leaf.prop_recursive(6, 40, 2, |inner| {
        (
            prop::collection::vec(finite(), 4),
            finite(),
            prop::option::of(inner.clone()),
            prop::option::of(inner),
        )
            .prop_map(|(value, flag, left, right)| Object {
                tensors: vec![value, vec![flag]],
                children: vec![left.map(Box::new), right.map(Box::new)],
            })
    })
}

fn to_json(object: &Object) -> serde_json::Value {
    let value: Vec<Vec<f32>> = object.tensors[0].chunks(2).map(<[f32]>::to_vec).collect();
    serde_json::json!({
        "value": value,
        "flag": object.tensors[1],
        "left": object.children[0].as_deref().map(to_json),
        "right": object.children[1].as_deref().map(to_json),
    })
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(object in object()) {
        let data_type = tree_type();
        object.check(&data_type, "input").unwrap();
        let bytes = codec::encode(&object);
        prop_assert_eq!(codec::decode(&data_type, &bytes).unwrap(), object.clone());
        let from_json = easeml_object::object_from_json(&data_type, &to_json(&object), "input").unwrap();
        prop_assert_eq!(from_json, object);
    }
}

proptest! {
    #[test]
    fn any_finite_bits_survive_the_codec(values in prop::collection::vec(
        prop::num::f32::NORMAL | prop::num::f32::ZERO | prop::num::f32::SUBNORMAL, 3)
    ) {
        let data_type = DataType {
            fields: vec![Field {
                name: "x".to_owned(),
                kind: FieldKind::Tensor(Tensor { dims: vec![3] }),
            }],
        };
        let object = Object::single(values);
        let decoded = codec::decode(&data_type, &codec::encode(&object)).unwrap();
        prop_assert_eq!(decoded, object);
    }
}
