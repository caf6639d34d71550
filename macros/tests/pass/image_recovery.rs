//! An image in and an image out, shapes given by `#[shape(...)]`.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema]
mod deblur {
    pub struct Input {
        #[shape(64, 64, 3)]
        pub observed: Tensor,
    }
    pub struct Output {
        #[shape(64, 64, 3)]
        pub restored: Tensor,
    }
}

#[test]
fn image_recovery() {
    assert_eq!(deblur::Output::RESTORED_SHAPE, [64, 64, 3]);
    assert!(deblur::Output::new(Tensor::zeros(vec![64, 64, 3])).is_ok());

    let image = || Tensor::zeros(vec![64, 64, 3]);
    client_round_trip!(
        deblur,
        feed,
        vec![(
            deblur::Input::new(image()).unwrap(),
            deblur::Output::new(image()).unwrap(),
        )],
        deblur::Input::new(image()).unwrap()
    );
}
