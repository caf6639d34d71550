//! The golden generated types (`tests/golden/*/src/types.rs`), compiled here against the real
//! runtime, and exercised: shapes are checked on construction, values round-trip as JSON, labels
//! parse and print.

use easeml_tests::examples;

/// The golden types, compiled here against the real runtime.
#[allow(dead_code)]
mod golden {
    pub mod galaxy_morphology {
        include!("../golden/galaxy_morphology/src/types.rs");
    }
    pub mod plankton_species {
        include!("../golden/plankton_species/src/types.rs");
    }
    pub mod heartbeat_arrhythmia {
        include!("../golden/heartbeat_arrhythmia/src/types.rs");
    }
    pub mod sentiment_tree {
        include!("../golden/sentiment_tree/src/types.rs");
    }
    pub mod traffic_forecast {
        include!("../golden/traffic_forecast/src/types.rs");
    }
    pub mod galaxy_with_metadata {
        include!("../golden/galaxy_with_metadata/src/types.rs");
    }
    pub mod handwritten_digits {
        include!("../golden/handwritten_digits/src/types.rs");
    }
    pub mod breast_cancer {
        include!("../golden/breast_cancer/src/types.rs");
    }
    pub mod diabetes_progression {
        include!("../golden/diabetes_progression/src/types.rs");
    }
    pub mod galaxy_deblur {
        include!("../golden/galaxy_deblur/src/types.rs");
    }
    pub mod molecule_autoencoder {
        include!("../golden/molecule_autoencoder/src/types.rs");
    }
    pub mod skin_lesions_formal {
        include!("../golden/skin_lesions_formal/src/types.rs");
    }
    pub mod vowel_speakers {
        include!("../golden/vowel_speakers/src/types.rs");
    }
    pub mod wine_cultivar {
        include!("../golden/wine_cultivar/src/types.rs");
    }
}

#[test]
fn every_example_has_a_compiled_golden_module() {
    let source = include_str!("golden_types.rs");
    for (stem, _) in examples() {
        assert!(
            source.contains(&format!("include!(\"../golden/{stem}/src/types.rs\")")),
            "{stem} is not compiled"
        );
    }
}

#[test]
fn generated_types_check_shapes_and_round_trip_as_json() {
    use easeml_runtime::Tensor;
    use golden::heartbeat_arrhythmia::{Input, Label, Output, SYSTEM_TYPE};

    assert_eq!(
        SYSTEM_TYPE,
        "{input: {[Tensor[12]], [next]}, output: {[Tensor[2]], []}}"
    );
    let last = Input::new(Tensor::zeros(vec![12]), None).unwrap();
    let first = Input::new(Tensor::zeros(vec![12]), Some(Box::new(last))).unwrap();
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(json["next"]["next"], serde_json::Value::Null);
    assert_eq!(serde_json::from_value::<Input>(json).unwrap(), first);
    let error = Input::new(Tensor::zeros(vec![11]), None)
        .unwrap_err()
        .to_string();
    assert_eq!(error, "field `leads`: expected shape [12], found [11]");
    assert!(Output::new(Tensor::zeros(vec![2])).is_ok());
    assert_eq!(Label::ALL, [Label::Normal, Label::Arrhythmia]);
    assert_eq!("arrhythmia".parse::<Label>().unwrap().index(), 1);
    let unknown = "flutter".parse::<Label>().unwrap_err().to_string();
    assert_eq!(
        unknown,
        "unknown label `flutter`; the labels are normal, arrhythmia"
    );
    assert_eq!(
        golden::plankton_species::Label::SeaLionLarva.name(),
        "sea lion larva"
    );
    assert_eq!(golden::handwritten_digits::Label::Class7.to_string(), "7");
}
