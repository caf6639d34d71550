//! What every case does with its typed client (a macro, as each case's `$app` is a module of
//! types).

/// Opens `$app::Client` on a fresh embedded store in the temp dir, stores `$examples` with
/// `$feed` (`feed` or `feed_labelled`), lists them, disables the first, reads the status, and
/// checks that `infer` refuses to answer: no model is trained yet, or, when easeml-runtime was
/// built without its `engine` feature (`cargo test -p easeml-macros` alone: the macros crate asks
/// for the runtime without it; the workspace's other members turn it on), this process has no
/// engine. `open_default`, `MANIFEST` and `SERVER` are checked without touching the user's default
/// store.
macro_rules! client_round_trip {
    ($app:ident, $feed:ident, $examples:expr, $input:expr) => {{
        let home = ::std::env::temp_dir().join(format!(
            "easeml-macro-pass-{}-{}-{}",
            module_path!().replace("::", "-"),
            stringify!($app),
            ::std::process::id()
        ));
        let _ = ::std::fs::remove_dir_all(&home);
        let connection = ::easeml_runtime::Connection::embedded(&home);
        let mut client = $app::Client::open(&connection).unwrap();
        let examples: ::std::vec::Vec<_> = $examples;
        let count = examples.len();
        let report = client.$feed(examples).unwrap();
        assert_eq!(report.added, count);
        let page = client
            .examples(::easeml_runtime::PageRequest::default())
            .unwrap();
        assert_eq!(page.total, count as u64);
        assert_eq!(page.items.len(), count);
        let version = client.set_enabled(report.ids[0], false).unwrap();
        assert_eq!(version, report.data_version + 1);
        let status = client.status().unwrap();
        assert_eq!(status.app, $app::APP);
        assert_eq!(status.system_type, $app::SYSTEM_TYPE);
        assert_eq!(
            (status.examples, status.enabled_examples),
            (count as u64, count as u64 - 1)
        );
        let error = client.infer([$input]).unwrap_err();
        match &error {
            ::easeml_runtime::Error::NoEngine => assert!(
                error.to_string().contains("this process has no engine"),
                "{error}"
            ),
            ::easeml_runtime::Error::NoModel { app, .. } => {
                assert_eq!(app, $app::APP);
                assert!(error.to_string().contains("is trained yet"), "{error}");
            }
            other => panic!("infer before any training: {other}"),
        }
        let spec = ::easeml_runtime::AppSpec::from_manifest_json($app::MANIFEST).unwrap();
        assert_eq!(spec.schema().system_type(), $app::SYSTEM_TYPE);
        assert_eq!($app::SERVER, None);
        let _: fn() -> ::easeml_runtime::Result<$app::Client> = $app::Client::open_default;
        drop(client);
        ::std::fs::remove_dir_all(&home).unwrap();
    }};
}
