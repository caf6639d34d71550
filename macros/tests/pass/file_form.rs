//! The file form over every example program (the repository's `examples/`, named relative to
//! this crate's manifest dir): every template row, the same types and client.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema(file = "../examples/breast_cancer.eml")]
mod breast_cancer {}

#[easeml_schema(file = "../examples/diabetes_progression.eml")]
mod diabetes_progression {}

#[easeml_schema(file = "../examples/galaxy_deblur.eml")]
mod galaxy_deblur {}

#[easeml_schema(file = "../examples/galaxy_morphology.eml")]
mod galaxy_morphology {}

#[easeml_schema(file = "../examples/galaxy_with_metadata.eml")]
mod galaxy_with_metadata {}

#[easeml_schema(file = "../examples/handwritten_digits.eml")]
mod handwritten_digits {}

#[easeml_schema(file = "../examples/heartbeat_arrhythmia.eml")]
mod heartbeat_arrhythmia {}

#[easeml_schema(file = "../examples/molecule_autoencoder.eml")]
mod molecule_autoencoder {}

#[easeml_schema(file = "../examples/plankton_species.eml")]
mod plankton_species {}

#[easeml_schema(file = "../examples/sentiment_tree.eml")]
mod sentiment_tree {}

#[easeml_schema(file = "../examples/skin_lesions_formal.eml")]
mod skin_lesions_formal {}

#[easeml_schema(file = "../examples/traffic_forecast.eml")]
mod traffic_forecast {}

#[easeml_schema(file = "../examples/vowel_speakers.eml")]
mod vowel_speakers {}

#[easeml_schema(file = "../examples/wine_cultivar.eml")]
mod wine_cultivar {}

#[test]
fn file_form() {
    assert_eq!(breast_cancer::Label::ALL.len(), 2);
    assert_eq!(wine_cultivar::Output::CULTIVAR_SHAPE, [3]);
    assert_eq!(
        sentiment_tree::SYSTEM_TYPE,
        "{input: {[Tensor[50]], [left,right]}, output: {[Tensor[3]], []}}"
    );
    let row = || breast_cancer::Input::new(Tensor::zeros(vec![30])).unwrap();
    client_round_trip!(
        breast_cancer,
        feed_labelled,
        vec![
            (row(), breast_cancer::Label::Malignant),
            (row(), breast_cancer::Label::Benign)
        ],
        row()
    );
    let wine = || wine_cultivar::Input::new(Tensor::zeros(vec![13])).unwrap();
    client_round_trip!(
        wine_cultivar,
        feed,
        vec![(
            wine(),
            wine_cultivar::Output::new(Tensor::zeros(vec![3])).unwrap()
        )],
        wine()
    );
}
