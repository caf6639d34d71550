//! Images in, declared labels out, with a training-time constraint.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema(labels = [elliptical, spiral, irregular], constraint(train_time <= 30m))]
mod galaxies {
    pub struct Input {
        pub image: Tensor<256, 256, 3>,
    }
    pub struct Output(Tensor<3>);
}

#[test]
fn image_classification() {
    let input = galaxies::Input::new(Tensor::zeros(vec![256, 256, 3])).unwrap();
    assert_eq!(input.image.dims(), [256, 256, 3]);
    assert!(galaxies::Input::new(Tensor::zeros(vec![3])).is_err());
    assert_eq!(galaxies::Label::Spiral.index(), 1);
    assert_eq!(
        galaxies::SYSTEM_TYPE,
        "{input: {[Tensor[256,256,3]], []}, output: {[Tensor[3]], []}}"
    );
    assert_eq!(galaxies::APP, "galaxies");

    let image = || galaxies::Input::new(Tensor::zeros(vec![256, 256, 3])).unwrap();
    client_round_trip!(
        galaxies,
        feed_labelled,
        vec![
            (image(), galaxies::Label::Spiral),
            (image(), galaxies::Label::Irregular)
        ],
        image()
    );
}
