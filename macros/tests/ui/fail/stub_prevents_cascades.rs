use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input(Tensor<0>);
    pub struct Output(Tensor<2>);
}

fn main() {
    // Only the schema error is reported, not "no type `Input` in module `app`" or "no function
    // `open_default`": the stub module has the types and the whole client.
    let _input: Option<app::Input> = None;
    let mut client = app::Client::open_default().unwrap();
    let _ = client.feed(Vec::new());
    let _ = client.infer(Vec::new());
    let _ = client.status();
}
