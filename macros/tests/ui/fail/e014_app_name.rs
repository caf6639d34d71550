use easeml_macros::easeml_schema;

#[easeml_schema(app = "Galaxy-Zoo")]
mod app {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<3>);
}

fn main() {}
