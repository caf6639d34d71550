//! Tabular classification and regression, and a wrongly shaped value built around `new`.
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

#[test]
fn tabular() {
    assert_eq!(cancer::Label::ALL.len(), 2);
    assert!(diabetes::Output::new(Tensor::zeros(vec![1])).is_ok());

    client_round_trip!(
        cancer,
        feed_labelled,
        vec![
            (
                cancer::Input::new(Tensor::zeros(vec![30])).unwrap(),
                cancer::Label::Malignant
            ),
            (
                cancer::Input::new(Tensor::zeros(vec![30])).unwrap(),
                cancer::Label::Benign
            ),
        ],
        cancer::Input::new(Tensor::zeros(vec![30])).unwrap()
    );
    client_round_trip!(
        diabetes,
        feed,
        vec![(
            diabetes::Input::new(Tensor::zeros(vec![10])).unwrap(),
            diabetes::Output::new(Tensor::zeros(vec![1])).unwrap(),
        )],
        diabetes::Input::new(Tensor::zeros(vec![10])).unwrap()
    );
    // A value built around `new` with the wrong shape is refused by the store's check, whole batch.
    let home = std::env::temp_dir().join(format!("easeml-macro-pass-bad-{}", std::process::id()));
    let mut client = cancer::Client::open(&easeml_runtime::Connection::embedded(&home)).unwrap();
    let good = cancer::Input::new(Tensor::zeros(vec![30])).unwrap();
    let bad = cancer::Input {
        field1: Tensor::zeros(vec![3]),
    };
    let error = client
        .feed_labelled([(good, cancer::Label::Benign), (bad, cancer::Label::Benign)])
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("1 of 2 example(s) are bad; nothing was stored"),
        "{error}"
    );
    assert_eq!(client.status().unwrap().examples, 0);
    drop(client);
    std::fs::remove_dir_all(&home).unwrap();
}
