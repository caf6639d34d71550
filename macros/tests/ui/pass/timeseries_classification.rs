use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

include!("../client_round_trip.rs");

#[easeml_schema(app = heartbeat, labels = [normal, arrhythmia])]
pub mod ecg {
    pub struct Input {
        pub leads: Tensor<12>,
        pub next: Option<Box<Input>>,
    }
    pub struct Output {
        pub rhythm: Tensor<2>,
    }
}

fn main() {
    let tail = ecg::Input::new(Tensor::zeros(vec![12]), None).unwrap();
    let head = ecg::Input::new(Tensor::zeros(vec![12]), Some(Box::new(tail))).unwrap();
    assert!(head.next.is_some());
    assert_eq!(ecg::APP, "heartbeat");
    assert_eq!("normal".parse::<ecg::Label>().unwrap(), ecg::Label::Normal);

    let chain = || {
        let tail = ecg::Input::new(Tensor::zeros(vec![12]), None).unwrap();
        ecg::Input::new(Tensor::zeros(vec![12]), Some(Box::new(tail))).unwrap()
    };
    client_round_trip!(
        ecg,
        feed_labelled,
        vec![(chain(), ecg::Label::Normal), (chain(), ecg::Label::Arrhythmia)],
        chain()
    );
}
