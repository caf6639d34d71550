use easeml_macros::easeml_schema;

#[easeml_schema(labels = [cat, dog])]
mod app {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<3>);
}

fn main() {}
