use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input(Tensor<0>);
    pub struct Output(Tensor<2>);
}

fn main() {
    // Only the schema error is reported, not "no type `Input` in module `app`".
    let _input: Option<app::Input> = None;
}
