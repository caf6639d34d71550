use easeml_macros::easeml_schema;

#[easeml_schema(lables = [a, b])]
mod app {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<2>);
}

fn main() {}
