use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema]
mod traffic {
    pub struct Input {
        pub sensors: Tensor<10>,
        pub next: Option<Box<Input>>,
    }
    pub struct Output {
        pub sensors: Tensor<10>,
        pub next: Option<Box<Output>>,
    }
}

fn main() {
    assert_eq!(traffic::SYSTEM_TYPE, "{input: {[Tensor[10]], [next]}, output: {[Tensor[10]], [next]}}");
    let _ = traffic::Output::new(Tensor::zeros(vec![10]), None).unwrap();
}
