use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

#[easeml_schema(labels = [malignant, benign])]
mod cancer {
    pub struct Input(Tensor<30>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema(constraint(infer_latency <= 20ms))]
mod diabetes {
    pub struct Input {
        pub measurements: Tensor<10>,
    }
    pub struct Output {
        pub progression: Tensor<1>,
    }
}

fn main() {
    assert_eq!(cancer::Label::ALL.len(), 2);
    assert!(diabetes::Output::new(Tensor::zeros(vec![1])).is_ok());
}
