use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input(Tensor<65536, 65536>);
    pub struct Output(Tensor<2>);
}

fn main() {}
