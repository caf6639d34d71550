//! Trees in (two optional children), labels out.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema(labels = [negative, neutral, positive])]
mod sentiment {
    pub struct Input {
        pub embedding: Tensor<50>,
        pub left: Option<Box<Input>>,
        pub right: Option<Box<Input>>,
    }
    pub struct Output(Tensor<3>);
}

#[test]
fn tree_classification() {
    let leaf = sentiment::Input::new(Tensor::zeros(vec![50]), None, None).unwrap();
    let _root = sentiment::Input::new(
        Tensor::zeros(vec![50]),
        Some(Box::new(leaf.clone())),
        Some(Box::new(leaf)),
    )
    .unwrap();

    let tree = || {
        let leaf = sentiment::Input::new(Tensor::zeros(vec![50]), None, None).unwrap();
        sentiment::Input::new(
            Tensor::zeros(vec![50]),
            Some(Box::new(leaf.clone())),
            Some(Box::new(leaf)),
        )
        .unwrap()
    };
    client_round_trip!(
        sentiment,
        feed_labelled,
        vec![
            (tree(), sentiment::Label::Negative),
            (tree(), sentiment::Label::Positive)
        ],
        tree()
    );
}
