//! Chains in and chains out.
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

#[test]
fn timeseries_translation() {
    assert_eq!(
        traffic::SYSTEM_TYPE,
        "{input: {[Tensor[10]], [next]}, output: {[Tensor[10]], [next]}}"
    );
    let _ = traffic::Output::new(Tensor::zeros(vec![10]), None).unwrap();

    let input = || {
        let tail = traffic::Input::new(Tensor::zeros(vec![10]), None).unwrap();
        traffic::Input::new(Tensor::zeros(vec![10]), Some(Box::new(tail))).unwrap()
    };
    let output = traffic::Output::new(Tensor::zeros(vec![10]), None).unwrap();
    client_round_trip!(traffic, feed, vec![(input(), output)], input());
}
