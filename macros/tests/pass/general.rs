//! The general templates: two tensor fields in, classes out (the bit-level classifier's row).
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema]
mod galaxy_with_metadata {
    pub struct Input {
        pub image: Tensor<32, 32, 3>,
        pub photometry: Tensor<5>,
    }
    pub struct Output(Tensor<3>);
}

#[easeml_schema]
mod molecule {
    pub struct Input(Tensor<16, 16, 16>);
    pub struct Output(Tensor<32, 32>);
}

#[test]
fn general() {
    let value = serde_json::to_value(
        galaxy_with_metadata::Input::new(Tensor::zeros(vec![32, 32, 3]), Tensor::zeros(vec![5]))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        value["photometry"],
        serde_json::json!([0.0, 0.0, 0.0, 0.0, 0.0])
    );
    assert!(molecule::Output::new(Tensor::zeros(vec![32, 32])).is_ok());

    client_round_trip!(
        molecule,
        feed,
        vec![(
            molecule::Input::new(Tensor::zeros(vec![16, 16, 16])).unwrap(),
            molecule::Output::new(Tensor::zeros(vec![32, 32])).unwrap(),
        )],
        molecule::Input::new(Tensor::zeros(vec![16, 16, 16])).unwrap()
    );
    let metadata = || {
        galaxy_with_metadata::Input::new(Tensor::zeros(vec![32, 32, 3]), Tensor::zeros(vec![5]))
            .unwrap()
    };
    client_round_trip!(
        galaxy_with_metadata,
        feed,
        vec![(
            metadata(),
            galaxy_with_metadata::Output::new(Tensor::zeros(vec![3])).unwrap()
        )],
        metadata()
    );
}
