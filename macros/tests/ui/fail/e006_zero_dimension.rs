use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input(Tensor<256, 0, 3>);
    pub struct Output(Tensor<2>);
}

fn main() {}
