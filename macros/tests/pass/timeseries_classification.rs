//! A recursive input (a chain) with labels, the app named apart from its module.
use easeml_macros::easeml_schema;
use easeml_runtime::Tensor;

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

#[test]
fn timeseries_classification() {
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
        vec![
            (chain(), ecg::Label::Normal),
            (chain(), ecg::Label::Arrhythmia)
        ],
        chain()
    );
}
