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

fn main() {
    assert_eq!(deblur::Output::RESTORED_SHAPE, [64, 64, 3]);
    assert!(deblur::Output::new(Tensor::zeros(vec![64, 64, 3])).is_ok());
}
