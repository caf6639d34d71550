//! One-channel 8x8 images and ten quoted labels.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema(labels = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"])]
mod digits {
    pub struct Input(Tensor<8, 8>);
    pub struct Output(Tensor<10>);
}

#[test]
fn one_channel_image() {
    let input = digits::Input::new(Tensor::zeros(vec![8, 8])).unwrap();
    assert_eq!(input.field1.dims(), [8, 8]);
    assert_eq!(digits::Label::Class7.name(), "7");

    let image = || digits::Input::new(Tensor::zeros(vec![8, 8])).unwrap();
    client_round_trip!(
        digits,
        feed_labelled,
        vec![
            (image(), digits::Label::Class0),
            (image(), digits::Label::Class9)
        ],
        image()
    );
}
